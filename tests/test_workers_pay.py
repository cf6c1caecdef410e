"""``--workers N`` pays or steps aside (docs/model.md §10.3): the cost probe times warm points, and
a shared study whose trials are too short to win back the workers' start-up and storage work runs
in this process, saying why in one line."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np
import pytest

from edgeprefix.cli import main
from edgeprefix.solvers import distributed

COLD, WARM = 0.2, 0.001  # seconds of the first evaluation and of every later one


@dataclass
class ColdStart:
    """A problem whose first evaluation is slow (imports, caches) and the rest fast."""

    calls: list[int] = field(default_factory=lambda: [0])

    def score(self, x, warm_start=None):
        self.calls[0] += 1
        time.sleep(COLD if self.calls[0] == 1 else WARM)
        return type("S", (), {"value": 0.5, "coverage": 0.5, "feasible": True, "overload": 0.0, "warm_start": None})()


def test_the_probes_time_warm_points_not_the_cold_first_one():
    points = np.full((40, 3), 1 / 3)
    assert distributed.probe_seconds_per_point(ColdStart(), points) < COLD / 4
    assert distributed.probe_seconds_per_evaluation(ColdStart(), points) < COLD / 4


def test_study_workers_pay_only_for_long_trials(monkeypatch):
    monkeypatch.setattr(distributed, "usable_cores", lambda: 2)
    reason = distributed.local_workers_pay(2, 40, 0.0064)  # the TPE: 40 trials of a warm 6 ms
    assert reason is not None and "40 trials" in reason and "start-up" in reason
    assert distributed.local_workers_pay(2, 40, 1.0) is None  # 40 s of work: two processes win
    monkeypatch.setattr(distributed, "usable_cores", lambda: 1)
    assert "1 worker process(es)" in distributed.local_workers_pay(2, 40, 1.0)


def test_grid_with_workers_on_a_default_grid_runs_serially(monkeypatch, capsys):
    """The issue's case: the default 1/20 grid with --workers 2 started a cluster (cold point timed)."""
    monkeypatch.setattr(distributed, "usable_cores", lambda: 2)
    assert main(["solve", "--method", "grid", "--workers", "2", "--json"]) == 0
    captured = capsys.readouterr()
    assert "running the grid serially" in captured.err
    assert json.loads(captured.out)["extras"].get("dask_workers") is None


def test_short_study_with_workers_runs_in_this_process_on_the_storage(tmp_path, monkeypatch, capsys):
    import optuna

    monkeypatch.setattr(distributed, "usable_cores", lambda: 2)
    db = tmp_path / "x.db"
    assert main(["solve", "--method", "tpe", "--budget", "6", "--workers", "2", "--storage", str(db), "--json"]) == 0
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if "running the study in this process" in line]
    assert len(lines) == 1 and "6 trials" in lines[0]
    payload = json.loads(captured.out)
    assert payload["evaluations"] == 6 and "worker_exit_codes" not in payload["extras"]
    assert len(optuna.load_study(study_name="edgeprefix", storage=f"sqlite:///{db}").trials) == 6  # still stored


@pytest.mark.parametrize("argv", [["--method", "tpe", "--budget", "4", "--workers", "2"]])
def test_workers_without_a_storage_still_need_one(argv, capsys):
    assert main(["solve", *argv]) == 2
    assert "storage" in capsys.readouterr().err
