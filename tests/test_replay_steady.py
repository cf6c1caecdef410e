"""A replay that measures the steady state (docs/model.md §17.7): warm start, the stationarity test,
the warnings, overloaded nodes replayed vs predicted, the prediction with the replayed part's
statistics, and a small version of the Mooncake table of benchmarks/README.md section 4b."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.cli import main
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.pipeline.trace_workload import load_trace_workload, split_index
from edgeprefix.placement.simulation.replay import ReplaySpec, prepend, replay, warm_part

SAMPLE = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")
KEYS = {
    "stationary",
    "warm_start",
    "measured_service_times",
    "overloaded_node_share_replayed",
    "overloaded_node_share_predicted",
    "coverage_predicted_replayed_stats",
}


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> tuple[Path, object, object]:
    out = tmp_path_factory.mktemp("steady") / "sample.toml"
    # bins split at the target (the default, docs/model.md (2.10)): the instance carries the bins' edges and a
    # replayed request takes the sub-type whose bin holds its length, the bin it was built into ((2.8); by nearest
    # length, as before the edges, the in-sample replayed-statistics coverage was 0.007 off on this sample)
    assert main(["profiles", "--out", str(out), "--length-bins", "3"]) == 0
    inst, workload = load_trace_workload(str(SAMPLE), load_instance(out))
    return out, inst, workload


def test_warm_parts_arrive_at_the_replayed_parts_rate(sample):
    _, _, workload = sample
    cut = split_index(workload.requests, 0.5)
    train, test = workload.part(slice(0, cut)), workload.part(slice(cut, None))
    for how in ("train", "resample"):
        prefix = warm_part(test, how, train, np.random.default_rng(0))
        both = prepend(prefix, test)
        assert both.requests == prefix.requests + test.requests and np.all(np.diff(both.time) >= 0)
        gap = np.diff(test.time).mean()
        assert np.diff(both.time[: prefix.requests]).mean() == pytest.approx(gap, rel=1e-9)
        assert both.time[prefix.requests] - both.time[prefix.requests - 1] == pytest.approx(gap)
        np.testing.assert_array_equal(both.kind[prefix.requests :], test.kind)
    with pytest.raises(ValueError, match="--split"):
        warm_part(test, "train", None, np.random.default_rng(0))


def test_a_warm_replay_measures_every_request_and_reports_its_steady_state(sample, capsys):
    path, inst, workload = sample
    spec = ReplaySpec(decode_per_token=0.0445, nodes=10, warm_start="resample")
    result = replay(inst, workload, None, spec, seed=1)
    assert result.requests == workload.requests and result.warm_requests == workload.requests
    s = result.summary()
    assert KEYS <= set(s) and s["warm_start"] == "resample"
    ev = evaluate(inst, None, queue_model="cell")
    assert s["overloaded_node_share_predicted"] == pytest.approx(ev.overloaded_shares[0])
    loads = result.node_loads()
    assert s["overloaded_node_share_replayed"] == pytest.approx(float(np.mean(loads >= 1.0)))
    served = result.node >= 0
    assert s["measured_service_times"] == pytest.approx(result.measured_span() / result.service[served].mean())
    # the instance was built from these very requests: the replayed statistics are the training ones
    assert s["coverage_predicted_replayed_stats"] == pytest.approx(s["coverage_predicted"], abs=1e-9)
    # 200 requests span about one mean service time: the output says the replay is mostly transient
    assert main(["replay", str(SAMPLE), "--instance", str(path), "--nodes", "10", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["warm_start"] == "resample" and report["measured_service_times"] < 10
    warning = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warning) >= 1 and "mean service times" in warning[0]


def test_the_trend_test_sees_growing_waits_and_passes_a_light_load(sample):
    _, inst, w = sample
    k = 20  # the sample 20 times over (200 requests span one mean service time: no queue could build up)
    long = w.repeated(k)
    lam = inst.network.request_intensity
    spec = ReplaySpec(decode_per_token=0.0445, nodes=10, warm_start="none", warmup=0.0)
    heavy = replay(inst, long, None, spec, intensity=2 * lam, seed=0)  # utilisation 1.2 of an all-fallback network
    trend = heavy.stationarity()
    assert trend["stationary"] is False and trend["kendall_tau"] > 0.5 and trend["p_value"] < 0.05
    assert trend["window_mean_wait"][-1] > 10 * trend["window_mean_wait"][0]
    assert any("waits trend over the replay (growing" in w for w in heavy.summary()["warnings"])
    light = replay(inst, long, None, spec, intensity=0.5 * lam, seed=0)
    assert light.stationarity()["stationary"] is True and light.measured_service_times() > 10


@pytest.mark.slow
def test_small_version_of_the_mooncake_table():
    """The shipped Mooncake trace, `profiles --split 0.5` as a user gets it (the default length bins: 16, split at
    the target, docs/model.md (2.10); the recent window chosen on the training half by (17.24)), the solved mix, warm
    replay of the second half on 50 nodes, 3 replications, Λ₀/2, both routers (a budget of 30): the planner reports
    the plan stable, the replayed coverage is within max(0.02, 3 SE) of the prediction and the mean TTFT within 10 %
    (benchmarks/README.md section 4b has the full table); without the window (F = 1) the online router's mean TTFT
    misses by the drift, which the replayed half's own statistics show (docs/model.md (17.19))."""
    from edgeprefix.benchmarks.accuracy.replay.replay_steady import cases

    rows = cases(nodes=50, replications=3, budget=30, loads=(0.5,))
    assert [row["router"] for row in rows] == ["tier", "online"]
    for row in rows:
        assert row["recent"] == 0.5  # the rule sees the training half's drift
        assert row["stable_planned"] and row["stationary_replications"] >= 2
        assert abs(row["coverage_predicted"] - row["coverage_replayed"]) <= max(0.02, 3 * row["coverage_se"])
        assert row["mean_ttft_replayed"] == pytest.approx(row["mean_ttft_predicted"], rel=0.10)
        # the bins split at the target: the replayed half's own statistics predict its coverage too
        assert abs(row["coverage_predicted_replayed_stats"] - row["coverage_replayed"]) <= max(0.02, 3 * row["coverage_se"])
    (online,) = cases(nodes=50, replications=3, budget=30, loads=(0.5,), routers=("online",), recent=1.0)
    assert online["mean_ttft_replayed"] < 0.9 * online["mean_ttft_predicted"]  # the drift, uncorrected
    assert online["mean_ttft_predicted_replayed_stats"] == pytest.approx(online["mean_ttft_replayed"], rel=0.05)
