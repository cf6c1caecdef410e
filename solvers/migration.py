"""Deciding the epoch mixes of a :class:`~edgeprefix.formulations.migration.MigrationProblem` (docs/model.md §10.5).

By default epochs are decided in order (a receding horizon): epoch ``e`` maximises
``w_e P_cov^e(π) − γ bytes(π^{e−1} → π)`` under §10.1 and the node-change budget from the mix
chosen for ``e − 1``; the plan ``m_{s→t}`` between consecutive mixes is then the transport LP
(HiGHS through Pyomo).  Each epoch's search is an ordinary :func:`edgeprefix.solvers.solve` run.
This is exact for one epoch; for several it is the greedy decomposition of the joint
objective.  ``joint=True`` searches ``(π^1, …, π^E)`` at once instead, so it can trade
coverage now for budget later.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgeprefix.formulations.migration import MigrationPlan, MigrationProblem
from edgeprefix.formulations.migration_joint import joint_migration_problem
from edgeprefix.placement.progress import progress_bar
from edgeprefix.solvers.api import DEFAULT_BUDGET, solve
from edgeprefix.solvers.result import Result


@dataclass(frozen=True)
class EpochDecision:
    """The mix chosen for one epoch, its coverage and the plan that reaches it."""

    name: str
    mix: dict[str, float]
    coverage: float
    objective: float
    feasible: bool
    plan: MigrationPlan
    result: Result = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "mix": dict(self.mix),
            "coverage": self.coverage,
            "objective": self.objective,
            "feasible": self.feasible,
            "moved_share": self.plan.moved_share,
            "moved_bytes": self.plan.moved_bytes,
            "plan": self.plan.table(),
        }


@dataclass(frozen=True)
class MigrationSolution:
    """Per-epoch decisions; ``objective = Σ_e w_e P_cov^e − γ Σ_e bytes^e``."""

    epochs: tuple[EpochDecision, ...]
    current: dict[str, float]
    objective: float
    evaluations: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "current_mix": dict(self.current),
            "objective": self.objective,
            "evaluations": self.evaluations,
            "seconds": self.seconds,
            "epochs": [e.to_dict() for e in self.epochs],
        }


def solve_migration(
    problem: MigrationProblem,
    *,
    method: str = "grid",
    budget: int | None = None,
    seed: int | None = 0,
    joint: bool = False,
    **options: Any,
) -> MigrationSolution:
    """Decide ``π^1..π^E`` epoch by epoch with ``method`` (default the 1/20 grid) and plan each move.

    With ``joint=True`` all epochs are searched at once (:mod:`edgeprefix.formulations.migration_joint`;
    ``budget`` is then the total, and the grid is refused: its product lattice is too large).
    """
    if joint:
        return _solve_joint(problem, method=method, budget=budget, seed=seed, **options)
    start = time.perf_counter()
    previous = problem.current
    decisions = []
    evaluations = 0
    total = 0.0
    rng = np.random.default_rng(seed)
    bar = progress_bar(total=len(problem.epochs), desc="migrate", unit="epoch")
    for e, epoch in enumerate(problem.epochs):
        sub = problem.epoch_problem(e, previous)
        with _epoch_progress(bar, f"epoch {epoch.name}", options) as watched:
            result = solve(sub, method, budget=budget, seed=rng, **watched)
        plan = sub.plan(result.x)
        evaluations += result.nfev
        total += epoch.weight * result.coverage - problem.byte_weight * plan.moved_bytes
        decisions.append(EpochDecision(epoch.name, dict(result.mix), result.coverage, result.fun, result.success, plan, result))
        previous = result.x
        bar.update(1)
        bar.set_postfix_str(f"epoch {epoch.name}: {result.nfev} evaluations")  # drawn now, however fast the epoch was
    bar.close()
    ids = problem.instance.profile_ids
    return MigrationSolution(
        epochs=tuple(decisions),
        current=dict(zip(ids, problem.current.tolist())),
        objective=total,
        evaluations=evaluations,
        seconds=time.perf_counter() - start,
    )


@contextlib.contextmanager
def _epoch_progress(bar: Any, label: str, options: dict[str, Any], count: bool = False) -> Iterator[dict[str, Any]]:
    """``options`` with a callback that shows ``label`` and the evaluations so far on ``bar``
    (advancing it by evaluations when ``count``); a caller's own callback is kept and still asked."""
    inner = options.get("callback")
    seen = [0]

    def callback(progress: Any) -> Any:
        if count:
            bar.update(progress.nfev - seen[0])
            seen[0] = progress.nfev
        bar.set_postfix_str(f"{label}: {progress.nfev} evaluations", refresh=False)
        return inner(progress) if inner is not None else False

    yield {**options, "callback": callback}


def _solve_joint(problem: MigrationProblem, *, method: str, budget: int | None, seed: int | None, **options: Any) -> MigrationSolution:
    if method == "grid":
        raise ValueError("the joint migration search needs a sampling method (spsa, tpe, cmaes, qmc, random), got 'grid'")
    start = time.perf_counter()
    joint = joint_migration_problem(problem)
    total = DEFAULT_BUDGET if budget is None else budget
    bar = progress_bar(total=total, desc="migrate (joint)", unit="eval")
    with _epoch_progress(bar, "all epochs", options, count=True) as watched:
        result = solve(joint, method, budget=total, seed=seed, **watched)
    bar.close()
    mixes, plans = joint.split(result.x), joint.plans(result.x)
    ids = problem.instance.profile_ids
    decisions = []
    for e, epoch in enumerate(problem.epochs):
        coverage = float(result.evaluation.coverages[e])
        decisions.append(
            EpochDecision(
                epoch.name,
                dict(zip(ids, mixes[e].tolist())),
                coverage,
                epoch.weight * coverage - problem.byte_weight * plans[e].moved_bytes,
                bool(result.evaluation.feasible[e]),
                plans[e],
                result,
            )
        )
    return MigrationSolution(
        epochs=tuple(decisions),
        current=dict(zip(ids, problem.current.tolist())),
        objective=float(sum(d.objective for d in decisions)),
        evaluations=result.nfev,
        seconds=time.perf_counter() - start,
    )
