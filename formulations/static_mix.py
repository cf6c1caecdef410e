"""One mix for every epoch: the static baseline of a migration plan (docs/model.md §10.5, §17).

``max_π Σ_e w_e P^e_cov(τ_0; π) / Σ_e w_e`` subject to the §10.1 constraints of the base
instance and ``ρ^e_s(π) < 1`` in every epoch.  It is the placement problem of the base
instance (same Pyomo declaration, same linear constraints: epochs only change ``p^e`` and
``Λ^e``) whose black box evaluates every epoch and returns their weighted average; a point
is feasible only when it is stable in every epoch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.formulations.migration import MigrationProblem
from edgeprefix.formulations.objective import default_evaluator
from edgeprefix.formulations.placement import PlacementProblem, placement_problem

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class EpochAverage:
    """The epochs' evaluations of one mix, read as one evaluation by the coverage objective.

    ``coverage(τ)`` is the ``w_e``-weighted mean; ``utilization`` the largest ``ρ^e_s`` per tier;
    ``stable`` holds when every epoch is stable; ``fixed_point`` is the first epoch's report that
    did not converge (else the first one's).  No warm start is offered (each epoch has its own).
    """

    evaluations: tuple[Any, ...]
    weights: FloatArray
    advertised_wait: None = None
    mean_wait: None = None

    def coverage(self, tau: float) -> float:
        values = np.array([float(ev.coverage(tau)) for ev in self.evaluations])
        return float(np.dot(self.weights, values) / self.weights.sum())

    @property
    def utilization(self) -> FloatArray:
        rho = np.array([np.asarray(ev.utilization, dtype=float) for ev in self.evaluations])
        top = np.max(np.where(np.isnan(rho), -np.inf, rho), axis=0)
        return np.where(np.isneginf(top), np.nan, top)  # NaN: a tier inactive in every epoch

    @property
    def stable(self) -> bool:
        return all(bool(ev.stable) for ev in self.evaluations)

    @property
    def fixed_point(self) -> Any:
        reports = [ev.fixed_point for ev in self.evaluations if ev.fixed_point is not None]
        failed = [r for r in reports if not r.converged]
        return failed[0] if failed else (reports[0] if reports else None)


def static_mix_problem(problem: MigrationProblem) -> PlacementProblem:
    """The placement problem whose black box averages ``P^e_cov`` over ``problem``'s epochs."""
    weights = np.array([e.weight for e in problem.epochs], dtype=float)
    instances = tuple(problem.epoch_instance(e) for e in range(len(problem.epochs)))
    inner = problem.evaluator or default_evaluator()

    def evaluator(instance: Any, mix: FloatArray, policy: str, *, target: float, warm_start: Any = None) -> EpochAverage:
        return EpochAverage(tuple(inner(inst, mix, policy, target=target) for inst in instances), weights)

    return placement_problem(problem.instance, target=problem.target, policy=problem.policy, evaluator=evaluator)
