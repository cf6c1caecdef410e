"""Pure random search: uniform (flat Dirichlet) proposals on the simplex, projected (a baseline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from edgeprefix.solvers.base import Solver
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.tracking import Problem, Tracker


@dataclass(frozen=True)
class RandomSolver(Solver):
    """Score ``Proj(z)`` for ``z ~ Dirichlet(1, …, 1)`` until the budget is spent."""

    name: ClassVar[str] = "random"

    def run(self, problem: Problem, projection: Projection, tracker: Tracker, rng: np.random.Generator) -> Status:
        while True:
            tracker.evaluate(projection(rng.dirichlet(np.ones(problem.dimension))))
            tracker.nit += 1
