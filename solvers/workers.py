"""Many processes, one Optuna study (docs/model.md §10.3): N local workers, other machines join.

:func:`run_shared` is what :class:`edgeprefix.solvers.optuna_search.OptunaSolver` runs when
``workers >= 1``:

1. open the study in the shared storage, or create it.  The creator records the study's
   definition (method, budget, decision names, seed) as study attributes and, for samplers
   whose proposals ignore the values (QMC), enqueues all ``budget`` proposals up front, the
   very points a single-process run with the same seed proposes.  A process that finds the
   study joins it after checking that its own definition matches.
2. fork ``workers`` processes; each loops over trials of the study (:func:`work`) until the
   budget of COMPLETE trials is met and nothing runs.  Without ``--workers`` the calling process
   runs the same loop itself (:func:`run_here`).
3. replay every COMPLETE trial, in trial-number order, into the tracker.

Each loop step holds the study's claim lock (:meth:`edgeprefix.solvers.storage.SharedStorage.lock`)
while it fails the trials whose heartbeat expired (Optuna's public ``fail_stale_trials``; the retry
callback enqueues their copies), counts COMPLETE, RUNNING and WAITING trials, and creates or
claims a trial (``ask``, its first heartbeat and the :data:`WORKER_ATTR` claim mark) only while
a proposal waits or fewer than ``budget`` trials are COMPLETE or RUNNING; telling a finished
trial takes the lock too.  A trial is evaluated while a thread records its heartbeat.  So each
proposal is evaluated by one process, another live process's RUNNING trial is never taken for
dead (only an expired heartbeat, or no claim mark ``grace_period`` after its start, makes a
trial dead), a dead trial is retried once (never twice), and the study ends with exactly
``budget`` COMPLETE trials whatever the number of processes.  Trials are evaluated cold (no warm
start from a previous trial), so a value does not depend on which process computed it.  Each
process's sampler seed mixes the run's seed, the worker's index, the host name and the process
id, so no two propose alike.
"""

from __future__ import annotations

import contextlib
import datetime
import multiprocessing
import os
import signal
import socket
import sys
import threading
import time
import warnings
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.trial import TrialState

from edgeprefix.solvers.failures import WorkersFailed
from edgeprefix.solvers.optuna_common import (
    COVERAGE_ATTR,
    FEASIBLE_ATTR,
    MIX_ATTR,
    quiet_optuna,
)
from edgeprefix.solvers.persistence import FINGERPRINT_ATTR, check_fingerprint, fingerprint_difference, problem_fingerprint
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Progress, Status
from edgeprefix.solvers.storage import (
    WORKER_ATTR,
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

    Workers claim trials under the study's claim lock and ask only while a proposal waits, so a
    trial never reaches it; if one did, it would end without an evaluation (:class:`QueueDrained`).
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
    queued: bool = True  # enqueue a value-independent sampler's proposals up front (``--workers`` studies)

    @property
    def fixed(self) -> bool:
        """The proposals are all enqueued up front (value-independent sampler)."""
        return self.queued and bool(self.solver.SHARED_CANDIDATES)

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
        deadline = time.monotonic() + 10  # a command that has just created the study records what it is about next
        while not {DEFINITION_PREFIX + "method", FINGERPRINT_ATTR} & set(study.user_attrs) and time.monotonic() < deadline:
            time.sleep(0.2)
        if DEFINITION_PREFIX + "method" not in study.user_attrs and FINGERPRINT_ATTR in study.user_attrs and not job.fixed:
            check_fingerprint(study, job.definition()["fingerprint"], redact(job.storage.url))  # a study of plain runs: join it
            return study
        _check_definition(study, job)
        return study
    study.set_user_attr(FINGERPRINT_ATTR, job.definition()["fingerprint"])  # plain runs of the same problem may join
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
                if not diff:
                    continue  # only the instance's name or metadata changed
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


def fail_orphans(study: optuna.Study, job: Job, trials: Any = None) -> int:
    """Fail (and enqueue a retry of) RUNNING trials that no live process claimed.

    A process claims a trial (``ask``, its first heartbeat, :data:`WORKER_ATTR`) in one hold of the
    claim lock, so a RUNNING trial without the attribute, seen while holding the lock, was asked by
    a process that died before finishing its claim (or by another program).  Optuna never calls
    such a trial stale (it has no heartbeat); one older than ``grace_period`` is failed here.
    Call with the claim lock held (``trials``: the study's trials, if just read).  Returns how many this process failed.
    """
    now = datetime.datetime.now()
    grace = datetime.timedelta(seconds=job.storage.grace_period)
    retry = retry_callback(job.storage.max_retry)
    failed = 0
    running = (
        study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if trials is None
        else [t for t in trials if t.state == TrialState.RUNNING]
    )
    for trial in running:
        if WORKER_ATTR in trial.user_attrs or trial.datetime_start is None or now - trial.datetime_start <= grace:
            continue
        try:
            study.tell(trial.number, state=TrialState.FAIL)
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError):
            continue  # finished meanwhile
        retry(study, trial)
        failed += 1
    return failed


