"""Plain ``edgeprefix solve --storage`` commands running at once on one study (docs/distributed.md).

Each command runs in a process of its own, forked from the test process.

Two and three concurrent commands, without ``--workers``, on SQLite, PostgreSQL and a journal
file: every command exits 0 and reports the whole study, and the study holds exactly the budget
of COMPLETE trials, each trial number once.  A run that treated another live command's RUNNING
trial as abandoned would fail it and evaluate its copy (more FAIL trials, more COMPLETE ones than
the budget, or "Cannot tell a COMPLETE trial" from the loser).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
import uuid
from collections import Counter
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from edgeprefix.cli import main
from edgeprefix.solvers.optuna_common import storage_url
from edgeprefix.solvers.storage import SharedStorage, close

BUDGET = 8


@pytest.fixture()
def folder(tmp_path):
    """A folder for SQLite and journal studies, in memory-backed /dev/shm when there is one (commits skip the disk)."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        path = Path(tempfile.mkdtemp(prefix="edgeprefix-", dir="/dev/shm"))
        yield path
        shutil.rmtree(path, ignore_errors=True)
    else:
        yield tmp_path


@pytest.fixture(scope="module")
def postgres(postgres_url):
    close(SharedStorage(postgres_url).open())  # Optuna creates its tables once, before processes race to
    return postgres_url


def _storage(backend: str, folder: Path, request) -> str:
    if backend == "postgresql":
        return request.getfixturevalue("postgres")
    return str(folder / ("s.db" if backend == "sqlite" else "s.journal"))


def _trials(storage: str, study: str) -> list[optuna.trial.FrozenTrial]:
    if storage.endswith(".journal"):
        from edgeprefix.solvers.persistence import JournalStudy

        with JournalStudy(storage) as journal:
            return optuna.load_study(study_name=study, storage=journal).get_trials()
    return optuna.load_study(study_name=study, storage=storage_url(storage)).get_trials()


def _command(argv: list[str], out: Path, err: Path, cwd: Path) -> None:
    """A forked child: ``edgeprefix ARGV`` with its stdout and stderr in files, then exit with its code.

    Forked from the test process (the modules already imported), so a command costs its work and
    not an interpreter's start-up; it runs the same ``main`` as ``python -m edgeprefix.cli``.
    """
    os.chdir(cwd)
    os.environ["EDGEPREFIX_PROGRESS"] = "0"
    code = 1
    with open(out, "w") as stdout, open(err, "w") as stderr:
        sys.stdout, sys.stderr = stdout, stderr
        try:
            code = main(argv)
        except BaseException:
            traceback.print_exc()
        finally:
            stdout.flush()
            stderr.flush()
    os._exit(code)


def _run_at_once(
    n: int, storage: str, study: str, cwd: Path, extra: tuple[list[str], ...] = (), where: list[str] | None = None
) -> list[subprocess.CompletedProcess]:
    """``n`` plain commands (and one per ``extra`` argument list) started at once, each in its own process."""
    argv = [
        "solve",
        "--method",
        "tpe",
        "--budget",
        str(BUDGET),
        *(where or ["--storage", storage, "--study", study]),
        "--heartbeat",
        "1",
        "--grace",
        "3",
        "--json",
    ]
    context = multiprocessing.get_context("fork")
    runs = []
    for i, more in enumerate([[]] * n + list(extra)):
        out, err = cwd / f"out-{i}.txt", cwd / f"err-{i}.txt"
        proc = context.Process(target=_command, args=(argv + more, out, err, cwd))
        proc.start()
        runs.append((argv + more, proc, out, err))
    done = []
    for args, proc, out, err in runs:
        proc.join(timeout=300)
        assert proc.exitcode is not None, f"{args} still runs after 300 s"
        done.append(subprocess.CompletedProcess(args, proc.exitcode, out.read_text(), err.read_text()))
        out.unlink()
        err.unlink()
    return done


@pytest.mark.slow
@pytest.mark.parametrize("processes", [2, 3])
@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "journal"])
def test_concurrent_plain_commands_share_the_budget_exactly(request, folder, backend, processes):
    storage = _storage(backend, folder, request)
    study = f"plain-{uuid.uuid4().hex[:8]}"
    runs = _run_at_once(processes, storage, study, folder)
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr and "Cannot tell" not in run.stderr
        assert json.loads(run.stdout)["evaluations"] == BUDGET  # each reports the whole study
    trials = _trials(storage, study)
    count = Counter(t.state for t in trials)
    assert count[TrialState.COMPLETE] == BUDGET
    assert not count[TrialState.RUNNING] and not count[TrialState.WAITING]
    assert not count[TrialState.FAIL]  # nobody's live trial was taken for dead
    numbers = [t.number for t in trials]
    assert len(set(numbers)) == len(numbers)
    best = [json.loads(run.stdout)["coverage"] for run in runs]
    assert best == pytest.approx([best[0]] * processes, rel=1e-9)  # every command reports the best of the same study


@pytest.mark.slow
def test_a_plain_command_and_one_with_workers_share_the_budget_exactly(folder, monkeypatch):
    import edgeprefix.commands.solve as solve_command

    monkeypatch.setattr(solve_command, "_study_workers_pay", lambda *args: True)  # short trials: fork the workers anyway
    storage = str(folder / "mixed.db")
    runs = _run_at_once(1, storage, "mixed", folder, extra=(["--workers", "2"],))
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["evaluations"] == BUDGET
    assert json.loads(runs[1].stdout)["extras"]["worker_exit_codes"] == [0, 0]  # the second one did run two workers
    count = Counter(t.state for t in _trials(storage, "mixed"))
    assert count[TrialState.COMPLETE] == BUDGET and not count[TrialState.FAIL] and not count[TrialState.RUNNING]


@pytest.mark.slow
def test_concurrent_commands_on_one_output_folder_share_its_study_exactly(folder):
    """Three ``solve --out DIR`` at once: they take turns on ``DIR/study.journal`` (each writes its
    output set before the next starts), the study ends with the budget, the folder with one set."""
    out = folder / "run"
    runs = _run_at_once(3, "", "", folder, where=["--out", str(out)])
    for run in runs:
        assert run.returncode == 0, run.stderr
        assert "Traceback" not in run.stderr and json.loads(run.stdout)["evaluations"] == BUDGET
    count = Counter(t.state for t in _trials(str(out / "study.journal"), "edgeprefix"))
    assert count[TrialState.COMPLETE] == BUDGET and not count[TrialState.FAIL]
    assert sorted(p.name for p in out.iterdir()) == ["best_so_far.png", "history.csv", "result.json", "study.journal"]
    assert sum("waiting for another process" in run.stderr for run in runs) >= 1
