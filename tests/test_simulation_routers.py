"""Production baselines: each follows its published rule on hand-made candidate views."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.placement.simulation.routers import (
    REJECT,
    CandidateView,
    DynamoKV,
    LlmdWeighted,
    MooncakeTTFT,
    OnlineRouter,
    PowerOfTwo,
    PrebleE2,
    SGLangCacheAware,
)


def make_view(hit, in_system, *, length=1000.0, servers=4.0, radio=None, prefill=None, target=1.0):
    hit = np.asarray(hit, dtype=float)
    k = hit.size
    return CandidateView(
        q=0,
        length=length,
        now=0.0,
        target=target,
        node=np.arange(k),
        profile=np.arange(k) % 3,
        distance=np.ones(k),
        radio=np.zeros(k) if radio is None else np.asarray(radio, dtype=float),
        hit=hit,
        prefill=(length - hit) * 1e-4 if prefill is None else np.asarray(prefill, dtype=float),
        in_system=np.asarray(in_system, dtype=float),
        servers=np.full(k, servers),
        open=np.ones(k, dtype=bool),
        fetch=np.zeros(k),
        per_server=np.full(k, 0.25),
        age=np.zeros(k),
        memory=np.zeros(k),
        runtime_per_sequence=1.0,
        gpu_memory=10.0,
        staleness=0.0,
    )


RNG = np.random.default_rng(0)


def test_sglang_longest_match_above_threshold_else_least_loaded():
    router = SGLangCacheAware()
    assert router.choose(make_view([0, 400, 200], [0, 5, 1]), RNG) == 1  # match 0.4 > 0.3
    assert router.choose(make_view([0, 250, 200], [3, 5, 1]), RNG) == 2  # match 0.25: least loaded
    # imbalance: L_max − L_min > 64 and L_max > 1.5 L_min → least loaded even with a good match
    assert router.choose(make_view([0, 900, 0], [10, 100, 30]), RNG) == 0


def test_power_of_two_picks_less_loaded_of_two():
    router = PowerOfTwo()
    view = make_view([0, 0], [5, 1])
    assert all(router.choose(view, np.random.default_rng(s)) == 1 for s in range(5))


def test_dynamo_cost_and_temperature():
    router = DynamoKV()
    # candidate 1 saves prefill blocks, candidate 0 is idle: cost = (L − h)/16 + (n + 1) L/16
    view = make_view([0, 800], [0, 1])
    assert router.choose(view, RNG) == 0  # 62.5 + 62.5 = 125 < 12.5 + 125 = 137.5
    hot = DynamoKV(temperature=10.0)
    picks = {hot.choose(view, np.random.default_rng(s)) for s in range(50)}
    assert picks == {0, 1}


def test_llmd_weighted_scorers():
    router = LlmdWeighted()
    assert router.choose(make_view([0, 900], [0, 0]), RNG) == 1  # prefix score 3·0.9 dominates
    assert router.choose(make_view([900, 900], [10, 0]), RNG) == 1  # equal prefix: queue decides


def test_preble_exploit_vs_explore():
    router = PrebleE2()
    assert router.choose(make_view([0, 600], [0, 20]), RNG) == 1  # cached 600 > uncached 400: exploit
    assert router.choose(make_view([0, 300], [0, 20]), RNG) == 0  # explore: lower load cost


def test_mooncake_rejects_beyond_slo():
    router = MooncakeTTFT()
    assert router.choose(make_view([0, 900], [0, 0], target=1.0), RNG) == 1
    assert router.choose(make_view([0, 900], [40, 40], target=1.0), RNG) == REJECT


def test_online_router_cost_includes_margin_and_fetch():
    view = make_view([0, 0], [8, 0], radio=[0.0, 0.5], prefill=[0.1, 0.1])
    assert OnlineRouter("load_aware", "telemetry").choose(view, RNG) == 1  # Ŵ_0 = 5·0.25 > 0.5 extra radio
    assert OnlineRouter("nearest", "telemetry").choose(view, RNG) == 0
    assert OnlineRouter("prefix", "telemetry").choose(view, RNG) == 0


@pytest.mark.parametrize("policy", ["nearest", "prefix"])
def test_static_bias_matches_policy(policy):
    g = np.array([[1.0, 2.0], [0.5, 1.0]])
    bias = OnlineRouter(policy, "tier").static_bias(g)
    np.testing.assert_allclose(bias, np.zeros_like(g) if policy == "nearest" else g)
    assert OnlineRouter(policy, "telemetry").static_bias(g) is None


def test_unknown_policy_rejected():
    with pytest.raises(ValueError, match="valid"):
        OnlineRouter("random")
