"""SLSQP on the exact gradient (docs/model.md §15) inside the linear constraints of the formulation.

The objective's gradient comes from the implicit differentiation of the load–association fixed
point (one adjoint solve at a point already scored, counted in ``njev``; ``nfev`` counts the
fixed-point solves), and the constraints are the rows and bounds read back from the Pyomo model
(:class:`~edgeprefix.formulations.linear.LinearConstraints`), so every iterate SLSQP scores lies
in the polytope (a point off it by more than :data:`REPAIR_TOL` is projected first).

Chosen by measurement against ``trust-constr`` with the same gradient (benchmarks/README.md):
SLSQP's active-set steps land on the optimum's face in a few iterations (3–7 evaluations on
3–7 profiles), while ``trust-constr`` scores interior-point iterates outside the polytope
(20–30 % of its evaluations, up to 0.19 above a bound) and ends 4e-5–7e-5 short after 10–17.  A run that SLSQP ends abnormally (a singular or incompatible subproblem, a failed line
search) restarts once from the best point with a fresh quasi-Newton model.

Multi-start, because it pays where the objective has several local maxima (measured:
``paper_calibrated`` at twice its load has a second vertex 0.012 below the optimum, where 5 of 8
random starts end): after the descent from the initial point, descents start from the projected
corners ``Proj(e_s)`` in profile order, then from projected uniform-Dirichlet points of the seed,
until the budget is spent or ``starts`` descents are done.  A descent costs 1–10 evaluations on
3–7 profiles and 20–50 on 14.  The random restarts run only while the best point is not certified:
once the corners are done, a best point whose KKT residual (docs/model.md §18.6) is at most
``certify_tol`` ends the search (the corners found the second maximum of ``paper_calibrated``; a
random restart that only lands on a certified maximum again costs evaluations and buys nothing),
and ``nfev`` is what was used.  ``certify_tol=None`` restarts until the budget is spent.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from scipy.optimize import Bounds, LinearConstraint, minimize

from edgeprefix.formulations.objective import Score
from edgeprefix.solvers.base import Solver
from edgeprefix.solvers.certificate import kkt_certificate
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.tracking import Problem, Tracker

FloatArray = npt.NDArray[np.float64]
REPAIR_TOL = 1e-9  # an SLSQP iterate further than this outside the polytope is projected before scoring
CERTIFY_TOL = 1e-6  # KKT residual that ends the random restarts: the default of ``solve --certify-tol``


def linear_constraints(projection: Projection) -> tuple[list[LinearConstraint], Bounds]:
    """The formulation's rows and bounds as scipy objects (equalities, then ``A_ub x ≤ b_ub``)."""
    cons = projection.constraints
    rows = []
    if len(cons.b_eq):
        rows.append(LinearConstraint(cons.A_eq, cons.b_eq, cons.b_eq))
    if len(cons.b_ub):
        rows.append(LinearConstraint(cons.A_ub, -np.inf, cons.b_ub))
    return rows, Bounds(cons.lower, cons.upper)


class _Oracle:
    """``−value`` and ``−∂value/∂π`` for SLSQP (it minimises), each point scored once."""

    def __init__(self, projection: Projection, tracker: Tracker) -> None:
        self.projection, self.tracker = projection, tracker
        self.scores: dict[bytes, Score] = {}
        self.gradients: dict[bytes, FloatArray] = {}
        tracker.extras["missing_gradients"] = 0  # gradients the model could not give (non-converged fixed point)

    def score(self, x: FloatArray) -> tuple[bytes, Score]:
        point = np.asarray(x, dtype=float)
        if self.projection.constraints.violation(point) > REPAIR_TOL:
            point = self.projection(point)
        key = point.tobytes()
        if key not in self.scores:
            self.scores[key] = self.tracker.evaluate(point)
        return key, self.scores[key]

    def fun(self, x: FloatArray) -> float:
        return -self.score(x)[1].value

    def jac(self, x: FloatArray) -> FloatArray:
        key, score = self.score(x)
        if key not in self.gradients:
            slope = self.tracker.gradient(score)
            if slope is None:  # no derivative: a zero slope lets SLSQP stop here (the point scores as infeasible)
                self.tracker.extras["missing_gradients"] += 1
                slope = np.zeros(x.size)
            self.gradients[key] = -np.asarray(slope, dtype=float)
        return self.gradients[key]


