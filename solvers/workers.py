"""Many processes, one Optuna study (docs/model.md §10.3): N local workers, other machines join.

:func:`run_shared` is what :class:`edgeprefix.solvers.optuna_search.OptunaSolver` runs when
``workers >= 1``:

1. open the study in the shared storage, or create it.  The creator records the study's
   definition (method, budget, decision names, seed) as study attributes and, for samplers
   whose proposals ignore the values (QMC), enqueues all ``budget`` proposals up front, the
   very points a single-process run with the same seed proposes.  A process that finds the
   study joins it after checking that its own definition matches.
2. fork ``workers`` processes; each loops over Optuna trials (``study.optimize`` with one
   trial at a time, so Optuna writes heartbeats and fails stale trials, whose copies the
   retry callback enqueues) until the budget of COMPLETE trials is met and nothing runs.
3. replay every COMPLETE trial, in trial-number order, into the tracker.

Trials are created, claimed (``WAITING → RUNNING``) and failed under one lock of the storage
(:class:`edgeprefix.solvers.storage.SerialRDBStorage`), so each proposal is evaluated by exactly
one worker, a dead worker's trial is retried once (never twice), and no trial is created once
``budget`` trials are COMPLETE, RUNNING or WAITING: the study ends with exactly ``budget``
COMPLETE trials.  Trials are evaluated cold (no warm start from a previous trial), so a value
does not depend on which worker computed it.  Each worker's sampler seed mixes the run's seed,
the worker's index, the host name and the process id, so no two workers propose alike.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import signal
import socket
import time
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.trial import TrialState

from edgeprefix.solvers.optuna_common import (
    COVERAGE_ATTR,
    FEASIBLE_ATTR,
    MIX_ATTR,
    quiet_optuna,
)
from edgeprefix.solvers.failures import WorkersFailed
from edgeprefix.solvers.persistence import fingerprint_difference, problem_fingerprint
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.storage import (
    WORKER_ATTR,
    BudgetReached,
    SharedStorage,
    close,
    redact,
    retry_callback,
)
from edgeprefix.solvers.tracking import Problem, Tracker

if TYPE_CHECKING:
    from edgeprefix.solvers.optuna_search import OptunaSolver

DEFINITION_PREFIX = "edgeprefix:"
READY_KEY = "edgeprefix:ready"
READY_TIMEOUT = 120.0  # seconds a joining process waits for the creator to enqueue


class QueueDrained(optuna.TrialPruned):
    """A worker asked for a trial after another one claimed the last enqueued proposal."""


class QueueSampler(optuna.samplers.RandomSampler):
    """Sampler of a study whose proposals are all enqueued: proposes nothing itself.

    A trial that reaches it was created because the queue emptied between a worker's check
    and its ask; it ends ``PRUNED`` without an evaluation (see :class:`QueueDrained`).
    """

    def sample_independent(self, study: Any, trial: Any, param_name: str, param_distribution: Any) -> Any:
        raise QueueDrained(f"no enqueued proposal left for parameter {param_name!r}")


@dataclass(frozen=True)
class Job:
    """Everything a worker process needs (inherited through ``fork``, never pickled)."""

    solver: OptunaSolver
    storage: SharedStorage
    problem: Problem
    projection: Projection
    seed: int
    budget: int

    @property
    def fixed(self) -> bool:
        """The proposals are all enqueued up front (value-independent sampler)."""
        return bool(self.solver.SHARED_CANDIDATES)

    def definition(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "method": self.solver.name,
            "budget": self.budget,
            "variables": list(self.problem.variable_names),
            "fingerprint": problem_fingerprint(self.problem, self.solver.name),
        }
        if self.fixed:
            values["seed"] = self.seed
        return values


def shared_storage(solver: OptunaSolver, budget: int | None = None) -> SharedStorage:
    assert solver.storage is not None
    return SharedStorage(solver.storage, solver.heartbeat_interval, solver.grace_period, solver.max_retry, budget)


def proposals(job: Job) -> list[dict[str, float]]:
    """The ``budget`` parameter sets the solver's sampler proposes with ``seed`` in a fresh study."""
    study = optuna.create_study(direction="maximize", sampler=job.solver.sampler(job.seed, job.problem, job.projection))
    space = job.solver.search_space(job.problem, job.projection)
    out = []
    for _ in range(job.budget):
        trial = study.ask()
        space.suggest(trial)
        out.append(dict(trial.params))
        study.tell(trial, 0.0)  # value-independent sampler: the value is never read
    return out


