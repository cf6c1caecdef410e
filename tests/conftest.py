"""Shared fixtures: the embedded instance and a factory for modified instance mappings."""

from __future__ import annotations

import copy
import os
import sys
from typing import Any

# `python -m pytest` at the repository root puts the checkout first on sys.path; there the
# folder `edgeprefix/` (the CLI alone) would shadow the installed package, whose sub-packages
# `edgeprefix.placement`, `.formulations`, ... are mapped from the sibling folders.  Test the
# installed mapping, as a user imports it.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _ROOT]
# The same for every Python process a test starts (``python -m edgeprefix...`` in any folder).
os.environ["PYTHONSAFEPATH"] = "1"

import pytest  # noqa: E402

from edgeprefix.placement.model.instance import (  # noqa: E402
    default_instance,
    instance_from_mapping,
    instance_to_mapping,
)


@pytest.fixture(scope="session")
def postgres_url():
    """A reachable PostgreSQL URL, alive until the session ends (``tests/pg.py``: the
    ``EDGEPREFIX_TEST_POSTGRES`` URL, else a private throw-away cluster; skip, or fail under CI,
    when neither works).  A fixture, so the private cluster is stopped only after the last test
    that uses it -- not when a dropped generator is collected."""
    import pg

    yield from pg.postgres_url()


@pytest.fixture(scope="session")
def baseline():
    return default_instance()


@pytest.fixture()
def baseline_mapping(baseline) -> dict[str, Any]:
    return copy.deepcopy(instance_to_mapping(baseline))


@pytest.fixture()
def build():
    return instance_from_mapping


@pytest.fixture(scope="session")
def figure_report(tmp_path_factory):
    """``reproduce --all --quick`` on the default instance, run once per session.

    Returns ``(report, texts, out)``: the report of :func:`edgeprefix.benchmarks.paper.figures.report.run_all`,
    what each saved PNG shows (suptitle, per-axes title and labels, legends, and the problems
    ``plot_checks.figure_problems`` finds) and the output folder.
    """
    from edgeprefix.benchmarks.paper.figures import _common
    from edgeprefix.benchmarks.paper.figures.report import run_all

    texts: dict[str, dict[str, Any]] = {}
    real = _common.atomic_savefig

    from plot_checks import figure_problems

    def record(fig, path, *, dpi=120):
        axes = [
            {
                "title": ax.get_title(),
                "xlabel": ax.get_xlabel(),
                "ylabel": ax.get_ylabel(),
                "image": bool(ax.images),
                "legend": ax.get_legend() is not None,
            }
            for ax in fig.axes
        ]
        texts[os.path.basename(str(path))] = {
            "suptitle": fig._suptitle.get_text() if fig._suptitle is not None else "",
            "axes": axes,
            "legends": len(fig.legends),
            "problems": figure_problems(fig),
        }
        real(fig, path, dpi=dpi)

    out = tmp_path_factory.mktemp("figures")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_common, "atomic_savefig", record)
        report = run_all(quick=True, out=out)
    return report, texts, out
