"""What a stored study is about, and keeping it on disk cheaply (docs/model.md §10.3).

* :func:`problem_fingerprint` — the problem a study searches: a hash of the instance content
  after overrides, the network numbers users override (``Λ``, ``λ_b``), policy, target, queue
  model, constraints and method.  Stored in the study's user attributes; a study is resumed only
  by a run with the same fingerprint (:func:`check_fingerprint` names what differs).
* :class:`BatchedStudy` — the search runs on an in-memory Optuna study and its finished trials
  are appended to an on-disk journal (Optuna's ``JournalStorage``, file backend) in batches,
  every :data:`FLUSH_SECONDS` and at the end.  A killed run loses at most the last batch; a
  SQLite study written trial by trial costs ~0.2 s per trial, the batched journal ~5 ms.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from edgeprefix.placement.model.instance import instance_to_mapping

if TYPE_CHECKING:  # Optuna is imported where a study is opened: fingerprints and journals of other commands need none
    import optuna
    from optuna.trial import FrozenTrial

FINGERPRINT_ATTR = "edgeprefix:fingerprint"
FLUSH_SECONDS = 5.0  # at most this much finished work is lost when a batched run is killed
JOURNAL_SUFFIX = ".journal"


def _digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def problem_fingerprint(problem: Any, method: str) -> dict[str, Any]:
    """The identity of a search: what must match for a stored study to be resumed.

    Uses whatever the problem exposes (``instance``, ``policy``, ``target``, ``queue_model``) and
    always the constraints, the decision names and the method.
    """
    out: dict[str, Any] = {"method": method}
    instance = getattr(problem, "instance", None)
    if instance is not None:
        out["instance"] = instance.name
        out["request_intensity"] = instance.network.request_intensity
        out["edge_density"] = instance.network.edge_density
        out["instance_hash"] = _digest(instance_to_mapping(instance))
    objective = getattr(problem, "objective", None)
    for key in ("policy", "target", "queue_model"):
        value = getattr(problem, key, None)
        if value is None and objective is not None:
            value = getattr(objective, key, None)
        if value is not None:
            out[key] = value if isinstance(value, (str, int, float)) else repr(value)
    cons = problem.constraints
    arrays = [cons.A_eq, cons.b_eq, cons.A_ub, cons.b_ub, cons.lower, cons.upper]
    out["constraints_hash"] = _digest([np.asarray(a, dtype=float).round(15).tolist() for a in arrays])
    out["variables"] = ",".join(problem.variable_names)
    return out


def fingerprint_difference(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``["method: stored 'tpe', this run 'cmaes'", ...]`` for every key that differs."""
    keys = sorted(set(stored) | set(current))
    return [f"{k}: stored {stored.get(k)!r}, this run {current.get(k)!r}" for k in keys if stored.get(k) != current.get(k)]


class StudyMismatch(ValueError):
    """A stored study belongs to another problem than the run that tries to resume it."""


def check_fingerprint(study: optuna.Study, fingerprint: dict[str, Any], where: str) -> None:
    """Record ``fingerprint`` in a new study, or refuse to resume a study of another problem."""
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    if stored is None:
        if study.get_trials(deepcopy=False):
            raise StudyMismatch(
                f"study {study.study_name!r} in {where} has trials but no problem fingerprint (written by an older version "
                "or another program): choose another output folder or --study name"
            )
        study.set_user_attr(FINGERPRINT_ATTR, fingerprint)
        return
    diff = fingerprint_difference(stored, fingerprint)
    if diff:
        shown = "; ".join(diff[:3]) + (f"; … ({len(diff)} differences)" if len(diff) > 3 else "")
        raise StudyMismatch(
            f"study {study.study_name!r} in {where} searched another problem ({shown}): "
            "use another output folder or --study name, or delete the old study to start afresh"
        )


def repair_journal(path: Path) -> None:
    """Drop a torn last line (a run killed while appending) so that later appends stay readable."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size == 0:
        return
    with open(path, "rb+") as handle:
        handle.seek(max(0, size - 1))
        if handle.read(1) == b"\n":
            return
        data = handle.seek(0) or handle.read()
        handle.truncate(data.rfind(b"\n") + 1)
        handle.flush()
        os.fsync(handle.fileno())


def _backend_class() -> type:
    """Optuna's journal file backend, appending without an ``fsync`` per log line.

    Optuna syncs every appended operation (a trial costs ~7 ms of ``fsync``); a killed process
    loses nothing that reached the page cache, so :meth:`BatchedStudy.flush` syncs once per batch
    instead (:func:`sync_journal`).  Falls back to the plain backend if Optuna's lock helper moves.
    """
    from optuna.storages.journal import JournalFileBackend

    try:
        from optuna.storages.journal._file import get_lock_file
    except ImportError:  # pragma: no cover - another Optuna layout: keep its (slower) appends
        return JournalFileBackend

    class UnsyncedJournalFileBackend(JournalFileBackend):
        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            with get_lock_file(self._lock):
                text = "\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n"
                with open(self._file_path, "ab") as handle:
                    handle.write(text.encode("utf-8"))

    return UnsyncedJournalFileBackend


def journal_storage(path: str | os.PathLike[str]) -> optuna.storages.BaseStorage:
    """Optuna's journal storage on a local file (created with its folder)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileOpenLock

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    repair_journal(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return JournalStorage(_backend_class()(str(target), lock_obj=JournalFileOpenLock(str(target))))


def sync_journal(path: str | os.PathLike[str]) -> None:
    """``fsync`` the journal file (after a batch of appends)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class BatchedStudy:
    """An in-memory working study mirrored to a stored one in batches (see module notes).

    ``working`` is what the sampler and the search loop use; :meth:`flush` appends the trials
    finished since the last flush to ``stored``.
    """

    def __init__(self, stored: optuna.Study, working: optuna.Study, path: str | None = None) -> None:
        self.stored = stored
        self.working = working
        self.path = path  # the journal file, synced after every batch
        self._flushed = 0
        self._last = time.monotonic()

    @classmethod
    def open(cls, stored: optuna.Study, sampler: optuna.samplers.BaseSampler, path: str | None = None) -> BatchedStudy:
        """Copy the stored trials into a fresh in-memory study (finished ones as they are; a trial
        left running by a killed run is enqueued again with its parameters)."""
        import optuna

        working = optuna.create_study(direction="maximize", sampler=sampler)
        finished: list[FrozenTrial] = []
        for trial in stored.get_trials(deepcopy=False):
            if trial.state.is_finished():
                finished.append(trial)
            elif trial.params:  # left running by a killed direct-write run: propose it again
                working.enqueue_trial(trial.params)
        working.add_trials(finished)
        batched = cls(stored, working, path)
        batched._flushed = len(finished)
        return batched

    def maybe_flush(self) -> None:
        if time.monotonic() - self._last >= FLUSH_SECONDS:
            self.flush()

    def flush(self) -> None:
        """Append the working study's newly finished trials to the stored study."""
        new: list[FrozenTrial] = []
        for t in self.working.get_trials(deepcopy=False)[self._flushed :]:
            if not t.state.is_finished():
                break  # keep the order: a later flush picks it up once it has finished
            new.append(t)
        if new:
            self.stored.add_trials(new)
            self._flushed += len(new)
            if self.path is not None:
                sync_journal(self.path)
        self._last = time.monotonic()
