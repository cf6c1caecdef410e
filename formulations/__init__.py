"""Problems declared as explicit Pyomo models with a black-box objective (docs/model.md §10).

The names below are imported from their modules on first use (PEP 562), so that importing one
formulation (e.g. :mod:`edgeprefix.formulations.objective`) does not import the others and Pyomo
with them (start-up: Pyomo's deferred-import hook loads ``scipy.stats`` once Pyomo and scipy are
both imported).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgeprefix.formulations.density import (
        DensityPlanningProblem,
        build_density_model,
        density_problem,
    )
    from edgeprefix.formulations.linear import LinearConstraints, read_linear_constraints
    from edgeprefix.formulations.migration import (
        Epoch,
        EpochProblem,
        MigrationPlan,
        MigrationProblem,
        build_transport_model,
        load_migration,
        migration_plan,
        transfer_bytes,
    )
    from edgeprefix.formulations.migration_joint import (
        JointMigrationProblem,
        build_joint_migration_model,
        joint_migration_problem,
    )
    from edgeprefix.formulations.objective import CoverageObjective, Score
    from edgeprefix.formulations.placement import (
        PlacementProblem,
        build_placement_model,
        placement_problem,
    )

_MODULE_OF = {
    "DensityPlanningProblem": "density",
    "build_density_model": "density",
    "density_problem": "density",
    "LinearConstraints": "linear",
    "read_linear_constraints": "linear",
    "Epoch": "migration",
    "EpochProblem": "migration",
    "MigrationPlan": "migration",
    "MigrationProblem": "migration",
    "build_transport_model": "migration",
    "load_migration": "migration",
    "migration_plan": "migration",
    "transfer_bytes": "migration",
    "JointMigrationProblem": "migration_joint",
    "build_joint_migration_model": "migration_joint",
    "joint_migration_problem": "migration_joint",
    "CoverageObjective": "objective",
    "Score": "objective",
    "PlacementProblem": "placement",
    "build_placement_model": "placement",
    "placement_problem": "placement",
}

__all__ = [
    "CoverageObjective",
    "DensityPlanningProblem",
    "Epoch",
    "EpochProblem",
    "JointMigrationProblem",
    "LinearConstraints",
    "MigrationPlan",
    "MigrationProblem",
    "PlacementProblem",
    "Score",
    "build_density_model",
    "build_joint_migration_model",
    "build_placement_model",
    "build_transport_model",
    "density_problem",
    "joint_migration_problem",
    "load_migration",
    "migration_plan",
    "placement_problem",
    "read_linear_constraints",
    "transfer_bytes",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_MODULE_OF))
