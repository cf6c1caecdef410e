"""What a stored study is about, and keeping it on disk cheaply (docs/model.md §10.3).

* :func:`problem_fingerprint` — the problem a study searches: a hash of the instance content
  after overrides, the network numbers users override (``Λ``, ``λ_b``), policy, target, queue
  model, constraints and method.  Stored in the study's user attributes; a study is resumed only
  by a run with the same fingerprint (:func:`check_fingerprint` names what differs).
* :class:`BatchedStudy` — the search runs on an in-memory Optuna study and its finished trials
  are appended to an on-disk journal (Optuna's ``JournalStorage``, file backend) in batches,
  every :data:`FLUSH_SECONDS` and at the end.  A killed run loses at most the last batch; a
  SQLite study written trial by trial costs ~0.2 s per trial, the batched journal one synced
  append per trial.  :class:`JournalStudy` lets one process at a time use a journal.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
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
        mapping = instance_to_mapping(instance)
        out["instance_hash"] = _digest(mapping)
        # what the search depends on: the content without the name and [metadata] (a study resumes across renames)
        out["problem_hash"] = _digest({k: v for k, v in mapping.items() if k not in DESCRIPTIVE_KEYS})
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


DESCRIPTIVE_KEYS = ("name", "metadata")  # instance fields that do not change the problem


def fingerprint_difference(stored: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``["method: stored 'tpe', this run 'cmaes'", ...]`` for every key that differs.

    Where both record ``problem_hash`` (the instance content without its name and metadata), the
    instance's name and full hash are not compared: renaming an instance or editing its
    ``[metadata]`` resumes the study.  Older studies (no ``problem_hash``) compare everything.
    """
    keys = set(stored) | set(current)
    if "problem_hash" in stored and "problem_hash" in current:
        keys -= {"instance", "instance_hash"}
    elif "problem_hash" not in stored:
        keys.discard("problem_hash")
    return [f"{k}: stored {stored.get(k)!r}, this run {current.get(k)!r}" for k in sorted(keys) if stored.get(k) != current.get(k)]


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
        handle.seek(0)
        data = handle.read()
        handle.truncate(data.rfind(b"\n") + 1)
        handle.flush()
        os.fsync(handle.fileno())


class JournalStudy:
    """Optuna's journal storage on a local file, used by one process at a time (a context manager).

    Entering takes an exclusive ``flock`` on the journal file itself, held until the process ends
    (the kernel releases it, also when the holder is killed) or calls :func:`release_journals`, so
    a command's output set is written before another command uses the study; entering again in
    the same process reuses it.  A second process waits for it, saying so on stderr, then resumes
    the study as the first left it, so any number of commands on one journal end it with exactly
    the budget.
    While the lock is held no other process of this package appends, so a ``FILE.lock`` left by
    Optuna's :class:`~optuna.storages.journal.JournalFileOpenLock` (its holder was killed while
    appending) is stale: it is removed with a one-line note instead of stalling every append.
    Appends go through Optuna's public :class:`~optuna.storages.journal.JournalFileBackend`.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __enter__(self) -> optuna.storages.BaseStorage:
        import fcntl

        import optuna
        from optuna.storages import JournalStorage
        from optuna.storages.journal import JournalFileBackend, JournalFileOpenLock

        self.path.parent.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())
        if key not in _HELD:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                note(f"waiting for another process that uses {self.path}")
                fcntl.flock(fd, fcntl.LOCK_EX)
            _HELD[key] = fd
        clear_stale_lock(self.path)
        repair_journal(self.path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return JournalStorage(JournalFileBackend(str(self.path), lock_obj=JournalFileOpenLock(str(self.path))))

    def __exit__(self, *exc: object) -> None:
        pass  # the lock stays until the process ends (release_journals): its output set is written under it


_HELD: dict[str, int] = {}  # journals this process holds: resolved path → the file descriptor of its flock


def release_journals() -> None:
    """Let other processes use the journals this process has used (else that happens when it exits)."""
    while _HELD:
        os.close(_HELD.popitem()[1])


def note(text: str) -> None:
    """A one-line note on stderr (the study's state, never an error)."""
    print(f"edgeprefix: note: {text}", file=sys.stderr, flush=True)


BUDGET_ATTR = "edgeprefix:budget"  # the budget the last run of a journal study asked for


def state_budget(study: optuna.Study, budget: int | None, resumed: int, where: str) -> None:
    """Say how a resumed journal study meets this run's budget, and record the budget.

    A run resumes with its own ``budget`` (the total of COMPLETE trials), whatever the budget the
    study was made with: a larger one extends it, one at most the trials already done evaluates
    nothing new (the result covers every stored trial).
    """
    if budget is None:
        return
    before = study.user_attrs.get(BUDGET_ATTR)
    if resumed and resumed >= budget:
        note(
            f"{where} already holds {resumed} trials, at least --budget {budget}: nothing new is evaluated "
            "(a larger --budget extends the study)"
        )
    elif resumed and before is not None and before != budget:
        note(f"{where} was run with budget {before} and holds {resumed} trials: this run's budget {budget} adds {budget - resumed}")
    if before != budget and not (resumed and resumed >= budget):
        study.set_user_attr(BUDGET_ATTR, budget)


def study_method(path: str | os.PathLike[str]) -> str | None:
    """The method of the first study with trials in the journal ``path`` (``None``: no such study)."""
    if not Path(path).is_file():
        return None
    with JournalStudy(path) as storage:
        for frozen in storage.get_all_studies():
            fingerprint = frozen.user_attrs.get(FINGERPRINT_ATTR)
            if storage.get_n_trials(storage.get_study_id_from_name(frozen.study_name)):
                return fingerprint.get("method", "unknown") if isinstance(fingerprint, dict) else "unknown"
    return None


def check_folder_method(folder: str | os.PathLike[str], method: str, resumable: bool) -> None:
    """Refuse a method that cannot resume (``resumable`` false) the study an output folder holds (``DIR/study.journal``)."""
    if resumable:
        return  # an Optuna method: the study's fingerprint decides (check_fingerprint)
    journal = Path(folder) / "study.journal"
    stored = study_method(journal)
    if stored is not None:
        raise ValueError(
            f"--out {str(folder)!r} holds a {stored} study ({journal.name}) that --method {method} does not resume: "
            f"its result.json would stop describing the study; use another --out folder, or delete {journal} to start afresh"
        )


def clear_stale_lock(path: Path) -> bool:
    """Remove ``PATH.lock`` (call while holding the journal's exclusive lock); ``True`` if there was one."""
    stale = path.with_name(path.name + ".lock")
    try:
        stale.unlink()
    except FileNotFoundError:
        return False
    note(f"removed {stale}, left by a process that died while appending to {path.name}")
    return True


class BatchedStudy:
    """An in-memory working study mirrored to a stored one in batches (see module notes).

    ``working`` is what the sampler and the search loop use; :meth:`flush` appends the trials
    finished since the last flush to ``stored``.
    """

    def __init__(self, stored: optuna.Study, working: optuna.Study) -> None:
        self.stored = stored
        self.working = working
        self._flushed = 0
        self._last = time.monotonic()

    @classmethod
    def open(cls, stored: optuna.Study, sampler: optuna.samplers.BaseSampler) -> BatchedStudy:
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
        batched = cls(stored, working)
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
        self._last = time.monotonic()
