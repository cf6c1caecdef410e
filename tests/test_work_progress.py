"""A long run the size guard accepts draws a bar of type blocks on stderr; a short one draws nothing; stdout is the same."""

from __future__ import annotations

import json

import pytest

from edgeprefix.cli import main
from edgeprefix.placement import work_progress
from edgeprefix.placement.memory import evaluation_bytes
from edgeprefix.placement.progress import progress_bar
from edgeprefix.solvers import density

ARGS = ["evaluate", "paper_baseline", "--gradient", "--json"]


def _run(capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    assert main(ARGS) == 0
    out, err = capsys.readouterr()
    return json.loads(out), err


def _without_timings(payload: dict) -> dict:
    return {k: v for k, v in payload.items() if k not in ("seconds", "timings")}


def test_a_long_estimated_evaluation_shows_its_blocks_and_a_short_one_does_not(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "1")  # bars forced: stderr is no terminal here
    short, err = _run(capsys)
    assert "type blocks" not in err  # paper_baseline is far below the threshold
    monkeypatch.setattr(work_progress, "LONG_WORK_BYTES", 0.0)  # every run counts as long
    bars = []

    def recorded(**kwargs: object) -> object:
        bars.append(progress_bar(**kwargs))
        return bars[-1]

    monkeypatch.setattr(work_progress, "progress_bar", recorded)
    long, err = _run(capsys)
    assert "evaluate" in err and "type blocks" in err
    assert len(bars) == 1 and bars[0].n > 0  # the kernels' and the gradient's block loops advanced it
    assert _without_timings(long) == _without_timings(short)  # the bar never reaches stdout


def test_the_issue_size_is_long_and_the_shipped_instances_are_not() -> None:
    assert evaluation_bytes(500, 2000, 2.0, "load_aware") >= work_progress.LONG_WORK_BYTES  # 352 s in the issue
    assert evaluation_bytes(14, 113, 3.5, "load_aware") < work_progress.LONG_WORK_BYTES  # mooncake_large, seconds


def test_nested_long_work_shares_the_outer_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(work_progress, "LONG_WORK_BYTES", 0.0)
    with work_progress.long_work(1.0, "outer") as outer, work_progress.long_work(1.0, "inner") as inner:
        assert outer is True and inner is False
    with work_progress.long_work(-1.0, "short") as drawn:
        assert drawn is False
        work_progress.advance()  # no bar: nothing to count, no error


def test_plan_density_counts_the_densities_it_tries(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["plan-density", "paper_baseline", "--reliability", "0.8", "--mix", "none=0.2,shallow=0.4,deep=0.4", "--json"]
    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "0")
    assert main(args) == 0
    quiet_out, quiet_err = capsys.readouterr()
    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "1")
    bars = []

    def recorded(**kwargs: object) -> object:
        bars.append(progress_bar(**kwargs))
        return bars[-1]

    monkeypatch.setattr(density, "progress_bar", recorded)
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "densities tried" not in quiet_err and "densities tried" in err
    assert len(bars) == 1 and bars[0].n == json.loads(out)["steps"] > 1  # every density tried, counted once
    assert {k: v for k, v in json.loads(out).items() if k != "seconds"} == {
        k: v for k, v in json.loads(quiet_out).items() if k != "seconds"
    }
