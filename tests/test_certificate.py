"""KKT certificates (docs/model.md §18.6) on instances whose optimum is known in closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgeprefix.benchmarks.optimisers.classical import ClassicalSpec, _membership, classical_instance
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.solvers.certificate import kkt_certificate


def _closed_form_gradient(instance, mix: np.ndarray) -> np.ndarray:
    """``∂P/∂π_s = Σ_{j ∈ s} p_j c e^{−c a_j}`` of (18.2)."""
    net = instance.network
    c = math.pi * net.edge_density * (instance.placement.target / net.radio_scale) ** (2.0 / net.radio_exponent)
    membership = _membership(instance)
    gain = np.asarray(instance.probabilities) * c * np.exp(-c * (membership @ mix))
    return membership.T @ gain


@pytest.mark.parametrize(
    "spec",
    [
        ClassicalSpec(6, 2, zipf=0.9, reach=2.0),
        ClassicalSpec(5, 2, zipf=1.1, reach=3.0, fallback_min=0.2),
        ClassicalSpec(6, 2, zipf=0.7, reach=2.5, sizes=(1, 2, 3, 1, 2, 3), memory_budget=0.5),
        ClassicalSpec(5, 2, zipf=0.8, reach=3.0, max_share=0.12),
    ],
)
def test_residual_vanishes_at_the_known_optimum_and_not_nearby(spec: ClassicalSpec) -> None:
    inst = classical_instance(spec)
    cons = placement_problem(inst).constraints
    mix = inst.mix_vector(inst.metadata["optimal_mix"])
    cert = kkt_certificate(cons, mix, _closed_form_gradient(inst, mix))
    tol = 1e-6 if spec.closed_form else 1e-5  # the convex program's optimum is accurate to its tolerance
    assert cert.residual <= tol
    assert any("sum" in name or "simplex" in name for name in cert.active) or cons.A_eq.size
    # move mass between two used profiles' neighbours: a feasible point that is not stationary
    rng = np.random.default_rng(0)
    x = 0.7 * mix + 0.3 * rng.dirichlet(np.ones(mix.size))
    if inst.fallback_index is not None:
        x = x * (1 - inst.placement.fallback_min) / x.sum()
        x[inst.fallback_index] += inst.placement.fallback_min
    x = np.minimum(x, np.nan_to_num(cons.upper, posinf=1.0))
    x /= x.sum()
    off = kkt_certificate(cons, x, _closed_form_gradient(inst, x))
    assert off.residual > 100 * max(cert.residual, 1e-8)


def test_certificate_rejects_bad_input() -> None:
    inst = classical_instance(ClassicalSpec(4, 2))
    cons = placement_problem(inst).constraints
    with pytest.raises(ValueError, match="shape"):
        kkt_certificate(cons, np.ones(3), np.ones(3))
    with pytest.raises(ValueError, match="finite"):
        kkt_certificate(cons, np.full(6, 1 / 6), np.full(6, np.nan))
