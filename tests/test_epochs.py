"""Epochs measured on a trace: windows, intensities, type mixes, and the file ``migrate`` reads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from replay_fixtures import B, hand_mapping, record

from edgeprefix.cli import main
from edgeprefix.formulations.migration import load_migration
from edgeprefix.formulations.static_mix import EpochAverage, static_mix_problem
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import instance_from_mapping, write_instance
from edgeprefix.placement.pipeline.epochs import cut_epochs, epochs_mapping, instance_reference, write_epochs
from edgeprefix.placement.pipeline.trace_workload import block_catalogue, trace_workload
from edgeprefix.solvers.api import solve

SHAPES = {"deep": ((1, 2, 3, 4), 16), "short": ((1, 5), 7), "none": ((8,), 3)}


def _drifting(instance, per_phase: int = 60):
    """Two phases of 100 s: first mostly deep requests at 0.6/s, then mostly short ones at 1.2/s."""
    rng = np.random.default_rng(0)
    records, t = [], 0.0
    for names, rate in ((["deep"] * 3 + ["short"], 0.6), (["short"] * 3 + ["none"], 1.2)):
        for _ in range(int(per_phase * rate / 0.6)):
            t += float(rng.exponential(1.0 / rate))
            blocks, length = SHAPES[names[int(rng.integers(0, len(names)))]]
            records.append(record(len(records) + 1, blocks, length, t=t))
    return trace_workload(records, block_catalogue(instance, B))


@pytest.fixture(scope="module")
def hand():
    return instance_from_mapping(hand_mapping())


def test_epochs_carry_the_window_rate_and_type_mix(hand) -> None:
    w = _drifting(hand)
    cut = cut_epochs(w, hand, 50.0)
    span = w.time[-1] - w.time[0]
    assert cut.mean_rate == pytest.approx((w.requests - 1) / span)
    assert sum(e.requests for e in cut.epochs) == w.requests and cut.epochs[0].start == w.time[0]
    assert cut.epochs[-1].end == w.time[-1]
    for e in cut.epochs:
        inside = (w.time >= e.start) & ((w.time < e.end) | (e.end == w.time[-1]))
        assert e.requests == int(inside.sum())
        assert e.intensity == pytest.approx(hand.network.request_intensity * (e.requests / (e.end - e.start)) / cut.mean_rate)
        assert sum(e.mix_of_types.values()) == pytest.approx(1.0) and set(e.mix_of_types) == set(hand.request_ids)
        expected = np.bincount(w.kind[inside], minlength=4) / inside.sum()
        np.testing.assert_allclose([e.mix_of_types[q] for q in hand.request_ids], expected)
    first, last = cut.epochs[0], cut.epochs[-1]
    assert first.mix_of_types["q_h4"] > 0.5 > last.mix_of_types["q_h4"]  # the drift is measured
    assert last.intensity > first.intensity
    assert np.mean([e.weight for e in cut.epochs]) == pytest.approx(1.0)


def test_a_short_remainder_joins_the_last_window(hand) -> None:
    w = _drifting(hand)
    span = float(w.time[-1] - w.time[0])
    window = span / 3.2  # 3 windows and a 0.2 remainder
    cut = cut_epochs(w, hand, window)
    assert len(cut.epochs) == 3 and cut.epochs[-1].end - cut.epochs[-1].start == pytest.approx(1.2 * window)
    assert len(cut_epochs(w, hand, span / 3.6).epochs) == 4  # a 0.6 remainder is its own window
    with pytest.raises(ValueError, match="--window"):
        cut_epochs(w, hand, 2 * span)


def test_epochs_file_round_trips_through_migrate(hand, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst_path = tmp_path / "inst" / "hand.toml"
    write_instance(hand, inst_path)
    w = _drifting(hand)
    cut = cut_epochs(w, hand, 50.0)
    out = tmp_path / "plan" / "epochs.toml"
    ref = instance_reference(inst_path, out)
    assert ref == "../inst/hand.toml"
    write_epochs(out, epochs_mapping(cut, ref, current_mix={"none": 0.5, "deep": 0.5}, change_budget=0.4))
    problem = load_migration(out)
    assert problem.instance.request_ids == hand.request_ids and len(problem.epochs) == len(cut.epochs)
    for epoch, e in zip(problem.epochs, cut.epochs):
        assert (epoch.start, epoch.end, epoch.name) == (e.start, e.end, e.name)
        assert problem.epoch_instance(cut.epochs.index(e)).network.request_intensity == pytest.approx(e.intensity)
        assert dict(epoch.probabilities) == pytest.approx(e.mix_of_types)
    assert main(["migrate", str(out), "--resolution", "4", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert len(plan["epochs"]) == len(cut.epochs) and all(e["moved_share"] <= 0.4 + 1e-9 for e in plan["epochs"])


def test_the_static_mix_maximises_the_weighted_mean_coverage(hand, tmp_path: Path) -> None:
    inst_path = tmp_path / "hand.toml"
    write_instance(hand, inst_path)
    w = _drifting(hand)
    out = tmp_path / "epochs.toml"
    write_epochs(out, epochs_mapping(cut_epochs(w, hand, 50.0), str(inst_path)))
    problem = load_migration(out)
    static = static_mix_problem(problem)
    mix = np.array([0.25, 0.25, 0.25, 0.25])
    score = static.score(mix)
    weights = np.array([e.weight for e in problem.epochs])
    covs = [evaluate(problem.epoch_instance(e), mix, "load_aware").coverage(hand.placement.target) for e in range(len(weights))]
    assert isinstance(score.evaluation, EpochAverage)
    assert score.coverage == pytest.approx(np.dot(weights, covs) / weights.sum(), rel=1e-12)
    best = solve(static, "grid", budget=None, resolution=4)
    lattice = [static.score(p).coverage for p in ([1, 0, 0, 0], [0.5, 0.5, 0, 0], [0.25, 0.25, 0.25, 0.25])]
    assert best.coverage >= max(lattice) - 1e-12


def test_epochs_command_json_contract(hand, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst_path = tmp_path / "hand.toml"
    write_instance(hand, inst_path)
    trace = tmp_path / "t.jsonl"
    rng = np.random.default_rng(1)
    lines, t = [], 0.0
    for i in range(120):
        t += float(rng.exponential(1.0))
        blocks, length = list(SHAPES.values())[i % 3]
        lines.append(json.dumps({"timestamp": int(1000 * t), "input_length": length, "output_length": 5, "hash_ids": list(blocks)}))
    trace.write_text("\n".join(lines) + "\n")
    out = tmp_path / "epochs.toml"
    code = main(["epochs", str(trace), "--instance", str(inst_path), "--window", "30", "--block-size", str(B), "--out", str(out), "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["epochs"] and all({"start", "end", "intensity", "mix_of_types"} <= set(e) for e in report["epochs"])
    assert len(load_migration(out).epochs) == len(report["epochs"])
    assert main(["epochs", str(trace), "--instance", str(inst_path), "--window", "-1", "--block-size", str(B)]) == 2
    assert "--window" in capsys.readouterr().err
