"""Optional dependencies: ``pip install 'edgeprefix[distributed]'`` brings Dask and the PostgreSQL driver.

A command that needs one of them and finds it missing stops with one line naming the extra,
before any work.
"""

from __future__ import annotations

import importlib

EXTRA = "distributed"
INSTALL = f"python -m pip install 'edgeprefix[{EXTRA}]'"


class MissingExtra(ValueError):
    """An optional dependency a requested feature needs is not installed."""


def require(module: str, feature: str) -> None:
    """Import ``module`` or raise :class:`MissingExtra` naming ``feature`` and the extra that installs it."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise MissingExtra(f"{feature} needs the optional package {module!r}, which is not installed: {INSTALL}") from None
