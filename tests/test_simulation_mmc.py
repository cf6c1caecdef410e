"""FCFS M/M/c simulation vs Erlang C and the M/M/1 closed forms (docs/model.md §5, §13)."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.placement.simulation.mmc import fcfs_waits, simulate_mmc
from edgeprefix.placement.simulation.reference import (
    erlang_c,
    mm1_closed_forms,
    mmc_mean_wait,
)


def _batch_se(x, batches=50):
    means = np.array([b.mean() for b in np.array_split(np.asarray(x, dtype=float), batches)])
    return means.std(ddof=1) / np.sqrt(batches)


def test_mm9_matches_erlang_c():
    # 10⁶ customers (their wall time is measured by benchmarks/speed/timings.py, not here)
    res = simulate_mmc(9 * 0.82, 1.0, 9, 1_000_000, seed=11)
    assert res.waits.size == 950_000  # the first 5 % are discarded as warm-up
    assert abs(res.wait_probability - res.erlang_wait_probability) < 5 * _batch_se(res.waits > 0)
    assert abs(res.mean_wait - res.erlang_mean_wait) < 5 * res.mean_wait_standard_error()
    # Kolmogorov distance within 5 batch standard errors of the ECDF at its largest gap (the atom)
    assert res.kolmogorov < 5 * _batch_se(res.waits > 0) + 1e-3


def test_single_server_matches_mm1():
    lam, mu = 0.6, 1.0
    res = simulate_mmc(lam, mu, 1, 400_000, seed=5)
    closed = mm1_closed_forms(lam, mu)
    assert abs(res.wait_probability - closed["wait_probability"]) < 5 * _batch_se(res.waits > 0)
    assert abs(res.mean_wait - closed["mean_wait"]) < 5 * res.mean_wait_standard_error()
    assert erlang_c(lam / mu, 1) == pytest.approx(lam / mu)
    assert mmc_mean_wait(lam, mu, 1) == pytest.approx(closed["mean_wait"])
    assert res.kolmogorov < 5 * _batch_se(res.waits > 0) + 1e-3


def test_erlang_c_large_c_is_finite():
    pw = erlang_c(0.9 * 3000, 3000)
    assert 0.0 < pw < 1.0


def test_fcfs_waits_small_example():
    # two servers, four customers arriving at 0: third waits for the first free server
    waits = fcfs_waits([0, 0, 0, 0], [3, 1, 1, 1], 2)
    np.testing.assert_allclose(waits, [0, 0, 1, 2])


def test_unstable_rejected():
    with pytest.raises(ValueError, match="ρ"):
        simulate_mmc(2.0, 1.0, 1, 10, seed=0)
