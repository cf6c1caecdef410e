"""PostgreSQL for the shared-study tests.

The URL comes from ``EDGEPREFIX_TEST_POSTGRES`` (``.ci/run`` starts the Debian cluster on
loopback and exports it).  Without it, a private throw-away cluster is started when the
PostgreSQL server binaries are installed.  When neither works the tests skip with the reason,
except under CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ENV = "EDGEPREFIX_TEST_POSTGRES"


def reachable(url: str) -> str | None:
    """``None`` when ``url`` accepts a connection, else the reason."""
    try:
        import psycopg2
    except ImportError as exc:
        return f"psycopg2 is not installed ({exc})"
    try:
        psycopg2.connect(url, connect_timeout=5).close()
    except psycopg2.Error as exc:
        return f"cannot connect to {url.split('@')[-1]}: {str(exc).strip().splitlines()[0]}"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_binaries() -> str | None:
    """The ``initdb`` of the newest installed PostgreSQL server, or ``None``."""
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return binaries[-1] if binaries else shutil.which("initdb")


def _private_cluster(folder: Path) -> tuple[str | None, str, list[str]]:
    """Start a trust-auth cluster in ``folder`` (readable by the server's account); (URL or None, reason, stop command)."""
    initdb = server_binaries()
    if initdb is None:
        return None, "PostgreSQL server binaries (initdb) are not installed", []
    pg_ctl = str(Path(initdb).with_name("pg_ctl"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the cluster as the 'postgres' account
        as_user = ["runuser", "-u", "postgres", "--"]
        shutil.chown(folder, "postgres")
    data, port = folder / "data", _free_port()
    try:
        subprocess.run([*as_user, initdb, "-D", str(data), "-U", "postgres", "--auth=trust"], check=True, capture_output=True, timeout=120)
        options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1"
        subprocess.run(
            [*as_user, pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "log"), "-w", "start"],
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"could not start a private PostgreSQL cluster: {exc}", []
    return f"postgresql://postgres@127.0.0.1:{port}/postgres", "", [*as_user, pg_ctl, "-D", str(data), "-m", "immediate", "stop"]


def postgres_url() -> Iterator[str]:
    """Yield a reachable PostgreSQL URL (skip, or fail under CI, when there is none).

    Use it through the ``postgres_url`` fixture of ``tests/conftest.py``: the private cluster is
    stopped when this generator closes, so ``next(postgres_url())`` hands out a URL whose server
    is stopping."""
    url = os.environ.get(ENV)
    stop: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="edgeprefix-pg-"))
    folder.chmod(0o755)
    if url:
        reason = reachable(url)
    else:
        url, reason, stop = _private_cluster(folder)
        if url is not None:
            reason = reachable(url)
    if url is None or reason:
        message = f"PostgreSQL unavailable ({reason}); set {ENV} to a postgresql:// URL or run the PostgreSQL lines of .ci/run"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield url
    finally:
        if stop:
            subprocess.run(stop, capture_output=True, timeout=60, check=False)
        shutil.rmtree(folder, ignore_errors=True)
