"""Shared Optuna studies (docs/model.md §10.3): workers on PostgreSQL, a killed worker, resumption.

The sampler is QMC with a fixed seed: its proposals ignore the values, so the study enqueues
all ``BUDGET`` of them up front and the set of evaluated points does not depend on which
worker takes which trial.  The stub objective sleeps, so a worker is killed mid-evaluation.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState
from solver_stubs import StubModel, baseline
from study_reader import study_trials

from edgeprefix.formulations.placement import placement_problem
from edgeprefix.solvers import solve
from edgeprefix.solvers.optuna_common import quiet_optuna
from edgeprefix.solvers.optuna_search import QmcSolver
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.storage import SharedStorage, close, redact, retry_callback
from edgeprefix.solvers.workers import (
    WORKER_ATTR,
    Job,
    WorkersFailed,
    open_study,
    shared_storage,
)

BUDGET, SEED = 10, 11
OPTIMUM = np.array([0.3, 0.3, 0.4])
GUARD = {"heartbeat_interval": 1, "grace_period": 2}


@dataclass
class SlowStub(StubModel):
    """The stub objective, taking ``delay`` seconds per evaluation (long enough to be killed in)."""

    delay: float = 0.6

    def __call__(self, *args, **kwargs):
        time.sleep(self.delay)
        return super().__call__(*args, **kwargs)


@pytest.fixture(scope="module")
def postgres(postgres_url):
    close(SharedStorage(postgres_url).open())  # create Optuna's tables once, before processes race to
    return postgres_url


@pytest.fixture()
def sqlite_dir(tmp_path):
    """A folder for SQLite studies, in memory-backed /dev/shm when there is one (commits skip the disk)."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        folder = tempfile.mkdtemp(prefix="edgeprefix-", dir="/dev/shm")
        yield Path(folder)
        shutil.rmtree(folder, ignore_errors=True)
    else:
        yield tmp_path


@pytest.fixture(scope="module")
def single():
    """The single-process run on the same seed (in memory, no storage)."""
    return solve(placement_problem(baseline(), evaluator=StubModel(optimum=OPTIMUM)), "qmc", budget=BUDGET, seed=SEED)


