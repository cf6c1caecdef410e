"""Per-node load corrections of the coverage (Gamma law, node-level Erlang C)."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.simulation.correction import (
    corrected_coverage,
    load_distribution,
    node_erlang_coverage,
    sample_load_factors,
)


@pytest.fixture(scope="module")
def baseline():
    return load_instance(None)


@pytest.mark.parametrize("policy", ["load_aware", "prefix", "nearest"])
def test_no_spread_reproduces_p39(baseline, policy):
    ev = evaluate(baseline.with_network(request_intensity=2.0), None, policy)
    assert corrected_coverage(ev, shape=np.inf) == pytest.approx(ev.coverage(), abs=2e-4)


@pytest.mark.parametrize("policy", ["load_aware", "prefix", "nearest"])
def test_load_spread_lowers_coverage(baseline, policy):
    ev = evaluate(baseline.with_network(request_intensity=3.0), None, policy)
    assert corrected_coverage(ev) < ev.coverage()


def test_size_biased_gamma_moments():
    x, w = load_distribution(3.5, size_biased=False, points=4000)
    assert np.sum(w * x) == pytest.approx(1.0, abs=1e-3)
    xb, wb = load_distribution(3.5, size_biased=True, points=4000)
    assert np.sum(wb * xb) == pytest.approx(4.5 / 3.5, abs=1e-3)  # E[X²]/E[X] for Gamma(3.5, 1/3.5)


def test_nearest_load_law_is_voronoi_like(baseline):
    ev = evaluate(baseline, None, "nearest")
    factors = sample_load_factors(ev, mean_nodes=1500, points_per_node=300, seed=0)
    shapes = [1.0 / x.var() for x in factors]
    assert all(2.8 < k < 4.5 for k in shapes)  # Poisson–Voronoi cell area: shape ≈ 3.5


def test_node_erlang_at_light_load_matches_p39(baseline):
    ev = evaluate(baseline.with_network(request_intensity=1.0), None, "load_aware")
    assert node_erlang_coverage(ev, mean_nodes=1000, points_per_node=200, seed=1) == pytest.approx(ev.coverage(), abs=0.01)


def test_bad_shape_rejected():
    with pytest.raises(ValueError, match="shape"):
        load_distribution(0.0)


def _every_pair_coverage(ev, tau, shape, scv):
    """corrected_coverage with the load points' sum formed at every (type, radius), reached or not (the former code)."""
    from edgeprefix.placement.model.queueing import erlang_c
    from edgeprefix.placement.simulation.correction import service_scv
    from edgeprefix.placement.simulation.reference import joint_density, radial_grid

    inst = ev.instance
    act = np.asarray(ev.active, dtype=bool)
    lam = np.asarray(ev.densities, dtype=float)[act]
    g = np.asarray(inst.first_token_time, dtype=float)[act]
    c = np.asarray(inst.concurrency, dtype=float)[act]
    arrivals, mean_service = np.asarray(ev.arrival_rate)[act], np.asarray(ev.mean_service)[act]
    xi, alpha = inst.network.radio_scale, inst.network.radio_exponent
    shapes = np.broadcast_to(np.asarray(shape, dtype=float), (act.size,))[act]
    scale = (2.0 / (1.0 + service_scv(inst, ev.association)[act])) if scv else np.ones(lam.size)
    r = radial_grid(lam, 4001)
    f = joint_density(r, lam, np.asarray(ev.bias, dtype=float)[act], xi, alpha)
    slack = tau - xi * r[None, None, :] ** alpha - g[:, :, None]
    cdf = np.zeros_like(f)
    for s in range(lam.size):
        x, wts = load_distribution(shapes[s])
        offered = arrivals[s] * mean_service[s] * x
        stable = offered < c[s]
        pw = np.asarray(erlang_c(offered[stable], np.full(stable.sum(), c[s])), dtype=float)
        decay = (c[s] - offered[stable]) / mean_service[s] * scale[s]
        tail = (wts[stable] * pw * np.exp(-decay * np.maximum(slack[s], 0.0)[..., None])).sum(axis=-1)
        cdf[s] = np.where(slack[s] >= 0, wts[stable].sum() - tail, 0.0)
    pairs = np.trapezoid(f * cdf, r, axis=-1)
    return float(np.clip((np.asarray(inst.probabilities) * pairs.sum(axis=0)).sum(), 0.0, 1.0))


@pytest.mark.parametrize("tau,shape,scv", [(0.3, 3.5, False), (0.6, (2.0, np.inf, 5.0), True), (2.0, 1.5, False)])
def test_sum_over_reached_pairs_only_is_exact(baseline, tau, shape, scv):
    ev = evaluate(baseline.with_network(request_intensity=2.5), None, "load_aware")
    got = corrected_coverage(ev, tau, shape=np.asarray(shape, dtype=float), scv=scv)
    assert 0.0 < got < 1.0
    assert got == _every_pair_coverage(ev, tau, shape, scv)