def states(study: optuna.Study) -> Counter[TrialState]:
    return Counter(t.state for t in study.get_trials(deepcopy=False))


class Heartbeat:
    """Records a trial's heartbeat every ``interval`` seconds on a daemon thread (Optuna's public
    ``record_heartbeat``) while the trial is evaluated."""

    def __init__(self, storage: optuna.storages.RDBStorage, trial_id: int, interval: float) -> None:
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="edgeprefix-heartbeat", daemon=True)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.storage.record_heartbeat(self.trial_id)
            except Exception:  # a lost connection: the trial goes stale and is retried elsewhere
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


WAIT, DONE = "wait", "done"


def claim(study: optuna.Study, job: Job, storage: optuna.storages.RDBStorage, study_id: int, worker: str) -> Any:
    """Under the claim lock: fail dead trials, then create or claim one trial if the budget allows.

    Returns ``(trial, trial_id, complete)``, :data:`WAIT` (the budget is taken by running trials, which may
    yet die and come back) or :data:`DONE` (``budget`` COMPLETE trials; with enqueued proposals:
    all of them finished).
    """
    optuna.storages.fail_stale_trials(study)  # only trials whose heartbeat expired, with their retries
    trials = study.get_trials(deepcopy=False)
    count = Counter(t.state for t in trials)
    if fail_orphans(study, job, trials):
        count = states(study)
    complete, waiting, running = count[TrialState.COMPLETE], count[TrialState.WAITING], count[TrialState.RUNNING]
    if job.fixed:  # every proposal was enqueued: run them all
        if not waiting:
            return WAIT if running else DONE
    elif complete >= job.budget:
        return DONE  # (another command with a larger budget may go on)
    elif not waiting and complete + running >= job.budget:
        return WAIT
    trial = study.ask()  # claims a WAITING trial first, else creates one
    trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
    storage.record_heartbeat(trial_id)
    trial.set_user_attr(WORKER_ATTR, worker)
    return trial, trial_id, complete


class Told:
    """What :func:`work` reports after each trial it finished: the study's COMPLETE trials and this one's score."""

    def __init__(self, complete: int, score: Any) -> None:
        self.complete, self.score = complete, score


@contextlib.contextmanager
def quiet_database() -> Iterator[None]:
    """Optuna at ERROR level: it logs a database error it then works around; if the database is
    gone, :func:`database_lost` says so in one line."""
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(verbosity)


def work(job: Job, index: int, on_told: Callable[[Told], bool] | None = None, storage: Any = None) -> int:
    """One worker: run trials of the shared study until it is done; returns the trials it ran.

    ``on_told`` is called after each trial this process completed; ``True`` stops the loop.
    ``storage``: an open storage to use (else one is opened and closed here).
    """
    own = storage is None
    storage = job.storage.open() if own else storage
    try:
        with quiet_database(), warnings.catch_warnings():
            # Optuna warns that heartbeats are meant for Study.optimize; this loop records them itself (Heartbeat)
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
            return _trials_loop(job, index, storage, on_told)
    finally:
        if own:
            close(storage)


