"""Erlang B/C against closed forms, direct factorial sums and large c."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from edgeprefix.placement.model import queueing as qmod
from edgeprefix.placement.model.queueing import (
    advertised_wait,
    erlang_b,
    erlang_c,
    mean_wait,
    waiting_cdf,
)


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_mm1_closed_forms(rho):
    mu = 2.0
    lam = rho * mu
    assert erlang_c(rho, 1) == pytest.approx(rho, rel=1e-14)
    assert mean_wait(rho, 1, 1.0 / mu) == pytest.approx(rho / (mu - lam), rel=1e-13)


def _direct_erlang_c(a: float, c: int) -> float:
    rho = a / c
    top = a**c / math.factorial(c) / (1.0 - rho)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


@pytest.mark.parametrize("c", [1, 2, 3, 5, 9, 12, 20])
@pytest.mark.parametrize("rho", [0.05, 0.4, 0.82, 0.97])
def test_erlang_c_matches_factorial_sums(c, rho):
    assert erlang_c(rho * c, c) == pytest.approx(_direct_erlang_c(rho * c, c), rel=1e-12)


def test_vectorised_path_equals_scalar_path(monkeypatch):
    a = np.linspace(0.1, 11.5, 70)
    c = np.arange(1, 71) % 12 + 1
    scalar = np.array([erlang_b(x, k) for x, k in zip(a, c)])
    vector = erlang_b(a, c)  # 70 queues: vectorised recursion
    np.testing.assert_allclose(vector, scalar, rtol=1e-13)


@pytest.mark.parametrize("rho", [0.5, 0.9, 0.999])
def test_c_5000_without_overflow(rho):
    c = 5000
    a = rho * c
    b = float(erlang_b(a, c))
    # Erlang B = Poisson pmf(c; a) / cdf(c; a), evaluated by scipy in log space
    reference = math.exp(stats.poisson.logpmf(c, a) - stats.poisson.logcdf(c, a))
    assert b == pytest.approx(reference, rel=1e-9)
    pw = float(erlang_c(a, c))
    assert 0.0 <= pw <= 1.0 and np.isfinite(pw)


def test_unstable_queue():
    assert erlang_c(5.0, 4) == 1.0
    assert mean_wait(5.0, 4, 1.0) == np.inf
    assert waiting_cdf(10.0, 1.0, -1.0) == 0.0


def test_waiting_cdf_shape():
    w = np.array([-1.0, 0.0, 0.5, 5.0])
    f = waiting_cdf(w, 0.3, 2.0)
    np.testing.assert_allclose(f, [0.0, 0.7, 1 - 0.3 * math.exp(-1.0), 1 - 0.3 * math.exp(-10.0)])


def test_advertised_wait_is_erlang_below_clip_and_continuous_increasing_above():
    c, m = 9, 1.0
    below = np.linspace(0.1, 0.989, 30) * c
    np.testing.assert_allclose(advertised_wait(below, c, m), mean_wait(below, c, m), rtol=1e-12)
    loads = np.linspace(0.95, 1.5, 400) * c
    w = advertised_wait(loads, c, m)
    assert np.all(np.diff(w) > 0)
    clip = 0.99 * c
    eps = 1e-7
    assert advertised_wait(clip + eps, c, m) == pytest.approx(float(advertised_wait(clip - eps, c, m)), rel=1e-5)
    # the slope at ρ_clip is the Erlang-C slope (checked by a finite difference)
    h = 1e-6
    slope_left = (mean_wait(clip - h, c, m) - mean_wait(clip - 2 * h, c, m)) / h
    slope_right = (advertised_wait(clip + 2 * h, c, m) - advertised_wait(clip + h, c, m)) / h
    assert slope_right == pytest.approx(float(slope_left), rel=1e-3)


def test_vectorised_advertised_wait_equals_scalar(monkeypatch):
    loads = np.linspace(0.2, 14.0, 40)
    c = np.full(40, 12.0)
    m = np.linspace(0.5, 2.0, 40)
    scalar = advertised_wait(loads, c, m)
    monkeypatch.setattr(qmod, "_SCALAR_LIMIT", 0)
    np.testing.assert_allclose(advertised_wait(loads, c, m), scalar, rtol=1e-10)


def test_bad_queue_input():
    with pytest.raises(ValueError, match="servers"):
        erlang_b(1.0, -1)
    with pytest.raises(ValueError, match="offered_load"):
        erlang_b(-1.0, 3)
