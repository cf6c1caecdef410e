"""The README's test command reaches PostgreSQL on a machine that has the server binaries but
exports nothing (no ``EDGEPREFIX_TEST_POSTGRES``): the private cluster of ``tests/pg.py`` stays
up for the whole test that uses it and is stopped afterwards."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pg
import pytest

ROOT = Path(__file__).resolve().parent.parent


def _need_binaries() -> None:
    if not pg.server_binaries():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("PostgreSQL server binaries (initdb) are not installed; .ci/run installs them")
        pytest.skip("PostgreSQL server binaries (initdb) are not installed")


@pytest.mark.slow
def test_private_cluster_lives_until_the_generator_closes(monkeypatch):
    _need_binaries()
    monkeypatch.delenv(pg.ENV, raising=False)
    urls = pg.postgres_url()
    url = next(urls)
    assert pg.reachable(url) is None  # still up after next() returned
    urls.close()  # what pytest does when the fixture's scope ends
    assert pg.reachable(url) is not None  # stopped and removed


@pytest.mark.slow
def test_readme_test_command_reaches_postgresql_without_the_variable():
    """The two PostgreSQL tests that used ``next()`` on the generator, run as the README runs
    them, with ``CI=true`` so a skip would be a failure."""
    _need_binaries()
    env = {k: v for k, v in os.environ.items() if k != pg.ENV}
    env["CI"] = "true"
    tests = [
        "tests/test_output_sets.py::test_single_process_postgresql_storage",
        "tests/test_failures.py::test_unauthorised_database_is_one_line",
    ]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "2 passed" in run.stdout
