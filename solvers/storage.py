"""Optuna storages that many processes share: heartbeats, retried dead trials, one claim lock (docs/model.md §10.3).

A running trial writes a heartbeat every ``heartbeat_interval`` seconds (Optuna's public
``record_heartbeat``).  A trial whose heartbeat is older than ``grace_period`` belongs to a dead
process: Optuna's :func:`optuna.storages.fail_stale_trials` marks it ``FAIL`` and the retry
callback enqueues a copy with the same parameters, so the point is evaluated once more and no
proposal is lost.  Works for SQLite files (one machine) and PostgreSQL URLs (many machines).

:meth:`SharedStorage.lock` is the study's claim lock (an ``flock`` beside a SQLite file, a
PostgreSQL advisory lock seen by every host): :mod:`edgeprefix.solvers.workers` fails stale
trials, counts the budget, creates or claims a trial and tells a finished one only while holding
it, so no two processes claim one trial, fail one stale trial twice or take the last slot of
the budget together.  Everything goes through Optuna's public storage API.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from edgeprefix.solvers.optuna_common import open_rdb, redact, storage_url  # noqa: F401  (redact is re-exported)

WORKER_ATTR = "worker"  # user attribute: host:pid of the process that claimed the trial (not copied to retries)


def retry_callback(max_retry: int) -> Callable[[optuna.Study, FrozenTrial], None]:
    """Optuna's retry callback (``RetryHeartbeatStaleTrialCallback``, formerly ``RetryFailedTrialCallback``).

    The copy it enqueues keeps the dead trial's parameters and user attributes except
    :data:`WORKER_ATTR`, which the next claiming process sets anew.
    """
    cls = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or optuna.storages.RetryFailedTrialCallback
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        retry = cls(max_retry=max_retry)

    def callback(study: optuna.Study, trial: FrozenTrial) -> None:
        trial = copy.deepcopy(trial)
        trial.user_attrs = {k: v for k, v in trial.user_attrs.items() if k != WORKER_ATTR}
        retry(study, trial)

    return callback


class FileLock:
    """An exclusive ``flock`` on a file (released by the kernel when its holder dies)."""

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


class AdvisoryLock:
    """A PostgreSQL session advisory lock, held on a connection of its own (all hosts see it; the
    server releases it when the holder's connection drops)."""

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


@dataclass(frozen=True)
class SharedStorage:
    """Where a shared study lives and how its running trials are watched.

    Parameters
    ----------
    location : SQLite file path, ``sqlite:///...`` or ``postgresql://user:password@host:port/db``.
    heartbeat_interval : seconds between heartbeats of a running trial.
    grace_period : seconds without a heartbeat after which a running trial is dead.
    max_retry : times a dead trial is enqueued again (once by default: one retry per failure, never two).
    budget : COMPLETE trials the processes work to (``None``: no cap); the claim loop of
        :mod:`edgeprefix.solvers.workers` enforces it under :meth:`lock`.
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
        engine: dict[str, Any] = {"pool_pre_ping": True} if self.url.startswith("postgresql") else sqlite_engine(self.url)
        names = inspect.signature(optuna.storages.RDBStorage).parameters
        key = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in names else "failed_trial_callback"
        with self._creation_lock(), warnings.catch_warnings():
            # processes opening a new database at once would race to create Optuna's tables
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats are "experimental" since 2.9
            return open_rdb(
                self.url,
                engine_kwargs=engine,
                heartbeat_interval=self.heartbeat_interval,
                grace_period=self.grace_period,
                **{key: retry_callback(self.max_retry)},
            )

    @contextlib.contextmanager
    def _creation_lock(self) -> Iterator[None]:
        url = self.url
        if url.startswith("sqlite"):
            with FileLock(url.split(":///", 1)[1] + ".lock"):
                yield
            return
        import sqlalchemy

        try:
            engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
        except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError):  # open_rdb says why in one line
            yield
            return
        try:
            with contextlib.ExitStack() as stack:
                with contextlib.suppress(sqlalchemy.exc.SQLAlchemyError):  # unreachable: open_rdb says so in one line
                    stack.enter_context(AdvisoryLock(engine))
                yield
        finally:
            engine.dispose()

    def lock(self, storage: optuna.storages.RDBStorage) -> Any:
        """The claim lock of the study's database (a context manager; see the module notes)."""
        url = self.url
        if url.startswith("sqlite"):
            return FileLock(url.split(":///", 1)[1] + ".lock")
        return AdvisoryLock(storage.engine)


SQLITE_BUSY_SECONDS = 60.0  # a writer waits this long for another process's transaction (sqlite3's own default: 5 s)


def sqlite_engine(url: str) -> dict[str, Any]:
    """SQLAlchemy engine options for a shared SQLite study: write-ahead log, synced at checkpoints.

    In SQLite's default rollback-journal mode every commit syncs the file system two or three times, and a
    trial commits about 18 times (the trial, each parameter, its heartbeat, claim mark, attributes and
    value): the commits took 12.4 s of a 40-trial run's 42.6 s, almost all in ``fsync``
    (benchmarks/README.md, "Shared studies on SQLite").  In write-ahead-log mode with ``synchronous = NORMAL`` (SQLite's
    recommendation for WAL) a commit appends to the log without a sync: a killed process loses
    nothing it committed and the database stays consistent after a power cut, which may drop the
    last commits (a resumed study then re-runs them).  Readers no longer block the writer.  The
    log needs every process on one machine (as a SQLite study does anyway: docs/model.md §10.3).
    The mode is persistent in the file; every connection sets its own ``synchronous``.
    """
    import sqlite3

    if not url.startswith("sqlite:///"):
        return {}
    path = url.split(":///", 1)[1]

    def connect() -> sqlite3.Connection:
        # check_same_thread=False as SQLAlchemy's own pysqlite pool: the heartbeat thread shares the pool
        conn = sqlite3.connect(path, timeout=SQLITE_BUSY_SECONDS, check_same_thread=False)
        if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    return {"creator": connect}


def close(storage: optuna.storages.RDBStorage) -> None:
    """Drop the pooled connections of ``storage`` (before forking, and when done)."""
    storage.remove_session()
    storage.engine.dispose()
