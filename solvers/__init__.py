"""Methods that search a formulation (docs/model.md §10.2–10.5, §15): projection, the exact-gradient SLSQP, SPSA, Optuna, grid."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from edgeprefix.solvers.api import DEFAULT_BUDGET, solve
from edgeprefix.solvers.certificate import Certificate, kkt_certificate
from edgeprefix.solvers.density import DensityPlan, plan_density
from edgeprefix.solvers.polish import certify
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.registry import SOLVERS, get_solver, method_names
from edgeprefix.solvers.result import Progress, Result, Status

__all__ = [
    "Certificate",
    "DEFAULT_BUDGET",
    "DensityPlan",
    "EpochDecision",
    "MigrationSolution",
    "Progress",
    "Projection",
    "Result",
    "SOLVERS",
    "Status",
    "certify",
    "get_solver",
    "kkt_certificate",
    "method_names",
    "plan_density",
    "solve",
    "solve_migration",
]

if TYPE_CHECKING:
    from edgeprefix.solvers.migration import EpochDecision, MigrationSolution, solve_migration

# imported on first use (PEP 562): the migration formulations import Pyomo, which a search of the
# placement polytope does not need (start-up, docs/model.md §10)
_LAZY = {"EpochDecision": "migration", "MigrationSolution": "migration", "solve_migration": "migration"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
