"""Pure random search: uniform (flat Dirichlet) proposals on the simplex, projected (a baseline)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from edgeprefix.placement.errors import plain
from edgeprefix.solvers.base import Solver
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.tracking import Problem, Tracker


@dataclass(frozen=True)
class RandomSolver(Solver):
    """Score ``Proj(z)`` for ``z ~ Dirichlet(1, …, 1)`` until the budget is spent.

    Parameters
    ----------
    chunk : proposals scored together in one batched evaluation (docs/model.md §16); the
        proposals, and so the points, do not depend on it.
    """

    name: ClassVar[str] = "random"
    chunk: int = 64

    def __post_init__(self) -> None:
        if isinstance(self.chunk, bool) or not isinstance(self.chunk, int) or self.chunk < 1:
            raise ValueError(f"random option chunk must be a positive integer, got {plain(self.chunk)}")

    def run(self, problem: Problem, projection: Projection, tracker: Tracker, rng: np.random.Generator) -> Status:
        while True:
            size = self.chunk if tracker.remaining is None else max(1, min(self.chunk, tracker.remaining))
            tracker.evaluate_many([projection(z) for z in rng.dirichlet(np.ones(problem.dimension), size=size)])
            tracker.nit += 1
