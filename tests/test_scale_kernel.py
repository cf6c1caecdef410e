"""No zero work in the spatial kernel (docs/model.md (6.21), (16.7)): the same numbers as the full grid.

The reference path is the previous implementation, recovered in the test: ``_nonempty_segments``
replaced by the identity (nodes on every segment, empty ones included) and a kernel without
``association_contracted`` (the fixed point then contracts the whole ``(S, S, Q)`` ``∂A/∂b`` itself).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
from edgeprefix.benchmarks.workloads.scale_instances import scale_instance
from edgeprefix.placement.model import association, spatial
from edgeprefix.placement.model.association import tier_grid
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import default_instance
from edgeprefix.placement.model.spatial import AnalyticKernel
from edgeprefix.placement.model.tier_loads import lift_exponents


@dataclasses.dataclass(frozen=True)
class FullJacobianKernel:
    """The analytic kernel without the contracted Newton sums (the reference path)."""

    inner: AnalyticKernel = AnalyticKernel()
    provides_jacobian = True

    def association(self, lam, b, alpha):
        return self.inner.association(lam, b, alpha)

    def association_jacobian(self, lam, b, alpha):
        return self.inner.association_jacobian(lam, b, alpha)

    def truncated(self, lam, b, alpha, u_cut, tilt):
        return self.inner.truncated(lam, b, alpha, u_cut, tilt)

    def moments(self, lam, b, alpha):
        return self.inner.moments(lam, b, alpha)

    def error(self, lam, b, alpha):
        return self.inner.error(lam, b, alpha)


def coinciding_breakpoints():
    rng = np.random.default_rng(3)
    lam = rng.uniform(0.1, 1.0, size=7)
    b = rng.uniform(0.0, 3.0, size=(7, 19))
    b[1] = b[0]  # exchangeable tiers
    b[3, :8] = b[2, :8]
    b[5, 4:] = 60.0  # past the truncation of the axis
    return lam, b


@pytest.mark.parametrize("alpha", [2.0, 2.5, 3.5])
def test_empty_segments_carry_no_nodes_and_change_nothing(monkeypatch, alpha):
    lam, b = coinciding_breakpoints()
    u_cut = np.linspace(0.1, 2.0, b.size).reshape(b.shape)
    n = association.default_nodes(alpha)
    compact = tier_grid(lam, b, alpha, extra_breaks=b + u_cut, nodes=n)
    monkeypatch.setattr(association, "_nonempty_segments", lambda left, length: (left, length))
    full = tier_grid(lam, b, alpha, extra_breaks=b + u_cut, nodes=n)
    assert compact.u.shape[2] < full.u.shape[2]  # fewer nodes ...
    assert np.count_nonzero(full.mass) == np.count_nonzero(compact.mass)  # ... all of them with zero mass
    np.testing.assert_allclose(compact.mass.sum(axis=2), full.mass.sum(axis=2), rtol=0, atol=1e-15)
    inside = lambda g: np.where((g.u > 0) & (g.u <= u_cut[:, :, None]), g.mass, 0.0).sum(axis=2)  # noqa: E731
    np.testing.assert_allclose(inside(compact), inside(full), rtol=0, atol=1e-15)
    np.testing.assert_allclose(compact.jacobian(), full.jacobian(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("alpha", [2.0, 3.5])
def test_contracted_sums_are_the_contractions_of_the_full_jacobian(monkeypatch, alpha):
    lam, b = coinciding_breakpoints()
    lam = lam.copy()
    lam[6] = 1e-12 * lam[6]  # a tier whose row of A is far below 1 (lifted)
    rng = np.random.default_rng(5)
    weights = rng.uniform(0.0, 1.0, size=(3,) + b.shape)
    kernel = AnalyticKernel()
    a_full, d_a = kernel.association_jacobian(lam, b, alpha)
    k = lift_exponents(a_full)
    assert k.max() > 10
    expected = np.einsum("wsq,stq->wst", weights, np.ldexp(d_a, k[:, None, None]))
    monkeypatch.setattr(spatial, "BLOCK_ELEMENTS", 900)  # several blocks of types
    a, sums, k_sums = kernel.association_contracted(lam, b, alpha, weights)
    np.testing.assert_allclose(a, a_full, rtol=0, atol=1e-15)  # blocks pad fewer empty segments: rounding only
    np.testing.assert_array_equal(k_sums, k)
    np.testing.assert_allclose(sums, expected, rtol=1e-12, atol=1e-14 * np.abs(expected).max())


def shipped_cases():
    yield "paper_baseline", default_instance(), None
    medium = load_benchmark("medium_forest")
    uniform = np.full(len(medium.profiles), 1.0 / len(medium.profiles))
    yield "medium_forest", medium, uniform
    yield "medium_forest α=3.5", medium.with_network(radio_exponent=3.5), uniform
    moon = load_benchmark("mooncake_large")
    yield "mooncake_large α=2.5", moon.with_network(radio_exponent=2.5), np.full(len(moon.profiles), 1.0 / len(moon.profiles))
    yield "scale 20×12 α=3.5", scale_instance(12, 20, alpha=3.5), None


@pytest.mark.parametrize("case", list(shipped_cases()), ids=lambda c: c[0])
def test_evaluation_matches_the_reference_path(monkeypatch, case):
    _, instance, mix = case
    fast = evaluate(instance, mix)
    with monkeypatch.context() as patch:
        patch.setattr(association, "_nonempty_segments", lambda left, length: (left, length))
        reference = evaluate(instance, mix, kernel=FullJacobianKernel())
    assert fast.fixed_point.evaluations == reference.fixed_point.evaluations
    assert abs(fast.coverage() - reference.coverage()) <= 1e-12
    np.testing.assert_allclose(fast.association, reference.association, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.advertised_wait, reference.advertised_wait, rtol=1e-12, atol=1e-12)


def test_a_gradient_too_large_for_memory_is_refused_before_allocating(monkeypatch):
    from edgeprefix.placement import memory
    from edgeprefix.placement.errors import InstanceError
    from edgeprefix.placement.model.sensitivity import sensitivity

    instance = scale_instance(20, 40, alpha=3.5)
    ev = evaluate(instance)
    needed = memory.evaluation_bytes(40, 20, 3.5, "load_aware")  # memory for 1.1× the evaluation: it fits, its gradient does not
    monkeypatch.setattr(memory, "available_bytes", lambda: 1.1 * needed / memory.FRACTION)
    assert evaluate(instance).coverage() == ev.coverage()
    with pytest.raises(InstanceError, match=r"the exact gradient of an evaluation with 40 profiles .* needs about 0\.467 GiB"):
        sensitivity(ev)
    monkeypatch.setattr(memory, "available_bytes", lambda: 4 * 2**30)
    assert np.all(np.isfinite(sensitivity(ev).gradients["coverage"]))