def open_study(job: Job, storage: optuna.storages.BaseStorage) -> optuna.Study:
    """Create the study (recording its definition, enqueuing fixed proposals) or join it."""
    name = job.solver.study_name
    try:
        study = optuna.create_study(study_name=name, storage=storage, direction="maximize")
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name=name, storage=storage)
        _check_definition(study, job)
        return study
    for key, value in job.definition().items():
        study.set_user_attr(DEFINITION_PREFIX + key, value)
    if job.fixed:
        for params in proposals(job):
            study.enqueue_trial(params)
    study.set_user_attr(READY_KEY, True)
    return study


def _check_definition(study: optuna.Study, job: Job) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not study.user_attrs.get(READY_KEY):
        if DEFINITION_PREFIX + "method" not in study.user_attrs:
            raise ValueError(
                f"study {job.solver.study_name!r} exists but was not created for shared workers "
                "(no edgeprefix:method attribute): choose another --study name"
            )
        if time.monotonic() > deadline:
            raise ValueError(f"study {job.solver.study_name!r}: its creator did not finish enqueuing within {READY_TIMEOUT:g} s")
        time.sleep(0.5)
    for key, value in job.definition().items():
        stored = study.user_attrs.get(DEFINITION_PREFIX + key)
        if stored != value:
            if key == "fingerprint" and isinstance(stored, dict):
                diff = "; ".join(fingerprint_difference(stored, value)[:3])
                raise ValueError(f"study {job.solver.study_name!r} searched another problem ({diff}): choose another --study name")
            raise ValueError(f"study {job.solver.study_name!r} was created with {key} = {stored!r}, but this run has {key} = {value!r}")


def _worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _sampler(job: Job, index: int, earlier: int) -> optuna.samplers.BaseSampler:
    if job.fixed:
        return QueueSampler()
    host = zlib.crc32(socket.gethostname().encode())  # host and pid: two commands on one host, or two hosts, never share a seed
    seed = int(np.random.SeedSequence([job.seed, index, earlier, host, os.getpid()]).generate_state(1)[0]) % (2**31 - 1)
    return job.solver.sampler(seed, job.problem, job.projection)


def _objective(job: Job) -> Any:
    space = job.solver.search_space(job.problem, job.projection)
    worker = _worker_id()

    def objective(trial: optuna.Trial) -> float:
        trial.set_user_attr(WORKER_ATTR, worker)
        score = job.problem.score(job.projection(space.suggest(trial)))  # cold: the value is the point's alone
        trial.set_user_attr(MIX_ATTR, [float(v) for v in score.mix])
        trial.set_user_attr(COVERAGE_ATTR, float(score.coverage))
        trial.set_user_attr(FEASIBLE_ATTR, bool(score.feasible))
        return float(score.value)

    return objective


def fail_orphans(study: optuna.Study, job: Job) -> int:
    """Fail (and enqueue a retry of) RUNNING trials whose worker died before reaching the objective.

    Optuna's stale check needs a heartbeat, and a worker writes its first one only after
    ``ask`` (which for TPE includes the relative sampling).  A trial RUNNING for longer than
    ``grace_period`` without the :data:`WORKER_ATTR` the objective sets first is such an orphan.
    Returns how many this process failed (the row lock lets one process fail each).
    """
    now = datetime.datetime.now()
    grace = datetime.timedelta(seconds=job.storage.grace_period)
    retry = retry_callback(job.storage.max_retry)
    failed = 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if WORKER_ATTR in trial.user_attrs or trial.datetime_start is None or now - trial.datetime_start <= grace:
            continue
        try:
            study.tell(trial.number, state=TrialState.FAIL)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            continue  # another process got there first
        retry(study, trial)
        failed += 1
    return failed


