"""Storage URLs and Dask addresses in messages (docs/distributed.md): secrets hidden, bad URLs one line
before any work, a missing optional dependency named with its extra, and a database that goes away
under ``--workers 2`` reported in one line with exit code 3."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pg
import pytest
from optuna.trial import TrialState
from sqlalchemy.exc import IntegrityError
from study_reader import study_trials

from edgeprefix.cli import main
from edgeprefix.solvers.distributed import dask_client
from edgeprefix.solvers.optuna_common import open_rdb, redact, scrub, storage_url


@pytest.mark.parametrize(
    "url, shown",
    [
        ("postgresql://u:secret@db:5432/s", "postgresql://u:***@db:5432/s"),
        ("postgresql://u@db/s?password=secret&sslmode=require", "postgresql://u@db/s?password=***&sslmode=require"),
        ("postgresql://u@db/s?sslmode=require&PASSWORD=secret", "postgresql://u@db/s?sslmode=require&PASSWORD=***"),
        ("tcp://u:secret@10.0.0.5:8786", "tcp://u:***@10.0.0.5:8786"),
        ("tls://scheduler:8786", "tls://scheduler:8786"),
        ("sqlite:///studies/a.db", "sqlite:///studies/a.db"),
    ],
)
def test_secrets_are_redacted(url, shown):
    assert redact(url) == shown
    assert scrub(f"could not connect with {url}", url) == f"could not connect with {shown}"  # a driver's echo of it too


def test_a_query_string_password_never_reaches_the_error(capsys):
    url = "postgresql://u@127.0.0.1:1/db?password=hunter2&connect_timeout=2"
    assert main(["solve", "--method", "tpe", "--budget", "2", "--storage", url]) == 2
    err = capsys.readouterr().err
    assert "hunter2" not in err and "password=***" in err and len(err.strip().splitlines()) == 1


def test_a_bad_port_is_one_line_before_any_work(capsys, tmp_path):
    assert main(["solve", "--method", "tpe", "--budget", "2", "--storage", "postgresql://u:p4ss@127.0.0.1:notaport/db"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "edgeprefix solve: error: storage 'postgresql://u:***@127.0.0.1:notaport/db': port 'notaport' is not a number from 1 to 65535"
    )
    assert storage_url("postgresql://u@[::1]:5432/db") == "postgresql+psycopg2://u@[::1]:5432/db"


def test_a_dask_address_with_credentials_is_not_echoed():
    with pytest.raises(ValueError) as caught, dask_client("tcp://u:secret@127.0.0.1:1", workers=2):
        pass
    assert "secret" not in str(caught.value) and "tcp://u:***@127.0.0.1:1" in str(caught.value)


@pytest.mark.parametrize(
    "module, argv",
    [
        ("psycopg2", ["solve", "--method", "tpe", "--budget", "2", "--storage", "postgresql://u:secret@127.0.0.1/db"]),
        ("distributed", ["solve", "--method", "grid", "--resolution", "4", "--dask", "tcp://127.0.0.1:1"]),
    ],
)
def test_a_missing_optional_dependency_names_the_extra(capsys, monkeypatch, module, argv):
    monkeypatch.setitem(sys.modules, module, None)  # ``import module`` now raises ImportError, as when it is not installed
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "edgeprefix[distributed]" in err and repr(module) in err and "secret" not in err
    assert main(["solve", "--method", "tpe", "--budget", "2", "--json"]) == 0  # the rest works without the extra
    capsys.readouterr()


@pytest.fixture()
def private_postgres():
    """A throw-away PostgreSQL cluster this test may stop (the CI's shared one must stay up)."""
    folder = Path(tempfile.mkdtemp(prefix="edgeprefix-pg-"))
    folder.chmod(0o755)
    url, reason, stop = pg._private_cluster(folder)
    if url is None or pg.reachable(url):
        message = f"a private PostgreSQL cluster is needed to stop it under the workers ({reason or pg.reachable(url)})"
        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield url, stop
    finally:
        subprocess.run(stop, capture_output=True, timeout=60, check=False)
        shutil.rmtree(folder, ignore_errors=True)


# ``solve`` with its cost probe overruled: the workers are forked even for the stub's short trials
FORKING_SOLVE = (
    "import sys; import edgeprefix.commands.solve as s; s._study_workers_pay = lambda *args: True; "
    "from edgeprefix.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.slow
@pytest.mark.parametrize("workers", [["--workers", "2"], []])
def test_a_database_outage_is_one_line_and_exit_3(private_postgres, tmp_path, workers):
    url, stop = private_postgres
    command = [
        sys.executable,
        "-c",
        FORKING_SOLVE,
        "solve",
        "--method",
        "tpe",
        "--budget",
        "2000",
        "--storage",
        url,
        "--study",
        "outage",
        *workers,
        "--heartbeat",
        "1",
        "--grace",
        "3",
        "--json",
    ]
    errors = tmp_path / "stderr.txt"
    with open(errors, "w") as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env={**os.environ, "EDGEPREFIX_PROGRESS": "0"})
    try:
        deadline = time.monotonic() + 120
        done = 0
        while done < 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            done = sum(t.state == TrialState.COMPLETE for t in study_trials(storage_url(url), "outage"))
        assert done >= 4 and proc.poll() is None, errors.read_text()
        subprocess.run(stop, capture_output=True, timeout=60, check=True)  # the database goes away under the workers
        assert proc.wait(timeout=120) == 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = errors.read_text().strip().splitlines()
    assert len(lines) == 1, "\n".join(lines)
    assert "stopped answering" in lines[0] and "run the same command again" in lines[0] and "Traceback" not in lines[0]


class _CollidingStorage:
    """An RDB storage whose first schema creation collides with another program's, as PostgreSQL reports it."""

    calls = 0

    def __init__(self, url: str, **kwargs: object) -> None:
        type(self).calls += 1
        if type(self).calls == 1:
            raise IntegrityError(
                "CREATE TABLE alembic_version", {}, Exception('duplicate key value violates unique constraint "pg_type_typname_nsp_index"')
            )
        self.url = url


def test_a_schema_creation_that_collides_is_retried_once():
    _CollidingStorage.calls = 0
    assert open_rdb("sqlite:///x.db", cls=_CollidingStorage).url == "sqlite:///x.db"
    assert _CollidingStorage.calls == 2


def test_a_collision_that_persists_is_one_line():
    class Always(_CollidingStorage):
        def __init__(self, url: str, **kwargs: object) -> None:
            raise IntegrityError("CREATE TABLE studies", {}, Exception("duplicate key value"))

    with pytest.raises(ValueError, match=r"^storage 'sqlite:///x.db': cannot open the study database \(duplicate key value\)$"):
        open_rdb("sqlite:///x.db", cls=Always)
