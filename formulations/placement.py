"""Placement (docs/model.md §10.1, eq. (49)): ``max_π P_cov(τ_0; π)`` over the feasible mixes.

The Pyomo model declares the decision ``π_s ∈ [0, π_s^max]`` and every linear constraint as a
named rule with ``doc=``; the objective is a Pyomo ``ExternalFunction`` wrapping the fixed
point (a black box no Pyomo solver can optimise).  Solvers read the linear part back with
:func:`edgeprefix.formulations.linear.read_linear_constraints` and search the black box themselves.

Start-up: Pyomo is imported when the model is built, and :class:`PlacementProblem` builds it on first
access of ``model``.  The polytope of :func:`declare_mix` is also written out as arrays
(:func:`placement_polytope`), so a search that never asks for the model never imports Pyomo (whose
deferred-import hook loads ``scipy.stats`` as soon as Pyomo and scipy are both imported);
tests/test_startup_imports.py checks those arrays against the Pyomo read-back.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog

from edgeprefix.formulations.linear import LinearConstraints, read_linear_constraints
from edgeprefix.formulations.objective import (
    CoverageObjective,
    Differentiator,
    Evaluator,
    Score,
    clean_mix,
    clean_mixes,
)
from edgeprefix.formulations.simulated import SimulationObjective, SimulationSettings
from edgeprefix.placement.errors import InfeasibleConstraintsError
from edgeprefix.placement.model.instance import Instance

if TYPE_CHECKING:
    import pyomo.environ as pyo

FloatArray = npt.NDArray[np.float64]


def share_caps(instance: Instance) -> FloatArray:
    """``π_s^max`` per profile: the instance's cap (default 1), shape ``(S,)``."""
    caps = dict(instance.placement.max_share)
    return np.array([float(caps.get(sid, 1.0)) for sid in instance.profile_ids])


def declare_mix(model: pyo.ConcreteModel, instance: Instance) -> None:
    """Add the mix ``π`` and the linear constraints of §10.1 to ``model`` (mutates the new model).

    Components: set ``S`` (profile ids), variable ``pi``, constraints ``simplex``,
    ``memory_budget`` (when ``B̄`` is set), ``fallback`` (when ``π_min > 0``) and
    ``no_capacity`` (``π_s = 0`` where ``c_s < 1``).
    """
    import pyomo.environ as pyo

    ids = instance.profile_ids
    caps = dict(zip(ids, share_caps(instance)))
    memory = dict(zip(ids, instance.memory.tolist()))  # B_s
    slots = dict(zip(ids, instance.concurrency.tolist()))  # c_s
    plc = instance.placement
    model.S = pyo.Set(initialize=ids, ordered=True, doc="cache profiles s")
    model.pi = pyo.Var(
        model.S, bounds=lambda m, s: (0.0, caps[s]), initialize=0.0, doc="share π_s of nodes with profile s, in [0, π_s^max]"
    )
    model.simplex = pyo.Constraint(expr=sum(model.pi[s] for s in model.S) == 1.0, doc="Σ_s π_s = 1")
    if plc.memory_budget is not None:
        model.memory_budget = pyo.Constraint(expr=sum(memory[s] * model.pi[s] for s in model.S) <= plc.memory_budget, doc="Σ_s π_s B_s ≤ B̄")
    if plc.fallback is not None and plc.fallback_min > 0:
        model.fallback = pyo.Constraint(expr=model.pi[plc.fallback] >= plc.fallback_min, doc="π_0 ≥ π_min")
    idle = [s for s in ids if slots[s] < 1]
    if idle:
        model.no_capacity = pyo.Constraint(idle, rule=lambda m, s: m.pi[s] == 0.0, doc="π_s = 0 where c_s < 1")


