"""Dual density planning (docs/model.md §10.4, eq. (51)): ``min λ_b`` s.t. ``P_cov(τ_0; π, λ_b) ≥ ζ``.

Either for a given mix ``π`` or jointly (``min λ_b`` such that ``max_π P_cov ≥ ζ``).  The Pyomo
model declares ``λ_b ≥ 0``, the mix (a fixed ``Param`` or the §10.1 variables and
constraints), the objective ``min λ_b`` and the reliability constraint as an
``ExternalFunction`` over the fixed point.  Bracketing and bisection on ``λ_b`` live in
:mod:`edgeprefix.solvers.density`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from edgeprefix.formulations.objective import (
    CoverageObjective,
    Evaluator,
    Score,
    clean_mix,
)
from edgeprefix.formulations.placement import (
    PlacementProblem,
    declare_mix,
    placement_problem,
    share_caps,
)
from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.instance import Instance

if TYPE_CHECKING:
    import pyomo.environ as pyo

FloatArray = npt.NDArray[np.float64]


def build_density_model(instance: Instance, reliability: float, mix: FloatArray | None, objective: CoverageObjective) -> pyo.ConcreteModel:
    """``min λ_b`` s.t. ``P_cov(τ_0; π, λ_b) ≥ ζ`` with ``π`` fixed (``mix``) or free (``None``)."""
    import pyomo.environ as pyo

    model = pyo.ConcreteModel(name=f"density_planning[{instance.name}]")
    model.edge_density = pyo.Var(bounds=(0.0, None), initialize=instance.network.edge_density, doc="λ_b, nodes per unit area")
    if mix is None:
        declare_mix(model, instance)
        shares = [model.pi[s] for s in model.S]
    else:
        model.S = pyo.Set(initialize=instance.profile_ids, ordered=True, doc="cache profiles s")
        model.pi = pyo.Param(model.S, initialize=dict(zip(instance.profile_ids, mix.tolist())), doc="the given mix π")
        shares = [model.pi[s] for s in model.S]
    caps = share_caps(instance)

    def coverage_of(density: float, *pi: float) -> float:
        scaled = replace(objective, instance=instance.with_network(edge_density=density))
        return scaled.score(clean_mix(pi, caps)).coverage

    model.coverage_of = pyo.ExternalFunction(coverage_of)
    model.reliability = pyo.Constraint(expr=model.coverage_of(model.edge_density, *shares) >= reliability, doc="P_cov(τ_0; π, λ_b) ≥ ζ")
    model.cost = pyo.Objective(expr=model.edge_density, sense=pyo.minimize, doc="min λ_b")
    return model


@dataclass(frozen=True)
class DensityPlanningProblem:
    """Smallest edge density ``λ_b`` whose coverage reaches ``ζ`` (see :func:`density_problem`).

    ``mix`` is the fixed ``π`` or ``None`` (joint: the best mix is searched at each density).
    """

    instance: Instance
    reliability: float  # ζ
    mix: FloatArray | None
    objective: CoverageObjective
    build_model: Callable[[], Any] = field(repr=False, compare=False)

    @cached_property
    def model(self) -> pyo.ConcreteModel:
        """The Pyomo model of :func:`build_density_model` (built once, on first access: Pyomo is imported then)."""
        return self.build_model()

    @property
    def joint(self) -> bool:
        return self.mix is None

    def at_density(self, density: float) -> Instance:
        """The instance with ``λ_b = density``."""
        if not (np.isfinite(density) and density > 0):
            raise ValueError(f"edge_density λ_b must be > 0, got {plain(density)}")
        return self.instance.with_network(edge_density=float(density))

    def score(self, density: float, mix: npt.ArrayLike | None = None, warm_start: FloatArray | None = None) -> Score:
        """The black box at ``λ_b = density`` for ``mix`` (default the fixed mix)."""
        pi = self.mix if mix is None else np.asarray(mix, dtype=float)
        if pi is None:
            raise ValueError("a joint density problem needs a mix to score; use placement(density)")
        objective = replace(self.objective, instance=self.at_density(density))
        return objective.score(clean_mix(pi, share_caps(self.instance)), warm_start)

    def placement(self, density: float) -> PlacementProblem:
        """The §10.1 placement problem at ``λ_b = density`` (for the joint version)."""
        return placement_problem(
            self.at_density(density),
            target=self.objective.target,
            policy=self.objective.policy,
            evaluator=self.objective.evaluator,
            queue_model=self.objective.queue_model,
            differentiator=self.objective.differentiator,
            max_overloaded_share=self.objective.max_overloaded_share,
            queue_law=self.objective.queue_law,
        )

    def meets(self, score: Score) -> bool:
        """Stable, converged and ``P_cov ≥ ζ``."""
        return bool(score.feasible and score.coverage >= self.reliability)


def density_problem(
    instance: Instance,
    reliability: float,
    *,
    mix: Mapping[str, float] | npt.ArrayLike | None = None,
    target: float | None = None,
    policy: str = "load_aware",
    evaluator: Evaluator | None = None,
    queue_model: str = "meanfield",
    max_overloaded_share: float | None = None,
    queue_law: str = "slots",
) -> DensityPlanningProblem:
    """Build the density-planning problem (``mix=None``: joint with the mix); ``max_overloaded_share`` caps
    the share of overloaded nodes under the cell law (docs/model.md §14.9).

    Raises
    ------
    ValueError
        When ``ζ`` is not in (0, 1), the mix is invalid, or (joint) the linear constraints are empty.
    """
    zeta = float(reliability)
    if not (0.0 < zeta < 1.0):
        raise ValueError(f"reliability ζ must lie in (0, 1), got {plain(reliability)}")
    pi = None if mix is None else instance.mix_vector(mix)
    objective = CoverageObjective(
        instance,
        instance.placement.target if target is None else float(target),
        policy,
        evaluator,
        queue_model,
        max_overloaded_share=max_overloaded_share,
        queue_law=queue_law,
    )
    if pi is None:
        placement_problem(
            instance,
            target=objective.target,
            policy=policy,
            evaluator=evaluator,
            queue_model=queue_model,
            max_overloaded_share=max_overloaded_share,
            queue_law=queue_law,
        )  # checks the polytope
    else:
        pi.setflags(write=False)
    return DensityPlanningProblem(
        instance=instance,
        reliability=zeta,
        mix=pi,
        objective=objective,
        build_model=lambda: build_density_model(instance, zeta, pi, objective),
    )
