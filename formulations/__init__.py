"""Problems declared as explicit Pyomo models with a black-box objective (MODEL.md §10)."""

from __future__ import annotations

from formulations.linear import LinearConstraints, read_linear_constraints
from formulations.objective import CoverageObjective, Score
from formulations.placement import PlacementProblem, build_placement_model, placement_problem

__all__ = [
    "CoverageObjective",
    "LinearConstraints",
    "PlacementProblem",
    "Score",
    "build_placement_model",
    "placement_problem",
    "read_linear_constraints",
]