def _trials_loop(job: Job, index: int, storage: Any, on_told: Callable[[Told], bool] | None) -> int:
    name = job.solver.study_name
    earlier = len(optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False))
    study = optuna.load_study(study_name=name, storage=storage, sampler=_sampler(job, index, earlier))
    study_id = storage.get_study_id_from_name(name)
    lock = job.storage.lock(storage)
    space = job.solver.search_space(job.problem, job.projection)
    worker = _worker_id()
    poll = min(1.0, job.storage.heartbeat_interval / 2)
    ran = 0
    while True:
        with lock:
            claimed = claim(study, job, storage, study_id, worker)
        if claimed == DONE:
            return ran
        if claimed == WAIT:
            time.sleep(poll)  # a running trial may yet die and come back as WAITING
            continue
        trial, trial_id, complete = claimed
        try:
            with Heartbeat(storage, trial_id, job.storage.heartbeat_interval):
                score = job.problem.score(job.projection(space.suggest(trial)))  # cold: the value is the point's alone
        except QueueDrained:
            with lock:
                study.tell(trial, state=TrialState.PRUNED)
            continue
        except BaseException:
            with lock, contextlib.suppress(Exception):
                study.tell(trial, state=TrialState.FAIL)  # frees its slot (no retry: the point itself failed)
            raise
        with lock:
            try:
                trial.set_user_attr(MIX_ATTR, [float(v) for v in score.mix])
                trial.set_user_attr(COVERAGE_ATTR, float(score.coverage))
                trial.set_user_attr(FEASIBLE_ATTR, bool(score.feasible))
                study.tell(trial, float(score.value))
            except (optuna.exceptions.UpdateFinishedTrialError, ValueError) as exc:
                # failed as stale while this process was stalled (its retry recomputes the point)
                if isinstance(exc, ValueError) and not str(exc).startswith("Cannot tell a"):
                    raise
                continue
        ran += 1
        if on_told is not None and on_told(Told(complete + 1, score)) is True:  # at least: others may have told too
            return ran


EXIT_DATABASE = 3  # a worker's exit code when the study database stopped answering


def database_errors() -> tuple[type[BaseException], ...]:
    """What an unreachable study database raises through Optuna (SQLAlchemy's errors, Optuna's wrapper)."""
    import sqlalchemy.exc

    return (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError)


def database_lost(exc: BaseException, url: str, codes: Any = None) -> WorkersFailed:
    """One line for a study database that went away (its URL redacted, no traceback)."""
    from edgeprefix.solvers.optuna_common import scrub

    cause = exc.__cause__ or exc
    text = scrub(str(getattr(cause, "orig", None) or cause), url).strip()
    reason = text.splitlines()[0] if text else type(cause).__name__
    workers = f" (worker exit codes {codes})" if codes is not None else ""
    return WorkersFailed(
        f"the study database {redact(url)} stopped answering{workers}: {reason[:200]}; "
        "its finished trials are kept: run the same command again once it is back to resume"
    )