def build_placement_model(instance: Instance, objective: Callable[[FloatArray], float] | None = None) -> pyo.ConcreteModel:
    """The placement model of ``instance`` (pure: a new model each call).

    ``objective`` (``π ↦ P_cov``) becomes the maximised ``ExternalFunction`` objective ``coverage``.
    """
    import pyomo.environ as pyo

    model = pyo.ConcreteModel(name=f"placement[{instance.name}]")
    declare_mix(model, instance)
    if objective is not None:
        model.coverage_of = pyo.ExternalFunction(lambda *pi: float(objective(np.array(pi, dtype=float))))
        model.coverage = pyo.Objective(
            expr=model.coverage_of(*[model.pi[s] for s in model.S]), sense=pyo.maximize, doc="P_cov(τ_0; π), black box"
        )
    return model


_PLAIN_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _plain_id(sid: str) -> bool:
    """Whether Pyomo names the index ``sid`` without quotes (``pi[sid]``)."""
    if not _PLAIN_ID.fullmatch(sid):
        return False
    try:
        float(sid)  # "inf", "nan", "infinity": Pyomo quotes strings that read as numbers
    except ValueError:
        return True
    return False


def placement_polytope(instance: Instance) -> LinearConstraints | None:
    """The linear part of :func:`declare_mix` as arrays, as :func:`read_linear_constraints` reads it back
    from :func:`build_placement_model` (same rows, order, names and bounds), without importing Pyomo.

    ``None`` when a profile id is one Pyomo's component names quote (the caller then reads the model).
    """
    ids = instance.profile_ids
    if not all(_plain_id(sid) for sid in ids):
        return None
    n = len(ids)
    caps = share_caps(instance)
    slots = instance.concurrency.tolist()
    plc = instance.placement
    eq_rows: list[tuple[FloatArray, float, str]] = [(np.ones(n), 1.0, "simplex")]
    ub_rows: list[tuple[FloatArray, float, str]] = []
    if plc.memory_budget is not None:
        ub_rows.append((np.array([float(m) for m in instance.memory.tolist()]), float(plc.memory_budget), "memory_budget"))
    if plc.fallback is not None and plc.fallback_min > 0:
        row = np.zeros(n)
        row[ids.index(plc.fallback)] = -1.0  # π_0 ≥ π_min, stored negated
        ub_rows.append((row, -float(plc.fallback_min), "fallback"))
    for i, sid in enumerate(ids):
        if slots[i] < 1:
            row = np.zeros(n)
            row[i] = 1.0
            eq_rows.append((row, 0.0, f"no_capacity[{sid}]"))

    def frozen(rows: list[tuple[FloatArray, float, str]]) -> tuple[FloatArray, FloatArray, tuple[str, ...]]:
        a = np.array([r[0] for r in rows], dtype=float).reshape(len(rows), n)
        b = np.array([r[1] for r in rows], dtype=float)
        a.setflags(write=False)
        b.setflags(write=False)
        return a, b, tuple(r[2] for r in rows)

    a_eq, b_eq, eq_names = frozen(eq_rows)
    a_ub, b_ub, ub_names = frozen(ub_rows)
    lower = np.zeros(n)
    upper = np.array([float(c) for c in caps])
    lower.setflags(write=False)
    upper.setflags(write=False)
    return LinearConstraints(
        A_eq=a_eq,
        b_eq=b_eq,
        A_ub=a_ub,
        b_ub=b_ub,
        lower=lower,
        upper=upper,
        names=tuple(f"pi[{sid}]" for sid in ids),
        n_decision=n,
        eq_names=eq_names,
        ub_names=ub_names,
    )


