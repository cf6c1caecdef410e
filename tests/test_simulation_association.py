"""Exact nearest-distance Monte Carlo vs Theorem 1 (docs/model.md §6, §13)."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.simulation.association_mc import (
    simulate_association,
    simulate_instance_association,
)
from edgeprefix.placement.simulation.reference import (
    association_by_quadrature,
    serving_distance_cdf,
)

SAMPLES = 200_000


@pytest.fixture(scope="module")
def baseline():
    return load_instance(None)


def _analytical(instance, policy):
    """A_{s,q} from placement.model.evaluation when present, else the local quadrature (prefix/nearest)."""
    pi = instance.mix_vector(None)
    try:
        from edgeprefix.placement.model.evaluation import evaluate
    except ImportError:
        evaluate = None
    if evaluate is not None:
        ev = evaluate(instance, None, policy)
        return np.asarray(ev.association), np.asarray(ev.bias)
    if policy == "load_aware":
        pytest.skip("placement.model.evaluation not available yet")
    bias = np.zeros_like(instance.residual_prefill) if policy == "nearest" else np.asarray(instance.residual_prefill)
    net = instance.network
    return association_by_quadrature(pi * net.edge_density, bias, net.radio_scale, net.radio_exponent), bias


@pytest.mark.parametrize("policy", ["nearest", "prefix", "load_aware"])
def test_sobol_mc_within_1e3_of_theorem1(baseline, policy):
    analytic, bias = _analytical(baseline, policy)
    sample = simulate_instance_association(baseline, None, bias, samples=SAMPLES, seed=2026)
    assert sample.association.shape == analytic.shape  # its run time: benchmarks/speed/timings.py
    assert np.abs(sample.association - analytic).max() < 1e-3  # the paper's check (§13)
    np.testing.assert_allclose(sample.association.sum(axis=0), 1.0)


@pytest.mark.parametrize("policy", ["nearest", "prefix", "load_aware"])
def test_plain_mc_within_5_sigma(baseline, policy):
    analytic, bias = _analytical(baseline, policy)
    sample = simulate_instance_association(baseline, None, bias, samples=SAMPLES, seed=7, sampler="random")
    sigma = np.sqrt(analytic * (1 - analytic) / SAMPLES)
    assert np.all(np.abs(sample.association - analytic) <= 5 * sigma + 1e-12)


def test_equal_bias_gives_mix_and_rayleigh():
    lam = np.array([0.2, 0.5, 0.3])
    sample = simulate_association(lam, np.zeros((3, 1)), 0.5, 2.0, samples=SAMPLES, seed=1, sampler="random")
    sigma = np.sqrt(lam * (1 - lam) / SAMPLES)
    assert np.all(np.abs(sample.association[:, 0] - lam) <= 5 * sigma)
    # serving distance of the nearest node overall: Rayleigh of density Σλ = 1
    d = np.sort(sample.serving_distance[0])
    cdf = 1 - np.exp(-np.pi * d**2)
    ks = np.max(np.abs(np.arange(1, d.size + 1) / d.size - cdf))
    assert ks < 1.63 / np.sqrt(SAMPLES) * 2  # 1% KS critical value, doubled


def test_serving_distance_cdf_matches(baseline):
    pi = baseline.mix_vector(None)
    bias = np.asarray(baseline.residual_prefill)
    net = baseline.network
    sample = simulate_instance_association(baseline, None, bias, samples=SAMPLES, seed=3, sampler="random")
    r = np.linspace(0.0, 2.0, 81)
    emp = sample.serving_distance_cdf(r)
    ana = serving_distance_cdf(r, pi * net.edge_density, bias, net.radio_scale, net.radio_exponent)
    counts = np.round(sample.association * SAMPLES)
    for s in range(3):
        for q in range(2):
            if counts[s, q] < 1000:
                continue
            # DKW bound at 1e-4 failure probability
            eps = np.sqrt(np.log(2 / 1e-4) / (2 * counts[s, q]))
            assert np.nanmax(np.abs(emp[s, q] - ana[s, q])) < eps


def test_empty_tier_never_selected():
    sample = simulate_association([0.0, 1.0], np.array([[-10.0], [0.0]]), 1.0, samples=1000, seed=0)
    assert sample.association[0, 0] == 0.0


def test_bad_sampler_rejected():
    with pytest.raises(ValueError, match="sampler"):
        simulate_association([1.0], np.zeros((1, 1)), 1.0, samples=10, sampler="lhs")
