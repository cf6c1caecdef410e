"""Multi-epoch migration (docs/model.md §10.5, paper Sec. VII).

Epochs ``e = 1..E`` carry their own workload (popularity ``p^e``, intensity ``Λ^e``) and weight
``w_e``; from the current mix ``π^0`` the decision is ``π^1..π^E``.  Between consecutive mixes
the nodes switching profile are the flows ``m^e_{s→t} ≥ 0`` with ``Σ_t m_{s→t} = π^{e−1}_s``,
``Σ_s m_{s→t} = π^e_t`` and the budget ``Σ_{s≠t} m_{s→t} ≤ m_max`` (eq. (53)); moving costs the
bytes of the states to load, ``Σ_{s≠t} m_{s→t} · bytes_{s→t}`` with
``bytes_{s→t} = Σ_{v ∈ C_t \\ C_s} κ_v (ℓ_v − ℓ_{parent(v)})`` (per node of the fleet, in the
instance's memory units), weighted by ``γ``.

Each epoch is an explicit Pyomo model: the §10.1 mix and constraints plus the flow block
(the flows are auxiliary columns of the linear constraints).  The plan between two given
mixes is the transportation LP of :func:`build_transport_model`, solved by Pyomo with HiGHS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyomo.environ as pyo

from edgeprefix.formulations.linear import LinearConstraints, read_linear_constraints
from edgeprefix.formulations.objective import (
    CoverageObjective,
    Evaluator,
    Score,
    clean_mix,
)
from edgeprefix.formulations.placement import (
    declare_mix,
    diagnose_infeasibility,
    share_caps,
)
from edgeprefix.placement.errors import plain
from edgeprefix.placement.files import parse_document, read_text
from edgeprefix.placement.model.instance import Instance, load_instance
from edgeprefix.placement.model.profiles import Profile, persistent_memory
from edgeprefix.placement.model.workload import PrefixForest

FloatArray = npt.NDArray[np.float64]
BUDGET_SLACK = 1e-9  # tolerance on m_max when planning between two already-rounded mixes
HIGHS = "appsi_highs"


def transfer_bytes(instance: Instance) -> FloatArray:
    """``bytes_{s→t}``: persistent memory of ``C_t \\ C_s`` (the states a node must load), ``(S, S)``."""
    forest = PrefixForest(instance.prefixes)
    sets = [set(p.prefixes) for p in instance.profiles]
    out = np.zeros((len(sets), len(sets)))
    for s, have in enumerate(sets):
        for t, want in enumerate(sets):
            missing = tuple(v for v in instance.profiles[t].prefixes if v not in have)
            if missing:
                out[s, t] = persistent_memory((Profile("missing", missing),), forest, instance.gpu.kv_per_token)[0]
    return out


def declare_flows(model: pyo.Block, previous: Any, change_budget: float | None, *, slack: float = 0.0) -> None:
    """Add flows ``m[s, t] ≥ 0`` from ``previous`` (``π^{e−1}``) to ``model.pi`` with the eq. (53) budget.

    ``previous`` is a fixed mix (array in profile order) or the previous epoch's ``pi`` variable.
    """
    ids = list(model.S)
    prev = previous if isinstance(previous, pyo.Var) else dict(zip(ids, np.asarray(previous, dtype=float).tolist()))
    model.flow = pyo.Var(model.S, model.S, bounds=(0.0, None), initialize=0.0, doc="m_{s→t}: share of nodes switching s → t")
    model.supply = pyo.Constraint(model.S, rule=lambda m, s: sum(m.flow[s, t] for t in m.S) == prev[s], doc="Σ_t m_{s→t} = π^{e−1}_s")
    model.demand = pyo.Constraint(model.S, rule=lambda m, t: sum(m.flow[s, t] for s in m.S) == m.pi[t], doc="Σ_s m_{s→t} = π^e_t")
    if change_budget is not None:
        model.change_budget = pyo.Constraint(
            expr=sum(model.flow[s, t] for s in model.S for t in model.S if s != t) <= change_budget + slack,
            doc="Σ_{s≠t} m_{s→t} ≤ m_max",
        )


def build_transport_model(
    previous: npt.ArrayLike, mix: npt.ArrayLike, cost: npt.ArrayLike, *, names: tuple[str, ...], change_budget: float | None = None
) -> pyo.ConcreteModel:
    """``min Σ cost_{s,t} m_{s→t}`` over the flows from ``previous`` to the fixed ``mix`` (a transport LP)."""
    cost = np.asarray(cost, dtype=float)
    model = pyo.ConcreteModel(name="migration_plan")
    model.S = pyo.Set(initialize=names, ordered=True, doc="cache profiles s")
    model.pi = pyo.Param(model.S, initialize=dict(zip(names, np.asarray(mix, dtype=float).tolist())), doc="target mix π^e")
    declare_flows(model, np.asarray(previous, dtype=float), change_budget, slack=BUDGET_SLACK)
    index = {s: i for i, s in enumerate(names)}
    model.cost = pyo.Objective(
        expr=sum(cost[index[s], index[t]] * model.flow[s, t] for s in model.S for t in model.S),
        sense=pyo.minimize,
        doc="Σ cost_{s,t} m_{s→t}",
    )
    return model


@dataclass(frozen=True)
class MigrationPlan:
    """Explicit flows ``m_{s→t}`` (``(S, S)``, rows = from) and what they move."""

    profile_ids: tuple[str, ...]
    flows: FloatArray = field(repr=False)
    moved_share: float  # Σ_{s≠t} m_{s→t}
    moved_bytes: float  # Σ_{s≠t} m_{s→t} bytes_{s→t}

    def table(self, tol: float = 1e-12) -> dict[str, dict[str, float]]:
        """``{from: {to: share}}`` of the nodes that change profile (``s ≠ t``, share > tol)."""
        out: dict[str, dict[str, float]] = {}
        for i, s in enumerate(self.profile_ids):
            for j, t in enumerate(self.profile_ids):
                if i != j and self.flows[i, j] > tol:
                    out.setdefault(s, {})[t] = float(self.flows[i, j])
        return out


def solve_transport(model: pyo.ConcreteModel) -> FloatArray:
    """Solve a transport model with HiGHS through Pyomo; the flows as an ``(S, S)`` array.

    Raises
    ------
    ValueError
        When the LP is infeasible (e.g. the budget ``m_max`` is below the total variation).
    """
    results = pyo.SolverFactory(HIGHS).solve(model, load_solutions=False)
    if results.solver.termination_condition != pyo.TerminationCondition.optimal:
        raise ValueError(f"the migration plan LP is not solvable: HiGHS ended with {results.solver.termination_condition}")
    model.solutions.load_from(results)
    ids = list(model.S)
    return np.array([[pyo.value(model.flow[s, t]) for t in ids] for s in ids])


def migration_plan(
    instance: Instance,
    previous: npt.ArrayLike,
    mix: npt.ArrayLike,
    *,
    change_budget: float | None = None,
    cost: npt.ArrayLike | None = None,
) -> MigrationPlan:
    """The optimal plan from ``previous`` to ``mix``: fewest bytes, then fewest moved nodes.

    ``cost`` overrides the per-move cost (e.g. all ones off the diagonal: the plan then moves
    exactly the total variation ``½ ||π^e − π^{e−1}||₁``).
    """
    bytes_ = transfer_bytes(instance)
    moves = 1.0 - np.eye(len(bytes_))
    if cost is None:
        cost = bytes_ + 1e-6 * max(bytes_.max(), 1.0) * moves  # ties go to the plan moving fewer nodes
    flows = solve_transport(build_transport_model(previous, mix, cost, names=instance.profile_ids, change_budget=change_budget))
    flows = np.clip(flows, 0.0, None)
    return MigrationPlan(instance.profile_ids, flows, float((flows * moves).sum()), float((flows * bytes_).sum()))


@dataclass(frozen=True)
class Epoch:
    """One epoch's workload: overrides of ``p_q`` and ``Λ`` and its weight ``w_e``.

    ``start``/``end`` optionally give the epoch's window on a trace's clock (seconds, as
    written by ``edgeprefix epochs``); the planner does not read them, trace replay does.
    """

    name: str = ""
    probabilities: tuple[tuple[str, float], ...] = ()
    request_intensity: float | None = None
    weight: float = 1.0
    start: float | None = None
    end: float | None = None

    def __post_init__(self) -> None:
        if not (np.isfinite(self.weight) and self.weight > 0):
            raise ValueError(f"epochs.weight: must be > 0, got {plain(self.weight)}")
        if (self.start is None) != (self.end is None):
            raise ValueError(f"epochs[{self.name}]: give both start and end of the window, or neither")
        if (
            self.start is not None
            and self.end is not None
            and not (np.isfinite(self.start) and np.isfinite(self.end) and self.start < self.end)
        ):
            raise ValueError(
                f"epochs[{self.name}]: the window needs start < end (seconds), got start={plain(self.start)}, end={plain(self.end)}"
            )


@dataclass(frozen=True)
class EpochProblem:
    """One epoch's search: ``max w_e P_cov^e(π) − γ bytes(π^{e−1} → π)`` over §10.1 + flows.

    Implements the solver-facing problem protocol (``constraints``, ``score``, ...); the flows
    are auxiliary columns that the projection chooses freely.  An unstable point scores
    ``w_e · penalty − γ · max bytes``, below every feasible point.
    """

    instance: Instance
    previous: FloatArray
    weight: float
    byte_weight: float
    change_budget: float | None
    objective: CoverageObjective
    model: pyo.ConcreteModel = field(repr=False, compare=False)
    constraints: LinearConstraints = field(repr=False)

    @property
    def variable_names(self) -> tuple[str, ...]:
        return self.instance.profile_ids

    @property
    def dimension(self) -> int:
        return self.constraints.n_decision

    def initial_point(self) -> FloatArray:
        """Staying put (``π^{e−1}``) always meets the budget."""
        return np.asarray(self.previous, dtype=float).copy()

    def clean(self, x: npt.ArrayLike) -> FloatArray:
        return clean_mix(x, self.constraints.upper[: self.dimension])

    def plan(self, mix: npt.ArrayLike) -> MigrationPlan:
        return migration_plan(self.instance, self.previous, mix, change_budget=self.change_budget)

    def score(self, x: npt.ArrayLike, warm_start: FloatArray | None = None) -> Score:
        mix = self.clean(x)
        score = self.objective.score(mix, warm_start)
        if self.byte_weight == 0:
            cost = 0.0
        elif score.feasible:
            cost = self.byte_weight * self.plan(mix).moved_bytes
        else:
            cost = self.byte_weight * float(transfer_bytes(self.instance).max())
        return dataclasses.replace(score, value=self.weight * score.value - cost)


@dataclass(frozen=True)
class MigrationProblem:
    """Epochs, the current mix ``π^0``, the budget ``m_max`` and the byte weight ``γ``."""

    instance: Instance
    epochs: tuple[Epoch, ...]
    current: FloatArray
    change_budget: float | None = None  # m_max
    byte_weight: float = 0.0  # γ
    target: float | None = None
    policy: str = "load_aware"
    evaluator: Evaluator | None = field(default=None, compare=False)
    queue_model: str = "meanfield"  # docs/model.md §14
    queue_law: str = "slots"  # docs/model.md §17.10

    def __post_init__(self) -> None:
        if not self.epochs:
            raise ValueError("epochs: at least one epoch is needed")
        if self.change_budget is not None and not (0 <= self.change_budget <= 1):
            raise ValueError(f"change_budget m_max must lie in [0, 1], got {plain(self.change_budget)}")
        if not (np.isfinite(self.byte_weight) and self.byte_weight >= 0):
            raise ValueError(f"byte_weight γ must be >= 0, got {plain(self.byte_weight)}")
        object.__setattr__(self, "current", self.instance.mix_vector(self.current, field_name="current_mix"))
        for e in range(len(self.epochs)):
            self.epoch_instance(e)  # validates overrides early

    def epoch_instance(self, e: int) -> Instance:
        """The instance with epoch ``e``'s popularity ``p^e`` and intensity ``Λ^e``."""
        epoch = self.epochs[e]
        instance = self.instance
        if epoch.probabilities:
            instance = instance.with_probabilities(dict(epoch.probabilities))
        if epoch.request_intensity is not None:
            instance = instance.with_network(request_intensity=epoch.request_intensity)
        return instance

    def epoch_problem(self, e: int, previous: npt.ArrayLike) -> EpochProblem:
        """Epoch ``e``'s Pyomo model (§10.1 + flows from ``previous``) and its black box."""
        instance = self.epoch_instance(e)
        previous = np.asarray(previous, dtype=float)
        objective = CoverageObjective(
            instance,
            instance.placement.target if self.target is None else float(self.target),
            self.policy,
            self.evaluator,
            self.queue_model,
            queue_law=self.queue_law,
        )
        model = pyo.ConcreteModel(name=f"migration_epoch[{e}]")
        declare_mix(model, instance)
        declare_flows(model, previous, self.change_budget)
        caps = share_caps(instance)
        model.objective_of = pyo.ExternalFunction(lambda *pi: objective.score(clean_mix(pi, caps)).value)
        model.objective = pyo.Objective(
            expr=model.objective_of(*[model.pi[s] for s in model.S]), sense=pyo.maximize, doc="w_e P_cov^e(π) − γ cost^e (black box)"
        )
        constraints = read_linear_constraints(model, model.pi)
        diagnose_infeasibility(instance)
        constraints.check_feasible()
        return EpochProblem(instance, previous, self.epochs[e].weight, self.byte_weight, self.change_budget, objective, model, constraints)


