"""Regression tests for numerical edge cases (docs/model.md §7, §20): vanishing and subnormal loads,
rows of the association that underflow, wild Newton steps and exchangeable (identical) profiles.

Warnings are errors in this suite, so every call here also checks that nothing overflows or
divides 0 by 0 on the way.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.placement.model.erlang import erlang_b_large, erlang_b_large_scalar
from edgeprefix.placement.model.evaluation import delay_cap, evaluate, exchangeable_tiers
from edgeprefix.placement.model.fixed_point import allowed_residual, robust_solve
from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, load_instance
from edgeprefix.placement.model.mgc import cosmetatos_ratio, mgc_mean_wait, variability_factor
from edgeprefix.placement.model.queueing import (
    _advertised_scalar_and_slope,
    advertised_wait_and_slope,
    erlang_b,
    erlang_b_over_load,
    mean_wait,
)
from edgeprefix.placement.model.sensitivity import sensitivity
from edgeprefix.placement.model.tier_loads import lift, unlift
from edgeprefix.placement.model.wait_laws import MgcLaw, erlang_c_and_slope

TINY_LOADS = [0.0, 5e-324, 1e-320, 1e-310, 1e-300, 1e-200, 1e-160, 1e-20]


# -- the advertised delay at a subnormal load --------------------------------------------------------
@pytest.mark.parametrize("c", [1, 2, 5, 63, 64, 100, 10**6])
def test_the_advertised_slope_is_finite_at_subnormal_loads_and_both_paths_agree(c):
    """``c/a`` overflowed at a subnormal ``a`` and met an underflowed ``E_c(a)``: ``inf · 0`` = NaN."""
    scalar = np.array([_advertised_scalar_and_slope(a, c, 2.0, 0.99) for a in TINY_LOADS])
    assert np.all(np.isfinite(scalar))
    loads = np.array(TINY_LOADS * 9)  # 72 queues: the vectorised path
    wait, slope = advertised_wait_and_slope(loads, np.full(loads.size, float(c)), np.full(loads.size, 2.0))
    np.testing.assert_allclose(wait[: len(TINY_LOADS)], scalar[:, 0], rtol=1e-12, atol=0.0)
    np.testing.assert_allclose(slope[: len(TINY_LOADS)], scalar[:, 1], rtol=1e-12, atol=0.0)
    if c == 1:  # W̄ = a m/(1 − a): the slope tends to m = 2 and the wait to 0
        np.testing.assert_allclose(scalar[:, 1], 2.0 / (1.0 - np.array(TINY_LOADS)) ** 2, rtol=1e-12)
    else:  # W̄ ≈ m a^c / (c! c²): both vanish, the slope is nondecreasing in the load
        assert scalar[0, 1] == 0.0 and np.all(np.diff(scalar[:, 1]) >= 0.0)


def test_the_ratio_of_erlang_b_to_the_load_keeps_its_digits_where_erlang_b_is_subnormal():
    """``E_c(a)/a`` by one step of the recursion where ``E_c`` underflows: ``E_2(a)/a = a/(2 + 3a + a²) · …``."""
    a = np.array([1e-160, 1e-200, 5e-324, 0.0])
    b = erlang_b(a, np.full(a.size, 2.0))
    exact = np.array([x / (2.0 + 2.0 * x + x * x) for x in a])  # E_2(a)/a = (a/2)/(1 + a + a²/2)
    np.testing.assert_allclose(erlang_b_over_load(a, 2.0, b), exact, rtol=1e-14, atol=0.0)
    np.testing.assert_allclose(erlang_b_over_load(a, 1.0, erlang_b(a, 1.0)), 1.0 / (1.0 + a), rtol=1e-15)
    pw, slope = erlang_c_and_slope(np.array([1e-310, 0.0, 1e-310]), np.array([25.0, 1.0, 1.0]))
    assert np.all(np.isfinite(pw)) and slope[1] == 1.0 and slope[2] == pytest.approx(1.0, rel=1e-15)


def test_erlang_b_for_many_servers_at_a_subnormal_load_is_zero():
    """The deviance's ``c/a`` overflowed (vectorised path) at a subnormal load."""
    a = np.array([5e-324, 1e-310, 1e-290])
    np.testing.assert_array_equal(erlang_b_large(a, np.full(a.size, 64.0)), 0.0)
    assert [erlang_b_large_scalar(float(x), 64) for x in a] == [0.0, 0.0, 0.0]


