"""Properties of the model over random valid instances and mixes (Hypothesis, derandomised).

Each property runs a fixed number of examples drawn from a fixed seed (``derandomize=True``), so
the suite costs the same every time; warnings are errors (pytest configuration).  Shrunk
counterexamples found while writing these are kept as regular tests at the end.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.association import (
    association_alpha2,
    association_quadrature,
    tier_grid,
    truncated_alpha2,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, load_instance
from edgeprefix.placement.model.mgc import mgc_advertised_wait_and_slopes, variability_factor
from edgeprefix.placement.model.queueing import RHO_CLIP, _advertised_scalar_and_slope, advertised_wait_and_slope

PROPERTY = settings(max_examples=30, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
POLICIES = ("load_aware", "prefix", "nearest")


@st.composite
def extensions(draw):
    """One serving-system extension of docs/model.md §19 (or none), with drawn parameters."""
    kind = draw(st.sampled_from(["none", "mgc", "chunked", "disaggregated", "compression", "remote", "tiers"]))
    if kind == "mgc":
        return {"serving": {"queue": "mgc", "decode_scv": draw(st.floats(0.0, 3.0))}}
    if kind == "chunked":
        return {
            "serving": {
                "queue": draw(st.sampled_from(["mmc", "mgc"])),
                "chunk_size": draw(st.floats(64.0, 2048.0)),
                "chunk_overhead": draw(st.floats(0.0, 0.02)),
                "decode_scv": draw(st.floats(0.0, 3.0)),
            }
        }
    if kind == "disaggregated":
        return {
            "serving": {
                "mode": "disaggregated",
                "decode_slots": draw(st.floats(1.0, 20.0)),
                "handoff_bandwidth": draw(st.floats(1.0, 100.0)),
                "handoff_latency": draw(st.floats(0.0, 0.01)),
            }
        }
    if kind == "compression":
        return {
            "compression": {
                "ratio": draw(st.floats(1.0, 8.0)),
                "decompress_per_token": draw(st.floats(0.0, 1e-4)),
                "quality_loss": draw(st.floats(0.0, 0.05)),
            }
        }
    if kind == "remote":
        return {
            "remote": {
                "prefixes": ["sys", "tool"],
                "bandwidth": draw(st.floats(1.0, 100.0)),
                "latency": draw(st.floats(0.0, 0.01)),
                "per_node": draw(st.booleans()),
                "interference": draw(st.floats(0.0, 1.0)),
                "pipelined": draw(st.booleans()),
            }
        }
    if kind == "tiers":
        return {
            "tiers": [
                {
                    "name": "dram",
                    "capacity": draw(st.floats(0.5, 5.0)),
                    "bandwidth": draw(st.floats(10.0, 500.0)),
                    "latency": draw(st.floats(0.0, 0.005)),
                    "pipelined": draw(st.booleans()),
                }
            ]
        }
    return {}


def _build(mapping, extension):
    """The instance of ``mapping`` with ``extension`` grafted on; an invalid combination is rejected."""
    data = copy.deepcopy(mapping)
    for key, value in extension.items():
        if key == "tiers":
            data["gpu"]["tiers"] = value
        else:
            data[key] = value
    try:
        return instance_from_mapping(data)
    except InstanceError:
        reject()


@st.composite
def instances(draw, alpha=None, extended=False, profiles=(2, 4)):
    """A valid instance: a two-level prefix chain, 1–3 request types, 2–4 profiles (the fourth, ``deep2``,
    identical to ``deep``); ``extended`` grafts one serving-system extension (docs/model.md §19) on it."""
    root = draw(st.floats(100, 2000))
    child = root + draw(st.floats(100, 3000))
    q_count = draw(st.integers(1, 3))
    weights = [draw(st.floats(0.05, 1.0)) for _ in range(q_count)]
    requests = []
    for j in range(q_count):
        path = draw(st.sampled_from([[], ["sys"], ["sys", "tool"]]))
        floor = {0: 1.0, 1: root, 2: child}[len(path)]
        requests.append(
            {
                "id": f"q{j}",
                "probability": weights[j] / sum(weights),
                "length": floor + draw(st.floats(0, 4000)),
                "decode": draw(st.floats(1e-3, 3.0)),
                "path": path,
            }
        )
    total = sum(q["probability"] for q in requests)
    requests[-1]["probability"] += 1.0 - total
    profiles = [
        {"id": "none", "prefixes": []},
        {"id": "shallow", "prefixes": ["sys"]},
        {"id": "deep", "prefixes": ["sys", "tool"]},
        {"id": "deep2", "prefixes": ["sys", "tool"]},
    ][: draw(st.integers(*profiles))]
    return _build(
        {
            "name": "random",
            "network": {
                "edge_density": draw(st.floats(0.2, 5.0)),
                "request_intensity": draw(st.floats(0.05, 6.0)),
                "radio_scale": draw(st.floats(0.02, 2.0)),
                "radio_exponent": alpha if alpha is not None else draw(st.sampled_from([1.0, 2.0, 2.0, 3.0, 4.0, 6.0])),
            },
            "gpu": {"memory": draw(st.floats(3.0, 40.0)), "runtime_per_sequence": 1.0, "kv_per_token": draw(st.floats(1e-5, 5e-4))},
            "prefill": {"linear": draw(st.floats(1e-5, 3e-4)), "quadratic": draw(st.one_of(st.just(0.0), st.floats(1e-10, 1e-7)))},
            "prefixes": [{"id": "sys", "depth": root}, {"id": "tool", "depth": child, "parent": "sys"}],
            "requests": requests,
            "profiles": profiles,
            "placement": {"target": draw(st.floats(0.2, 3.0))},
        },
        draw(extensions()) if extended else {},
    )


@st.composite
def cases(draw, alpha=None, extended=False, profiles=(2, 4)):
    """An instance and a valid mix (zero shares allowed, at least one positive, shares >= 1e-3)."""
    inst = draw(instances(alpha, extended, profiles))
    raw = [draw(st.one_of(st.just(0.0), st.floats(1e-3, 1.0))) for _ in inst.profiles]
    raw = [r if c >= 1 else 0.0 for r, c in zip(raw, inst.concurrency)]
    if not any(raw):
        raw[int(np.argmax(inst.concurrency))] = 1.0
    mix = np.array(raw) / sum(raw)
    return inst, mix


@PROPERTY
@given(cases(), st.sampled_from(POLICIES))
def test_association_columns_sum_to_one(case, policy):
    inst, mix = case
    a = evaluate(inst, mix, policy).association
    assert np.all(a >= -1e-12)
    np.testing.assert_allclose(a.sum(axis=0), 1.0, atol=2e-6)


@PROPERTY
@given(cases(), st.sampled_from(POLICIES), st.floats(0.01, 10.0))
def test_coverage_lies_between_zero_and_the_queue_free_bound(case, policy, tau):
    inst, mix = case
    ev = evaluate(inst, mix, policy)
    cov, bound = ev.coverage(tau), ev.coverage_queue_free(tau)
    assert 0.0 <= cov <= bound + 1e-12 and bound <= 1.0


@PROPERTY
@given(cases(), st.sampled_from(POLICIES))
def test_coverage_tends_to_the_queue_free_bound_as_load_vanishes(case, policy):
    inst, mix = case
    light = inst.with_network(request_intensity=inst.network.request_intensity * 1e-9)
    ev = evaluate(light, mix, policy)
    assert ev.coverage() == pytest.approx(ev.coverage_queue_free(), abs=1e-6)


@PROPERTY
@given(cases(), st.sampled_from(POLICIES))
def test_coverage_tends_to_the_queue_free_bound_as_slots_grow(case, policy):
    inst, mix = case
    big = inst.replace(gpu=dataclasses.replace(inst.gpu, memory=inst.gpu.memory * 2000))
    ev = evaluate(big, mix, policy)
    assert ev.coverage() == pytest.approx(ev.coverage_queue_free(), abs=1e-6)


def slack(inst) -> float:
    """Comparison slack: rounding for the α = 2 closed form, the documented quadrature bound otherwise."""
    return 1e-12 if inst.network.radio_exponent == 2.0 else 4e-6


@PROPERTY
@given(cases(), st.sampled_from(POLICIES), st.floats(0.05, 5.0), st.floats(1.01, 4.0))
def test_coverage_is_monotone_in_the_target(case, policy, tau, factor):
    inst, mix = case
    ev = evaluate(inst, mix, policy)
    assert ev.coverage(tau) <= ev.coverage(tau * factor) + slack(inst)


@PROPERTY
@given(cases(), st.floats(1.05, 4.0))
def test_nearest_coverage_is_monotone_in_the_density(case, factor):
    inst, mix = case
    denser = inst.with_network(edge_density=inst.network.edge_density * factor)
    assert evaluate(inst, mix, "nearest").coverage() <= evaluate(denser, mix, "nearest").coverage() + slack(inst)


@PROPERTY
@given(cases(), st.sampled_from(POLICIES), st.randoms(use_true_random=False))
def test_profile_order_does_not_change_results(case, policy, rnd):
    inst, mix = case
    order = list(range(len(inst.profiles)))
    rnd.shuffle(order)
    shuffled = inst.replace(profiles=tuple(inst.profiles[i] for i in order))
    ev, ev2 = evaluate(inst, mix, policy), evaluate(shuffled, mix[order], policy)
    assert ev2.coverage() == pytest.approx(ev.coverage(), abs=1e-9)
    np.testing.assert_allclose(ev2.association, ev.association[order], atol=1e-9)


@st.composite
def tiers(draw):
    """Active tiers: densities λ_s, offsets b_{s,q}, cut points u_cut and tilts."""
    s = draw(st.integers(2, 5))
    q = draw(st.integers(1, 3))
    lam = np.array([draw(st.floats(0.01, 10.0)) for _ in range(s)])
    b = np.array([[draw(st.floats(0.0, 5.0)) for _ in range(q)] for _ in range(s)])
    u_cut = np.array([[draw(st.floats(0.0, 5.0)) for _ in range(q)] for _ in range(s)])
    tilt = np.array([[draw(st.floats(0.0, 50.0))] * q for _ in range(s)])
    return lam, b, u_cut, tilt


@PROPERTY
@given(tiers())
def test_alpha2_closed_form_equals_the_quadrature(t):
    lam, b, u_cut, tilt = t
    np.testing.assert_allclose(association_alpha2(lam, b), association_quadrature(lam, b, 2.0, 40), atol=1e-9)
    p1, p2 = truncated_alpha2(lam, b, u_cut, tilt)
    grid = tier_grid(lam, b, 2.0, extra_breaks=b + u_cut, nodes=40)
    inside = (grid.u > 0) & (grid.u <= u_cut[:, :, None])
    mass = np.where(inside, grid.mass, 0.0)
    discount = np.exp(-tilt[:, :, None] * (u_cut[:, :, None] - np.where(inside, grid.u, 0.0)))
    np.testing.assert_allclose(p1, mass.sum(axis=2), atol=1e-9)
    np.testing.assert_allclose(p2, (mass * discount).sum(axis=2), atol=1e-9)


# -- the fixed point, the queue laws and the serving extensions ------------------------------
LOADS = st.sampled_from([1.0, 3.0, 10.0, 30.0])  # Λ multipliers: up to deep overload of every tier


@PROPERTY
@given(cases(alpha=2.5), LOADS)
def test_the_fixed_point_converges_at_light_and_heavy_load(case, factor):
    """α ≠ 2 (quadrature) from light load to overload, identical profiles included (``deep2``)."""
    inst, mix = case
    ev = evaluate(inst.with_network(request_intensity=inst.network.request_intensity * factor), mix)
    assert ev.fixed_point.converged, ev.fixed_point
    assert np.all(np.isfinite(ev.advertised_wait[ev.active]))


@PROPERTY
@given(cases(profiles=(4, 4)), st.floats(0.05, 0.6), st.sampled_from([1.0, 3.0, 10.0]))
def test_identical_profiles_share_their_delay_and_split_by_density(case, split, factor):
    """``deep`` and ``deep2`` are exchangeable: equal ``W̄``, and ``A`` in the ratio of their shares (eq. (7.10))."""
    inst, mix = case
    mix = mix.copy()
    mix[2:] = (mix[2] + mix[3] + 0.1) * np.array([split, 1.0 - split])
    mix /= mix.sum()
    ev = evaluate(inst.with_network(request_intensity=inst.network.request_intensity * factor), mix)
    assert ev.fixed_point.converged and ev.advertised_wait[2] == ev.advertised_wait[3]
    np.testing.assert_allclose(ev.association[2] * (1.0 - split), ev.association[3] * split, rtol=1e-10, atol=1e-300)


@PROPERTY
@given(cases(), st.sampled_from(POLICIES), st.sampled_from([1e-30, 1e-25, 1e-12]))
def test_vanishing_loads_keep_every_tier_finite(case, policy, intensity):
    """Λ at the bottom of its range: offered loads down to subnormal numbers, waits 0, coverage at the bound,
    and each ``1/μ_s`` a weighted mean of the tier's service times."""
    inst, mix = case
    ev = evaluate(inst.with_network(request_intensity=intensity), mix, policy)
    on = ev.active
    service = inst.service_time[on]
    assert np.all(ev.mean_service[on] >= service.min(axis=1) * (1 - 1e-15))
    assert np.all(ev.mean_service[on] <= service.max(axis=1) * (1 + 1e-15))
    assert np.all(np.isfinite(ev.advertised_wait[on])) and np.all(ev.advertised_wait[on] >= 0.0)
    assert ev.coverage() == pytest.approx(ev.coverage_queue_free(), abs=1e-12)


