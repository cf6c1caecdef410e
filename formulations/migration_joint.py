"""The joint multi-epoch migration problem (docs/model.md §10.5): all of ``π^1..π^E`` at once.

``max Σ_e w_e P_cov^e(π^e) − γ Σ_e bytes(π^{e−1} → π^e)`` subject to every epoch's §10.1
constraints and the flows ``m^e_{s→t}`` with the per-epoch budget ``m_max`` linking
consecutive mixes.  The Pyomo model has one block per epoch (the mix, its constraints and
the flows from the previous block's mix); the decision is the stacked ``(π^1, …, π^E)`` and
every flow is an auxiliary column.  Unlike the epoch-by-epoch decomposition it can spend
the node-change budget early for a later epoch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyomo.environ as pyo

from edgeprefix.formulations.linear import LinearConstraints, read_linear_constraints
from edgeprefix.formulations.migration import (
    MigrationPlan,
    MigrationProblem,
    declare_flows,
    migration_plan,
    transfer_bytes,
)
from edgeprefix.formulations.objective import (
    INFEASIBLE_BASE,
    CoverageObjective,
    Score,
    clean_mix,
)
from edgeprefix.formulations.placement import declare_mix, diagnose_infeasibility

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class JointEvaluation:
    """Per-epoch evaluations of a stacked point; ``advertised_wait`` stacks their ``W̄`` for warm starts."""

    epochs: tuple[Any, ...]
    coverages: FloatArray
    feasible: tuple[bool, ...]
    advertised_wait: FloatArray


def build_joint_migration_model(problem: MigrationProblem) -> pyo.ConcreteModel:
    """One block per epoch: §10.1 mix and constraints, flows from the previous epoch's mix."""
    model = pyo.ConcreteModel(name=f"migration[{problem.instance.name}]")
    model.E = pyo.Set(initialize=range(len(problem.epochs)), ordered=True, doc="epochs e")
    model.epoch = pyo.Block(model.E, doc="epoch e: mix π^e, its constraints and the flows m^e from π^{e−1}")
    for e in model.E:
        block = model.epoch[e]
        declare_mix(block, problem.epoch_instance(e))
        declare_flows(block, problem.current if e == 0 else model.epoch[e - 1].pi, problem.change_budget)
    return model


@dataclass(frozen=True)
class JointMigrationProblem:
    """Solver-facing joint problem (build with :func:`joint_migration_problem`)."""

    problem: MigrationProblem
    objectives: tuple[CoverageObjective, ...]
    model: pyo.ConcreteModel = field(repr=False, compare=False)
    constraints: LinearConstraints = field(repr=False)
    max_bytes: float = 0.0

    @property
    def n_epochs(self) -> int:
        return len(self.objectives)

    @property
    def profile_ids(self) -> tuple[str, ...]:
        return self.problem.instance.profile_ids

    @property
    def variable_names(self) -> tuple[str, ...]:
        return tuple(f"{epoch.name}.{sid}" for epoch in self.problem.epochs for sid in self.profile_ids)

    @property
    def dimension(self) -> int:
        return self.constraints.n_decision

    def split(self, x: npt.ArrayLike) -> FloatArray:
        """The stacked point as ``(E, S)`` mixes."""
        return np.asarray(x, dtype=float).reshape(self.n_epochs, len(self.profile_ids))

    def initial_point(self) -> FloatArray:
        """Staying with the current mix in every epoch (always within the budget)."""
        return np.tile(self.problem.current, self.n_epochs)

    def clean(self, x: npt.ArrayLike) -> FloatArray:
        uppers = self.split(self.constraints.upper[: self.dimension])
        return np.concatenate([clean_mix(row, upper) for row, upper in zip(self.split(x), uppers)])

    def plans(self, x: npt.ArrayLike) -> tuple[MigrationPlan, ...]:
        """The transport-LP plan into each epoch's mix."""
        mixes = self.split(x)
        previous = [self.problem.current, *mixes[:-1]]
        return tuple(
            migration_plan(self.problem.epoch_instance(e), previous[e], mixes[e], change_budget=self.problem.change_budget)
            for e in range(self.n_epochs)
        )

    def score(self, x: npt.ArrayLike, warm_start: FloatArray | None = None) -> Score:
        """``Σ_e w_e P_cov^e − γ Σ_e bytes^e`` when every epoch is stable; a penalty below all feasible values otherwise."""
        mix = self.clean(x)
        waits = self.split(warm_start) if warm_start is not None else [None] * self.n_epochs
        scores = [obj.score(row, w) for obj, row, w in zip(self.objectives, self.split(mix), waits)]
        weights = np.array([e.weight for e in self.problem.epochs])
        coverages = np.array([s.coverage for s in scores])
        feasible = all(s.feasible for s in scores)
        gamma = self.problem.byte_weight
        if feasible:
            cost = gamma * sum(p.moved_bytes for p in self.plans(mix)) if gamma > 0 else 0.0
            value = float(weights @ coverages) - cost
        else:
            penalties = np.array([INFEASIBLE_BASE + 0.5 * s.coverage - s.overload for s in scores])
            value = float(weights @ penalties) - gamma * self.n_epochs * self.max_bytes
        stacked = np.concatenate([s.warm_start if s.warm_start is not None else np.zeros(len(self.profile_ids)) for s in scores])
        evaluation = JointEvaluation(tuple(s.evaluation for s in scores), coverages, tuple(s.feasible for s in scores), stacked)
        return Score(
            value=value,
            coverage=float(weights @ coverages / weights.sum()),
            feasible=feasible,
            overload=max(s.overload for s in scores),
            mix=mix,
            evaluation=evaluation,
        )


def joint_migration_problem(problem: MigrationProblem) -> JointMigrationProblem:
    """Build the joint problem; raises ``InfeasibleConstraintsError`` when no plan meets every constraint."""
    objectives = []
    for e in range(len(problem.epochs)):
        instance = problem.epoch_instance(e)
        diagnose_infeasibility(instance)
        target = instance.placement.target if problem.target is None else float(problem.target)
        objectives.append(
            CoverageObjective(instance, target, problem.policy, problem.evaluator, problem.queue_model, queue_law=problem.queue_law)
        )
    model = build_joint_migration_model(problem)
    built: dict[str, JointMigrationProblem] = {}  # the black box is the problem's own score, bound below
    model.objective_of = pyo.ExternalFunction(lambda *pi: built["problem"].score(np.array(pi)).value)
    model.objective = pyo.Objective(
        expr=model.objective_of(*[model.epoch[e].pi[s] for e in model.E for s in model.epoch[e].S]),
        sense=pyo.maximize,
        doc="Σ_e w_e P_cov^e(π^e) − γ Σ_e cost^e (black box)",
    )
    constraints = read_linear_constraints(model, [model.epoch[e].pi for e in model.E])
    constraints.check_feasible()
    joint = JointMigrationProblem(problem, tuple(objectives), model, constraints, float(transfer_bytes(problem.instance).max()))
    built["problem"] = joint
    return joint