def _kill_one_running_worker(url: str, study: str, after: int, report) -> None:
    """Wait for ``after`` COMPLETE trials, then SIGKILL the worker of a trial being evaluated."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        trials = study_trials(SharedStorage(url).url, study)  # read only (tests/study_reader.py)
        done = sum(t.state == TrialState.COMPLETE for t in trials)
        busy = [t for t in trials if t.state == TrialState.RUNNING and t.params and WORKER_ATTR in t.user_attrs]
        if done >= after and busy:
            victim = max(busy, key=lambda t: t.datetime_start)  # the latest start: furthest from its end
            pid = int(victim.user_attrs[WORKER_ATTR].rsplit(":", 1)[1])
            os.kill(pid, signal.SIGKILL)
            report.send((pid, victim.number))
            return
        time.sleep(0.02)
    report.send((None, None))


def _start_killer(url: str, study: str, after: int):
    receive, send = multiprocessing.get_context("fork").Pipe(duplex=False)
    killer = multiprocessing.get_context("fork").Process(target=_kill_one_running_worker, args=(url, study, after, send))
    killer.start()
    return killer, receive


def _trials(url: str, study: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=study, storage=SharedStorage(url).url).get_trials()


def _assert_each_proposal_once(trials, single) -> None:
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    evaluated = sorted(tuple(t.user_attrs["mix"]) for t in complete)
    assert len(complete) == BUDGET
    assert evaluated == sorted(tuple(p) for p in single.points.tolist())  # every proposal, each exactly once


def test_two_workers_with_one_killed_record_every_trial_once(postgres, single):
    study = f"kill-{uuid.uuid4().hex[:8]}"
    problem = placement_problem(baseline(), evaluator=SlowStub(optimum=OPTIMUM))
    killer, report = _start_killer(postgres, study, after=2)
    try:
        result = solve(problem, "qmc", budget=BUDGET, seed=SEED, storage=postgres, study_name=study, workers=2, **GUARD)
    finally:
        killer.join(timeout=60)
    pid, killed = report.recv()
    assert pid is not None, "no worker was caught evaluating a trial"
    assert sorted(result.extras["worker_exit_codes"]) == [-signal.SIGKILL, 0]
    trials = _trials(postgres, study)
    _assert_each_proposal_once(trials, single)
    failed = [t for t in trials if t.state == TrialState.FAIL]
    assert [t.number for t in failed] == [killed]  # the trial the killed worker was evaluating ...
    retried = [t for t in trials if t.system_attrs.get("failed_trial") == killed]
    assert [t.state for t in retried] == [TrialState.COMPLETE]  # ... was evaluated once more, by the survivor
    assert result.nfev == BUDGET and result.fun == single.fun
    np.testing.assert_array_equal(result.points[np.argmax(result.values)], single.x)
    np.testing.assert_allclose(result.x, single.x, rtol=0, atol=1e-15)  # the replayed best is re-scored (cleaned again)
    # resuming the finished study adds nothing and reports the same best
    again = solve(problem, "qmc", budget=BUDGET, seed=SEED, storage=postgres, study_name=study, workers=2, **GUARD)
    assert len(_trials(postgres, study)) == len(trials)
    assert again.nfev == BUDGET and again.extras["resumed_trials"] == BUDGET and again.fun == single.fun


def test_killing_the_only_worker_then_resuming_loses_and_repeats_nothing(postgres, single):
    study = f"resume-{uuid.uuid4().hex[:8]}"
    problem = placement_problem(baseline(), evaluator=SlowStub(optimum=OPTIMUM, delay=0.4))
    killer, report = _start_killer(postgres, study, after=3)
    try:
        with pytest.raises(WorkersFailed, match="run the same command again to resume"):
            solve(problem, "qmc", budget=BUDGET, seed=SEED, storage=postgres, study_name=study, workers=1, **GUARD)
    finally:
        killer.join(timeout=60)
    pid, killed = report.recv()
    assert pid is not None
    before = [t for t in _trials(postgres, study) if t.state == TrialState.COMPLETE]
    assert 3 <= len(before) < BUDGET
    resumed = solve(problem, "qmc", budget=BUDGET, seed=SEED, storage=postgres, study_name=study, workers=2, **GUARD)
    trials = _trials(postgres, study)
    _assert_each_proposal_once(trials, single)
    assert [t.number for t in trials if t.state == TrialState.FAIL] == [killed]
    assert resumed.extras["resumed_trials"] == len(before) and resumed.fun == single.fun


def test_joining_with_another_definition_is_refused(sqlite_dir):
    problem = placement_problem(baseline(), evaluator=StubModel(optimum=OPTIMUM))
    storage = str(sqlite_dir / "shared.db")
    first = solve(problem, "qmc", budget=2, seed=SEED, storage=storage, study_name="s", workers=1, **GUARD)
    assert first.nfev == 2
    with pytest.raises(ValueError, match="was created with budget = 2, but this run has budget = 3"):
        solve(problem, "qmc", budget=3, seed=SEED, storage=storage, study_name="s", workers=1, **GUARD)
    with pytest.raises(ValueError, match="was created with method = 'qmc', but this run has method = 'tpe'"):
        solve(problem, "tpe", budget=2, seed=SEED, storage=storage, study_name="s", workers=1, **GUARD)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_adaptive_sampler_budget_is_exact_and_workers_propose_apart(request, sqlite_dir, backend, workers):
    """TPE on a shared study: exactly ``budget`` COMPLETE trials (no worker asks past it), and no
    two workers share a sampler seed (their random start-up proposals all differ)."""
    storage = str(sqlite_dir / "tpe.db") if backend == "sqlite" else request.getfixturevalue("postgres")
    study = f"tpe-{uuid.uuid4().hex[:8]}"
    problem = placement_problem(baseline(), evaluator=StubModel(optimum=OPTIMUM))
    budget = 12
    result = solve(problem, "tpe", budget=budget, seed=SEED, storage=storage, study_name=study, workers=workers, **GUARD)
    trials = _trials(storage, study)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert len(complete) == budget and result.nfev == budget
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    params = [tuple(sorted(t.params.items())) for t in complete]
    assert len(set(params)) == len(params)  # distinct seeds: no proposal repeats across workers
    assert result.extras["worker_exit_codes"] == [0] * workers


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
def test_a_failed_trial_is_retried_once_even_when_two_processes_see_it(sqlite_dir):
    """Two storages (as two processes) failing the same trial: the storage lock lets one succeed, so one retry is enqueued."""
    shared = SharedStorage(str(sqlite_dir / "retry.db"), budget=BUDGET, **GUARD)
    first, second = shared.open(), shared.open()
    try:
        with quiet_optuna():
            trial = optuna.create_study(study_name="r", storage=first).ask({"x": optuna.distributions.FloatDistribution(0, 1)})
            studies = [optuna.load_study(study_name="r", storage=rdb) for rdb in (first, second)]
            told = 0
            for study in studies:
                try:
                    study.tell(trial.number, state=TrialState.FAIL)
                except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
                    continue
                told += 1
                retry_callback(1)(study, study.get_trials(deepcopy=False)[trial.number])
            retries = [t for t in studies[1].get_trials(deepcopy=False) if t.system_attrs.get("failed_trial") == trial.number]
        assert told == 1 and len(retries) == 1
    finally:
        close(first)
        close(second)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"workers": 2}, "workers=2 needs a storage"),
        ({"storage": "x.db", "heartbeat_interval": 5, "grace_period": 5}, "grace_period > heartbeat_interval must hold"),
        ({"storage": "x.db", "workers": -1}, "workers must be an integer >= 0, got -1"),
    ],
)
def test_bad_shared_options_are_refused(options, message):
    problem = placement_problem(baseline(), evaluator=StubModel())
    with pytest.raises(ValueError, match=message):
        solve(problem, "qmc", budget=4, seed=0, **options)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_trial_orphaned_before_its_first_heartbeat_is_retried(sqlite_dir, single):
    """A worker killed between ``ask`` and its first heartbeat leaves a RUNNING trial Optuna never calls stale."""
    problem = placement_problem(baseline(), evaluator=StubModel(optimum=OPTIMUM))
    storage = str(sqlite_dir / "orphan.db")
    solver = QmcSolver(storage=storage, study_name="o", workers=1, **GUARD)
    job = Job(solver, shared_storage(solver), problem, Projection(problem.constraints), _solver_seed(SEED), BUDGET)
    rdb = job.storage.open()
    orphan = open_study(job, rdb).ask()  # popped from the queue (RUNNING), no heartbeat, never evaluated
    close(rdb)
    time.sleep(GUARD["grace_period"] + 0.5)
    result = solve(problem, "qmc", budget=BUDGET, seed=SEED, storage=storage, study_name="o", workers=1, **GUARD)
    trials = _trials(storage, "o")
    _assert_each_proposal_once(trials, single)
    assert [t.number for t in trials if t.state == TrialState.FAIL] == [orphan.number]
    assert result.fun == single.fun and result.extras["failed_trials"] == 1


def _solver_seed(seed: int) -> int:
    """The sampler seed ``solve(..., seed=seed)`` hands to an Optuna solver."""
    return int(np.random.default_rng(seed).integers(2**31 - 1))


def test_storage_urls_get_the_psycopg2_driver_and_hide_passwords(tmp_path):
    assert SharedStorage("postgresql://u:secret@db:5432/s").url == "postgresql+psycopg2://u:secret@db:5432/s"
    assert SharedStorage("postgresql+psycopg2://u@db/s").url == "postgresql+psycopg2://u@db/s"
    assert SharedStorage(str(tmp_path / "a.db")).url == f"sqlite:///{tmp_path / 'a.db'}"
    assert redact("postgresql://u:secret@db:5432/s") == "postgresql://u:***@db:5432/s"
    with pytest.raises(ValueError, match="grace_period > heartbeat_interval must hold, but got grace_period=3"):
        SharedStorage("x.db", heartbeat_interval=3, grace_period=3)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_the_claim_step_keeps_the_budget_and_fails_only_expired_heartbeats(sqlite_dir):
    """``claim`` under the lock: no trial past the budget of COMPLETE + RUNNING, and of three running
    trials only the two whose heartbeat expired are failed and retried; the live one keeps running."""
    from edgeprefix.solvers.optuna_search import TpeSolver
    from edgeprefix.solvers.workers import DONE, WAIT, claim, load_or_create

    problem = placement_problem(baseline(), evaluator=StubModel(optimum=OPTIMUM))
    solver = TpeSolver(storage=str(sqlite_dir / "claim.db"), study_name="c", **GUARD)
    job = Job(solver, shared_storage(solver, 3), problem, Projection(problem.constraints), SEED, 3)
    rdb = job.storage.open()
    try:
        with quiet_optuna():
            study = load_or_create("c", rdb)
            study_id = rdb.get_study_id_from_name("c")
            space = solver.search_space(problem, job.projection)
            claimed = []
            for _ in range(3):
                trial, trial_id, _ = claim(study, job, rdb, study_id, "here:1")
                space.suggest(trial)
                claimed.append((trial, trial_id))
            assert claim(study, job, rdb, study_id, "here:1") == WAIT  # 0 COMPLETE + 3 RUNNING = budget
            live, live_id = claimed[0]
            for _ in range(int(GUARD["grace_period"] / 0.5) + 2):  # only the first trial keeps beating
                rdb.record_heartbeat(live_id)
                time.sleep(0.5)
            retry, _, _ = claim(study, job, rdb, study_id, "here:2")
            by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
            assert by_number[live.number].state == TrialState.RUNNING  # a live trial is never taken for dead
            assert {by_number[t.number].state for t, _ in claimed[1:]} == {TrialState.FAIL}
            assert by_number[retry.number].system_attrs["failed_trial"] in {t.number for t, _ in claimed[1:]}
            assert by_number[retry.number].params == by_number[by_number[retry.number].system_attrs["failed_trial"]].params
            for trial, _ in [(live, live_id), (retry, None)]:
                study.tell(trial, 0.5)
            other, _, _ = claim(study, job, rdb, study_id, "here:2")  # the second retry, still WAITING
            study.tell(other, 0.5)
            assert claim(study, job, rdb, study_id, "here:2") == DONE
    finally:
        close(rdb)
