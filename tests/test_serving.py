"""Serving-system extensions (docs/model.md §19): the paper's model as the special case, the
limiting cases, hand-computed fetch/pool/compression/hand-off times, the instance sections, and
the optimisers, the simulator and ``validate`` on the benchmark instances."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from validate_fixtures import fast_validate_args

from edgeprefix.benchmarks.accuracy.extensions.serving_extensions import INSTANCES, NAMES, instance_mappings
from edgeprefix.cli import main
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import (
    instance_from_mapping,
    instance_to_mapping,
    load_instance,
    write_instance,
)
from edgeprefix.placement.model.profiles import concurrency
from edgeprefix.placement.model.serving import Compression, MemoryTier, RemotePool, Serving
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.solvers.api import solve

DATA = Path(__file__).resolve().parent / "data"
ARRAYS = ("memory", "hbm_memory", "concurrency", "first_token_time", "service_time", "reused_depth", "recomputed_prefill")


def _reference_module():
    spec = importlib.util.spec_from_file_location("paper_reference", DATA / "paper_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE = _reference_module()
CASES = list(REFERENCE.cases())


@pytest.fixture(scope="module")
def reference():
    return json.loads((DATA / "paper_reference.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("key,source,mix,policy", CASES, ids=[c[0] for c in CASES])
def test_the_paper_instances_evaluate_bit_for_bit_as_before(reference, key, source, mix, policy):
    """The full to_dict (every float, compared exactly), a quantile and a coverage curve, against
    values computed before the extensions existed."""
    ev = evaluate(load_instance(source), mix, policy)
    summary = ev.to_dict()
    assert summary.pop("queue_model") == "meanfield"  # added later (docs/model.md §14); the rest is unchanged
    assert summary.pop("router") == "online"  # the router the mean-field coverage predicts for (added later)
    assert summary.pop("queue_law") == "slots"  # the slot law, not the engine's (added later, docs/model.md §17.10)
    assert 0.0 <= summary.pop("overloaded_node_share") <= summary.pop("overloaded_request_share") <= 1.0  # added later (§14.9)
    assert summary.pop("mean_wait_growth") >= 0.0 and summary.pop("reference_horizon_s") > 0.0  # added later ((14.18))
    assert summary.pop("mean_ttft_horizon_s") is None or ev.mean_ttft_horizon > 0.0
    now = {
        "dict": summary,
        "ttft_quantile_0.9": ev.ttft_quantile(0.9),
        "coverage_curve": np.asarray(ev.coverage(np.linspace(0.1, 3.0, 7))).tolist(),
    }
    # every float as before to 1e-12 relative: the association skips empty segments since (docs/model.md §6),
    # which reorders the sums of the mean distances by at most an ulp; everything else is still bit for bit
    _assert_close(json.loads(json.dumps(now)), reference[key])
    assert "serving" not in now["dict"]


def _assert_close(now, before, path="", rtol=1e-12):
    if isinstance(before, dict):
        assert set(now) == set(before), path
        for k in before:
            _assert_close(now[k], before[k], f"{path}/{k}", rtol)
    elif isinstance(before, list):
        assert len(now) == len(before), path
        for i, (a, b) in enumerate(zip(now, before)):
            _assert_close(a, b, f"{path}[{i}]", rtol)
    elif isinstance(before, float) and isinstance(now, float):
        assert now == pytest.approx(before, rel=rtol, abs=0.0), path
    else:
        assert now == before, path


def base():
    return load_instance("paper_baseline")


def heavy():
    """paper_baseline with κ = 0.002: segments sys 1.6, tool 2.9; deep B = 4.5, c = 8."""
    inst = base()
    return inst.replace(gpu=dataclasses.replace(inst.gpu, kv_per_token=0.002))


def with_tier(inst, capacity, bandwidth, latency=0.0, pipelined=False):
    return inst.replace(gpu=dataclasses.replace(inst.gpu, tiers=(MemoryTier("dram", capacity, bandwidth, latency, pipelined),)))


def assert_same_model(a, b):
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    da, db = evaluate(a).to_dict(), evaluate(b).to_dict()
    da.pop("serving", None)
    db.pop("serving", None)
    da.pop("instance"), db.pop("instance")
    assert da == db


# ---------------------------------------------------------------------------------------------
# Memory tiers (docs/model.md §19.1)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bandwidth,latency,pipelined", [(5.0, 0.01, False), (0.5, 0.2, True)])
def test_a_tier_of_zero_capacity_is_the_papers_model(bandwidth, latency, pipelined):
    inst = heavy()
    assert_same_model(with_tier(inst, 0.0, bandwidth, latency, pipelined), inst)


@pytest.mark.parametrize("capacity", [0.5, 2.0, 4.5, 9.0])
def test_an_infinitely_fast_tier_is_a_bigger_hbm_for_the_states(capacity):
    plain = heavy()
    tiered = with_tier(plain, capacity, math.inf, 0.0)
    gpu = plain.gpu
    np.testing.assert_array_equal(tiered.hbm_memory, np.maximum(plain.memory - capacity, 0.0))
    np.testing.assert_array_equal(
        tiered.concurrency, concurrency(np.maximum(plain.memory - capacity, 0.0), gpu.memory, gpu.runtime_per_sequence)
    )
    np.testing.assert_array_equal(tiered.first_token_time, plain.residual_prefill)
    np.testing.assert_array_equal(tiered.service_time, plain.service_time)
    # where every profile's states exceed C, it is exactly an HBM of M + C
    bigger = plain.replace(gpu=dataclasses.replace(gpu, memory=gpu.memory + capacity))
    holds = plain.memory >= capacity
    np.testing.assert_array_equal(tiered.concurrency[holds], bigger.concurrency[holds])
    assert evaluate(tiered).coverage_at_target >= evaluate(plain).coverage_at_target - 1e-12


def test_deepest_first_fetch_times_by_hand():
    inst = with_tier(heavy(), 2.0, 40.0, 0.003)  # deep: HBM keeps sys 1.6 + 0.9 of tool, the tier 2.0 of tool
    deep, none = inst.profile_ids.index("deep"), inst.profile_ids.index("none")
    short, long = inst.request_ids.index("short"), inst.request_ids.index("long")
    g = inst.prefill
    assert inst.hbm_memory[deep] == pytest.approx(2.5)
    assert inst.concurrency[deep] == 10
    assert inst.first_token_time[deep, long] == pytest.approx(0.003 + 2.0 / 40.0 + g(4096 - 2250))
    assert inst.first_token_time[deep, short] == pytest.approx(g(1024 - 800))  # sys stays in HBM
    assert inst.service_time[deep, long] == pytest.approx(inst.first_token_time[deep, long] + 0.7)
    assert inst.fetch_time[deep, long] == pytest.approx(0.053)
    assert inst.first_token_time[none, long] == g(4096)
    piped = with_tier(heavy(), 2.0, 40.0, 0.003, pipelined=True)
    assert piped.first_token_time[deep, long] == pytest.approx(max(0.053, g(4096 - 2250)))
    slow = with_tier(heavy(), 2.0, 1.0, 0.003, pipelined=True)
    assert slow.first_token_time[deep, long] == pytest.approx(2.003)  # the fetch is longer than the prefill


def test_the_tier_capacity_trades_fetch_time_for_concurrency():
    plain = heavy()
    cov = [evaluate(with_tier(plain, c, math.inf)).coverage_at_target for c in (0.0, 1.0, 2.0, 4.5)]
    assert all(b >= a - 1e-12 for a, b in zip(cov, cov[1:])) and cov[-1] > cov[0] + 0.05
    slow = evaluate(with_tier(plain, 4.5, 2.0, 0.05)).coverage_at_target  # too slow to pay off
    assert slow < cov[-1]


# ---------------------------------------------------------------------------------------------
# Remote pool (docs/model.md §19.2)
# ---------------------------------------------------------------------------------------------
def with_pool(inst, bandwidth, *, prefixes=("sys", "tool"), latency=0.005, density=None, interference=0.38, pipelined=False):
    return inst.replace(remote=RemotePool(prefixes, bandwidth, latency, density, interference, pipelined))


def test_a_pool_the_profiles_already_hold_or_cannot_beat_a_prefill_changes_nothing():
    inst = base()
    only_sys = with_pool(inst, 1e9, prefixes=("sys",))
    assert only_sys.pool_hit[1:].sum() == 0  # shallow and deep hold sys
    assert_same_model(with_pool(inst, 1e-6), inst)  # too slow: never taken


def test_a_pool_hit_by_hand_and_its_metrics():
    inst = with_pool(base(), 10.0)
    none, long = inst.profile_ids.index("none"), inst.request_ids.index("long")
    shallow = inst.profile_ids.index("shallow")
    g = inst.prefill
    via_none = 0.005 + 0.00048 * 2250 / 10.0 + 1.38 * g(4096 - 2250)
    assert inst.first_token_time[none, long] == pytest.approx(via_none) and via_none < g(4096)
    via_shallow = 0.005 + 0.00048 * (2250 - 800) / 10.0 + 1.38 * g(4096 - 2250)
    assert inst.first_token_time[shallow, long] == pytest.approx(via_shallow)
    assert inst.reused_depth[none, long] == 2250 and inst.hit_depth[none, long] == 0
    assert inst.saving[none, long] == pytest.approx(g(4096) - g(4096 - 2250))
    plain, pooled = evaluate(base()), evaluate(inst)
    assert pooled.mean_prefix_depth > plain.mean_prefix_depth
    report = pooled.to_dict()["serving"]
    expected = float((inst.probabilities * (pooled.association * inst.pool_hit)).sum())
    assert report["pool_share"] == pytest.approx(expected) and report["pool_share"] > 0
    assert pooled.coverage_at_target > plain.coverage_at_target


def test_regional_pools_share_their_bandwidth_and_a_dense_pool_is_a_link_per_node():
    inst = base()
    per_node = with_pool(inst, 10.0)
    assert_same_model(with_pool(inst, 10.0, density=2.0), per_node)  # λ_R ≥ λ_b
    assert_same_model(with_pool(inst, 10.0, density=0.25), with_pool(inst, 2.5))
    assert RemotePool(("sys",), 8.0, density=0.5).node_bandwidth(2.0) == 2.0


def test_interference_slows_only_the_pool_option():
    inst = base()
    free = with_pool(inst, 10.0, interference=0.0)
    slowed = with_pool(inst, 10.0, interference=0.38)
    assert np.all(slowed.first_token_time >= free.first_token_time)
    np.testing.assert_array_equal(slowed.first_token_time[~slowed.pool_hit], inst.first_token_time[~slowed.pool_hit])


# ---------------------------------------------------------------------------------------------
# Compression (docs/model.md §19.3)
# ---------------------------------------------------------------------------------------------
def test_ratio_one_without_decompression_is_the_papers_model():
    inst = heavy()
    assert_same_model(inst.replace(compression=Compression(1.0, 0.0, 0.05)), inst)


def test_compression_shrinks_the_states_and_adds_decompression():
    plain = heavy()
    comp = plain.replace(compression=Compression(4.0, 2e-5, 0.02))
    np.testing.assert_allclose(comp.memory, plain.memory / 4.0)
    np.testing.assert_array_equal(comp.concurrency, concurrency(plain.memory / 4.0, 12.5, 1.0))
    np.testing.assert_allclose(comp.first_token_time, plain.residual_prefill + 2e-5 * plain.hit_depth)
    ev = evaluate(comp)
    share = float((comp.probabilities * (ev.association * (comp.hit_depth > 0)).sum(axis=0)).sum())
    assert ev.to_dict()["serving"]["quality_loss"] == pytest.approx(0.02 * share)
    # compressed states also shrink tier fetches
    tiered = with_tier(plain, 4.5, 10.0).replace(compression=Compression(2.0))
    deep, long = plain.profile_ids.index("deep"), plain.request_ids.index("long")
    assert tiered.fetch_time[deep, long] == pytest.approx(4.5 / 2.0 / 10.0)


# ---------------------------------------------------------------------------------------------
# Disaggregation (docs/model.md §19.4)
# ---------------------------------------------------------------------------------------------
def test_colocated_serving_is_the_papers_model():
    inst = base()
    assert_same_model(inst.replace(serving=Serving()), inst)


def test_disaggregation_moves_decode_off_the_node_and_adds_the_handoff():
    inst = base()
    split = inst.replace(serving=Serving("disaggregated", decode_slots=12.0, handoff_bandwidth=20.0, handoff_latency=0.002))
    handoff = 0.002 + inst.gpu.kv_per_token * inst.lengths / 20.0
    np.testing.assert_allclose(split.first_token_time, inst.residual_prefill + handoff[None, :])
    np.testing.assert_array_equal(split.service_time, split.first_token_time)
    instant = inst.replace(serving=Serving("disaggregated", decode_slots=12.0, handoff_bandwidth=math.inf))
    np.testing.assert_array_equal(instant.first_token_time, inst.residual_prefill)
    assert split.decode_utilization == pytest.approx(3.0 * float(inst.probabilities @ inst.decodes) / 12.0)
    assert evaluate(split).to_dict()["serving"]["decode_utilization"] == split.decode_utilization


# ---------------------------------------------------------------------------------------------
# Instance sections, loader errors, benchmark instances
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_the_benchmark_instances_are_the_generated_ones_and_round_trip(name, tmp_path):
    shipped = load_instance(INSTANCES / f"{name}.toml")
    assert shipped.extended
    mapping = instance_mappings()[name]
    assert instance_to_mapping(shipped) == instance_to_mapping(instance_from_mapping(mapping))
    for suffix in (".toml", ".json"):
        path = tmp_path / f"copy{suffix}"
        write_instance(shipped, path)
        assert instance_to_mapping(load_instance(path)) == instance_to_mapping(shipped)


def _mapping(**sections):
    data = instance_to_mapping(base())
    data.update(sections)
    return data


@pytest.mark.parametrize(
    "sections,field",
    [
        ({"remote": {"prefixes": ["sys"], "bandwidth": 1.0}}, "remote.density"),
        ({"remote": {"prefixes": ["sys"], "bandwidth": 1.0, "per_node": True, "density": 1.0}}, "remote.density"),
        ({"remote": {"prefixes": ["sys"], "bandwidth": 1.0, "per_node": False}}, "remote.per_node"),
        ({"remote": {"prefixes": ["tool"], "bandwidth": 1.0, "per_node": True}}, "remote.prefixes"),
        ({"remote": {"prefixes": ["nope"], "bandwidth": 1.0, "per_node": True}}, "remote.prefixes"),
        ({"compression": {"ratio": 0.5}}, "compression.ratio"),
        ({"compression": {"ratio": 2.0, "quality_loss": 1.5}}, "compression.quality_loss"),
        ({"serving": {"mode": "disaggregated", "handoff_bandwidth": 1.0}}, "serving.decode_slots"),
        ({"serving": {"mode": "colocated", "decode_slots": 4.0}}, "serving.mode"),
        ({"serving": {"mode": "split"}}, "serving.mode"),
    ],
)
def test_bad_sections_name_their_field(sections, field):
    with pytest.raises(InstanceError) as err:
        instance_from_mapping(_mapping(**sections))
    assert str(err.value).startswith(field)


def test_duplicate_and_negative_tiers_name_their_field():
    data = _mapping()
    data["gpu"]["tiers"] = [{"name": "a", "capacity": 1.0, "bandwidth": 1.0}, {"name": "a", "capacity": 1.0, "bandwidth": 1.0}]
    with pytest.raises(InstanceError, match="gpu.tiers"):
        instance_from_mapping(data)
    data["gpu"]["tiers"] = [{"name": "a", "capacity": -1.0, "bandwidth": 1.0}]
    with pytest.raises(InstanceError, match="gpu.tiers.a.capacity"):
        instance_from_mapping(data)


# ---------------------------------------------------------------------------------------------
# The optimisers, the simulator and validate keep working
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_solve_on_each_extension_instance(name):
    inst = load_instance(INSTANCES / f"{name}.toml")
    result = solve(placement_problem(inst), "grid", budget=None, resolution=10)
    assert result.success and result.nfev > 0
    again = evaluate(inst, result.x)
    assert again.stable and again.coverage_at_target == pytest.approx(result.coverage, abs=1e-9)
    assert result.coverage >= evaluate(inst, {"none": 0.2, "shallow": 0.5, "deep": 0.3}).coverage_at_target - 1e-12


@pytest.mark.parametrize("name", NAMES)
def test_the_simulator_serves_with_the_extended_times(name):
    inst = load_instance(INSTANCES / f"{name}.toml")
    ev = evaluate(inst)
    spec = SimulationSpec(horizon=20.0, warmup=5.0, service="deterministic", layout=LayoutSpec(mean_nodes=60.0, counts="exact"))
    res = simulate_network(inst, None, analytical_router(ev), spec, seed=1)
    served = res.node >= 0
    profile, kind = res.profile[served], res.request_type[served]
    np.testing.assert_allclose(res.prefill[served], inst.first_token_time[profile, kind])
    np.testing.assert_allclose(res.service[served], inst.service_time[profile, kind])
    radio = inst.network.radio_scale * res.distance[served] ** inst.network.radio_exponent
    np.testing.assert_allclose(res.ttft[served], radio + inst.first_token_time[profile, kind] + res.wait[served])


def test_validate_runs_on_an_extension_instance(capsys):
    fast = fast_validate_args("5")
    assert main(["validate", str(INSTANCES / "serving_disaggregated.toml"), *fast, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["instance"] == "serving_disaggregated"


def test_the_documented_sections_load_into_an_instance():
    import re
    import tomllib

    doc = (Path(__file__).resolve().parents[1] / "docs" / "instances.md").read_text(encoding="utf-8")
    block = re.search(r"## Serving extensions.*?```toml\n(.*?)```", doc, re.DOTALL).group(1)
    sections = tomllib.loads(block)
    data = _mapping(remote=sections["remote"], compression=sections["compression"], serving=sections["serving"])
    data["gpu"]["tiers"] = sections["gpu"]["tiers"]
    inst = instance_from_mapping(data)
    assert inst.extended and inst.gpu.tiers[0].pipelined and inst.serving.disaggregated
