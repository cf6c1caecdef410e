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
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import optuna
from optuna.trial import FrozenTrial

from edgeprefix.solvers.optuna_common import storage_url


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


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
        retry(study, trial)

    return callback


@dataclass(frozen=True)
class SharedStorage:
    """Where a shared study lives and how its running trials are watched.

    Parameters
    ----------
    location : SQLite file path, ``sqlite:///...`` or ``postgresql://user:password@host:port/db``.
    heartbeat_interval : seconds between heartbeats of a running trial.
    grace_period : seconds without a heartbeat after which a running trial is dead.
    max_retry : times a dead trial is enqueued again.
    """

    location: str
    heartbeat_interval: int = 5
    grace_period: int = 20
    max_retry: int = 3

    def __post_init__(self) -> None:
        if self.grace_period <= self.heartbeat_interval:
            raise ValueError(
                f"grace_period > heartbeat_interval must hold, but got grace_period={self.grace_period}, "
                f"heartbeat_interval={self.heartbeat_interval}"
            )

    @property
    def url(self) -> str:
        """SQLAlchemy URL; a bare ``postgresql://`` gets the ``psycopg2`` driver this package depends on."""
        url = storage_url(self.location)
        if url.startswith(("postgresql://", "postgres://")):
            url = "postgresql+psycopg2://" + url.split("://", 1)[1]
        return url

    def open(self) -> optuna.storages.RDBStorage:
        """A new RDB storage with heartbeats and the retry callback (one per process: never fork one)."""
        engine: dict[str, Any] = {"pool_pre_ping": True} if self.url.startswith("postgresql") else {}
        names = inspect.signature(optuna.storages.RDBStorage).parameters
        key = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in names else "failed_trial_callback"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # heartbeats are "experimental" since 2.9
            return optuna.storages.RDBStorage(
                self.url,
                engine_kwargs=engine,
                heartbeat_interval=self.heartbeat_interval,
                grace_period=self.grace_period,
                **{key: retry_callback(self.max_retry)},
            )


def close(storage: optuna.storages.RDBStorage) -> None:
    """Drop the pooled connections of ``storage`` (before forking, and when done)."""
    storage.remove_session()
    storage.engine.dispose()