def test_an_unstable_queue_with_a_subnormal_gap_waits_forever_without_overflow():
    """``c − a`` subnormal and negative (``c = 0``): ``m/(c − a)`` overflowed before the mask."""
    assert mean_wait(np.array([5e-324]), np.array([0.0]), 1.0)[0] == math.inf
    assert mgc_mean_wait(np.array([5e-324]), np.array([0.0]), 1.0, 0.5)[0] == math.inf


# -- Cosmetatos' ratio as the load vanishes ----------------------------------------------------------
@pytest.mark.parametrize("c", [2.0, 4.0, 64.0])
def test_cosmetatos_ratio_is_one_in_light_traffic_without_overflow(c):
    """``F = A_c (c − a)/a`` overflowed as ``a → 0``; the callers had to silence it."""
    a = np.array(TINY_LOADS)
    k, dk = cosmetatos_ratio(a, np.full(a.size, c))
    np.testing.assert_array_equal(k, 1.0)
    np.testing.assert_array_equal(dk, 0.0)


def test_cosmetatos_ratio_at_one_server_is_a_half_at_every_load():
    """Pollaczek–Khinchine: ``W̄_{M/D/1} = W̄_{M/M/1}/2`` at every load, so also at ``a = 0`` (was 1 there)."""
    a = np.array([*TINY_LOADS, 0.5, 0.99])
    k, dk = cosmetatos_ratio(a, np.ones(a.size))
    np.testing.assert_array_equal(k, 0.5)
    np.testing.assert_array_equal(dk, 0.0)
    np.testing.assert_array_equal(variability_factor(a, 1.0, 0.44), 0.72)


def test_the_mgc_law_needs_no_silenced_warnings_at_vanishing_loads():
    law = MgcLaw()
    a = np.array([0.0, 5e-324, 1e-310, 1e-160, 0.5])
    c, m, scv = np.array([1.0, 2.0, 4.0, 8.0, 3.0]), np.ones(5), np.full(5, 0.3)
    wait, slope, d_m, d_scv = law.advertised(a, c, m, 0.99, scv)
    w = law.wait_law(a, c, m, scv)
    for x in (wait, slope, d_m, d_scv, w.weight, w.decay, w.d_decay_da, w.d_weight_da):
        assert np.all(np.isfinite(x))


# -- rows of the association that underflow ----------------------------------------------------------
def test_lifting_rows_is_exact_and_keeps_normal_rows_untouched():
    a = np.array([[0.3, 0.6], [1e-312, 3e-312], [0.0, 0.0], [1.0, 0.0]])
    lifted, k = lift(a)
    assert k.tolist() == [0, 1034, 0, 0]
    np.testing.assert_array_equal(lifted[[0, 2, 3]], a[[0, 2, 3]])
    assert 0.5 <= lifted[1].max() < 1.0
    np.testing.assert_array_equal(unlift(lifted, k), a)  # powers of two: exact both ways
    assert lift(a[[0, 3]])[0] is a[[0, 3]] or np.array_equal(lift(a[[0, 3]])[0], a[[0, 3]])


def _two_tiers():
    """paper_baseline with two active profiles at α = 2 (the closed form: exact tails)."""
    inst = load_instance("paper_baseline")
    mix = np.zeros(len(inst.profiles))
    mix[[0, len(inst.profiles) - 1]] = 0.5
    return inst, mix


def _offset_for_share(inst, mix, share):
    """The advertised delay of the second tier at which its largest association is about ``share``."""
    net = inst.network
    dens = np.pi * mix[mix > 0] * net.edge_density
    return -math.log(share) * net.radio_scale / dens[0] + float(np.ptp(inst.first_token_time[mix > 0]))


def _far_tier(inst, mix, share):
    """Evaluate with the second tier advertising a delay at which its largest ``A`` is about ``share``."""
    w = np.zeros(len(inst.profiles))
    w[mix > 0] = [0.0, _offset_for_share(inst, mix, share)]
    ev = evaluate(inst, mix, warm_start=w, method="damped", max_iterations=0)  # one map evaluation at w
    far = np.flatnonzero(mix)[1]
    return ev.association[far], ev.mean_service[far], inst.service_time[far]


