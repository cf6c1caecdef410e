"""Network DES: filtering, verification, hysteresis, M/M/1 limit, agreement with the analysis."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edgeprefix.placement.model.instance import Gpu, load_instance
from edgeprefix.placement.simulation.layout import (
    LayoutSpec,
    NodeAttributes,
    expected_record,
    sample_layout,
    verify_reuse,
)
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.reference import mm1_closed_forms
from edgeprefix.placement.simulation.routers import BASELINES, OnlineRouter

SMALL = SimulationSpec(horizon=20.0, warmup=10.0, layout=LayoutSpec(mean_nodes=120.0))


@pytest.fixture(scope="module")
def baseline():
    return load_instance(None)


def _routers():
    yield OnlineRouter("nearest", "tier")
    yield OnlineRouter("prefix", "tier")
    yield OnlineRouter("load_aware", "telemetry", candidates_per_profile=2, margin=1.0, rho_high=1.2, rho_low=0.9)
    yield OnlineRouter("load_aware", "tier", tier_wait=(0.0, 0.01, 0.1))
    for cls in BASELINES.values():
        yield cls()


@pytest.mark.parametrize("router", list(_routers()), ids=lambda r: r.name)
def test_router_never_sends_to_filtered_node(baseline, router):
    spec = dataclasses.replace(SMALL, layout=LayoutSpec(mean_nodes=120.0, foreign_fraction=0.25, stale_fraction=0.2))
    res = simulate_network(baseline.with_network(request_intensity=2.0), None, router, spec, seed=3)
    layout = res.layout
    assert (~layout.eligible).sum() > 10  # the test network really has filtered nodes
    served = res.node[res.node >= 0]
    assert served.size > 1000
    assert layout.eligible[served].all()
    for x in np.unique(served):
        assert layout.attributes[x] == NodeAttributes()  # same model, tokenizer, adapter, domain, epoch


def test_verify_reuse_downgrades_on_mismatch():
    current = NodeAttributes()
    depths = {"sys": 800.0, "tool": 2250.0}
    expected = {v: expected_record(current, v) for v in depths}
    good = dict(expected)
    assert verify_reuse(good, expected, ("sys", "tool"), depths) == (2250.0, "tool")
    bad_deep = dict(expected, tool=dataclasses.replace(expected["tool"], prefix_hash="x"))
    assert verify_reuse(bad_deep, expected, ("sys", "tool"), depths) == (800.0, "sys")
    bad_root = dict(expected, sys=dataclasses.replace(expected["sys"], position_encoding="alibi"))
    assert verify_reuse(bad_root, expected, ("sys", "tool"), depths) == (0.0, None)  # full prefill
    other_model = {v: expected_record(NodeAttributes(model="m2"), v) for v in depths}
    assert verify_reuse(other_model, expected, ("sys", "tool"), depths) == (0.0, None)


@pytest.mark.parametrize("online", [False, True])
def test_verification_failure_never_reuses_mismatched_state(baseline, online):
    spec = dataclasses.replace(SMALL, layout=LayoutSpec(mean_nodes=120.0, mismatch_fraction=0.5))
    router = OnlineRouter("prefix", "telemetry" if online else "tier", candidates_per_profile=1 + online)
    res = simulate_network(baseline, None, router, spec, seed=4)
    layout = res.layout
    expected = {p.id: expected_record(layout.current, p.id) for p in baseline.prefixes}
    depths = {p.id: p.depth for p in baseline.prefixes}
    downgraded = 0
    for x, q, h in zip(res.node.tolist(), res.request_type.tolist(), res.hit.tolist()):
        vertex = layout.reused_vertex[x][q]
        if vertex is None:
            assert h == 0.0
        else:
            assert layout.states[x][vertex] == expected[vertex]  # only verified states are reused
            assert h == depths[vertex]
        downgraded += h < layout.advertised_hit[x, q]
    assert downgraded > 100  # mismatches happened and were downgraded
    # realised prefill is that of the verified hit
    g = baseline.prefill(baseline.lengths[res.request_type] - res.hit)
    np.testing.assert_allclose(res.prefill, g)


def test_hysteresis_closes_and_reopens_at_thresholds():
    from edgeprefix.placement.simulation.routers import hysteresis_step

    high, low = 1.2, 0.9
    loads = [0.5, 1.19, 1.2, 1.1, 0.95, 0.91, 0.9, 1.0, 1.19, 1.25, 0.3]
    expected = [False, False, True, True, True, True, False, False, False, True, False]
    closed = False
    states = []
    for load in loads:
        closed = bool(hysteresis_step(closed, load, high, low))
        states.append(closed)
    assert states == expected
    with pytest.raises(ValueError, match="rho_low <= rho_high"):
        OnlineRouter(rho_high=0.8, rho_low=0.9)


def test_router_skips_closed_tiers_and_falls_back():
    from edgeprefix.placement.simulation.routers import CandidateView

    router = OnlineRouter("prefix", "telemetry", rho_high=1.0, rho_low=0.5, fallback=0)

    def view(open_):
        k = 3
        return CandidateView(
            q=0,
            length=1000.0,
            now=0.0,
            target=1.0,
            node=np.arange(k),
            profile=np.array([0, 1, 2]),
            distance=np.ones(k),
            radio=np.array([0.3, 0.2, 0.1]),
            hit=np.array([0.0, 500.0, 900.0]),
            prefill=np.array([0.5, 0.2, 0.05]),
            in_system=np.zeros(k),
            servers=np.ones(k),
            open=np.array(open_),
            fetch=np.zeros(k),
            per_server=np.ones(k),
            age=np.zeros(k),
            memory=np.zeros(k),
            runtime_per_sequence=1.0,
            gpu_memory=10.0,
            staleness=0.0,
        )

    rng = np.random.default_rng(0)
    assert router.choose(view([True, True, True]), rng) == 2
    assert router.choose(view([True, True, False]), rng) == 1  # next-best open candidate
    assert router.choose(view([False, False, False]), rng) == 0  # all closed: fallback tier


def test_hysteresis_in_simulation_limits_node_load(baseline):
    inst = baseline.with_network(request_intensity=4.0)
    router = OnlineRouter("prefix", "telemetry", candidates_per_profile=3, rho_high=1.0, rho_low=0.8)
    free = OnlineRouter("prefix", "telemetry", candidates_per_profile=3)
    a = simulate_network(inst, None, router, SMALL, seed=8)
    b = simulate_network(inst, None, free, SMALL, seed=8)
    # admission control sheds load from the hot deep tier (prefix routing alone overloads it)
    assert a.tier_utilization()[2] < b.tier_utilization()[2]
    assert a.coverage(0.8) > b.coverage(0.8)


def test_single_node_c1_matches_mm1(baseline):
    inst = baseline.replace(
        gpu=Gpu(memory=1.5, runtime_per_sequence=1.0, kv_per_token=baseline.gpu.kv_per_token),
        placement=dataclasses.replace(baseline.placement, mix=(("none", 1.0),)),
    )
    inst = inst.with_probabilities({"short": 1.0, "long": 0.0})
    mu = 1.0 / float(inst.service_time[0, 0])
    lam = 0.6 * mu
    inst = inst.with_network(request_intensity=lam)  # area 1/λ_b = 1: one node sees rate Λ
    spec = SimulationSpec(horizon=200_000.0, warmup=2_000.0, layout=LayoutSpec(mean_nodes=1.0, counts="exact"))
    res = simulate_network(inst, {"none": 1.0}, OnlineRouter("nearest", "tier"), spec, seed=9)
    assert res.layout.nodes == 1 and res.layout.servers[0] == 1
    closed = mm1_closed_forms(lam, mu)

    def batch_se(x, batches=40):
        m = np.array([b.mean() for b in np.array_split(np.asarray(x, dtype=float), batches)])
        return m.std(ddof=1) / np.sqrt(batches)

    assert abs(np.mean(res.wait > 0) - closed["wait_probability"]) < 5 * batch_se(res.wait > 0)
    assert abs(res.wait.mean() - closed["mean_wait"]) < 5 * batch_se(res.wait)


def test_same_seed_same_result(baseline):
    r = OnlineRouter("load_aware", "telemetry")
    a = simulate_network(baseline, None, r, SMALL, seed=12)
    b = simulate_network(baseline, None, r, SMALL, seed=12)
    np.testing.assert_array_equal(a.ttft, b.ttft)


def test_stale_telemetry_runs_and_is_not_better(baseline):
    inst = baseline.with_network(request_intensity=4.0)
    fresh = simulate_network(inst, None, OnlineRouter("load_aware", "telemetry"), SMALL, seed=2)
    stale = simulate_network(inst, None, OnlineRouter("load_aware", "telemetry"), dataclasses.replace(SMALL, refresh_period=5.0), seed=2)
    assert stale.coverage(0.8) <= fresh.coverage(0.8) + 0.01


def test_layout_exact_counts(baseline):
    layout = sample_layout(baseline, None, LayoutSpec(mean_nodes=100.0, counts="exact"), seed=0)
    np.testing.assert_array_equal(np.bincount(layout.profile, minlength=3), [18, 54, 28])


@pytest.mark.slow
def test_lambda1_simulation_agrees_with_analysis(baseline):
    from edgeprefix.placement.simulation.compare import (
        VALIDATION_SPEC,
        compare_coverage,
    )

    rows = compare_coverage(baseline, None, intensities=(1.0,), spec=VALIDATION_SPEC, replications=1, seed=1)
    for row in rows:
        assert abs(row.simulated - row.analytical) < 0.03, row
        assert abs(row.node_erlang - row.simulated) < 0.03, row


@pytest.mark.slow
def test_network_association_matches_theorem1(baseline):
    from edgeprefix.placement.model.evaluation import evaluate
    from edgeprefix.placement.simulation.compare import analytical_router

    inst = baseline.with_network(request_intensity=1.0)
    spec = SimulationSpec(horizon=30.0, warmup=1.0, layout=LayoutSpec(mean_nodes=2000.0, counts="exact"))
    for policy in ("load_aware", "prefix", "nearest"):
        ev = evaluate(inst, None, policy)
        res = simulate_network(inst, None, analytical_router(ev), spec, seed=5)
        assert np.abs(res.association() - ev.association).max() < 0.02


def test_torus_has_no_edge_effect(baseline):
    from edgeprefix.placement.simulation.layout import edge_effect_check

    pi = baseline.mix_vector(None)
    layout = sample_layout(baseline, None, LayoutSpec(mean_nodes=2000.0, counts="exact"), seed=1)
    ks = edge_effect_check(layout, pi * baseline.network.edge_density, probes=20_000, seed=2)
    counts = np.bincount(layout.profile)
    # the nearest-distance law on the torus is the stationary one up to the node-pattern noise
    assert np.all(ks < 2.0 * 1.36 / np.sqrt(counts))


@pytest.mark.slow
def test_hotspot_prefix_overloads_deep_tier(baseline):
    from edgeprefix.placement.model.evaluation import evaluate
    from edgeprefix.placement.simulation.compare import analytical_router

    inst = baseline.with_network(request_intensity=4.0)
    spec = SimulationSpec(horizon=40.0, warmup=40.0, layout=LayoutSpec(mean_nodes=300.0, counts="exact"))
    res = {
        p: simulate_network(inst, None, analytical_router(evaluate(inst, None, p)), spec, seed=6)
        for p in ("load_aware", "prefix", "nearest")
    }
    cov = {p: r.coverage(0.8) for p, r in res.items()}
    assert cov["prefix"] < cov["nearest"] < cov["load_aware"]
    assert res["prefix"].tier_utilization()[2] > res["load_aware"].tier_utilization()[2]


def test_local_accounting_limits_herding_on_stale_telemetry(baseline):
    inst = baseline.with_network(request_intensity=4.0)
    stale = dataclasses.replace(SMALL, refresh_period=8.0)
    herd = simulate_network(inst, None, OnlineRouter("load_aware", "telemetry"), stale, seed=2)
    acct = simulate_network(inst, None, OnlineRouter("load_aware", "telemetry"), dataclasses.replace(stale, local_accounting=True), seed=2)
    assert acct.coverage(0.8) > herd.coverage(0.8) + 0.05