def _epoch_from(i: int, data: Any) -> Epoch:
    if not isinstance(data, Mapping):
        raise ValueError(f"epochs[{i}]: must be a table, got {data!r}")
    allowed = {"name", "probabilities", "request_intensity", "weight", "start", "end"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"epochs[{i}].{unknown[0]}: unknown field (allowed: {sorted(allowed)})")
    probabilities = data.get("probabilities", {})
    if not isinstance(probabilities, Mapping):
        raise ValueError(f"epochs[{i}].probabilities: must be a table of request id -> probability")
    return Epoch(
        name=str(data.get("name", f"epoch{i + 1}")),
        probabilities=tuple((str(k), float(v)) for k, v in probabilities.items()),
        request_intensity=None if data.get("request_intensity") is None else float(data["request_intensity"]),
        weight=float(data.get("weight", 1.0)),
        start=None if data.get("start") is None else float(data["start"]),
        end=None if data.get("end") is None else float(data["end"]),
    )


def migration_from_mapping(data: Mapping[str, Any], base: Path | None = None, **kwargs: Any) -> MigrationProblem:
    """Build a :class:`MigrationProblem` from a parsed epochs file (see ``edgeprefix migrate``)."""
    allowed = {"instance", "current_mix", "change_budget", "byte_weight", "target", "epochs"}
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown field of the epochs file (allowed: {sorted(allowed)})")
    source = data.get("instance")
    if source is not None and base is not None and not Path(str(source)).is_absolute() and (base / str(source)).is_file():
        source = base / str(source)
    instance = load_instance(source)
    epochs = data.get("epochs")
    if not isinstance(epochs, list) or not epochs:
        raise ValueError("epochs: must be a non-empty list of tables")
    current = data.get("current_mix")
    return MigrationProblem(
        instance=instance,
        epochs=tuple(_epoch_from(i, e) for i, e in enumerate(epochs)),
        current=instance.mix_vector(current if current is None else dict(current), field_name="current_mix"),
        change_budget=None if data.get("change_budget") is None else float(data["change_budget"]),
        byte_weight=float(data.get("byte_weight", 0.0)),
        target=None if data.get("target") is None else float(data["target"]),
        **kwargs,
    )


def load_migration(path: str | Path, **kwargs: Any) -> MigrationProblem:
    """Read an epochs file (TOML, or JSON by suffix)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"epochs file: no such file {str(path)!r}")
    what = f"epochs file {str(path)!r}"
    data = parse_document(read_text(path, "epochs file"), "json" if path.suffix.lower() == ".json" else "toml", what)
    return migration_from_mapping(data, base=path.parent, **kwargs)