@pytest.mark.parametrize("share", [1e-321, 1e-322])
def test_the_mean_service_time_of_a_tier_the_router_almost_never_picks(share):
    """A row ``A_{s,·}`` of subnormal numbers made the sums ``λq_s``, ``a_s`` round to a few multiples of
    ``2⁻¹⁰⁷⁴`` (or ``a_s`` to 0): ``1/μ_s`` came out as 1.0 or 1.167 s, outside the tier's service times
    [1.135, 2.281] s, or 0 (then ``W/(1/μ) = 0/0`` in the fixed point's Jacobian).  It is the mean of the
    service times weighted by ``p_q A_{s,q}``, whatever the scale of ``A``."""
    inst, mix = _two_tiers()
    row, mean, service = _far_tier(inst, mix, share)
    assert 0.0 < row.max() < 1e-320
    lifted = np.ldexp(row, 1074)  # exact: integers
    assert mean == pytest.approx((inst.probabilities * lifted * service).sum() / (inst.probabilities * lifted).sum(), rel=1e-14)
    assert service.min() * (1 - 1e-15) <= mean <= service.max() * (1 + 1e-15)  # within rounding of the range


def test_the_mean_service_time_does_not_depend_on_the_scale_of_the_association():
    """At α = 2 with two tiers the later tier's ``A_{1,q}`` all scale by the same ``e^{−π λ_0 ΔW/ξ}``, so
    its ``1/μ`` is the same for a normal row (1e-100) and a subnormal one with 44 significant bits (1e-310)."""
    inst, mix = _two_tiers()
    (normal, m_normal, _), (tiny, m_tiny, _) = (_far_tier(inst, mix, share) for share in (1e-100, 1e-310))
    assert 1e-110 < normal.max() < 1e-90 and 0.0 < tiny.max() < 2.2e-308
    assert m_tiny == pytest.approx(m_normal, rel=1e-12)


@pytest.mark.parametrize("policy", ["prefix", "load_aware"])
def test_the_gradient_of_a_point_where_a_tier_gets_a_subnormal_share(policy):
    """``1/λq_s`` overflowed in the sensitivities at a converged point whose far tier receives ~1e-310 of the
    requests (a small radio scale ξ against the prefill gap); the seeds on that tier are ∝ its share, so
    the quotients stay finite.  Under ``prefix`` the far tier's coverage gradient scales with its share."""
    inst, mix = _two_tiers()
    gap = float(np.abs(np.diff(inst.first_token_time[mix > 0], axis=0)).min())
    out = []
    for share in (1e-100, 1e-310):
        xi = np.pi * 0.5 * inst.network.edge_density * gap / -math.log(share)
        ev = evaluate(inst.with_network(radio_scale=xi), mix, policy)
        grad = sensitivity(ev).gradients["coverage"]
        assert np.all(np.isfinite(grad))
        out.append((ev, grad))
    (ev0, g0), (ev1, g1) = out
    far = np.flatnonzero(mix)[0]
    if policy == "prefix":  # (load-aware routing evens the loads out: no tier is starved there)
        assert 0.0 < ev1.arrival_rate[far] < 2.3e-308
        assert g1[far] / ev1.arrival_rate[far] == pytest.approx(g0[far] / ev0.arrival_rate[far], rel=1e-3)
        np.testing.assert_allclose(np.delete(g1, far), np.delete(g0, far), rtol=1e-3)


def test_a_newton_step_of_thousands_in_log_delay_is_evaluated_at_the_cap():
    """A nearly singular Jacobian gave a step of ~4000 in ``v = log(W + w₀)``: ``e^v`` overflowed."""
    seen = []

    def fn(w):
        seen.append(float(np.max(w)))
        return 0.5 * w + 1.0  # W* = 2

    def jacobian(w):  # a wrong, nearly singular slope: the first Newton step is huge
        ev = w + 1e-3
        return fn(w), np.diag((0.5 * w + 1.0 + 1e-3) / ev * (1.0 - 1e-12))

    w, report = robust_solve(fn, np.zeros(2), jacobian=jacobian, w_shift=1e-3, w_max=1e6)
    assert report.converged and np.allclose(w, 2.0, rtol=1e-9)
    assert max(seen) <= 1e6 * (1 + 1e-12)
    assert delay_cap(0.5) == 5e249


