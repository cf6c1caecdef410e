"""Polish a returned mix until its KKT certificate holds (docs/model.md §18.6).

:func:`certify` takes a :class:`~edgeprefix.solvers.result.Result` of any method and, unless its
certificate already meets the tolerance, runs the gradient method (SLSQP on the exact gradient,
:class:`~edgeprefix.solvers.gradient.GradientSolver`) from the returned mix, one descent at a
time, each restarted from the best point with a fresh quasi-Newton model, until the KKT
stationarity residual of the best point is at most ``tol`` or the rounds or the evaluation
budget are spent.  The better of the returned and the polished point is kept (the objective
never goes down); the result says whether it is certified.

SLSQP stops on the objective's change (``ftol``), which near a maximum is about the square of
the residual times the curvature: ``ftol = 1e-14`` leaves residuals of ``1e-9–3e-8`` on the
classical instances, the gradient method's ``1e-10`` leaves ``1e-7–7e-6`` (benchmarks/README.md,
"Optimality certificates"), hence :data:`FTOL`.  A result whose certificate was not computed
(``solve(..., certificate=False)``) gets it first from its own evaluation (one gradient, no
fixed point).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from edgeprefix.formulations.objective import Score
from edgeprefix.solvers.api import run_solver
from edgeprefix.solvers.certificate import certify_point
from edgeprefix.solvers.gradient import GradientSolver
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Result, Status
from edgeprefix.solvers.tracking import Callback, Problem

DEFAULT_TOLERANCE = 1e-6  # on the KKT residual ‖∇P − Σ multipliers · normals‖_∞
DEFAULT_BUDGET = 200  # fixed-point solves the polishing may spend
ROUNDS = 4  # SLSQP descents at most
FTOL = 1e-14  # SLSQP's precision goal on the objective (see module notes)
MAX_ITERATIONS = 100  # SLSQP iterations per descent


def certify(
    problem: Problem,
    result: Result,
    *,
    tol: float = DEFAULT_TOLERANCE,
    budget: int = DEFAULT_BUDGET,
    callback: Callback | None = None,
    projection: Projection | None = None,
) -> Result:
    """``result`` polished until its KKT residual is at most ``tol`` (see module notes).

    Parameters
    ----------
    problem : the problem ``result`` solved.
    result : the result to certify (any method).
    tol : tolerance on the residual (> 0).
    budget : fixed-point solves the polishing may spend (≥ 1).
    callback, projection : as in :func:`edgeprefix.solvers.api.solve` (the callback sees the
        polishing's evaluations, counted from 1).

    Returns
    -------
    Result
        The better of ``result`` and the polished point, with ``certified`` set, the evaluations
        of both searches in order (``nfev``, ``njev``, ``nit``, ``seconds`` and the histories are
        totals) and ``polish``: ``tolerance``, ``residual_before``, ``coverage_before``,
        ``evaluations``, ``gradient_solves``, ``rounds``, ``improved`` and ``note`` (why it is not
        certified, else ``None``).  ``method``, ``extras`` and the status are the search's.

    Raises
    ------
    ValueError
        For a tolerance that is not a positive number or a budget below 1.
    """
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not (math.isfinite(tol) and tol > 0):
        raise ValueError(f"certify tolerance must be a positive number, got {tol!r}")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"certify budget must be an integer >= 1 evaluations, got {budget!r}")
    differentiable = getattr(problem, "differentiable", False) and not problem.constraints.has_auxiliary
    if result.certificate is None and differentiable and result.success and result.evaluation is not None:
        # not computed by the search (``certificate=False``): the result's own evaluation gives it
        score = Score(result.fun, result.coverage, True, 0.0, result.x, result.evaluation)
        certificate, note = certify_point(problem, score)
        result = dataclasses.replace(result, certificate=certificate, certificate_note=note)
    before = result.certificate
    facts: dict[str, Any] = {
        "tolerance": float(tol),
        "residual_before": None if before is None else before.residual,
        "coverage_before": result.coverage,
        "evaluations": 0,
        "gradient_solves": 0,
        "rounds": 0,
        "improved": False,
        "note": None,
    }
    if before is not None and before.residual <= tol:
        return dataclasses.replace(result, certified=True, polish=facts)
    if not differentiable:
        why = (result.certificate_note or "no exact gradient").removeprefix("no certificate: ")
        facts["note"] = f"{why}, so the mix cannot be polished"
        return dataclasses.replace(result, certified=False, polish=facts)
    projector = projection or Projection(problem.constraints)
    start = time.perf_counter()
    runs: list[Result] = []
    best = result
    for _ in range(ROUNDS):
        left = budget - sum(r.nfev for r in runs)
        if left < 1:
            break
        solver = GradientSolver(starts=1, x0=tuple(best.x.tolist()), tol=FTOL, max_iterations=MAX_ITERATIONS)
        run = run_solver(problem, solver, budget=left, callback=callback, projection=projector)
        runs.append(run)
        moved = run.fun >= best.fun and not np.array_equal(run.x, best.x)
        if run.fun >= best.fun:  # never below the returned point's objective
            best = run
        if _meets(best, tol) or run.status is Status.CALLBACK_STOP or not moved:
            break
    merged = _merge(result, runs, best, time.perf_counter() - start)
    certified = _meets(best, tol)
    facts.update(
        evaluations=sum(r.nfev for r in runs),
        gradient_solves=sum(r.njev for r in runs),
        rounds=len(runs),
        improved=best is not result,
    )
    if not certified:
        facts["note"] = (
            f"KKT residual {best.certificate.residual:.3g} > {tol:g} after {len(runs)} SLSQP descents and {facts['evaluations']} evaluations"
            if best.certificate is not None
            else (best.certificate_note or "").removeprefix("no certificate: ")
        )
    return dataclasses.replace(merged, certified=certified, polish=facts)


def _meets(result: Result, tol: float) -> bool:
    return result.certificate is not None and result.certificate.residual <= tol


def _merge(result: Result, runs: list[Result], best: Result, seconds: float) -> Result:
    """``result`` followed by the polishing ``runs``, reporting ``best``."""
    if not runs:
        return result
    parts = [result, *runs]
    history = np.maximum.accumulate(np.concatenate([r.history for r in parts]))
    arrays = {key: np.concatenate([getattr(r, key) for r in parts]) for key in ("points", "values", "coverages", "feasible")}
    for array in (history, *arrays.values()):
        array.setflags(write=False)
    status = result.status
    if status is Status.NO_FEASIBLE_POINT and best.success:
        status = best.status
    return dataclasses.replace(
        result,
        x=best.x,
        mix=best.mix,
        fun=best.fun,
        coverage=best.coverage,
        success=best.success,
        status=status,
        message=status.message,
        nfev=sum(r.nfev for r in parts),
        nit=sum(r.nit for r in parts),
        njev=sum(r.njev for r in parts),
        seconds=result.seconds + seconds,
        history=history,
        evaluation=best.evaluation,
        certificate=best.certificate,
        certificate_note=best.certificate_note,
        points=arrays["points"],
        values=arrays["values"],
        coverages=arrays["coverages"],
        feasible=arrays["feasible"],
    )
