"""Simulation in the loop: the placement objective scored by the network simulator (docs/model.md §14).

A reference for small instances: ``π ↦`` the mean simulated TTFT coverage over a fixed set of
seeds (common random numbers: every mix sees the same networks' randomness), with Theorem 1's
tier rule routing on the mix's own mean-field advertised delays (the routing both queue models
assume).  A point whose mean-field operating point is unstable or does not converge is
infeasible and penalised as in :mod:`edgeprefix.formulations.objective`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgeprefix.formulations.objective import INFEASIBLE_BASE, POLICIES, Evaluator, Score, default_evaluator
from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.instance import Instance


@dataclass(frozen=True)
class SimulationSettings:
    """Seeds, network size and run length of each simulated score.

    ``seeds`` : the fixed seed set (the same for every mix); ``nodes`` : nodes on the torus;
    ``horizon``, ``warmup`` : measured and discarded seconds.
    """

    seeds: tuple[int, ...] = (0, 1, 2, 3)
    nodes: float = 300.0
    horizon: float = 40.0
    warmup: float = 30.0

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("simulation seeds: at least one seed is needed")
        if not (self.nodes >= 10 and self.horizon > 0 and self.warmup >= 0):
            raise ValueError(
                f"simulation settings: nodes >= 10, horizon > 0 and warmup >= 0 are needed, got "
                f"{plain(self.nodes)}, {plain(self.horizon)}, {plain(self.warmup)}"
            )


@dataclass(frozen=True)
class SimulationObjective:
    """``π ↦`` mean simulated coverage at ``τ_0`` over ``settings.seeds`` (same interface as ``CoverageObjective``)."""

    instance: Instance
    target: float
    policy: str = "load_aware"
    settings: SimulationSettings = field(default_factory=SimulationSettings)
    evaluator: Evaluator | None = None
    queue_model: str = "simulation"

    def __post_init__(self) -> None:
        if not (np.isfinite(self.target) and self.target > 0):
            raise ValueError(f"target τ_0 must be a positive number of seconds, got {plain(self.target)}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {list(POLICIES)}, got {self.policy!r}")

    def score(self, mix, warm_start=None) -> Score:
        from edgeprefix.placement.simulation.compare import analytical_router
        from edgeprefix.placement.simulation.layout import LayoutSpec
        from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network

        evaluate = self.evaluator or default_evaluator()
        ev = evaluate(self.instance, mix, self.policy, target=self.target, warm_start=warm_start)
        rho = np.asarray(ev.utilization, dtype=float)
        finite = rho[np.isfinite(rho)]
        overload = float(max(0.0, finite.max() - 1.0)) if finite.size else 0.0
        converged = ev.fixed_point is None or bool(ev.fixed_point.converged)
        feasible = bool(ev.stable) and converged
        if not feasible:
            coverage = float(ev.coverage(self.target))
            return Score(INFEASIBLE_BASE + 0.5 * coverage - overload, coverage, False, overload, mix, ev)
        s = self.settings
        spec = SimulationSpec(horizon=s.horizon, warmup=s.warmup, layout=LayoutSpec(mean_nodes=s.nodes, counts="exact"))
        router = analytical_router(ev)
        coverage = float(np.mean([simulate_network(self.instance, mix, router, spec, seed=seed).coverage(self.target) for seed in s.seeds]))
        return Score(coverage, coverage, True, overload, mix, ev)

    def score_many(self, mixes, warm_start=None) -> list[Score]:
        """:meth:`score` of every mix, one by one (each simulation is the cost; nothing to batch)."""
        scores: list[Score] = []
        for mix in mixes:
            scores.append(self.score(mix, warm_start))
            warm_start = scores[-1].warm_start
        return scores
