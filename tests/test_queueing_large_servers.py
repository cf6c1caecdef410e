"""Erlang B in O(1) for many servers (docs/model.md §16) against the exact recursion."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edgeprefix.placement.model.erlang import erlang_b_large, erlang_b_large_scalar
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import default_instance
from edgeprefix.placement.model.queueing import (
    LARGE_SERVERS,
    advertised_wait,
    advertised_wait_and_slope,
    erlang_b,
    erlang_c,
)

RHOS = [1e-3, 0.05, 0.2, 0.34, 0.5, 0.7, 0.9, 0.97, 0.99, 0.999, 1.0, 1.001, 1.01, 1.05, 1.2, 1.5, 2.0, 3.0, 10.0, 100.0]
SERVERS = [LARGE_SERVERS, 65, 100, 257, 1000, 2048, 4999, 10_000]


def recursion(a: float, c: int) -> float:
    """``E_k = a E_{k−1} / (k + a E_{k−1})``, ``E_0 = 1`` on Python floats (the reference)."""
    e = 1.0
    for k in range(1, c + 1):
        e = a * e / (k + a * e)
    return e


def assert_matches_recursion(values: np.ndarray, loads: np.ndarray, servers: np.ndarray) -> None:
    reference = np.array([recursion(a, int(c)) for a, c in zip(loads, servers)])
    normal = reference > 1e-290  # subnormal results carry no relative precision
    np.testing.assert_allclose(values[normal], reference[normal], rtol=1e-12, atol=0)
    np.testing.assert_allclose(values[~normal], reference[~normal], rtol=0, atol=1e-290)


def grid() -> tuple[np.ndarray, np.ndarray]:
    c, rho = np.meshgrid(np.array(SERVERS, dtype=float), np.array(RHOS))
    return (rho * c).ravel(), c.ravel()


def test_vectorised_path_matches_the_recursion_over_a_wide_grid():
    loads, servers = grid()
    assert loads.size > 64  # erlang_b's vectorised branch
    assert_matches_recursion(erlang_b(loads, servers), loads, servers)


def test_scalar_path_matches_the_recursion_and_the_vectorised_one():
    loads, servers = grid()
    scalar = np.array([erlang_b_large_scalar(a, int(c)) for a, c in zip(loads, servers)])
    assert_matches_recursion(scalar, loads, servers)
    np.testing.assert_allclose(scalar, erlang_b_large(loads, servers), rtol=1e-14, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.5, 0.999, 1.0, 1.003, 1.2])
def test_a_million_servers(rho):
    c = 1_000_000
    assert erlang_b(rho * c, c)[()] == pytest.approx(recursion(rho * c, c), rel=1e-12)


def test_both_sides_of_the_switch_agree():
    for rho in (0.3, 0.9, 1.0, 1.5):
        below = recursion(rho * (LARGE_SERVERS - 1), LARGE_SERVERS - 1)
        assert erlang_b(rho * (LARGE_SERVERS - 1), LARGE_SERVERS - 1)[()] == below  # still the recursion
        a = rho * LARGE_SERVERS
        assert erlang_b(a, LARGE_SERVERS)[()] == pytest.approx(recursion(a, LARGE_SERVERS), rel=1e-13)


@pytest.mark.parametrize("c", [80, 5000, 10**6, 10**8])
@pytest.mark.parametrize("rho", [0.3, 0.95, 0.995])
def test_newton_slope_is_the_derivative_of_the_advertised_wait(c, rho):
    a, m = rho * c, 0.7
    wait, slope = advertised_wait_and_slope(np.array([a]), np.array([float(c)]), np.array([m]))
    assert wait[0] == advertised_wait(np.array([a]), np.array([float(c)]), np.array([m]))[0]
    h = 1e-6 * a
    up = advertised_wait(np.array([a + h]), np.array([float(c)]), np.array([m]))[0]
    down = advertised_wait(np.array([a - h]), np.array([float(c)]), np.array([m]))[0]
    central = (up - down) / (2 * h)
    assert slope[0] == pytest.approx(central, rel=1e-5, abs=1e-300)


def test_erlang_c_stays_a_probability_for_huge_c():
    c = np.array([1e8, 1e8, 1e8, 5e3])
    a = np.array([10.0, 0.5e8, 0.99e8, 4990.0])
    pw = erlang_c(a, c)
    assert np.all((pw >= 0) & (pw <= 1))
    assert pw[0] == 0.0 and pw[1] == 0.0  # e^{−D} underflows: no queue at all
    assert 0.0 < pw[3] < 1.0 and pw[2] == 0.0  # ρ = 0.99 with 10⁸ servers: a wait is ~e^{−5000}


def test_an_instance_with_1e8_servers_evaluates_to_its_queue_free_coverage():
    inst = default_instance()
    big = inst.replace(gpu=dataclasses.replace(inst.gpu, memory=1e8))
    assert big.concurrency.min() > 9 * 10**7
    ev = evaluate(big)
    assert ev.fixed_point.converged and ev.stable
    assert np.all(ev.wait_probability == 0.0)
    assert ev.coverage() == pytest.approx(ev.coverage_queue_free(), abs=1e-15)
    assert 0.0 < ev.coverage() < 1.0


def test_the_simulators_refuse_more_slots_than_they_can_hold():
    from edgeprefix.placement.errors import InstanceError
    from edgeprefix.placement.simulation.layout import sample_layout

    inst = default_instance()
    big = inst.replace(gpu=dataclasses.replace(inst.gpu, memory=1e6))  # fine for the model, not for a slot list
    assert evaluate(big).fixed_point.converged
    with pytest.raises(InstanceError, match=r"gpu\.memory.*simulators keep one slot per sequence"):
        sample_layout(big, None, seed=0)
    sample_layout(inst, None, seed=0)  # the paper's c_s ≤ 12 pass


def test_vectorised_newton_slope_matches_the_scalar_one():
    rng = np.random.default_rng(4)
    c = rng.choice([1.0, 3.0, 12.0, 80.0, 5000.0], size=200)
    a = c * rng.uniform(0.0, 1.3, size=200)  # across ρ_clip: the linear continuation too
    m = rng.uniform(0.2, 2.0, size=200)
    wait, slope = advertised_wait_and_slope(a, c, m)  # > 64 queues: the array branch
    pairs = [advertised_wait_and_slope(a[i : i + 1], c[i : i + 1], m[i : i + 1]) for i in range(200)]
    np.testing.assert_allclose(wait, [w[0] for w, _ in pairs], rtol=1e-12, atol=0)
    np.testing.assert_allclose(slope, [s[0] for _, s in pairs], rtol=1e-10, atol=0)
