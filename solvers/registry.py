"""Solvers by name; the order of :data:`SOLVERS` is the order shown to users.

A method's module is imported when its class is first asked for, so a command that runs SPSA or
the gradient method never imports Optuna (the ``tpe``, ``cmaes`` and ``qmc`` module imports it).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from edgeprefix.solvers.base import Solver

_WHERE: dict[str, tuple[str, str]] = {  # name → (module, class); the class's ``name`` is the key
    "gradient": ("edgeprefix.solvers.gradient", "GradientSolver"),
    "spsa": ("edgeprefix.solvers.spsa", "SpsaSolver"),
    "tpe": ("edgeprefix.solvers.optuna_search", "TpeSolver"),
    "cmaes": ("edgeprefix.solvers.optuna_search", "CmaEsSolver"),
    "qmc": ("edgeprefix.solvers.optuna_search", "QmcSolver"),
    "grid": ("edgeprefix.solvers.grid", "GridSolver"),
    "random": ("edgeprefix.solvers.random_search", "RandomSolver"),
}


class _Registry(Mapping[str, type[Solver]]):
    """A read-only mapping from method names to solver classes that imports each class on first access."""

    def __getitem__(self, name: str) -> type[Solver]:
        module, attribute = _WHERE[name]
        cls: type[Solver] = getattr(importlib.import_module(module), attribute)
        return cls

    def __iter__(self) -> Iterator[str]:
        return iter(_WHERE)

    def __len__(self) -> int:
        return len(_WHERE)


SOLVERS: Mapping[str, type[Solver]] = _Registry()


def method_names() -> tuple[str, ...]:
    return tuple(SOLVERS)


def get_solver(name: str) -> type[Solver]:
    """The solver class registered as ``name``; unknown names raise with the valid list."""
    try:
        return SOLVERS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r} (valid: {list(SOLVERS)})") from None