LOAD_VALUES = st.one_of(st.floats(0.0, 1e-300), st.sampled_from([5e-324, 1e-320, 2.2e-308]), st.floats(0.0, 2.0))


@PROPERTY
@given(st.lists(st.tuples(LOAD_VALUES, st.integers(1, 200)), min_size=65, max_size=80), st.floats(0.1, 10.0))
def test_the_advertised_delay_is_finite_and_both_paths_agree_at_any_load(queues, service):
    """Scalar (few queues) and vectorised (many) paths of eq. (7.1) and its slope, subnormal loads included."""
    a = np.array([x * c for x, c in queues])  # ρ = x ∈ [0, 2]: from empty to overloaded (linear continuation)
    c = np.array([float(c) for _, c in queues])
    wait, slope = advertised_wait_and_slope(a, c, np.full(a.size, service))
    pairs = np.array([_advertised_scalar_and_slope(x, k, service, RHO_CLIP) for x, k in zip(a.tolist(), c.tolist())])
    assert np.all(np.isfinite(pairs)) and np.all(pairs >= 0.0)
    np.testing.assert_allclose(wait, pairs[:, 0], rtol=1e-11, atol=0.0)
    np.testing.assert_allclose(slope, pairs[:, 1], rtol=1e-11, atol=0.0)