def test_a_calibration_point_that_divided_zero_by_zero():
    """Found by the Sec. VI calibration search: an overloaded point whose Newton trials passed through
    a subnormal row of ``A`` (``1/μ_s = 0``, then ``W/(1/μ) = 0/0``) and a subnormal load (NaN wait)."""
    data = {
        "name": "paper_section6",
        "network": {"edge_density": 1.0, "request_intensity": 6.0, "radio_scale": 0.18605688985825478, "radio_exponent": 2.0},
        "gpu": {"memory": 13.740194804187158, "runtime_per_sequence": 1.0, "kv_per_token": 0.003125},
        "prefill": {"linear": 7.061251403816377e-05, "quadratic": 2.235396366537687e-08, "intercept": 0.029209875468146646},
        "prefixes": [{"id": "sys", "depth": 1002.54}, {"id": "tool", "depth": 3840.0, "parent": "sys"}],
        "requests": [
            {"id": "short", "probability": 0.7, "length": 1024.0, "decode": 0.05000000000000001, "path": ["sys"]},
            {"id": "long", "probability": 0.3, "length": 4096.0, "decode": 4.999999999999998, "path": ["sys", "tool"]},
        ],
        "profiles": [{"id": "none", "prefixes": []}, {"id": "shallow", "prefixes": ["sys"]}, {"id": "deep", "prefixes": ["sys", "tool"]}],
        "placement": {"target": 0.8, "mix": {"none": 0.0, "shallow": 0.5, "deep": 0.5}},
    }
    ev = evaluate(instance_from_mapping(data))
    on = ev.active
    assert np.all(np.isfinite(ev.advertised_wait[on])) and np.all(ev.mean_service[on] > 0)
    assert ev.coverage() == 0.0 and not ev.stable  # both tiers overloaded (ρ ≈ 1.9 and 1.01)


# -- identical profiles and the stopping rule --------------------------------------------------------
def test_identical_profiles_form_one_group():
    keys = np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0], [0.5, 2.0], [3.0, 4.0]])
    group, first = exchangeable_tiers(keys)
    assert group.tolist() == [0, 1, 0, 2, 1] and first.tolist() == [0, 1, 3]


@pytest.mark.parametrize("alpha", [2.0, 2.5])
@pytest.mark.parametrize("factor", [2.0, 5.0, 8.0])
def test_the_fixed_point_converges_with_identical_profiles_at_heavy_load(alpha, factor):
    """Profiles p2 and p3 are identical; at heavy load the delays reach 10³ s, where one unit in the last
    place of ``W`` moves ``T(W) − W`` by ~10⁻⁸ s, so the absolute 10⁻⁹ s could not be met (reported as not
    converged at residual ≈ 10⁻⁸).  The tolerance is now relative above 1 s, and the identical tiers share
    one unknown, so their breakpoints coincide exactly."""
    inst = synthetic_instance(5, 4, alpha=alpha, seed=3)
    assert np.array_equal(inst.first_token_time[2], inst.first_token_time[3])
    heavy = inst.with_network(request_intensity=inst.network.request_intensity * factor)
    ev = evaluate(heavy)
    fp = ev.fixed_point
    assert fp.converged and fp.method == "robust:newton"
    assert fp.residual <= allowed_residual(ev.advertised_wait, 1e-9)
    assert ev.advertised_wait[2] == ev.advertised_wait[3]
    np.testing.assert_allclose(ev.association[2], ev.association[3], rtol=1e-14)


def test_the_allowed_residual_is_absolute_below_one_second_and_relative_above():
    assert allowed_residual(np.array([0.2, 0.5]), 1e-9) == 1e-9
    assert allowed_residual(np.array([0.2, -2000.0]), 1e-9) == pytest.approx(2e-6)


def test_identical_profiles_with_different_shares_get_their_share_of_the_mass():
    """Exchangeable tiers split their joint association in proportion to their densities (eq. (7.10))."""
    data = instance_to_mapping(load_instance("paper_baseline"))
    twin = dict(data["profiles"][-1], id="twin")
    data["profiles"].append(twin)
    inst = instance_from_mapping(data)
    mix = np.full(len(inst.profiles), 0.1)
    mix[-2], mix[-1] = 0.15, 0.45
    mix /= mix.sum()
    ev = evaluate(inst, mix)
    assert ev.fixed_point.converged and ev.advertised_wait[-2] == ev.advertised_wait[-1]
    np.testing.assert_allclose(ev.association[-1], 3.0 * ev.association[-2], rtol=1e-12)
    merged = np.delete(mix, -1)
    merged[-1] += mix[-1]
    single = evaluate(load_instance("paper_baseline"), merged)  # the twins as one profile of the joint share
    np.testing.assert_allclose(ev.association[-2:].sum(axis=0), single.association[-1], rtol=1e-9, atol=1e-12)
    assert ev.coverage() == pytest.approx(single.coverage(), abs=1e-9)


