"""Epoch plans confirmed on the trace: migrated mixes vs the best static mix (docs/model.md §17, §10.5).

From an epochs file with windows (``edgeprefix epochs``): the migration planner decides the
epoch mixes ``π^1..π^E`` (:func:`edgeprefix.solvers.migration.solve_migration`), the static
baseline is the one mix that maximises the weighted mean coverage over the epochs
(:func:`edgeprefix.formulations.static_mix.static_mix_problem`), and the trace is replayed once
under each: with the mixes switching at the epoch starts (the fewest nodes change profile,
queues carry over) and with the static mix throughout, on the same networks, locations and
requests.  Per epoch: replayed and predicted coverage of both, the gain, and what the plan
moves (share of nodes and bytes, in the instance's memory units per node of the fleet).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgeprefix.formulations.migration import MigrationProblem
from edgeprefix.formulations.static_mix import static_mix_problem
from edgeprefix.placement.pipeline.trace_workload import TraceWorkload
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.replay import MixSchedule, ReplaySpec
from edgeprefix.placement.simulation.replay_analysis import ReplayReport, replay_replicated
from edgeprefix.solvers.api import solve
from edgeprefix.solvers.migration import MigrationSolution, solve_migration


@dataclass(frozen=True)
class EpochReplay:
    """The plan, the static mix and both replays (``summary()`` is the JSON)."""

    problem: MigrationProblem = field(repr=False)
    solution: MigrationSolution = field(repr=False)
    static_mix: dict[str, float]
    static_coverage_predicted: float
    migrated_report: ReplayReport = field(repr=False)
    static_report: ReplayReport = field(repr=False)

    @property
    def migrated(self) -> dict[str, Any]:
        """Summary of the replay under the migrated mixes."""
        return self.migrated_report.summary()

    @property
    def static(self) -> dict[str, Any]:
        """Summary of the replay under the static mix."""
        return self.static_report.summary()

    def rows(self) -> list[dict[str, Any]]:
        out = []
        migrated, static = self.migrated, self.static
        for e, (epoch, decision) in enumerate(zip(self.problem.epochs, self.solution.epochs)):
            mig, sta = migrated["epochs"][e], static["epochs"][e]
            out.append(
                {
                    "name": epoch.name,
                    "start": epoch.start,
                    "end": epoch.end,
                    "requests": mig["requests"],
                    "intensity": self.problem.epoch_instance(e).network.request_intensity,
                    "mix": dict(decision.mix),
                    "coverage_migrated": mig["coverage_replayed"],
                    "coverage_static": sta["coverage_replayed"],
                    "gain": mig["coverage_replayed"] - sta["coverage_replayed"],
                    "predicted_migrated": mig["coverage_predicted"],
                    "predicted_static": sta["coverage_predicted"],
                    "predicted_gain": mig["coverage_predicted"] - sta["coverage_predicted"],
                    "moved_share": decision.plan.moved_share,
                    "moved_bytes": decision.plan.moved_bytes,
                    "nodes_changed": mig["nodes_changed"],
                }
            )
        return out

    def summary(self) -> dict[str, Any]:
        rows = self.rows()
        migrated, static = self.migrated, self.static
        return {
            "static_mix": dict(self.static_mix),
            "static_coverage_predicted": self.static_coverage_predicted,
            "coverage_migrated": migrated["coverage_replayed"],
            "coverage_static": static["coverage_replayed"],
            "gain": migrated["coverage_replayed"] - static["coverage_replayed"],
            "predicted_migrated": migrated["coverage_predicted"],
            "predicted_static": static["coverage_predicted"],
            "moved_bytes": float(sum(r["moved_bytes"] for r in rows)),
            "epochs": rows,
        }


def epoch_schedule(problem: MigrationProblem, mixes: list[Any]) -> MixSchedule:
    """The replay schedule of ``problem``'s windows with one mix per epoch."""
    missing = [e.name for e in problem.epochs if e.start is None]
    if missing:
        raise ValueError(f"epochs file: epoch {missing[0]!r} has no window (start/end): cut the trace with edgeprefix epochs")
    return MixSchedule(
        starts=tuple(float(e.start) for e in problem.epochs if e.start is not None),  # all of them (checked above)
        instances=tuple(problem.epoch_instance(e) for e in range(len(problem.epochs))),
        mixes=tuple(mixes),
        names=tuple(e.name for e in problem.epochs),
    )


def epoch_replay(
    problem: MigrationProblem,
    workload: TraceWorkload,
    spec: ReplaySpec,
    *,
    method: str = "grid",
    budget: int | None = None,
    seed: int | None = 0,
    replications: int = 1,
    **options: Any,
) -> EpochReplay:
    """Plan the epochs, find the best static mix, and replay ``workload`` under both.

    ``method``/``budget``/``options`` go to both searches (per epoch for the plan); the
    replays share ``seed`` (common random numbers).
    """
    with progress_bar(total=4, desc="replay --epochs", unit="step") as bar:
        bar.set_postfix_str("epoch plan", refresh=False)
        solution = solve_migration(problem, method=method, budget=budget, seed=seed, **options)
        bar.update(1)
        bar.set_postfix_str("best static mix", refresh=False)
        result = solve(static_mix_problem(problem), method, budget=budget, seed=seed, **options)
        bar.update(1)
        static = np.asarray(result.x, dtype=float)
        migrated = epoch_schedule(problem, [problem.instance.mix_vector(dict(d.mix)) for d in solution.epochs])
        fixed = epoch_schedule(problem, [static] * len(problem.epochs))
        base = problem.instance
        bar.set_postfix_str("replay under the plan", refresh=False)
        migrated_report = replay_replicated(base, workload, None, spec, schedule=migrated, replications=replications, seed=seed)
        bar.update(1)
        bar.set_postfix_str("replay under the static mix", refresh=False)
        static_report = replay_replicated(base, workload, None, spec, schedule=fixed, replications=replications, seed=seed)
        bar.update(1)
    return EpochReplay(
        problem=problem,
        solution=solution,
        static_mix=dict(zip(base.profile_ids, static.tolist())),
        static_coverage_predicted=float(result.coverage),
        migrated_report=migrated_report,
        static_report=static_report,
    )
