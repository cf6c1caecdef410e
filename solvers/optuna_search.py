"""Optuna samplers (TPE, CMA-ES, QMC) driven through ask/tell (docs/model.md §10.3).

A sampler proposes a point of its search space (:class:`~edgeprefix.solvers.optuna_common.SearchSpace`:
box, simplex or softmax coordinates of the shares); the evaluated point is its projection
``Proj(w)`` onto the linear constraints (the samplers ignore constraints).  With ``storage`` (a SQLite file path or a
database URL) the study persists after every trial and is shared by every process that runs on
it, with an exact budget (:func:`edgeprefix.solvers.workers.run_here`): a killed run resumes
with every completed evaluation kept (replayed into the history, not re-scored) and a trial it
left running retried once its heartbeat has expired.  A ``*.journal`` storage is written in
batches by one process at a time.  With ``workers >= 1`` the study is shared by that many
processes here (and by any other machine that joins it), see :mod:`edgeprefix.solvers.workers`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import optuna
from optuna.trial import TrialState

from edgeprefix.placement.errors import plain
from edgeprefix.solvers.base import Solver
from edgeprefix.solvers.optuna_common import (
    COVERAGE_ATTR,
    FEASIBLE_ATTR,
    MIX_ATTR,
    SPACES,
    SearchSpace,
    check_study_name,
    quiet_optuna,
    storage_url,
)
from edgeprefix.solvers.persistence import (
    JOURNAL_SUFFIX,
    BatchedStudy,
    JournalStudy,
    check_fingerprint,
    problem_fingerprint,
    state_budget,
)
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.tracking import Problem, StopSearch, Tracker
from edgeprefix.solvers.workers import load_or_create, run_here, run_shared


@dataclass(frozen=True)
class OptunaSolver(Solver):
    """Base of the Optuna methods.

    Parameters
    ----------
    storage : SQLite file path or database URL holding the study, written trial by trial and shared
        by any number of processes (:func:`edgeprefix.solvers.workers.run_here`); or a ``*.journal``
        file, written in batches by one process at a time (:class:`edgeprefix.solvers.persistence.BatchedStudy`,
        :class:`~edgeprefix.solvers.persistence.JournalStudy`); ``None``: in memory, nothing resumes.  A stored study is resumed only by a run of the same
        problem (:func:`edgeprefix.solvers.persistence.problem_fingerprint`).
    study_name : name of the study inside the storage.
    workers : ``0`` runs the ask/tell loop in this process; ``N >= 1`` starts ``N`` worker
        processes on a shared study (needs ``storage``), see :mod:`edgeprefix.solvers.workers`.
    heartbeat_interval, grace_period : seconds between heartbeats of a running trial, and
        without one before the trial counts as dead (shared studies only).
    max_retry : times a dead trial is proposed again (shared studies only; once by default).
    space : search space of the proposals, ``box``, ``simplex`` or ``softmax`` (``None``: the
        method's default, :attr:`DEFAULT_SPACE`).
    """

    RESUMABLE: ClassVar[bool] = True
    SHARED_CANDIDATES: ClassVar[bool] = False  # proposals ignore the values: a shared study enqueues them all
    DEFAULT_SPACE: ClassVar[str] = "box"
    storage: str | None = None
    study_name: str = "edgeprefix"
    workers: int = 0
    heartbeat_interval: int = 5
    grace_period: int = 20
    max_retry: int = 1
    space: str | None = None

    def __post_init__(self) -> None:
        if self.space is not None and self.space not in SPACES:
            raise ValueError(f"Optuna option space must be one of {list(SPACES)}, got {self.space!r}")
        for key, least in (("workers", 0), ("heartbeat_interval", 1), ("grace_period", 1), ("max_retry", 0)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"Optuna option {key} must be an integer >= {least}, got {plain(value)}")
        if self.grace_period <= self.heartbeat_interval:
            raise ValueError(
                f"grace_period > heartbeat_interval must hold, but got grace_period={self.grace_period}, "
                f"heartbeat_interval={self.heartbeat_interval}"
            )
        if self.workers and self.storage is None:
            raise ValueError(f"workers={self.workers} needs a storage the processes share (a SQLite path or a database URL), got None")
        check_study_name(self.study_name)
        if self.workers and str(self.storage).endswith(JOURNAL_SUFFIX):
            raise ValueError(
                f"workers={self.workers} needs a SQLite or PostgreSQL storage, got the journal {self.storage!r} (Optuna's journal "
                "storage keeps no heartbeats, so a dead worker cannot be told from a slow one; one process at a time uses a journal)"
            )
        if self.storage is not None and not str(self.storage).endswith(JOURNAL_SUFFIX):
            storage_url(self.storage)  # a bad scheme or a bare word fails here, before any work

    def sampler(self, seed: int, problem: Problem, projection: Projection) -> optuna.samplers.BaseSampler:
        raise NotImplementedError

    def search_space(self, problem: Problem, projection: Projection) -> SearchSpace:
        """The space this method proposes in (``space`` or the method's default)."""
        return SearchSpace.of(self.space or self.DEFAULT_SPACE, problem, projection)

    def run(self, problem: Problem, projection: Projection, tracker: Tracker, rng: np.random.Generator) -> Status:
        seed = int(rng.integers(2**31 - 1))
        if self.workers:
            with quiet_optuna():
                return run_shared(self, problem, projection, tracker, seed)
        with quiet_optuna():
            if self.storage is None:
                study = optuna.create_study(direction="maximize", sampler=self.sampler(seed, problem, projection))
                return self._loop(study, problem, projection, tracker)
            if not str(self.storage).endswith(JOURNAL_SUFFIX):
                return run_here(self, problem, projection, tracker, seed)  # SQLite / PostgreSQL: a shared study
            with JournalStudy(self.storage) as storage:
                stored = load_or_create(self.study_name, storage)
                check_fingerprint(stored, problem_fingerprint(problem, self.name), str(self.storage))
                earlier = len(stored.get_trials(deepcopy=False))
                sampler = self.sampler((seed + earlier) % (2**31 - 1), problem, projection)  # a resumed run draws anew
                mirror = BatchedStudy.open(stored, sampler)
                self._resume(mirror.working, tracker)
                state_budget(stored, tracker.budget, tracker.replayed, f"the study in {self.storage}")
                try:
                    return self._loop(mirror.working, problem, projection, tracker, after_trial=mirror.maybe_flush)
                finally:
                    mirror.flush()  # also on a stop, an error or Ctrl-C: every finished trial is kept

    @staticmethod
    def _resume(study: optuna.Study, tracker: Tracker) -> None:
        for trial in study.get_trials(deepcopy=False):
            if trial.state == TrialState.COMPLETE and MIX_ATTR in trial.user_attrs:
                attrs = trial.user_attrs
                assert trial.value is not None  # a COMPLETE trial has its value
                tracker.replay(attrs[MIX_ATTR], trial.value, attrs[COVERAGE_ATTR], attrs[FEASIBLE_ATTR])
            elif trial.state in (TrialState.RUNNING, TrialState.WAITING) and trial.params:
                if trial.state == TrialState.RUNNING:  # left behind by a killed run: propose it again
                    study.tell(trial.number, state=TrialState.FAIL)
                    study.enqueue_trial(trial.params)
        tracker.extras["resumed_trials"] = tracker.replayed

    def batch_size(self, study: optuna.Study) -> int:
        """Trials asked before any is told (and scored in one batched evaluation, docs/model.md §16).

        One by default: TPE's next proposal depends on every value so far, and a CMA-ES generation
        asked at once was measured no faster (Optuna re-tells its optimiser at every proposal
        while the generation is pending, which costs what the batch saves).
        """
        return 1

    def _loop(self, study: optuna.Study, problem: Problem, projection: Projection, tracker: Tracker, after_trial: Any = None) -> Status:
        space = self.search_space(problem, projection)
        tracker.extras["space"] = space.kind
        while tracker.remaining is None or tracker.remaining > 0:
            size = self.batch_size(study) if tracker.remaining is None else min(self.batch_size(study), tracker.remaining)
            trials = [study.ask() for _ in range(size)]
            points = [projection(space.suggest(trial)) for trial in trials]
            recorded = tracker.nfev
            try:
                scores = [tracker.evaluate(points[0])] if size == 1 else tracker.evaluate_many(points)
            except StopSearch as stop:
                for j, trial in enumerate(trials):  # the callback stopped the search after point j
                    k = recorded + j
                    if stop.status is Status.CALLBACK_STOP and k < tracker.nfev:
                        self._tell(study, trial, tracker.points[k], tracker.values[k], tracker.coverages[k], tracker.feasible[k])
                    else:
                        study.tell(trial, state=TrialState.FAIL)
                raise
            for trial, score in zip(trials, scores):
                self._tell(study, trial, score.mix, score.value, score.coverage, score.feasible)
                if after_trial is not None:
                    after_trial()
            tracker.nit += 1
        return Status.BUDGET_EXHAUSTED

    @staticmethod
    def _tell(study: optuna.Study, trial: optuna.Trial, x: np.ndarray, value: float, coverage: float, feasible: bool) -> None:
        trial.set_user_attr(MIX_ATTR, [float(v) for v in x])
        trial.set_user_attr(COVERAGE_ATTR, float(coverage))
        trial.set_user_attr(FEASIBLE_ATTR, bool(feasible))
        study.tell(trial, float(value))


@dataclass(frozen=True)
class TpeSolver(OptunaSolver):
    """Tree-structured Parzen estimator (multivariate) in softmax coordinates, ``n_startup_trials``
    random proposals first (40: with 10, 1–2 seeds in 5 settled on a wrong face of medium_forest or
    ended 0.007–0.014 short on mooncake_large at 1.3 times its load; benchmarks/README.md)."""

    name: ClassVar[str] = "tpe"
    DEFAULT_SPACE: ClassVar[str] = "softmax"
    n_startup_trials: int = 40

    def sampler(self, seed: int, problem: Problem, projection: Projection) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=self.n_startup_trials, multivariate=True)


@dataclass(frozen=True)
class CmaEsSolver(OptunaSolver):
    """CMA-ES in softmax coordinates from their centre, the uniform mix (Optuna's default start and
    step), ``n_startup_trials`` random first.  The box (``space="box"``) stalls on faces with few
    profiles: 0.008 short of the concentrated optimum of mooncake_large at 1.3 times its load."""

    name: ClassVar[str] = "cmaes"
    DEFAULT_SPACE: ClassVar[str] = "softmax"
    n_startup_trials: int = 1

    def sampler(self, seed: int, problem: Problem, projection: Projection) -> optuna.samplers.BaseSampler:
        return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=self.n_startup_trials)


@dataclass(frozen=True)
class QmcSolver(OptunaSolver):
    """Scrambled Sobol quasi-random proposals in softmax coordinates (in the box they crowd onto
    low-dimensional faces: 0.016 short on mooncake_large at 1.3 times its load)."""

    name: ClassVar[str] = "qmc"
    DEFAULT_SPACE: ClassVar[str] = "softmax"
    SHARED_CANDIDATES: ClassVar[bool] = True

    def sampler(self, seed: int, problem: Problem, projection: Projection) -> optuna.samplers.BaseSampler:
        return optuna.samplers.QMCSampler(qmc_type="sobol", scramble=True, seed=seed)

    def batch_size(self, study: optuna.Study) -> int:
        """QMC proposals ignore the values: 16 at a time."""
        return 16
