"""Problems declared as explicit Pyomo models with a black-box objective (docs/model.md §10)."""

from __future__ import annotations

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
