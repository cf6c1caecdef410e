"""Solvers by name; the order of :data:`SOLVERS` is the order shown to users."""

from __future__ import annotations

from edgeprefix.solvers.base import Solver
from edgeprefix.solvers.gradient import GradientSolver
from edgeprefix.solvers.grid import GridSolver
from edgeprefix.solvers.optuna_search import CmaEsSolver, QmcSolver, TpeSolver
from edgeprefix.solvers.random_search import RandomSolver
from edgeprefix.solvers.spsa import SpsaSolver

SOLVERS: dict[str, type[Solver]] = {
    cls.name: cls for cls in (GradientSolver, SpsaSolver, TpeSolver, CmaEsSolver, QmcSolver, GridSolver, RandomSolver)
}


def method_names() -> tuple[str, ...]:
    return tuple(SOLVERS)


def get_solver(name: str) -> type[Solver]:
    """The solver class registered as ``name``; unknown names raise with the valid list."""
    try:
        return SOLVERS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r} (valid: {list(SOLVERS)})") from None