def _worker_main(job: Job, index: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it terminates the workers, the study keeps their trials
    with quiet_optuna():
        try:
            work(job, index)
        except database_errors():
            sys.exit(EXIT_DATABASE)  # the parent says why, in one line (no traceback per worker)


def start_workers(job: Job, n: int) -> list[multiprocessing.process.BaseProcess]:
    """Fork ``n`` worker processes (the problem is inherited, not pickled)."""
    context = multiprocessing.get_context("fork")
    procs: list[multiprocessing.process.BaseProcess] = [
        context.Process(target=_worker_main, args=(job, i), name=f"edgeprefix-worker-{i}", daemon=False) for i in range(n)
    ]
    for proc in procs:
        proc.start()
    return procs


def collect(study: optuna.Study, tracker: Tracker) -> Counter[TrialState]:
    """Replay every COMPLETE trial (trial-number order) into ``tracker``; the study's state counts."""
    for trial in sorted(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)), key=lambda t: t.number):
        attrs = trial.user_attrs
        assert trial.value is not None  # a COMPLETE trial has its value
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
    codes = [proc.exitcode for proc in procs]
    try:
        storage = shared.open()
        try:
            with quiet_database():
                count = collect(optuna.load_study(study_name=solver.study_name, storage=storage), tracker)
        finally:
            close(storage)
    except (ValueError, *database_errors()) as exc:  # type: ignore[misc]  # a tuple built at run time
        if EXIT_DATABASE not in codes and not isinstance(exc, database_errors()) and "cannot open the study database" not in str(exc):
            raise
        raise database_lost(exc, shared.url, codes) from None
    tracker.extras.update(
        workers=solver.workers,
        study=solver.study_name,
        resumed_trials=earlier,
        worker_exit_codes=codes,
        failed_trials=count[TrialState.FAIL],
        drained_trials=count[TrialState.PRUNED],
    )
    done = count[TrialState.COMPLETE] >= job.budget and not (job.fixed and (count[TrialState.WAITING] or count[TrialState.RUNNING]))
    if not done:
        raise WorkersFailed(
            f"every local worker ended (exit codes {codes}) but study {solver.study_name!r} in {redact(shared.url)} holds "
            f"{count[TrialState.COMPLETE]} of {job.budget} complete trials: run the same command again to resume it"
        )
    return Status.BUDGET_EXHAUSTED


def run_here(solver: OptunaSolver, problem: Problem, projection: Projection, tracker: Tracker, seed: int) -> Status:
    """Search ``problem`` in this process on a study in a SQLite or PostgreSQL storage (``workers=0``).

    The same claim loop as a worker (:func:`work`), so any number of such commands, with or
    without ``--workers``, share the study and end it with exactly ``budget`` COMPLETE trials
    (each command stops at its own budget).  The tracker's callback sees each trial this process
    finishes (``nfev`` counts the study's COMPLETE trials) and may stop the search; at the end every
    COMPLETE trial of the study is replayed into the tracker, in trial-number order.
    """
    if tracker.budget is None:
        raise ValueError(f"a stored study needs a budget of COMPLETE trials, got None (method {solver.name!r})")
    shared = shared_storage(solver, tracker.budget)
    job = Job(solver, shared, problem, projection, seed, tracker.budget, queued=False)
    storage = shared.open()
    try:
        study = load_or_create(solver.study_name, storage)
        check_fingerprint(study, problem_fingerprint(problem, solver.name), redact(shared.url))
        earlier = states(study)[TrialState.COMPLETE]
        stopped: list[bool] = [False]
        best: list[Any] = [None]  # the best score told so far

        def on_told(told: Told) -> bool:
            score = told.score
            if best[0] is None or score.value > best[0].value:
                best[0] = score
            if tracker.callback is None:
                return False
            progress = Progress(
                nfev=told.complete,
                budget=tracker.budget,
                best_value=best[0].value,
                best_coverage=best[0].coverage,
                best_x=best[0].mix,
                value=score.value,
                feasible=score.feasible,
            )
            stopped[0] = tracker.callback(progress) is True
            return stopped[0]

        with quiet_database():
            work(job, 0, on_told=on_told, storage=storage)
            count = collect(optuna.load_study(study_name=solver.study_name, storage=storage), tracker)
    except database_errors() as exc:
        raise database_lost(exc, shared.url) from None
    finally:
        close(storage)
    tracker.extras.update(study=solver.study_name, resumed_trials=earlier, failed_trials=count[TrialState.FAIL])
    return Status.CALLBACK_STOP if stopped[0] else Status.BUDGET_EXHAUSTED


def load_or_create(name: str, storage: optuna.storages.BaseStorage) -> optuna.Study:
    """Load study ``name``, or create it (a process racing to create it loads the winner's)."""
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True)
