"""Solvers by name; the order of :data:`SOLVERS` is the order shown to users."""

from __future__ import annotations

from solvers.base import Solver
from solvers.grid import GridSolver
from solvers.optuna_search import CmaEsSolver, QmcSolver, TpeSolver
from solvers.random_search import RandomSolver
from solvers.spsa import SpsaSolver

SOLVERS: dict[str, type[Solver]] = {
    cls.name: cls for cls in (SpsaSolver, TpeSolver, CmaEsSolver, QmcSolver, GridSolver, RandomSolver)
}


def method_names() -> tuple[str, ...]:
    return tuple(SOLVERS)


def get_solver(name: str) -> type[Solver]:
    """The solver class registered as ``name``; unknown names raise with the valid list."""
    try:
        return SOLVERS[name]
    except KeyError:
        raise ValueError(f"unknown method {name!r} (valid: {list(SOLVERS)})") from None
