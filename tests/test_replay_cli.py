"""``edgeprefix replay``: the JSON contract, the split, the written files, epochs and bad input."""

from __future__ import annotations

import csv
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
from replay_fixtures import B, epochs_case, hand_mapping

from edgeprefix.cli import main
from edgeprefix.placement.model.instance import instance_from_mapping, load_instance, write_instance
from edgeprefix.placement.pipeline.trace_workload import load_trace_workload

CONTRACT = {
    "requests",
    "coverage_replayed",
    "coverage_predicted",
    "mean_ttft_replayed",
    "mean_ttft_predicted",
    "hit_depth_replayed",
    "hit_depth_predicted",
    "router",
    "split",
}
SAMPLE = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")


@pytest.fixture(scope="module")
def sample_instance(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "sample.toml"
    assert main(["profiles", "--out", str(path), "--json"]) == 0
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | str, str]:
    code = main(["replay", *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in argv and code == 0 else out), err


@pytest.mark.parametrize("router", ["tier", "online"])
def test_json_contract_and_the_prediction_of_the_same_mix(sample_instance: Path, capsys, router: str) -> None:
    code, report, _ = _run(
        capsys, str(SAMPLE), "--instance", str(sample_instance), "--router", router, "--nodes", "10", "--warm-start", "none", "--json"
    )
    assert code == 0 and CONTRACT <= set(report)
    assert report["router"] == router and report["split"] == 0.0 and report["requests"] == 180  # 200 minus 10 % warm-up
    assert report["warm_start"].startswith("none") and "no finite-horizon prediction" in report["warm_start"]
    from edgeprefix.placement.model.evaluation import evaluate

    # the prediction is the router's own model: the cell model for the tier rule, eq. (39) for the online router
    assert report["queue_model"] == ("cell" if router == "tier" else "meanfield")
    ev = evaluate(load_instance(sample_instance), None, "load_aware", queue_model=report["queue_model"])
    assert report["coverage_predicted"] == pytest.approx(ev.coverage_at_target, rel=1e-12)
    assert report["hit_depth_predicted"] == pytest.approx(ev.mean_prefix_depth, rel=1e-12)
    assert 0.0 <= report["coverage_replayed"] <= 1.0 and report["hit_depth_replayed"] > 0
    # the instance was built from this very trace: its decode rate comes back
    assert report["decode_per_token"] == pytest.approx(0.044513344308437494, rel=1e-9)


def test_split_reports_the_generalisation_gap_and_writes_files(sample_instance: Path, capsys, tmp_path: Path) -> None:
    out = tmp_path / "run"
    code, report, err = _run(
        capsys, str(SAMPLE), "--instance", str(sample_instance), "--split", "0.5", "--nodes", "8", "--ablation", "--out", str(out), "--json"
    )
    assert f"wrote {out / 'replay.json'}" in err and f"wrote {out / 'requests.csv'}" in err
    # warm start (default with --split): the training part fills the queues, all 100 replayed requests are measured
    assert code == 0 and report["split"] == 0.5 and report["requests_train"] == 100 and report["requests"] == 100
    assert report["warm_start"] == "train" and report["warm_requests"] == 100
    gen = report["generalisation"]
    assert gen["requests_train"] == 100 and gen["requests_test"] == 100
    assert gen["gap_coverage"] == pytest.approx(gen["coverage_test"] - gen["coverage_train"])
    assert [row["name"] for row in report["ablation"]][:2] == ["trace", "poisson arrivals"]
    saved = json.loads((out / "replay.json").read_text())
    assert saved["coverage_replayed"] == pytest.approx(report["coverage_replayed"])
    with (out / "requests.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 100 and set(rows[0]) >= {"time", "node", "hit", "ttft"}
    ttft = np.array([float(r["ttft"]) for r in rows])
    assert np.mean(ttft <= report["target"]) == pytest.approx(report["coverage_replayed"], rel=1e-12)


def test_text_output_puts_replayed_beside_predicted(sample_instance: Path, capsys) -> None:
    code, text, _ = _run(capsys, str(SAMPLE), "--instance", str(sample_instance), "--nodes", "10", "--split", "0.5")
    assert code == 0 and "replayed" in text and "predicted" in text and "generalisation" in text
    assert "(--intensity)" not in text
    code, text, _ = _run(capsys, str(SAMPLE), "--instance", str(sample_instance), "--nodes", "10", "--intensity", "0.7")
    assert code == 0 and "Λ = 0.7 (--intensity)" in text


def test_epochs_replay_reports_gain_and_bytes(tmp_path: Path, capsys) -> None:
    trace, inst_path, epochs = epochs_case(tmp_path)
    code, report, _ = _run(
        capsys,
        str(trace),
        "--instance",
        str(inst_path),
        "--block-size",
        str(B),
        "--epochs",
        str(epochs),
        "--resolution",
        "4",
        "--nodes",
        "8",
        "--json",
    )
    assert code == 0 and CONTRACT <= set(report)
    plan = report["epoch_plan"]
    assert len(plan["epochs"]) == 3 and plan["gain"] == pytest.approx(plan["coverage_migrated"] - plan["coverage_static"])
    assert all(row["moved_share"] <= 0.5 + 1e-9 and row["moved_bytes"] >= 0 for row in plan["epochs"])
    assert sum(plan["static_mix"].values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--split", "1.5"], "--split"),
        (["--router", "fastest"], "--router"),
        (["--policy", "best"], "policy"),
        (["--block-size", "64"], "--block-size"),
        (["--mix", "nope=1"], "nope"),
    ],
)
def test_bad_input_exits_2_naming_the_option(sample_instance: Path, capsys, extra: list[str], needle: str) -> None:
    try:
        code = main(["replay", str(SAMPLE), "--instance", str(sample_instance), *extra])
    except SystemExit as exc:  # argparse rejects --router choices itself
        code = exc.code
    _, err = capsys.readouterr()
    assert code == 2 and needle in err


def test_an_instance_from_another_trace_is_rejected(capsys, tmp_path: Path) -> None:
    data = hand_mapping()
    for p in data["prefixes"]:
        del p["blocks"]
    inst = tmp_path / "bare.toml"
    write_instance(instance_from_mapping(data), inst)
    code = main(["replay", str(SAMPLE), "--instance", str(inst)])
    assert code == 2 and "prefixes[0]" in capsys.readouterr().err  # h1's block 1 is not the sample's h1


def test_profiles_split_trains_on_the_part_replay_skips(tmp_path: Path, capsys) -> None:
    half = tmp_path / "half.toml"
    assert main(["profiles", "--split", "0.5", "--out", str(half), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["forest"]["requests"] == 100
    code, report, _ = _run(capsys, str(SAMPLE), "--instance", str(half), "--split", "0.5", "--nodes", "8", "--json")
    assert code == 0 and report["requests_train"] == 100
    # the training part's block-level hits are the instance's per-type hits (it was built from them)
    instance, workload = load_trace_workload(SAMPLE, load_instance(half))
    train = workload.part(slice(0, 100))
    np.testing.assert_array_equal(train.hit, instance.hit_depth[:, train.kind])
    assert main(["profiles", "--split", "1.5"]) == 2 and "--split" in capsys.readouterr().err


def test_the_prediction_uses_the_routers_own_queue_model() -> None:
    from edgeprefix.placement.simulation.replay import ReplaySpec

    assert ReplaySpec(decode_per_token=0.04, router="tier").prediction_model == "cell"
    assert ReplaySpec(decode_per_token=0.04, router="online").prediction_model == "meanfield"
    assert ReplaySpec(decode_per_token=0.04, router="tier", queue_model="meanfield").prediction_model == "meanfield"
    with pytest.raises(ValueError, match="--queue-model"):
        ReplaySpec(decode_per_token=0.04, queue_model="exact")
