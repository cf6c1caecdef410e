"""Deciding the epoch mixes of a :class:`~formulations.migration.MigrationProblem` (MODEL.md §10.5).

Epochs are decided in order (a receding horizon): epoch ``e`` maximises
``w_e P_cov^e(π) − γ bytes(π^{e−1} → π)`` under §10.1 and the node-change budget from the mix
chosen for ``e − 1``; the plan ``m_{s→t}`` between consecutive mixes is then the transport LP
(HiGHS through Pyomo).  Each epoch's search is an ordinary :func:`solvers.solve` run.
This is exact for one epoch; for several it is the greedy decomposition of the joint
objective (a joint search over ``π^1..π^E`` would trade coverage now for budget later).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from formulations.migration import MigrationPlan, MigrationProblem
from solvers.api import solve
from solvers.result import Result


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
    **options: Any,
) -> MigrationSolution:
    """Decide ``π^1..π^E`` epoch by epoch with ``method`` (default the 1/20 grid) and plan each move."""
    start = time.perf_counter()
    previous = problem.current
    decisions = []
    evaluations = 0
    total = 0.0
    rng = np.random.default_rng(seed)
    for e, epoch in enumerate(problem.epochs):
        sub = problem.epoch_problem(e, previous)
        result = solve(sub, method, budget=budget, seed=rng, **options)
        plan = sub.plan(result.x)
        evaluations += result.nfev
        total += epoch.weight * result.coverage - problem.byte_weight * plan.moved_bytes
        decisions.append(EpochDecision(epoch.name, dict(result.mix), result.coverage, result.fun, result.success, plan, result))
        previous = result.x
    ids = problem.instance.profile_ids
    return MigrationSolution(
        epochs=tuple(decisions),
        current=dict(zip(ids, problem.current.tolist())),
        objective=total,
        evaluations=evaluations,
        seconds=time.perf_counter() - start,
    )