def states(study: optuna.Study) -> Counter[TrialState]:
    return Counter(t.state for t in study.get_trials(deepcopy=False))


def work(job: Job, index: int) -> int:
    """One worker: run trials of the shared study until it is done; returns the trials it ran."""
    storage = job.storage.open()
    name = job.solver.study_name
    earlier = len(optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False))
    study = optuna.load_study(study_name=name, storage=storage, sampler=_sampler(job, index, earlier))
    objective = _objective(job)
    poll = min(1.0, job.storage.heartbeat_interval / 2)
    ran = 0
    try:
        while True:
            optuna.storages.fail_stale_trials(study)
            fail_orphans(study, job)
            count = states(study)
            running = count[TrialState.RUNNING]
            open_slots = 0 if job.fixed else job.budget - count[TrialState.COMPLETE] - running
            if not count[TrialState.WAITING] and open_slots <= 0:
                if not running:
                    return ran
                time.sleep(poll)  # a running trial may yet die and come back as WAITING
                continue
            try:
                study.optimize(objective, n_trials=1, gc_after_trial=False)
            except BudgetReached:
                time.sleep(poll)  # the budget is taken by running trials: wait for them (or their retries)
                continue
            except (optuna.exceptions.UpdateFinishedTrialError, ValueError) as exc:
                # another worker finished this trial first (SQLite's claim is not atomic): its value stands
                if isinstance(exc, ValueError) and not str(exc).startswith("Cannot tell a"):
                    raise
            ran += 1
    finally:
        close(storage)


def _worker_main(job: Job, index: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it terminates the workers, the study keeps their trials
    with quiet_optuna():
        work(job, index)


def start_workers(job: Job, n: int) -> list[multiprocessing.process.BaseProcess]:
    """Fork ``n`` worker processes (the problem is inherited, not pickled)."""
    context = multiprocessing.get_context("fork")
    procs = [context.Process(target=_worker_main, args=(job, i), name=f"edgeprefix-worker-{i}", daemon=False) for i in range(n)]
    for proc in procs:
        proc.start()
    return procs


def collect(study: optuna.Study, tracker: Tracker) -> Counter[TrialState]:
    """Replay every COMPLETE trial (trial-number order) into ``tracker``; the study's state counts."""
    for trial in sorted(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.number):
        attrs = trial.user_attrs
        tracker.replay(attrs[MIX_ATTR], trial.value, attrs[COVERAGE_ATTR], attrs[FEASIBLE_ATTR])
    tracker.nit = tracker.nfev
    return states(study)


def run_shared(solver: OptunaSolver, problem: Problem, projection: Projection, tracker: Tracker, seed: int) -> Status:
    """Search ``problem`` with ``solver.workers`` local processes on the shared study (see module doc)."""
    if tracker.budget is None:
        raise ValueError(f"a shared study needs a budget of COMPLETE trials, got None (method {solver.name!r})")
    shared = shared_storage(solver, tracker.budget)
    job = Job(solver, shared, problem, projection, seed, tracker.budget)
    storage = shared.open()
    try:
        earlier = states(open_study(job, storage))[TrialState.COMPLETE]
    finally:
        close(storage)  # no pooled connection may cross the fork
    procs = start_workers(job, solver.workers)
    try:
        for proc in procs:
            proc.join()
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join()
    storage = shared.open()
    try:
        count = collect(optuna.load_study(study_name=solver.study_name, storage=storage), tracker)
    finally:
        close(storage)
    codes = [proc.exitcode for proc in procs]
    tracker.extras.update(
        workers=solver.workers, study=solver.study_name, resumed_trials=earlier, worker_exit_codes=codes,
        failed_trials=count[TrialState.FAIL], drained_trials=count[TrialState.PRUNED],
    )
    done = count[TrialState.COMPLETE] >= job.budget and not count[TrialState.WAITING] and not count[TrialState.RUNNING]
    if not done:
        raise WorkersFailed(
            f"every local worker ended (exit codes {codes}) but study {solver.study_name!r} in {redact(shared.url)} holds "
            f"{count[TrialState.COMPLETE]} of {job.budget} complete trials: run the same command again to resume it"
        )
    return Status.BUDGET_EXHAUSTED