@dataclass(frozen=True)
class PlacementProblem:
    """``max_π P_cov(τ_0; π)`` s.t. the linear constraints of §10.1 and ``ρ_s(π) < 1``.

    Build with :func:`placement_problem`.  Solvers use ``constraints`` (the linear part of ``model``),
    ``score`` (the black box) and ``variable_names``; nothing here is mutated by a solve.  ``model`` (the
    Pyomo model of :func:`build_placement_model`) is built by ``build_model`` on first access.
    """

    instance: Instance
    objective: CoverageObjective | SimulationObjective
    build_model: Callable[[], Any] = field(repr=False, compare=False)
    constraints: LinearConstraints = field(repr=False)

    @cached_property
    def model(self) -> pyo.ConcreteModel:
        """The Pyomo model (built once, on first access)."""
        return self.build_model()

    def __repr__(self) -> str:
        """One line: the instance by name and size, the objective's settings (not the whole instance)."""
        obj = self.objective
        return (
            f"PlacementProblem(instance {self.instance.name!r}: {len(self.instance.profiles)} profiles, "
            f"{len(self.instance.requests)} request types; target {obj.target:g} s, policy {obj.policy}, "
            f"queue model {obj.queue_model})"
        )

    @property
    def variable_names(self) -> tuple[str, ...]:
        """Profile ids, the order of ``π``."""
        return self.instance.profile_ids

    @property
    def dimension(self) -> int:
        return self.constraints.n_decision

    @property
    def target(self) -> float:
        return self.objective.target

    def initial_point(self) -> FloatArray:
        """The instance's default mix when it is feasible, else the uniform mix (to be projected)."""
        if self.instance.placement.mix is not None and not self.constraints.has_auxiliary:
            pi = self.instance.mix_vector(None)
            if self.constraints.decision_violation(pi)[0] <= 1e-9:
                return pi
        return np.full(self.dimension, 1.0 / self.dimension)

    def clean(self, x: npt.ArrayLike) -> FloatArray:
        """Snap a projected point onto the exact simplex (see :func:`edgeprefix.formulations.objective.clean_mix`)."""
        return clean_mix(x, self.constraints.upper[: self.dimension])

    def score(self, x: npt.ArrayLike, warm_start: FloatArray | None = None, *, gradient: bool = False) -> Score:
        """Evaluate a feasible point ``π`` (after :meth:`clean`) through the fixed point; ``gradient=True``
        adds the exact ``∂value/∂π`` (docs/model.md §15)."""
        if not gradient:
            return self.objective.score(self.clean(x), warm_start)
        score = self.objective.score(self.clean(x), warm_start)
        return dataclasses.replace(score, gradient=self.gradient(score))

    @property
    def gradient_missing(self) -> str:
        """Why scores have no exact gradient (empty when they have one): the simulation objective has
        none (docs/model.md §15); an injected evaluator's evaluations are differentiated only by an injected
        differentiator.  Both queue models have them at every radio exponent (the cell model: docs/model.md §14.6)."""
        if not callable(getattr(self.objective, "gradient", None)):
            return f"the {type(self.objective).__name__} has no gradient"
        if getattr(self.objective, "evaluator", None) is not None and getattr(self.objective, "differentiator", None) is None:
            return "an injected evaluator has exact gradients only with an injected differentiator"
        return ""

    @property
    def differentiable(self) -> bool:
        """Whether scores have exact gradients (see :attr:`gradient_missing`)."""
        return not self.gradient_missing

    def gradient(self, score: Score) -> FloatArray | None:
        """Exact ``∂value/∂π`` at a point already scored (see :meth:`CoverageObjective.gradient`)."""
        if not self.differentiable:
            raise ValueError(f"gradient: {self.gradient_missing}; use a derivative-free method")
        assert isinstance(self.objective, CoverageObjective)  # the simulation objective has no gradient (above)
        return self.objective.gradient(score)

    def score_many(self, points: Sequence[npt.ArrayLike], warm_start: FloatArray | None = None) -> list[Score]:
        """:meth:`score` of many feasible points in one batched evaluation (docs/model.md §16)."""
        mixes = clean_mixes(np.asarray(points, dtype=float).reshape(len(points), self.dimension), self.constraints.upper[: self.dimension])
        return self.objective.score_many(list(mixes), warm_start)

    def mix_dict(self, x: npt.ArrayLike) -> dict[str, float]:
        return dict(zip(self.variable_names, np.asarray(x, dtype=float).tolist()))


