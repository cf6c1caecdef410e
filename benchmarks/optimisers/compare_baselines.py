"""What a user would pick instead of the package's methods: plain scipy, in the comparison (docs/model.md §10.3).

* ``slsqp-fd`` — ``scipy.optimize.minimize(method="SLSQP")`` with its default options and
  finite-difference gradients (2-point, one evaluation per profile), from the projected uniform
  mix, the linear constraints passed as ``LinearConstraint`` / ``Bounds``: the ten lines a user
  writes around ``problem.score``.  It ends when SLSQP converges (or the budget is spent).
* ``de`` — ``scipy.optimize.differential_evolution`` with its defaults on the box of the shares,
  each proposal projected onto the polytope (as the Optuna samplers do), seeded.

Both are :class:`~edgeprefix.solvers.base.Solver` classes run by
:func:`edgeprefix.solvers.api.run_solver`, so their evaluations are counted, warm-started and
recorded exactly as those of the registered methods; neither reads the budget, so the comparison
reads them as anytime curves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.optimize import differential_evolution, minimize

from edgeprefix.solvers.base import Solver
from edgeprefix.solvers.gradient import linear_constraints
from edgeprefix.solvers.optuna_common import SearchBox
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.tracking import Problem, Tracker


@dataclass(frozen=True)
class ScipySlsqpBaseline(Solver):
    """SLSQP with finite differences from the projected uniform mix (see module notes)."""

    name: ClassVar[str] = "slsqp-fd"
    STOCHASTIC: ClassVar[bool] = False
    NEEDS_BUDGET: ClassVar[bool] = False

    def run(self, problem: Problem, projection: Projection, tracker: Tracker, rng: np.random.Generator) -> Status:
        n = problem.dimension
        rows, bounds = linear_constraints(projection)

        def negated(x: np.ndarray) -> float:
            return -tracker.evaluate(x).value

        result = minimize(negated, projection(np.full(n, 1.0 / n)), method="SLSQP", bounds=bounds, constraints=rows)
        tracker.nit = int(result.nit)
        tracker.extras["message"] = str(result.message)
        return Status.COMPLETED


@dataclass(frozen=True)
class DifferentialEvolutionBaseline(Solver):
    """scipy's differential evolution on the box, proposals projected (see module notes)."""

    name: ClassVar[str] = "de"

    def run(self, problem: Problem, projection: Projection, tracker: Tracker, rng: np.random.Generator) -> Status:
        box = SearchBox.of(problem, projection)
        free = box.upper > box.lower
        fixed = box.lower.copy()

        def objective(z: np.ndarray) -> float:
            point = fixed.copy()
            point[free] = z
            return -tracker.evaluate(projection(point)).value

        result = differential_evolution(
            objective,
            list(zip(box.lower[free], box.upper[free])),  # type: ignore[arg-type]  # scipy takes (min, max) pairs; its stub only Bounds
            seed=int(rng.integers(2**31 - 1)),
        )
        tracker.nit = int(result.nit)
        return Status.COMPLETED


BASELINES: dict[str, type[Solver]] = {cls.name: cls for cls in (ScipySlsqpBaseline, DifferentialEvolutionBaseline)}
