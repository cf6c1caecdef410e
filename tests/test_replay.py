"""Trace replay: time rescaling, burstiness, TTFT bookkeeping, FCFS queues, epochs and ablations."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from replay_fixtures import B, hand_mapping, record

from edgeprefix.placement.model.instance import instance_from_mapping
from edgeprefix.placement.pipeline.trace_workload import TraceWorkload, block_catalogue, trace_workload
from edgeprefix.placement.simulation.mmc import fcfs_waits
from edgeprefix.placement.simulation.replay import (
    MixSchedule,
    ReplaySpec,
    _resize,
    index_of_dispersion,
    poisson_times,
    reassign_profiles,
    replay,
    rescale_times,
)
from edgeprefix.placement.simulation.replay_analysis import ablation, burstiness, generalisation, replay_replicated


@pytest.fixture(scope="module")
def hand():
    return instance_from_mapping(hand_mapping())


def _workload(hand, n: int, seed: int = 0, gaps: np.ndarray | None = None) -> TraceWorkload:
    """``n`` requests drawn from four block sequences, with exponential gaps (or ``gaps``)."""
    rng = np.random.default_rng(seed)
    shapes = [((1, 2, 3, 4), 16), ((1, 2, 99), 10), ((1, 5), 7), ((8,), 3)]
    pick = rng.integers(0, len(shapes), size=n)
    t = np.cumsum(rng.exponential(1.0, n) if gaps is None else gaps)
    records = [record(i + 1, shapes[k][0], shapes[k][1], output=int(rng.integers(0, 20)), t=float(t[i])) for i, k in enumerate(pick)]
    return trace_workload(records, block_catalogue(hand, B))


def test_time_rescaling_gives_the_chosen_rate_and_keeps_the_pattern() -> None:
    t = np.array([3.0, 3.0, 4.0, 7.0, 11.0, 11.5])
    scaled, scale = rescale_times(t, rate=2.0)
    assert scaled[0] == 0.0 and (t.size - 1) / scaled[-1] == pytest.approx(2.0, rel=1e-12)  # mean rate = target
    np.testing.assert_allclose(np.diff(scaled) / scaled[-1], np.diff(t) / (t[-1] - t[0]), rtol=1e-12)  # gap shares kept
    assert scale == pytest.approx((t.size - 1) / ((t[-1] - t[0]) * 2.0))
    for bad, match in [(np.array([1.0]), "at least 2"), (np.array([2.0, 2.0]), "one timestamp"), (np.array([2.0, 1.0]), "nondecreasing")]:
        with pytest.raises(ValueError, match=match):
            rescale_times(bad, 1.0)


def test_replay_rescales_the_trace_to_lambda_per_unit_area(hand) -> None:
    w = _workload(hand, 400, gaps=np.random.default_rng(1).pareto(1.5, 400) + 0.01)  # bursty gaps
    spec = ReplaySpec(decode_per_token=0.01, nodes=20, warmup=0.0)
    r = replay(hand, w, None, spec, intensity=0.8, seed=0)
    rate = (w.requests - 1) / r.time[-1]
    assert rate == pytest.approx(0.8 * r.layout.area, rel=1e-12)
    np.testing.assert_allclose(r.time, (w.time - w.time[0]) * r.time_scale, rtol=1e-12)


def test_index_of_dispersion_separates_poisson_regular_and_clustered_streams() -> None:
    rng = np.random.default_rng(7)
    t = poisson_times(200_000, rate=5.0, rng=rng)
    k = int(np.floor(t[-1] / 20.0))  # windows of 100 expected arrivals
    assert abs(index_of_dispersion(t, 20.0) - 1.0) < 4 * np.sqrt(2.0 / (k - 1))  # 4 sd of the Poisson estimate
    assert (200_000 - 1) / t[-1] == pytest.approx(5.0, rel=4 / np.sqrt(200_000))
    assert index_of_dispersion(np.arange(1000.0), 10.0) == 0.0  # evenly spaced: no variance
    clustered = np.repeat(np.arange(1000.0) * 10, 5)  # batches of 5 every 10 s
    assert index_of_dispersion(clustered, 3.0) > 3.0
    rows = burstiness(t, (100,))
    assert rows[0]["window_requests"] == 100 and abs(rows[0]["index_of_dispersion"] - 1.0) < 4 * rows[0]["poisson_sd"]


def test_ttft_is_radio_plus_prefill_of_the_request_own_hit_plus_wait(hand) -> None:
    w = _workload(hand, 300)
    for router in ("tier", "online"):
        r = replay(hand, w, None, ReplaySpec(decode_per_token=0.01, router=router, nodes=12, warmup=0.0), intensity=0.5, seed=2)
        served = r.node >= 0
        assert served.all()
        # the hit is the chosen node's profile's block-level hit of this very request
        np.testing.assert_array_equal(r.hit, w.hit[r.profile, np.arange(w.requests)])
        g = hand.prefill
        np.testing.assert_allclose(r.prefill, g(r.length - r.hit), rtol=1e-12)
        radio = hand.network.radio_scale * r.distance**hand.network.radio_exponent
        np.testing.assert_allclose(r.ttft, radio + r.prefill + r.wait, rtol=1e-12)
        np.testing.assert_allclose(r.service, r.prefill + 0.01 * w.output, rtol=1e-12)  # deterministic occupancy
        assert r.coverage() == pytest.approx(np.mean(r.ttft <= hand.placement.target))


def test_one_node_with_one_slot_is_a_fcfs_queue(hand) -> None:
    data = hand_mapping()
    data["gpu"]["memory"] = 1.05  # c_s = 1 for the empty profile
    data["placement"] = {"target": 1.0, "fallback": "none", "mix": {"none": 1.0}}
    single = instance_from_mapping(data)
    w = _workload(single, 200, seed=4)
    r = replay(single, w, None, ReplaySpec(decode_per_token=0.05, nodes=1, warmup=0.0), intensity=0.4, seed=0)
    assert r.layout.nodes == 1 and r.layout.servers.tolist() == [1]
    np.testing.assert_allclose(r.wait, fcfs_waits(r.time, r.service, 1), rtol=1e-12)
    assert np.all(r.hit == 0.0) and r.wait.max() > 0


def test_warmup_drops_the_first_requests(hand) -> None:
    w = _workload(hand, 100)
    r = replay(hand, w, None, ReplaySpec(decode_per_token=0.01, nodes=5, warmup=0.25), seed=0)
    assert r.requests == 75 and r.time[0] > 0


def test_per_type_hits_replace_the_request_hits(hand) -> None:
    w = _workload(hand, 300)
    base = ReplaySpec(decode_per_token=0.01, nodes=12, warmup=0.0)
    by_type = replay(hand, w, None, ReplaySpec(decode_per_token=0.01, nodes=12, warmup=0.0, hits="type"), seed=3)
    np.testing.assert_array_equal(by_type.hit, np.minimum(hand.hit_depth[by_type.profile, w.kind], w.length))
    by_request = replay(hand, w, None, base, seed=3)
    np.testing.assert_array_equal(by_request.node, by_type.node)  # same network, same routing (tier rule by type)
    assert by_request.hit.sum() > by_type.hit.sum()  # the partial hits inside h3's chain


def test_ablation_rows_share_the_network_and_the_prediction(hand) -> None:
    w = _workload(hand, 300)
    rows = ablation(hand, w, None, ReplaySpec(decode_per_token=0.01, nodes=12), seed=5)
    assert [r["name"] for r in rows][0] == "trace" and len({r["coverage_predicted"] for r in rows}) == 1
    assert rows[1]["arrivals"] == "poisson" and rows[-1]["service"] == "exponential"
    assert rows[2]["hit_depth_replayed"] < rows[0]["hit_depth_replayed"]  # per-type hits lose the partial hits


def test_replications_average_independent_networks(hand) -> None:
    w = _workload(hand, 200)
    report = replay_replicated(hand, w, None, ReplaySpec(decode_per_token=0.01, nodes=8), replications=3, seed=1)
    covs = [r.coverage() for r in report.results]
    s = report.summary()
    assert s["replications"] == 3 and s["coverage_replayed"] == pytest.approx(np.mean(covs))
    assert len({tuple(r.layout.positions.ravel()) for r in report.results}) == 3


def test_generalisation_reports_both_parts_and_the_drift(hand) -> None:
    w = _workload(hand, 400)
    gen = generalisation(hand, w.part(slice(0, 200)), w.part(slice(200, None)), None, ReplaySpec(decode_per_token=0.01, nodes=10))
    assert gen["requests_train"] == 200 and gen["requests_test"] == 200
    assert gen["gap_hit_depth"] == pytest.approx(gen["hit_depth_test"] - gen["hit_depth_train"])
    p_train, p_test = w.part(slice(0, 200)).type_mix(4), w.part(slice(200, None)).type_mix(4)
    assert gen["type_mix_drift"] == pytest.approx(0.5 * np.abs(p_train - p_test).sum())


def test_reassigning_profiles_changes_the_fewest_nodes() -> None:
    rng = np.random.default_rng(0)
    profile = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 2])
    target = np.array([1, 4, 5])
    out = reassign_profiles(profile, target, rng)
    assert np.bincount(out, minlength=3).tolist() == target.tolist()
    assert np.count_nonzero(out != profile) == 2  # Σ_s max(0, n_s − target_s)


def test_a_node_losing_slots_starts_nothing_until_enough_finish() -> None:
    assert sorted(_resize([5.0, 1.0, 9.0], 2, now=0.5)) == [5.0, 9.0]
    assert sorted(_resize([5.0], 3, now=2.0)) == [2.0, 2.0, 5.0]


def test_a_schedule_switches_mixes_at_the_epoch_starts(hand) -> None:
    w = _workload(hand, 400)
    start = float(w.time[200])
    both = {"none": 0.5, "deep": 0.5}
    schedule = MixSchedule(
        (float(w.time[0]), start), (hand, hand.with_network(request_intensity=1.0)), (both, {"none": 0.5, "full": 0.5}), ("a", "b")
    )
    r = replay(hand, w, None, ReplaySpec(decode_per_token=0.01, nodes=10, warmup=0.0), schedule=schedule, seed=0)
    assert r.changed == (0, 5) and r.epoch.tolist() == [0] * 200 + [1] * 200
    used = {e: set(hand.profile_ids[s] for s in r.profile[r.epoch == e]) for e in (0, 1)}
    assert used[0] <= {"none", "deep"} and used[1] <= {"none", "full"}
    rows = r.summary()["epochs"]
    assert [row["requests"] for row in rows] == [200, 200] and rows[1]["nodes_changed"] == 5
    assert r.intensity == pytest.approx(400 / (200 / 0.5 + 200 / 1.0))  # n / Σ n_e / Λ^e


def test_bad_options_name_the_option(hand) -> None:
    for kwargs, match in [
        ({"router": "fastest"}, "--router"),
        ({"nodes": 0}, "--nodes"),
        ({"warmup": 1.0}, "--warmup"),
        ({"policy": "best"}, "policy"),
        ({"decode_per_token": -1.0}, "--decode-per-token"),
    ]:
        with pytest.raises(ValueError, match=match):
            ReplaySpec(**{"decode_per_token": 0.01, **kwargs})
    with pytest.raises(ValueError, match="--intensity"):
        replay(hand, _workload(hand, 10), None, ReplaySpec(decode_per_token=0.01), intensity=-1.0)


def test_node_dispersion_is_one_for_poisson_and_sees_batches(hand) -> None:
    from edgeprefix.placement.simulation.replay_analysis import node_dispersion

    w = _workload(hand, 6000)
    spec = ReplaySpec(decode_per_token=0.01, nodes=6, warmup=0.0)
    r = replay(hand, w, None, replace(spec, arrivals="poisson"), seed=0)
    k = int(6000 / (6 * 20))  # windows of 20 arrivals per node
    assert abs(node_dispersion(r, 20.0) - 1.0) < 4 * np.sqrt(2.0 / (6 * (k - 1)))
    # batches of 40 requests at Poisson epochs: the trace's index is ≈ 40, a node of 6 sees ≈ 1 + (40 − 1) / 6
    gaps = np.where(np.arange(6000) % 40 == 0, np.random.default_rng(3).exponential(40.0, 6000), 0.0)
    r = replay(hand, _workload(hand, 6000, gaps=gaps), None, spec, seed=0)
    assert 4.0 < node_dispersion(r, 20.0) < 12.0