def _overloaded_twin_tiers(intensity: float):
    """Hypothesis' counterexample: α = 1, one request type with no prefix, every tier 2–3× overloaded,
    ``none`` (3 slots) against ``deep``/``deep2`` (2 slots): the delays reach 10⁴ s and differ by 0.13 s."""
    return instance_from_mapping(
        {
            "name": "twin-tiers",
            "network": {"edge_density": 0.5, "request_intensity": intensity, "radio_scale": 0.5, "radio_exponent": 1.0},
            "gpu": {"memory": 3.0, "runtime_per_sequence": 1.0, "kv_per_token": 1e-5},
            "prefill": {"linear": 1e-5},
            "prefixes": [{"id": "sys", "depth": 100.0}, {"id": "tool", "depth": 200.0, "parent": "sys"}],
            "requests": [{"id": "q0", "probability": 1.0, "length": 1.0, "decode": 2.0}],
            "profiles": [
                {"id": "none", "prefixes": []},
                {"id": "shallow", "prefixes": ["sys"]},
                {"id": "deep", "prefixes": ["sys", "tool"]},
                {"id": "deep2", "prefixes": ["sys", "tool"]},
            ],
            "placement": {"target": 1.0},
        }
    )


def test_the_continuation_solves_an_overloaded_point_where_newton_stalls():
    """At Λ = 2 Newton's steps overshoot the near-step association (docs/model.md (7.11)) and, before the
    continuation, MINPACK and the damping ended at W ≈ 835 s with residual 1.1·10⁴ (not converged).  The
    overloaded delays are linear in Λ (the continuation of (7.1)), so the answer must lie on the chord of
    its neighbours, which Newton solves directly."""
    mix = np.array([1.0, 0.0, 0.05, 0.05]) / 1.1
    ev = evaluate(_overloaded_twin_tiers(2.0), mix)
    fp = ev.fixed_point
    assert fp.converged and fp.method == "robust:continuation", fp
    assert fp.residual <= allowed_residual(ev.advertised_wait[ev.active], 1e-9)
    below, above = (evaluate(_overloaded_twin_tiers(x), mix) for x in (1.8, 2.2))
    assert below.fixed_point.method == above.fixed_point.method == "robust:newton"
    chord = 0.5 * (below.advertised_wait + above.advertised_wait)
    np.testing.assert_allclose(ev.advertised_wait[ev.active], chord[ev.active], rtol=1e-3)
    assert ev.advertised_wait[2] == ev.advertised_wait[3]


def test_the_load_continuation_reaches_a_point_no_local_method_sees():
    """α = 6, both tiers ~90× overloaded (W ≈ 2–4·10⁴ s): the association's tails underflow away from the
    equilibrium (∂T/∂W = 0 there), and Newton, the pseudo-transient continuation, MINPACK and the damping all
    stalled (residual 4·10⁴ s).  Followed up from a lighter load (docs/model.md (7.12)) the point is reached,
    and it is a fixed point at the full load: started there, the solver needs no ladder and stays there.
    (Whether it stops at the first test depends on rounding: the point's residual, 1.7·10⁻⁵ s with one
    OpenBLAS kernel, lies between half the allowed residual, which Newton's first test asks, and the whole.)"""
    inst = instance_from_mapping(
        {
            "name": "steep",
            "network": {
                "edge_density": 2.607607960437271,
                "request_intensity": 179.4441308059072,
                "radio_scale": 1.033519,
                "radio_exponent": 6.0,
            },
            "gpu": {"memory": 10.95662436775736, "runtime_per_sequence": 1.0, "kv_per_token": 8.833291771257872e-05},
            "prefill": {"linear": 0.00019004711744037762, "quadratic": 0.0},
            "prefixes": [{"id": "sys", "depth": 718.3971076375104}, {"id": "tool", "depth": 2576.9682593092593, "parent": "sys"}],
            "requests": [
                {"id": "q0", "probability": 1.0, "length": 3928.977026043759, "decode": 1.8053848480808912, "path": ["sys", "tool"]}
            ],
            "profiles": [{"id": "none", "prefixes": []}, {"id": "shallow", "prefixes": ["sys"]}],
            "placement": {"target": 0.510810862474044},
        }
    )
    mix = np.array([0.20272303847137751, 0.7972769615286226])
    ev = evaluate(inst, mix)
    fp = ev.fixed_point
    assert fp.converged and fp.method == "robust:load-continuation", fp
    assert np.all(ev.advertised_wait > 1e4)
    warm = evaluate(inst, mix, warm_start=ev.advertised_wait)
    again = warm.fixed_point
    allowed = allowed_residual(ev.advertised_wait[ev.active], 1e-9)
    assert again.converged and again.method != "robust:load-continuation" and again.iterations <= 1, again
    assert again.residual <= allowed, again
    assert np.max(np.abs(warm.advertised_wait - ev.advertised_wait)) <= 2.0 * allowed
