"""Theorem 1: consistency checks, closed form vs quadrature vs scipy.quad."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.benchmarks.accuracy.quadrature.reference_kernel import QuadReferenceKernel
from edgeprefix.placement.model.association import (
    association,
    association_alpha2,
    association_error,
    association_quadrature,
)
from edgeprefix.placement.model.spatial import AnalyticKernel


def _random_case(rng, s=4, q=3):
    lam = rng.uniform(0.05, 1.0, s)
    b = rng.uniform(0.0, 4.0, (s, q))
    return lam, b


@pytest.mark.parametrize("alpha", [2.0, 1.5, 2.5, 3.0])
def test_association_sums_to_one(alpha):
    rng = np.random.default_rng(7)
    for _ in range(5):
        lam, b = _random_case(rng)
        a = association(lam, b, 1.0, alpha)
        np.testing.assert_allclose(a.sum(axis=0), 1.0, atol=1e-9)
        assert np.all(a >= 0)


@pytest.mark.parametrize("alpha", [2.0, 2.5, 4.0])
def test_equal_biases_give_pi(alpha):
    lam = np.array([0.2, 0.5, 0.3]) * 2.0
    a = association(lam, np.ones((3, 2)), 0.4, alpha)
    np.testing.assert_allclose(a, (lam / lam.sum())[:, None].repeat(2, axis=1), atol=1e-9)


@pytest.mark.parametrize("alpha", [2.0, 3.0])
def test_equal_biases_give_rayleigh_distance(alpha):
    lam = np.array([0.2, 0.5, 0.3]) * 2.0
    _, mean_r = AnalyticKernel().moments(lam, np.zeros((3, 1)), alpha)
    # Rayleigh of density λ_b: E[R] = 1 / (2 √λ_b), split across tiers by π_s
    np.testing.assert_allclose(mean_r.sum(), 1.0 / (2.0 * np.sqrt(lam.sum())), rtol=1e-7)
    mean_u, _ = AnalyticKernel().moments(lam, np.zeros((3, 1)), 2.0)
    np.testing.assert_allclose(mean_u.sum(), 1.0 / (np.pi * lam.sum()), rtol=1e-7)  # E[R²]


def test_single_tier_takes_everything():
    assert association(np.array([0.7]), np.array([[3.0, 0.1]]), 0.3, 2.5).tolist() == [[1.0, 1.0]]


@pytest.mark.parametrize("alpha", [2.0, 2.5])
def test_much_lower_bias_takes_everything_in_the_limit(alpha):
    lam = np.array([0.1, 1.0, 1.0])
    b = np.array([[0.0], [200.0], [250.0]])  # tier 0 is cheaper by 200 distance^α units
    a = association(lam, b, 1.0, alpha)
    assert a[0, 0] > 1 - 1e-9


def test_closed_form_and_quadrature_agree_at_alpha_2():
    rng = np.random.default_rng(3)
    for _ in range(10):
        lam, b = _random_case(rng, s=rng.integers(2, 7))
        np.testing.assert_allclose(association_alpha2(lam, b), association_quadrature(lam, b, 2.0), atol=1e-7)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 2.5, 3.0])
def test_against_scipy_quad_reference(alpha):
    rng = np.random.default_rng(11)
    lam, b = _random_case(rng, s=3, q=2)
    ours = AnalyticKernel().association(lam, b, alpha)
    ref = QuadReferenceKernel().association(lam, b, alpha)
    np.testing.assert_allclose(ours, ref, atol=1e-7)
    assert association_error(lam, b, 1.0, alpha) < 1e-6


def test_near_coincident_breakpoints_stay_accurate():
    lam = np.array([0.3, 0.4, 0.5])
    b = np.array([[1.0], [1.0 + 1e-6], [2.0]])
    ours = AnalyticKernel().association(lam, b, 2.5)
    ref = QuadReferenceKernel().association(lam, b, 2.5)
    np.testing.assert_allclose(ours, ref, atol=1e-6)


@pytest.mark.parametrize("alpha", [2.0, 2.5])
def test_truncated_integrals_match_reference(alpha):
    rng = np.random.default_rng(5)
    lam, b = _random_case(rng, s=3, q=2)
    u_cut = rng.uniform(-0.5, 3.0, b.shape)
    tilt = rng.uniform(0.0, 5.0, b.shape)
    ours = AnalyticKernel().truncated(lam, b, alpha, u_cut, tilt)
    ref = QuadReferenceKernel().truncated(lam, b, alpha, u_cut, tilt)
    np.testing.assert_allclose(ours[0], ref[0], atol=1e-7)
    np.testing.assert_allclose(ours[1], ref[1], atol=1e-7)
