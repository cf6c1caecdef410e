"""Methods that search a formulation (MODEL.md §10.2–10.4): projection, SPSA, Optuna, grid."""

from __future__ import annotations

from solvers.api import DEFAULT_BUDGET, solve
from solvers.projection import Projection
from solvers.registry import SOLVERS, get_solver, method_names
from solvers.result import Progress, Result, Status

__all__ = ["DEFAULT_BUDGET", "Progress", "Projection", "Result", "SOLVERS", "Status", "get_solver", "method_names", "solve"]
