"""``A`` and ``∂A/∂b`` on groups of tiers (docs/model.md (6.22)): the plain per-tier quadrature's numbers.

The reference is :func:`~edgeprefix.placement.model.association.association_quadrature_jacobian` (one grid
row per tier, the full ``(S × J) · (J × S)`` product per type), on random breakpoints with exchangeable
tiers, tiers sharing a breakpoint in some types only, tiers past the axis' truncation, and one density
per column; and whole evaluations of the shipped instances through a kernel built on that reference.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
from edgeprefix.benchmarks.workloads.scale_instances import scale_instance
from edgeprefix.placement.model import grouped_quadrature, spatial
from edgeprefix.placement.model.association import association_quadrature_jacobian, default_nodes
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.grouped_quadrature import grouped_quadrature_jacobian
from edgeprefix.placement.model.instance import default_instance
from edgeprefix.placement.model.sensitivity import sensitivity
from edgeprefix.placement.model.spatial import AnalyticKernel


def breakpoints(s_count: int, q_count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lam = rng.uniform(0.05, 1.0, size=s_count)
    b = rng.uniform(0.0, 3.0, size=(s_count, q_count))
    b[1] = b[0]  # exchangeable tiers (equal breakpoints in every type) ...
    lam[1] = lam[0]  # ... of equal density, and
    b[3, : q_count // 2] = b[2, : q_count // 2]  # equal breakpoints in some types only
    b[4] = b[0]  # a group of three
    b[-1, 1::2] = 80.0  # past the truncation y_max in every other type
    return lam, b


@pytest.mark.parametrize("alpha", [1.5, 2.5, 3.5, 5.0])
@pytest.mark.parametrize("shape", [(6, 3), (9, 5), (23, 4)])
def test_groups_give_the_plain_quadrature(alpha, shape):
    lam, b = breakpoints(*shape, seed=shape[0])
    nodes = default_nodes(alpha)
    a_ref, jac_ref = association_quadrature_jacobian(lam, b, alpha, nodes)
    a, jac = grouped_quadrature_jacobian(lam, b, alpha, nodes)
    assert np.all(a[-1, 1::2] == 0.0) and np.all(jac[-1, :, 1::2] == 0.0) and np.all(jac[:, -1, 1::2] == 0.0)
    np.testing.assert_allclose(a, a_ref, rtol=1e-13, atol=1e-16)
    np.testing.assert_allclose(jac, jac_ref, rtol=1e-12, atol=1e-14 * np.abs(jac_ref).max())


def test_one_density_per_column_and_segment_blocks(monkeypatch):
    lam, b = breakpoints(30, 6, seed=9)
    rng = np.random.default_rng(2)
    lam_cols = lam[:, None] * rng.uniform(0.5, 2.0, size=b.shape)  # several mixes side by side
    a_ref, jac_ref = association_quadrature_jacobian(lam_cols, b, 3.5, 32)
    for blocks in (1, 3, 8, 100):  # the triangular product in any number of segment blocks
        monkeypatch.setattr(grouped_quadrature, "SEGMENT_BLOCKS", blocks)
        a, jac = grouped_quadrature_jacobian(lam_cols, b, 3.5, 32)
        np.testing.assert_allclose(a, a_ref, rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(jac, jac_ref, rtol=1e-12, atol=1e-14 * np.abs(jac_ref).max())


@dataclasses.dataclass(frozen=True)
class PlainKernel:
    """The analytic kernel with the plain per-tier ``∂A/∂b`` and no contracted sums (the reference path)."""

    inner: AnalyticKernel = AnalyticKernel()
    provides_jacobian = True

    def association(self, lam, b, alpha):
        return self.inner.association(lam, b, alpha)

    def association_jacobian(self, lam, b, alpha):
        if alpha == 2.0 or lam.shape[0] == 1:
            return self.inner.association_jacobian(lam, b, alpha)
        return association_quadrature_jacobian(lam, b, alpha, default_nodes(alpha))

    def truncated(self, lam, b, alpha, u_cut, tilt):
        return self.inner.truncated(lam, b, alpha, u_cut, tilt)

    def moments(self, lam, b, alpha):
        return self.inner.moments(lam, b, alpha)

    def error(self, lam, b, alpha):
        return self.inner.error(lam, b, alpha)


def shipped_cases():
    base = default_instance()
    yield "paper_baseline α=3.5", base.with_network(radio_exponent=3.5), None
    medium = load_benchmark("medium_forest")
    uniform = np.full(len(medium.profiles), 1.0 / len(medium.profiles))
    yield "medium_forest α=2.5", medium.with_network(radio_exponent=2.5), uniform
    twin = dataclasses.replace(
        medium,
        profiles=medium.profiles + (dataclasses.replace(medium.profiles[1], id="twin"),),
        placement=dataclasses.replace(medium.placement, mix=None),
    )
    mix = np.full(len(twin.profiles), 1.0 / len(twin.profiles))
    yield "medium_forest with an exchangeable twin α=3.5", twin.with_network(radio_exponent=3.5), mix
    yield "scale 30×8 α=3.5", scale_instance(8, 30, alpha=3.5), None


@pytest.mark.parametrize("case", list(shipped_cases()), ids=lambda c: c[0])
def test_evaluation_matches_the_plain_reference(case):
    _, instance, mix = case
    fast = evaluate(instance, mix)
    reference = evaluate(instance, mix, kernel=PlainKernel())
    assert fast.fixed_point.converged and fast.fixed_point.evaluations == reference.fixed_point.evaluations
    assert abs(fast.coverage() - reference.coverage()) <= 1e-12
    np.testing.assert_allclose(fast.association, reference.association, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast.advertised_wait, reference.advertised_wait, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("queue_model", ["meanfield", "cell"])
def test_gradient_matches_the_plain_reference(monkeypatch, queue_model):
    instance = scale_instance(6, 12, alpha=3.5)
    fast = sensitivity(evaluate(instance, queue_model=queue_model)).gradients["coverage"]
    monkeypatch.setattr(spatial, "grouped_quadrature_jacobian", association_quadrature_jacobian)
    reference = sensitivity(evaluate(instance, queue_model=queue_model)).gradients["coverage"]
    np.testing.assert_allclose(fast, reference, rtol=0, atol=1e-12 * np.abs(reference).max())
