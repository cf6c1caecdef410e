"""A shared SQLite study writes a write-ahead log synced at checkpoints (no sync per commit), from any thread."""

from __future__ import annotations

import threading
from pathlib import Path

import optuna

from edgeprefix.solvers.storage import SharedStorage, close


def _pragma(storage: optuna.storages.RDBStorage, name: str) -> object:
    with storage.engine.connect() as conn:
        return conn.exec_driver_sql(f"PRAGMA {name}").scalar()


def test_a_sqlite_study_uses_the_write_ahead_log(tmp_path: Path) -> None:
    storage = SharedStorage(str(tmp_path / "s.db")).open()
    try:
        assert str(_pragma(storage, "journal_mode")).lower() == "wal"
        assert _pragma(storage, "synchronous") == 1  # NORMAL: the log is synced at checkpoints, not at every commit
        study = optuna.create_study(study_name="s", storage=storage, direction="maximize")
        errors: list[BaseException] = []

        def beat() -> None:  # the heartbeat thread writes through the same pool
            try:
                study.set_user_attr("written_by", "a thread")
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        thread = threading.Thread(target=beat)
        thread.start()
        thread.join()
        assert errors == [] and study.user_attrs["written_by"] == "a thread"
    finally:
        close(storage)
    reopened = SharedStorage(str(tmp_path / "s.db")).open()  # the mode stays in the file; a second opener keeps it
    try:
        assert str(_pragma(reopened, "journal_mode")).lower() == "wal"
        assert optuna.load_study(study_name="s", storage=reopened).user_attrs == {"written_by": "a thread"}
    finally:
        close(reopened)