@dataclass(frozen=True)
class GradientSolver(Solver):
    """SLSQP with exact gradients (see module notes).

    Parameters
    ----------
    starts : most descents to run (``None``: until the budget is spent); the first starts from ``x0``
        or the formulation's initial point, the next from the corners, then from random points.
    tol : SLSQP's ``ftol`` (precision goal on the objective).
    max_iterations : SLSQP iterations per descent.
    x0 : starting mix (projected); default the formulation's initial point.
    certify_tol : once the corners are done, stop when the best point's KKT residual is at most this
        (``None``: restart until the budget or ``starts`` is spent).
    """

    name: ClassVar[str] = "gradient"
    NEEDS_GRADIENT: ClassVar[bool] = True
    starts: int | None = None
    tol: float = 1e-10
    max_iterations: int = 100
    x0: tuple[float, ...] | None = None
    certify_tol: float | None = CERTIFY_TOL

    def __post_init__(self) -> None:
        for key in ("starts", "max_iterations"):
            value = getattr(self, key)
            if value is None and key == "starts":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"gradient option {key} must be an integer >= 1, got {value!r}")
        if not (np.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"gradient option tol must be > 0, got {self.tol!r}")
        if self.certify_tol is not None and (
            isinstance(self.certify_tol, bool)
            or not isinstance(self.certify_tol, (int, float))
            or not (np.isfinite(self.certify_tol) and self.certify_tol > 0)
        ):
            raise ValueError(f"gradient option certify_tol must be a number > 0 or None, got {self.certify_tol!r}")

    def run(self, problem: Problem, projection: Projection, tracker: Tracker, rng: np.random.Generator) -> Status:
        if projection.constraints.has_auxiliary:
            raise ValueError("method 'gradient' needs a problem whose variables are all decisions (no auxiliary flows)")
        oracle = _Oracle(projection, tracker)
        rows, bounds = linear_constraints(projection)
        messages: dict[str, int] = {}
        tracker.extras.update(descents=0, slsqp_exits=messages)
        n = problem.dimension
        first = problem.initial_point() if self.x0 is None else np.asarray(self.x0, dtype=float)
        free = np.flatnonzero(projection.constraints.upper[:n] > 0)
        k = 0
        while self.starts is None or k < self.starts:
            if k > free.size and self._certified(oracle, projection, tracker):
                tracker.extras["stopped"] = "certified"  # the random restarts would only spend the budget
                break
            if k == 0:
                point = first
            elif k <= free.size:
                point = np.eye(n)[free[k - 1]]
            else:
                point = rng.dirichlet(np.ones(n))
            tracker.extras["descents"] = k = k + 1
            before = tracker.nfev
            self._descend(projection(point), oracle, rows, bounds, tracker, messages)
            if tracker.nfev == before and k > free.size:  # random starts only land on scored points: a tiny polytope
                break
        return Status.COMPLETED

    def _certified(self, oracle: _Oracle, projection: Projection, tracker: Tracker) -> bool:
        """Whether the best point so far is feasible with a KKT residual ``≤ certify_tol`` (its gradient
        from SLSQP's calls when it asked for one there, else one adjoint solve, counted in ``njev``)."""
        score = tracker.best
        if self.certify_tol is None or score is None or not score.feasible:
            return False
        key = np.asarray(score.mix, dtype=float).tobytes()
        if key in oracle.scores and oracle.scores[key] is score:
            slope = -oracle.jac(score.mix)
        else:
            gradient = tracker.gradient(score)
            if gradient is None:
                return False
            slope = np.asarray(gradient, dtype=float)
        if not np.all(np.isfinite(slope)):
            return False
        residual = kkt_certificate(projection.constraints, score.mix, slope).residual
        tracker.extras["best_kkt_residual"] = residual
        return residual <= self.certify_tol

    def _descend(
        self, start: FloatArray, oracle: _Oracle, rows: list[LinearConstraint], bounds: Bounds, tracker: Tracker, messages: dict[str, int]
    ) -> None:
        """One SLSQP descent, restarted once from the best point if SLSQP ends abnormally."""
        for attempt in range(2):
            before = tracker.best_value
            result = self._slsqp(start, oracle, rows, bounds)
            tracker.nit += int(result.nit)
            messages[str(result.message)] = messages.get(str(result.message), 0) + 1
            if result.success or attempt or tracker.best_x is None or tracker.best_value <= before:
                return
            start = np.asarray(tracker.best_x, dtype=float)

    def _slsqp(self, start: FloatArray, oracle: _Oracle, rows: list[LinearConstraint], bounds: Bounds) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # SLSQP warns when its start sits on a bound
            return minimize(
                oracle.fun,
                start,
                jac=oracle.jac,
                method="SLSQP",
                bounds=bounds,
                constraints=rows,
                options={"ftol": self.tol, "maxiter": self.max_iterations},
            )
