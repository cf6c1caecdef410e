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