def diagnose_infeasibility(instance: Instance) -> None:
    """Name the field that empties the polytope of §10.1 (caps, fallback or budget ``B̄``).

    Raises
    ------
    InfeasibleConstraintsError
        With the rule, the bad values and the field.
    """
    caps = np.where(instance.concurrency >= 1, share_caps(instance), 0.0)
    plc = instance.placement
    if caps.sum() < 1.0 - 1e-12:
        raise InfeasibleConstraintsError(
            f"placement.max_share: the caps π_s^max of profiles with c_s >= 1 must sum to >= 1, but sum to {caps.sum():.6g} "
            f"({dict(zip(instance.profile_ids, caps.tolist()))})"
        )
    lower = np.zeros_like(caps)
    if plc.fallback is not None:
        fb = instance.fallback_index
        if plc.fallback_min > caps[fb]:
            raise InfeasibleConstraintsError(
                f"placement.fallback_min: π_min = {plc.fallback_min} exceeds the largest share {caps[fb]:g} "
                f"allowed to the fallback profile {plc.fallback!r}"
            )
        lower[fb] = plc.fallback_min
    if plc.memory_budget is not None:
        least = linprog(instance.memory, A_eq=np.ones((1, caps.size)), b_eq=[1.0], bounds=list(zip(lower, caps)), method="highs")
        if least.status == 0 and least.fun is not None and least.fun > plc.memory_budget + 1e-12:
            raise InfeasibleConstraintsError(
                f"placement.memory_budget: Σ_s π_s B_s <= B̄ must hold, but B̄ = {plc.memory_budget:g} is below the least "
                f"fleet memory {least.fun:.6g} that the caps and fallback allow"
            )


def placement_problem(
    instance: Instance,
    *,
    target: float | None = None,
    policy: str = "load_aware",
    evaluator: Evaluator | None = None,
    queue_model: str = "meanfield",
    simulation: SimulationSettings | None = None,
    differentiator: Differentiator | None = None,
    max_overloaded_share: float | None = None,
    queue_law: str = "slots",
) -> PlacementProblem:
    """Build the placement problem of ``instance`` (τ_0 defaults to ``placement.target``).

    ``queue_model`` (``meanfield`` or ``cell``, docs/model.md §14) sets the coverage model, ``queue_law``
    (``slots`` or ``engine``, docs/model.md §17.10) the node's law;
    ``max_overloaded_share`` caps the share of overloaded nodes under the cell law (docs/model.md §14.9);
    ``simulation`` replaces the model by the network simulator on a fixed seed set
    (:class:`~edgeprefix.formulations.simulated.SimulationSettings`; slow: small instances only).

    Raises
    ------
    InfeasibleConstraintsError
        When the simplex, budget ``B̄``, fallback ``π_min`` and caps ``π_s^max`` admit no mix
        (checked here, before any search).
    """
    tau = instance.placement.target if target is None else float(target)
    objective: CoverageObjective | SimulationObjective
    if simulation is not None:  # simulation in the loop (a reference for small instances)
        objective = SimulationObjective(instance, tau, policy, simulation, evaluator)
    else:
        objective = CoverageObjective(
            instance,
            tau,
            policy,
            evaluator,
            queue_model,
            differentiator=differentiator,
            max_overloaded_share=max_overloaded_share,
            queue_law=queue_law,
        )

    def build_model() -> pyo.ConcreteModel:
        return build_placement_model(instance, lambda pi: objective.score(clean_mix(pi, share_caps(instance))).value)

    constraints = placement_polytope(instance)
    builder = build_model
    if constraints is None:  # constraints the arrays do not cover: read them off the Pyomo model, and keep it
        built = build_model()
        constraints = read_linear_constraints(built, built.pi)
        builder = lambda: built  # noqa: E731
    diagnose_infeasibility(instance)
    constraints.check_feasible()
    return PlacementProblem(instance=instance, objective=objective, build_model=builder, constraints=constraints)