@PROPERTY
@given(st.integers(1, 100), st.floats(0.0, 4.0), st.lists(LOAD_VALUES, min_size=2, max_size=12))
def test_the_mgc_advertised_delay_is_finite_and_increasing_in_the_load(c, scv, rhos):
    """The M/G/c law of docs/model.md §19.6 from subnormal loads to overload: finite, nondecreasing in ``a``,
    ``K`` between its M/M/c and light-traffic values."""
    a = np.sort(np.array(rhos)) * c
    n = a.size
    wait, slope, d_scv = mgc_advertised_wait_and_slopes(a, np.full(n, float(c)), np.ones(n), np.full(n, scv))
    assert np.all(np.isfinite(wait)) and np.all(np.isfinite(slope)) and np.all(np.isfinite(d_scv))
    assert np.all(np.diff(wait) >= -1e-12 * np.abs(wait[1:])) and np.all(slope >= 0.0)
    k = variability_factor(a, float(c), scv)
    assert np.all(k >= min(1.0, (1.0 + scv) / 2.0) - 1e-12) and np.all(k <= max(1.0, (1.0 + scv) / 2.0) + 1e-12)


@PROPERTY
@given(cases(extended=True), st.sampled_from(POLICIES), LOADS)
def test_serving_extension_instances_keep_the_guarantees(case, policy, factor):
    """Memory tiers, a remote pool, compression, disaggregation, chunked prefill and the M/G/c law (§19)."""
    inst, mix = case
    ev = evaluate(inst.with_network(request_intensity=inst.network.request_intensity * factor), mix, policy)
    np.testing.assert_allclose(ev.association.sum(axis=0), 1.0, atol=2e-6)
    assert ev.fixed_point is None or ev.fixed_point.converged
    cov, bound = ev.coverage(), ev.coverage_queue_free()
    assert 0.0 <= cov <= bound + 1e-12 and bound <= 1.0


