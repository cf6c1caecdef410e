"""Length-resolved request types (docs/model.md §2.3): expansion, reports per declared type, and the
cell model, exact gradient and batched evaluation on instances with sub-types."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeprefix.cli import main
from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.batch import evaluate_batch
from edgeprefix.placement.model.costs import QuadraticPrefill
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, load_instance, write_instance
from edgeprefix.placement.model.lengths import length_bins, type_groups
from edgeprefix.placement.model.sensitivity import sensitivity
from edgeprefix.placement.pipeline.trace_workload import load_trace_workload

BASE = instance_to_mapping(load_instance("paper_baseline"))  # short: L = 1024, D = 2.25, path [sys] (800 tokens)


def with_lengths(lengths: dict, q: int = 0, **changes) -> dict:
    data = json.loads(json.dumps(BASE))
    data["requests"][q]["lengths"] = lengths
    data["requests"][q].update(changes)
    return data


RESOLVED = with_lengths(
    {"input": [820.0, 1000.0, 1400.0], "decode": [1.5, 2.25, 3.0], "weight": [0.3, 0.4, 0.3]},
    length=0.3 * 820 + 0.4 * 1000 + 0.3 * 1400,
    decode=2.25,
)


def test_a_single_bin_is_the_scalar_model_bit_for_bit():
    plain = load_instance("paper_baseline")
    one = instance_from_mapping(with_lengths({"input": [1024.0], "decode": [2.25]}))
    assert one.request_ids == ("short~1", "long")
    for queue_model in ("meanfield", "cell"):
        a, b = evaluate(plain, queue_model=queue_model), evaluate(one, queue_model=queue_model)
        assert a.coverage() == b.coverage() and a.mean_ttft == b.mean_ttft
        np.testing.assert_array_equal(a.association, b.association)


def test_sub_types_of_one_length_reproduce_their_type():
    plain = load_instance("paper_baseline")
    split = instance_from_mapping(with_lengths({"input": [1024.0, 1024.0], "weight": [1.0, 3.0]}))
    np.testing.assert_allclose(split.probabilities, [0.09, 0.27, 0.64])
    for queue_model in ("meanfield", "cell"):
        a, b = evaluate(plain, queue_model=queue_model), evaluate(split, queue_model=queue_model)
        assert b.coverage() == pytest.approx(a.coverage(), abs=1e-12)
        assert b.mean_ttft == pytest.approx(a.mean_ttft, rel=1e-12)
        assert b.ttft_quantile(0.5) == pytest.approx(a.ttft_quantile(0.5), rel=1e-9)
        assert b.mean_prefix_depth == pytest.approx(a.mean_prefix_depth, rel=1e-12)
        assert b.offload_ratio == pytest.approx(a.offload_ratio, rel=1e-12)
        d = b.to_dict()
        assert list(d["association"]) == ["short", "long"]  # reported per declared type
        for sid, value in a.to_dict()["association"]["short"].items():
            assert d["association"]["short"][sid] == pytest.approx(value, abs=1e-12)


def test_lengths_integrate_every_metric_and_the_report_adds_up():
    inst = instance_from_mapping(RESOLVED)
    assert inst.request_ids == ("short~1", "short~2", "short~3", "long")
    np.testing.assert_allclose(inst.probabilities, [0.108, 0.144, 0.108, 0.64])
    ev = evaluate(inst, queue_model="cell")
    types = ev.to_dict()["types"]
    assert set(types) == {"short", "long"}
    assert sum(t["probability"] * t["coverage"] for t in types.values()) == pytest.approx(ev.coverage(), abs=1e-12)
    assert sum(t["probability"] * t["mean_ttft"] for t in types.values()) == pytest.approx(ev.mean_ttft, rel=1e-12)
    assert sum(t["probability"] * t["mean_prefix_depth"] for t in types.values()) == pytest.approx(ev.mean_prefix_depth)
    assert types["short"]["mean_length"] == pytest.approx(1066.0)
    for shares in ev.to_dict()["association"].values():
        assert sum(shares.values()) == pytest.approx(1.0, abs=1e-9)
    # against one mean length (L̄ = 1066, D̄ = 2.25): the tiers see E g(L − h) > g(L̄ − h) for the convex g
    mean = instance_from_mapping(with_lengths({"input": [1066.0]}, length=1066.0))
    scalar = evaluate(mean, queue_model="cell")
    assert float(inst.probabilities[:3] @ inst.full_prefill[:3]) > float(mean.probabilities[0] * mean.full_prefill[0])
    assert abs(ev.coverage() - scalar.coverage()) > 1e-4  # 4.8e-4 here: the spread moves coverage


def test_files_round_trip_and_show_the_declared_types(tmp_path, capsys):
    inst = instance_from_mapping(RESOLVED)
    mapping = instance_to_mapping(inst)
    assert [q["id"] for q in mapping["requests"]] == ["short", "long"]
    assert mapping["requests"][0]["lengths"]["input"] == [820.0, 1000.0, 1400.0]
    again = instance_from_mapping(mapping)
    assert again == inst and instance_to_mapping(again) == mapping
    path = tmp_path / "resolved.toml"
    path.write_text(tomli_w.dumps(RESOLVED), encoding="utf-8")
    assert main(["evaluate", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["association"]) == {"short", "long"} and set(out["types"]) == {"short", "long"}


@pytest.mark.parametrize(
    "lengths,changes,field",
    [
        ({"input": [900.0, 1148.0]}, {"length": 1000.0}, "requests[0].length"),
        ({"input": [900.0, 1148.0], "decode": [1.0, 2.0]}, {}, "requests[0].decode"),
        ({"input": [900.0, 1148.0], "weight": [1.0]}, {}, "requests[0].lengths.weight"),
        ({"input": [900.0, 1148.0], "weight": [-1.0, 2.0]}, {"length": 1396.0}, "requests[0].lengths.weight"),
        ({"input": [500.0, 1548.0]}, {}, "requests[0].lengths.input[0]"),  # shorter than the path's 800 tokens
        ({"input": []}, {}, "requests[0].lengths.input"),
        ({"input": [1024.0], "output": [3]}, {}, "requests[0].lengths.output"),
        ({"decode": [1.0]}, {}, "requests[0].lengths.input"),
        ({"input": [900.0, 1148.0], "edges": [1200.0]}, {}, "requests[0].lengths.edges"),  # input[1] below its bin
        ({"input": [900.0, 1148.0], "edges": [950.0, 1000.0]}, {}, "requests[0].lengths.edges"),  # one edge per gap
    ],
)
def test_bad_lengths_name_the_field(lengths, changes, field):
    with pytest.raises(InstanceError) as err:
        instance_from_mapping(with_lengths(lengths, **changes))
    assert str(err.value).startswith(field + ":")


@pytest.mark.parametrize("queue_model", ["meanfield", "cell"])
def test_exact_gradient_with_sub_types_matches_central_differences(queue_model):
    inst = instance_from_mapping(RESOLVED).with_network(request_intensity=3.0)
    pi = np.array([0.2, 0.5, 0.3])
    ev = evaluate(inst, pi, tol=1e-13, queue_model=queue_model)
    sens = sensitivity(ev)
    assert sens.values["coverage"] == pytest.approx(ev.coverage(), abs=1e-9)
    grad = sens.gradients["coverage"]

    def value(mix):
        total = mix.sum()
        scaled = inst.with_network(edge_density=inst.network.edge_density * total)
        return evaluate(scaled, mix / total, tol=1e-13, queue_model=queue_model).coverage()

    h = 1e-6
    fd = np.array([(value(pi + h * e) - value(pi - h * e)) / (2 * h) for e in np.eye(3)])
    assert np.max(np.abs(grad - fd)) <= 1e-5 * np.max(np.abs(fd))
    assert np.max(np.abs(fd)) > 1e-3  # a gradient that could be wrong


def test_batched_evaluation_with_sub_types_matches_the_loop():
    inst = instance_from_mapping(RESOLVED)
    mixes = np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8], [0.5, 0.0, 0.5], [0.34, 0.33, 0.33]])
    for queue_model in ("meanfield", "cell"):
        batch = evaluate_batch(inst, mixes, queue_model=queue_model)
        for mix, cov in zip(mixes, batch.coverage):
            assert cov == pytest.approx(evaluate(inst, mix, queue_model=queue_model).coverage(), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(100.0, 50_000.0), min_size=2, max_size=60), st.integers(1, 9), st.floats(0.0, 90.0))
def test_length_bins_keep_the_mean_and_their_prefill_error_is_the_within_bin_variance(values, parts, hit):
    x = np.asarray(values)
    w = np.linspace(1.0, 2.0, x.size)
    w = w / w.sum()
    means, paired, weights = length_bins(x, w, parts, 2.0 * x)
    assert weights.size <= parts and weights.sum() == pytest.approx(1.0)
    assert np.all(np.diff(means) > 0)  # contiguous bins in increasing length
    assert float(weights @ means) == pytest.approx(float(w @ x), rel=1e-12)
    np.testing.assert_allclose(paired, 2.0 * means, rtol=1e-12)
    g = QuadraticPrefill(linear=1e-4, quadratic=2e-9, intercept=0.05)
    bins = np.searchsorted(0.5 * (means[1:] + means[:-1]), x, side="right")
    within = sum(float(w[bins == k] @ (x[bins == k] - means[k]) ** 2) for k in range(means.size))
    gap = float(w @ g(x - hit)) - float(weights @ g(means - hit))
    assert gap == pytest.approx(2e-9 * within, rel=1e-6, abs=1e-12)


def test_profiles_write_length_bins_and_the_replay_takes_the_nearest_sub_type(tmp_path, capsys):
    out = tmp_path / "trace.toml"
    assert main(["profiles", "--out", str(out), "--json", "--length-bins", "3", "--no-bin-edges-at-target"]) == 0
    report = json.loads(capsys.readouterr().out)
    inst = load_instance(out)
    groups = type_groups(inst.requests)
    assert groups.resolved and len(inst.requests) > len(groups.ids)
    assert [q["id"] for q in report["requests"]] == list(groups.ids)
    assert all(len(q["lengths"]["input"]) <= 3 for q in report["requests"] if "lengths" in q)
    from importlib import resources

    trace = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")
    inst, workload = load_trace_workload(str(trace), inst)
    lengths = np.asarray(inst.lengths)
    group = groups.index[workload.kind]
    for i in range(workload.requests):
        cols = np.flatnonzero(groups.index == group[i])
        assert workload.kind[i] == cols[np.argmin(np.abs(lengths[cols] - workload.length[i]))]
    # the empirical sub-type mix of the trace the instance was built from is close to the instance's
    assert np.abs(workload.type_mix(len(inst.requests)) - inst.probabilities).max() <= 0.05


def test_a_replayed_request_takes_the_sub_type_whose_bin_holds_it(tmp_path):
    """docs/model.md (2.8): the bins split at the target (2.10) carry their edges (``lengths.edges``), each
    request of the trace the instance was built from falls back into its own bin, the instance round-trips,
    and an instance without edges (written before them) still loads and takes the nearest sub-type."""
    out = tmp_path / "trace.toml"
    assert main(["profiles", "--out", str(out), "--length-bins", "3"]) == 0
    inst = load_instance(out)
    groups = type_groups(inst.requests)
    assert all(q.bin is not None for q in inst.requests if q.group is not None)
    again = tmp_path / "again.toml"
    write_instance(inst, again)
    assert [q.bin for q in load_instance(again).requests] == [q.bin for q in inst.requests]
    from importlib import resources

    trace = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")
    inst, workload = load_trace_workload(str(trace), inst)
    lower = np.array([q.bin[0] if q.bin else -np.inf for q in inst.requests])
    upper = np.array([q.bin[1] if q.bin else np.inf for q in inst.requests])
    assert np.all((lower[workload.kind] <= workload.length) & (workload.length < upper[workload.kind]))
    np.testing.assert_allclose(workload.type_mix(len(inst.requests)), inst.probabilities, atol=1e-12)  # in sample: exact
    data = tomllib.loads(out.read_text(encoding="utf-8"))
    for q in data["requests"]:
        q.get("lengths", {}).pop("edges", None)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data), encoding="utf-8")
    inst_old, nearest = load_trace_workload(str(trace), load_instance(old))
    lengths = np.asarray(inst_old.lengths)
    for i in range(nearest.requests):
        cols = np.flatnonzero(groups.index == groups.index[nearest.kind[i]])
        assert nearest.kind[i] == cols[np.argmin(np.abs(lengths[cols] - nearest.length[i]))]
    assert not np.array_equal(nearest.kind, workload.kind)  # split bins: some requests sit nearer the next bin's mean


def test_probabilities_by_declared_type_spread_over_the_sub_types():
    inst = instance_from_mapping(RESOLVED)
    moved = inst.with_probabilities({"short": 0.5, "long": 0.5})
    np.testing.assert_allclose(moved.probabilities, [0.15, 0.2, 0.15, 0.5])
    assert instance_to_mapping(moved)["requests"][0]["probability"] == pytest.approx(0.5)
    assert instance_to_mapping(moved)["requests"][0]["lengths"]["weight"] == pytest.approx([0.3, 0.4, 0.3])
    with pytest.raises(InstanceError, match="unknown request type"):
        inst.with_probabilities({"nope": 1.0})


def test_epochs_carry_each_windows_lengths(tmp_path):
    from importlib import resources

    from edgeprefix.placement.pipeline.epochs import cut_epochs

    out = tmp_path / "trace.toml"
    assert main(["profiles", "--out", str(out), "--length-bins", "3"]) == 0
    trace = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")
    inst, workload = load_trace_workload(str(trace), load_instance(out))
    cut = cut_epochs(workload, inst, 100.0)
    which = np.minimum(np.searchsorted([e.start for e in cut.epochs], workload.time, side="right") - 1, len(cut.epochs) - 1)
    for e, epoch in enumerate(cut.epochs):
        mine = workload.length[which == e]
        assert epoch.lengths["mean_input"] == pytest.approx(mine.mean())
        assert epoch.lengths["p90_input"] == pytest.approx(np.percentile(mine, 90))
        assert set(epoch.mix_of_types) == set(inst.request_ids)  # over the sub-types: the lengths reach the planner
        assert sum(epoch.mix_of_types.values()) == pytest.approx(1.0)
        assert epoch.to_dict()["lengths"] == epoch.lengths
