"""``edgeprefix profiles``: embedded sample, Mooncake trace, written instance, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE as MOONCAKE
from edgeprefix.benchmarks.datasets import SPLITWISE_TIMINGS as SPLITWISE
from edgeprefix.cli import main
from edgeprefix.placement.model.costs import PiecewiseLinearPrefill
from edgeprefix.placement.model.instance import (
    instance_to_mapping,
    load_instance,
    write_instance,
)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["profiles", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _evaluate_uniform(path: Path) -> None:
    from edgeprefix.placement.model.evaluation import evaluate

    instance = load_instance(path)
    ok = [i for i, c in enumerate(instance.concurrency) if c >= 1]
    mix = np.zeros(len(instance.profiles))
    mix[ok] = 1.0 / len(ok)
    ev = evaluate(instance, mix, "load_aware")
    assert ev.stable and 0.0 <= ev.coverage_at_target <= 1.0


def test_sample_trace_writes_an_instance_that_round_trips_and_solves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sample.toml"
    code, text, _ = _run(capsys, "--out", str(out), "--json")
    assert code == 0
    report = json.loads(text)
    assert report["forest"]["requests"] == 200 and report["profiles"][0]["id"] == "none"
    assert all(p["memory"] <= report["memory_cap"] + 1e-12 for p in report["profiles"])
    instance = load_instance(out)
    again = tmp_path / "again.json"
    write_instance(instance, again)
    assert instance_to_mapping(load_instance(again)) == instance_to_mapping(instance)
    assert [s.id for s in instance.profiles] == [p["id"] for p in report["profiles"]]
    _evaluate_uniform(out)
    assert main(["evaluate", str(out), "--json"]) == 0  # the default mix of the written instance
    capsys.readouterr()
    try:
        import edgeprefix.commands.solve  # noqa: F401
    except ModuleNotFoundError:
        return
    assert main(["solve", str(out), "--budget", "12", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["feasible"] is True


def test_text_report_and_calibration_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.toml"
    code, text, _ = _run(
        capsys,
        "sample",
        "--calibration",
        str(SPLITWISE),
        "--tensor-parallel",
        "2",
        "--prefill-law",
        "table",
        "--out",
        str(out),
        "--max-profiles",
        "3",
    )
    assert code == 0 and "requests by leaf depth" in text and "RMS relative error" in text
    instance = load_instance(out)
    assert isinstance(instance.prefill, PiecewiseLinearPrefill) and len(instance.profiles) <= 3


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--memory-cap", "abc"], "--memory-cap"),
        (["--memory-cap", "150%"], "--memory-cap"),
        (["--min-support", "0"], "k_min"),
        (["--utilisation", "1.5"], "utilisation"),
        (["--config", "x.json"], "--weights-gb"),
    ],
)
def test_bad_options_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, *argv)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_malformed_trace_names_the_line_or_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = [json.dumps({"timestamp": i, "input_length": 1200, "output_length": 9, "hash_ids": [0, 1 + i % 2, 10 + i]}) for i in range(6)]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(good[:3] + ['{"timestamp": 1, "input_length": 1200}'] + good[3:]) + "\n")
    code, _, err = _run(capsys, str(path))
    assert code == 2 and "line 4" in err and "output_length" in err
    code, text, _ = _run(capsys, str(path), "--skip-invalid", "--json")
    report = json.loads(text)
    assert code == 0 and report["skipped"]["lines"] == 1 and report["forest"]["requests"] == 6
    code, _, err = _run(capsys, str(tmp_path / "missing.jsonl"))
    assert code == 2 and "does not exist" in err


def test_mooncake_trace_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mooncake.toml"
    code, text, _ = _run(capsys, str(MOONCAKE), "--memory-cap", "5%", "--max-profiles", "4", "--out", str(out), "--json")
    assert code == 0
    report = json.loads(text)
    assert report["forest"]["requests"] == 12031 and report["forest"]["roots"] == 1
    assert 0 < report["seconds"]["ingest"] <= report["seconds"]["total"]  # the time itself: benchmarks/speed/timings.py
    assert 2 <= len(report["profiles"]) <= 4
    _evaluate_uniform(out)


def test_token_trace_builds_an_instance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    system = list(range(300))
    families = [rng.integers(0, 50_000, size=int(rng.integers(100, 600))).tolist() for _ in range(3)]
    path = tmp_path / "tokens.jsonl"
    with path.open("w") as handle:
        for i in range(60):
            tail = rng.integers(0, 50_000, size=int(rng.integers(10, 200))).tolist()
            handle.write(json.dumps({"tokens": system + families[i % 3] + tail, "output_length": 20, "timestamp": i}) + "\n")
    out = tmp_path / "tokens.toml"
    code, text, _ = _run(capsys, str(path), "--format", "tokens", "--block-size", "16", "--out", str(out), "--json")
    report = json.loads(text)
    assert code == 0 and report["forest"]["requests"] == 60
    instance = load_instance(out)
    root = [p for p in instance.prefixes if p.parent is None]
    assert [p.depth for p in root] == [288.0]  # 18 whole blocks of the 300-token system prompt
    _evaluate_uniform(out)
