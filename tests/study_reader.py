"""Read a shared study's trials without writing to its database.

``optuna.storages.RDBStorage(..., skip_table_creation=True)`` still writes: on a database whose
``alembic_version`` table is missing or empty it stamps one (Optuna's ``_VersionManager``), and two
processes creating that table at once collide in PostgreSQL's catalogue (``duplicate key value
violates unique constraint "pg_type_typname_nsp_index"``, seen in CI).  A poller watching a solve
therefore opens the storage only once the solve has stamped the schema.
"""

from __future__ import annotations

import optuna
import sqlalchemy
from optuna.trial import FrozenTrial
from sqlalchemy.exc import SQLAlchemyError


def schema_stamped(url: str) -> bool:
    """Whether the database at SQLAlchemy ``url`` holds a stamped Optuna schema (plain reads only)."""
    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as conn:
            if not sqlalchemy.inspect(conn).has_table("alembic_version"):
                return False
            return bool(conn.execute(sqlalchemy.text("SELECT count(*) FROM alembic_version")).scalar())
    finally:
        engine.dispose()


def study_trials(url: str, study: str) -> list[FrozenTrial]:
    """The trials of ``study`` at ``url``; empty while the schema or the study does not exist yet."""
    try:
        if not schema_stamped(url):
            return []
        storage = optuna.storages.RDBStorage(url, skip_compatibility_check=True, skip_table_creation=True)
        try:
            return optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
        finally:
            storage.engine.dispose()
    except (KeyError, SQLAlchemyError, optuna.exceptions.StorageInternalError):  # no study yet, or a transient read error
        return []
