"""Optuna storages that many processes share: heartbeats and retried dead trials (docs/model.md §10.3).

A running trial writes a heartbeat every ``heartbeat_interval`` seconds.  A trial whose
heartbeat is older than ``grace_period`` belongs to a dead worker: the next worker that starts
a trial marks it ``FAIL`` and Optuna's retry callback enqueues a copy with the same
parameters, so the point is evaluated once more and no proposal is lost.  Works for SQLite
files (one machine) and PostgreSQL URLs (many machines).
"""

from __future__ import annotations

import copy
import inspect
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from edgeprefix.solvers.optuna_common import open_rdb, redact, storage_url  # noqa: F401  (redact is re-exported)

WORKER_ATTR = "worker"  # user attribute: host:pid of the process evaluating the trial (not copied to retries)


def retry_callback(max_retry: int) -> Callable[[optuna.Study, FrozenTrial], None]:
    """Optuna's retry callback (``RetryHeartbeatStaleTrialCallback``, formerly ``RetryFailedTrialCallback``).

    The copy it enqueues keeps the dead trial's parameters and user attributes except
    :data:`WORKER_ATTR`, which the next evaluating process sets anew.
    """
    cls = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or optuna.storages.RetryFailedTrialCallback
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = cls(max_retry=max_retry)

    def callback(study: optuna.Study, trial: FrozenTrial) -> None:
        trial = copy.deepcopy(trial)
        trial.user_attrs = {k: v for k, v in trial.user_attrs.items() if k != WORKER_ATTR}
        try:
            retry(study, trial)
        except BudgetReached:
            pass  # a new trial took the failed one's place: the budget stays exact

    return callback


class BudgetReached(optuna.exceptions.OptunaError):
    """Creating one more trial would exceed the study's budget of COMPLETE + RUNNING + WAITING trials."""


class _FileLock:
    """An exclusive ``flock`` on a file beside the SQLite database (SQLite studies live on one host)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __enter__(self) -> None:
        import fcntl

        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        import fcntl

        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)


class _AdvisoryLock:
    """A PostgreSQL session advisory lock, held on a connection of its own (all hosts see it)."""

    KEY = 0x6564_6765  # "edge"

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def __enter__(self) -> None:
        import sqlalchemy

        self._conn = self.engine.connect()
        self._conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": self.KEY})

    def __exit__(self, *exc: object) -> None:
        import sqlalchemy

        try:
            self._conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": self.KEY})
        finally:
            self._conn.close()


class SerialRDBStorage(optuna.storages.RDBStorage):
    """RDB storage whose trial creation and state changes are serialised across processes and hosts.

    SQLite ignores ``SELECT … FOR UPDATE``, so two processes could both claim one enqueued trial,
    both fail one stale trial (and enqueue two retries) or both ask for the last slot of the budget.
    Here every creation and state change runs under one lock (``flock`` beside a SQLite file, a
    PostgreSQL advisory lock), and a trial that would be RUNNING or WAITING is created only while
    fewer than ``budget`` trials are COMPLETE, RUNNING or WAITING (:class:`BudgetReached` otherwise),
    so a study ends with exactly ``budget`` COMPLETE trials.
    """

    def __init__(self, url: str, *, budget: int | None = None, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.budget = budget
        self._lock_factory = (lambda: _FileLock(url.split(":///", 1)[1] + ".lock")) if url.startswith("sqlite") else (
            lambda: _AdvisoryLock(self.engine))

    def _create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> FrozenTrial:
        # Optuna's cache layer calls this (not create_new_trial), so the check lives here.
        with self._lock_factory():
            live = template_trial is None or template_trial.state in (TrialState.RUNNING, TrialState.WAITING)
            if live and self.budget is not None:
                count = len(self.get_all_trials(study_id, deepcopy=False, states=LIVE_STATES))
                if count >= self.budget:
                    raise BudgetReached(f"the study already holds {count} of {self.budget} complete, running or waiting trials")
            return super()._create_new_trial(study_id, template_trial)

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Any = None) -> bool:
        with self._lock_factory():
            return super().set_trial_state_values(trial_id, state, values)


LIVE_STATES = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)


@dataclass(frozen=True)
class SharedStorage:
    """Where a shared study lives and how its running trials are watched.

    Parameters
    ----------
    location : SQLite file path, ``sqlite:///...`` or ``postgresql://user:password@host:port/db``.
    heartbeat_interval : seconds between heartbeats of a running trial.
    grace_period : seconds without a heartbeat after which a running trial is dead.
    max_retry : times a dead trial is enqueued again (once by default: one retry per failure, never two).
    budget : COMPLETE + RUNNING + WAITING trials the study may hold (``None``: no cap).
    """

    location: str
    heartbeat_interval: int = 5
    grace_period: int = 20
    max_retry: int = 1
    budget: int | None = None

    def __post_init__(self) -> None:
        if self.grace_period <= self.heartbeat_interval:
            raise ValueError(
                f"grace_period > heartbeat_interval must hold, but got grace_period={self.grace_period}, "
                f"heartbeat_interval={self.heartbeat_interval}"
            )

    @property
    def url(self) -> str:
        """SQLAlchemy URL (see :func:`edgeprefix.solvers.optuna_common.storage_url`)."""
        return storage_url(self.location)

    def open(self) -> optuna.storages.RDBStorage:
        """A new RDB storage with heartbeats and the retry callback (one per process: never fork one)."""
        engine: dict[str, Any] = {"pool_pre_ping": True} if self.url.startswith("postgresql") else {}
        names = inspect.signature(optuna.storages.RDBStorage).parameters
        key = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in names else "failed_trial_callback"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats are "experimental" since 2.9
            return open_rdb(
                self.url,
                cls=SerialRDBStorage,
                budget=self.budget,
                engine_kwargs=engine,
                heartbeat_interval=self.heartbeat_interval,
                grace_period=self.grace_period,
                **{key: retry_callback(self.max_retry)},
            )


def close(storage: optuna.storages.RDBStorage) -> None:
    """Drop the pooled connections of ``storage`` (before forking, and when done)."""
    storage.remove_session()
    storage.engine.dispose()