# -- counterexamples kept as regular tests --------------------------------------------------
def test_alpha2_truncated_integral_past_the_cut_with_a_steep_tilt():
    """Segments past the upper limit with a large tilt made ``e^{+tilt (lo − upper)} · 0`` = NaN."""
    lam = np.array([1.0, 1.0])
    b = np.array([[0.0], [3.0]])  # tier 0's cut (0.5) lies before tier 1 starts: tier 0 has a dead segment past it
    p1, p2 = truncated_alpha2(lam, b, np.array([[0.5], [0.5]]), np.array([[400.0], [400.0]]))
    assert np.all(np.isfinite(p1)) and np.all(np.isfinite(p2))
    assert p1[0, 0] == pytest.approx(-np.expm1(-np.pi * 0.5), rel=1e-12)  # alone on [0, 0.5]: 1 − e^{−π λ u}


def test_a_large_common_offset_keeps_the_association():
    """``b`` of 1e12 for every tier once rounded the axis away (Σ_s A_s,q = 0)."""
    lam = np.array([1e6, 1e6])
    b = np.array([[1e12], [1e12 + 1e-3]])
    np.testing.assert_allclose(association_quadrature(lam, b, 3.0, 48).sum(axis=0), 1.0, atol=1e-9)


def test_a_request_with_no_gpu_time_is_refused():
    """Found by the monotonicity property: L_q equal to a cached prefix's depth and D_q = 0 give
    1/μ_{s,q} = 0, an infinite service rate, and NaN in the coverage tilt."""
    data = instance_to_mapping(load_instance("paper_baseline"))
    data["requests"][0].update(length=800.0, decode=0.0)  # exactly the cached system prompt
    with pytest.raises(InstanceError, match=r"requests\[0\].decode: request type 'short' needs no GPU time on profile 'shallow'"):
        instance_from_mapping(data)


def test_nearest_density_comparison_at_alpha_one_near_full_coverage():
    """Found by the density property: at coverage 1 − 7e-10 (α = 1) doubling λ_b moved the result by
    −1.4e-12, quadrature rounding far inside the documented bound; the slack covers it."""
    data = instance_to_mapping(load_instance("paper_baseline"))
    data["network"].update(edge_density=2.0, request_intensity=1.0, radio_scale=0.25, radio_exponent=1.0)
    inst = instance_from_mapping(data)
    mix = inst.mix_vector(None)
    denser = inst.with_network(edge_density=4.0)
    assert evaluate(inst, mix, "nearest").coverage() <= evaluate(denser, mix, "nearest").coverage() + slack(inst)
