"""The one entry point of the solver layer: ``solve(problem, method=..., budget=..., seed=...)``."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from edgeprefix.solvers.base import Solver
from edgeprefix.solvers.certificate import certify_point
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.registry import get_solver
from edgeprefix.solvers.result import Result, Status
from edgeprefix.solvers.tracking import Callback, Problem, StopSearch, Tracker

DEFAULT_BUDGET = 300


def solve(
    problem: Problem,
    method: str = "spsa",
    *,
    budget: int | None = DEFAULT_BUDGET,
    seed: int | np.random.Generator | None = 0,
    callback: Callback | None = None,
    projection: Projection | None = None,
    certificate: bool = True,
    **options: Any,
) -> Result:
    """Search ``problem`` with ``method`` and return the best feasible mix found, with its KKT
    certificate (``Result.certificate``, docs/model.md §18.6) when the objective has an exact gradient.

    Parameters
    ----------
    problem : a formulation (e.g. :class:`edgeprefix.formulations.placement.PlacementProblem`); never mutated.
    method : a registered name (``gradient``, ``spsa``, ``tpe``, ``cmaes``, ``qmc``, ``grid``, ``random``).
    budget : black-box evaluations allowed (``None``: only for methods that end on their own).
    seed : seed or generator; the only source of randomness.  Default 0, as ``edgeprefix solve
        --seed``: the same call returns the same mix; ``None`` draws fresh entropy each call.
    callback : called with a :class:`edgeprefix.solvers.result.Progress` after every evaluation;
        returning ``True`` stops the search.
    projection : a projector to reuse (built from ``problem.constraints`` when omitted).
    certificate : compute the best mix's KKT certificate (one exact gradient there, not counted in
        ``njev`` nor ``seconds``; at 300 profiles with most shares at 0 it costs as much as ~70
        evaluations, benchmarks/README.md); ``False`` skips it (``kkt_note`` says so).
    options : method options (see each solver's fields); unknown names raise with the valid list.

    Raises
    ------
    InfeasibleConstraintsError
        When the linear constraints admit no mix (before any evaluation).
    ValueError
        For an unknown method or option, or a bad budget.
    """
    solver = get_solver(method).from_options(options)
    return run_solver(problem, solver, budget=budget, seed=seed, callback=callback, projection=projection, certificate=certificate)


def run_solver(
    problem: Problem,
    solver: Solver,
    *,
    budget: int | None = DEFAULT_BUDGET,
    seed: int | np.random.Generator | None = 0,
    callback: Callback | None = None,
    projection: Projection | None = None,
    certificate: bool = True,
) -> Result:
    """:func:`solve` with a built solver (registered or not, e.g. a benchmark's baseline); same arguments."""
    method = solver.name
    solver_cls = type(solver)
    if budget is None and solver_cls.NEEDS_BUDGET:
        raise ValueError(f"method {method!r} needs a budget (a positive number of evaluations), got None")
    if solver_cls.NEEDS_GRADIENT and not getattr(problem, "differentiable", False):
        why = getattr(problem, "gradient_missing", "") or f"{type(problem).__name__} does not provide them"
        raise ValueError(f"method {method!r} needs exact gradients, but {why}: use a derivative-free method")
    tracker = Tracker(problem, budget, callback)
    projector = projection or Projection(problem.constraints)
    rng = np.random.default_rng(seed)
    calls0, seconds0 = projector.calls, projector.seconds
    start = time.perf_counter()
    try:
        status = solver.run(problem, projector, tracker, rng)
    except StopSearch as stop:
        status = stop.status
    best = tracker.best_score()
    seconds = time.perf_counter() - start
    if best is None:
        raise ValueError(f"method {method!r} ended before scoring any mix ({status.message})")
    if not best.feasible:
        status = Status.NO_FEASIBLE_POINT
    calls = projector.calls - calls0
    extras = dict(tracker.extras)
    extras.update(
        projections=calls,
        projection_seconds_per_call=(projector.seconds - seconds0) / calls if calls else 0.0,
    )
    frozen = {
        key: np.array(values)
        for key, values in (
            ("history", tracker.history),
            ("values", tracker.values),
            ("coverages", tracker.coverages),
        )
    }
    points = np.array(tracker.points, dtype=float).reshape(len(tracker.points), problem.dimension)
    feasible = np.array(tracker.feasible, dtype=bool)
    cert, note = certify_point(problem, best) if certificate else (None, "no certificate: not computed (certificate=False)")
    for array in (*frozen.values(), points, feasible, best.mix):
        array.setflags(write=False)
    return Result(
        method=method,
        x=best.mix,
        mix=dict(zip(problem.variable_names, best.mix.tolist())),
        fun=float(best.value),
        coverage=float(best.coverage),
        success=bool(best.feasible),
        status=status,
        message=status.message,
        nfev=tracker.nfev,
        nit=tracker.nit,
        seconds=seconds,
        points=points,
        feasible=feasible,
        evaluation=best.evaluation,
        extras=extras,
        njev=tracker.njev,
        certificate=cert,  # after the clock: not part of the search, nor of njev
        certificate_note=note,
        history=frozen["history"],
        values=frozen["values"],
        coverages=frozen["coverages"],
    )
