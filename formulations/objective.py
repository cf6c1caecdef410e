"""The black-box objective shared by the formulations: coverage at the fixed point (docs/model.md §10.1).

A point ``π`` is evaluated through the load–association fixed point (§7) and scored by the
TTFT coverage ``P_cov(τ_0; π)`` (§8).  The constraint ``ρ_s(π) < 1`` is only known through
the fixed point, so an evaluation that ends unstable or does not converge is *infeasible*
and scores below every feasible point, yet stays informative for local searches:

``value = INFEASIBLE_BASE + ½ · P_cov − max(0, max_s ρ_s − 1)``  (always ``≤ −½ < 0 ≤`` any feasible value)

where ``P_cov`` already counts nothing from unstable tiers (their ``F_{W_s} ≡ 0``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.evaluation_registry import ROUTER_PREDICTION_REGISTRY
from edgeprefix.placement.model.instance import Instance

FloatArray = npt.NDArray[np.float64]
INFEASIBLE_BASE = -1.0  # score offset of an unstable or non-converged point
POLICIES = ("load_aware", "prefix", "nearest")
QUEUE_MODELS = ROUTER_PREDICTION_REGISTRY.names()  # docs/model.md §8.6

Evaluator = Callable[..., Any]  # evaluate(instance, mix, policy, *, target=..., warm_start=...)
Differentiator = Callable[..., Any]  # sensitivity(evaluation, target, objectives) -> .gradients[name]


def default_evaluator() -> Evaluator:
    """``edgeprefix.placement.model.evaluation.evaluate`` (imported lazily: the model layer is optional at import)."""
    from edgeprefix.placement.model.evaluation import evaluate

    return evaluate


def default_differentiator() -> Differentiator:
    """``edgeprefix.placement.model.sensitivity.sensitivity`` (exact gradients, docs/model.md §15)."""
    from edgeprefix.placement.model.sensitivity import sensitivity

    return sensitivity


@dataclass(frozen=True)
class Score:
    """One evaluation of the black box.

    Attributes
    ----------
    value : the objective to maximise (``P_cov(τ_0)`` when feasible, a negative penalty otherwise).
    coverage : ``P_cov(τ_0; π)`` with unstable tiers contributing nothing.
    feasible : every active tier has ``ρ_s < 1`` and the fixed point converged.
    overload : ``max(0, max_s ρ_s − 1)`` over active tiers, or (stable tiers above a node cap) the overloaded
        node share's excess over ``max_overloaded_share``.
    mix : the evaluated mix ``π`` (cleaned: exact zeros, sums to 1).
    evaluation : the model's ``Evaluation`` of the point.
    gradient : ``∂value/∂π_s`` (other shares held fixed, one-sided at ``π_s = 0``) when asked
        for, else ``None``; also ``None`` when the fixed point did not converge (no derivative).
    """

    value: float
    coverage: float
    feasible: bool
    overload: float
    mix: FloatArray
    evaluation: Any
    gradient: FloatArray | None = None

    @property
    def warm_start(self) -> FloatArray | None:
        """Advertised ``W̄`` of this point (non-finite entries as 0), to warm-start the next fixed point."""
        wait = getattr(self.evaluation, "advertised_wait", None)
        if wait is None:
            wait = getattr(self.evaluation, "mean_wait", None)
        if wait is None:
            return None
        wait = np.where(np.isfinite(wait), np.asarray(wait, dtype=float), 0.0)
        return wait


def clean_mix(x: npt.ArrayLike, upper: FloatArray) -> FloatArray:
    """Round a (projected) point onto the exact simplex: clip at 0, zero where ``π_s^max = 0``, renormalise."""
    pi = np.clip(np.asarray(x, dtype=float), 0.0, None)
    pi[upper <= 0.0] = 0.0
    pi[pi < 1e-13] = 0.0
    total = pi.sum()
    if total <= 0.0:
        raise ValueError(f"a mix needs a positive share somewhere, got {np.asarray(x).tolist()}")
    return pi / total


def clean_mixes(points: npt.ArrayLike, upper: FloatArray) -> FloatArray:
    """:func:`clean_mix` of every row of ``points`` ``(B, S)`` at once (the same numbers)."""
    pi = np.clip(np.atleast_2d(np.asarray(points, dtype=float)), 0.0, None)
    pi[:, upper <= 0.0] = 0.0
    pi[pi < 1e-13] = 0.0
    total = pi.sum(axis=1)
    if np.any(total <= 0.0):
        clean_mix(np.atleast_2d(np.asarray(points, dtype=float))[int(np.argmax(total <= 0.0))], upper)  # raises
    return pi / total[:, None]


@dataclass(frozen=True)
class CoverageObjective:
    """``π ↦ P_cov(τ_0; π)`` through the fixed point, with the infeasibility penalty above.

    Parameters
    ----------
    instance : the instance (network ``λ_b``, ``Λ``, profiles, workload).
    target : ``τ_0`` in seconds.
    policy : routing policy (``load_aware``, ``prefix`` or ``nearest``).
    evaluator : ``evaluate`` of the model layer (injectable for tests).
    queue_model : ``meanfield`` (eq. (39)) or ``cell`` (per-node load law, docs/model.md §14).
    differentiator : ``sensitivity`` of the model layer (injectable for tests, with the evaluator).
    queue_law : ``slots`` (the model's node) or ``engine`` (the engine law of docs/model.md §17.10).
    max_overloaded_share : cap on the share of nodes whose own load reaches their slots under the cell
        law (docs/model.md §14.9); a point above it is infeasible and penalised by the excess.  ``None``:
        no cap (the cell model's points are then still reported unstable above 1 %, not rejected).
    """

    instance: Instance
    target: float
    policy: str = "load_aware"
    evaluator: Evaluator | None = None
    queue_model: str = "meanfield"
    differentiator: Differentiator | None = None
    max_overloaded_share: float | None = None
    queue_law: str = "slots"

    def __post_init__(self) -> None:
        if not (np.isfinite(self.target) and self.target > 0):
            raise ValueError(f"target τ_0 must be a positive number of seconds, got {plain(self.target)}")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {list(POLICIES)}, got {self.policy!r}")
        if self.queue_model not in QUEUE_MODELS:
            raise ValueError(f"queue_model: unknown {self.queue_model!r} (valid: {list(QUEUE_MODELS)})")
        cap = self.max_overloaded_share
        if cap is not None and not (np.isfinite(cap) and 0.0 <= cap <= 1.0):
            raise ValueError(f"--max-overload must be a share of nodes in [0, 1], got {plain(cap)}")

    def score(self, mix: FloatArray, warm_start: FloatArray | None = None, *, gradient: bool = False) -> Score:
        """Evaluate a clean mix (see :func:`clean_mix`) and score it; ``gradient=True`` adds ``∂value/∂π``."""
        evaluate = self.evaluator or default_evaluator()
        extra: dict[str, str] = {} if self.queue_model == "meanfield" else {"queue_model": self.queue_model}
        if self.queue_law != "slots":
            extra["queue_law"] = self.queue_law
        ev = evaluate(self.instance, mix, self.policy, target=self.target, warm_start=warm_start, **extra)
        score = self._scored(mix, ev, float(ev.coverage(self.target)))
        return dataclasses.replace(score, gradient=self.gradient(score)) if gradient else score

    def score_many(self, mixes: Sequence[FloatArray], warm_start: FloatArray | None = None) -> list[Score]:
        """:meth:`score` of every clean mix, in one batched evaluation (docs/model.md §16).

        Every fixed point starts from ``warm_start``.  With an injected ``evaluator`` the mixes
        are scored one by one, each warm-started from the previous one.  Under the cell queue model
        the fixed points are batched as well (they are the mean field's) and the cell coverage of all
        the mixes is one call after them (docs/model.md §14).
        """
        if self.evaluator is not None:
            scores: list[Score] = []
            for mix in mixes:
                scores.append(self.score(mix, warm_start))
                warm_start = scores[-1].warm_start
            return scores
        if not len(mixes):
            return []
        from edgeprefix.placement.model.batch import evaluate_batch

        batch = evaluate_batch(
            self.instance,
            np.asarray(mixes, dtype=float),
            self.policy,
            target=self.target,
            warm_start=warm_start,
            queue_model=self.queue_model,
            queue_law=self.queue_law,
        )
        return [self._scored(mix, ev, float(cov)) for mix, ev, cov in zip(mixes, batch.evaluations, batch.coverage)]

    def _scored(self, mix: FloatArray, ev: Any, coverage: float) -> Score:
        rho = np.asarray(ev.utilization, dtype=float)
        finite = rho[np.isfinite(rho)]
        overload = float(max(0.0, finite.max() - 1.0)) if finite.size else 0.0
        converged = ev.fixed_point is None or bool(ev.fixed_point.converged)  # None: no fixed point needed
        feasible = bool(ev.stable) and converged
        if feasible and self.max_overloaded_share is not None:  # the node-level cap (docs/model.md §14.9)
            excess = float(ev.overloaded_shares[0]) - self.max_overloaded_share
            if excess > 0:
                feasible, overload = False, excess
        value = coverage if feasible else INFEASIBLE_BASE + 0.5 * coverage - overload
        return Score(value=value, coverage=coverage, feasible=feasible, overload=overload, mix=mix, evaluation=ev)

    def gradient(self, score: Score) -> FloatArray | None:
        """``∂value/∂π`` at a scored point (no second fixed point: the evaluation is reused): the
        coverage's gradient, or the penalty's ``½ ∂P_cov − ∂ max_s ρ_s`` (its kink at ``ρ = 1`` taken
        from above); ``None`` when the fixed point did not converge (the point has no derivative)."""
        ev = score.evaluation
        if ev.fixed_point is not None and not ev.fixed_point.converged:
            return None
        differentiate = self.differentiator or default_differentiator()
        if not score.feasible and bool(getattr(ev, "stable", False)):  # above the node cap only: the share's own
            # derivative is not computed, the penalty's coverage part is (a search leaves through the penalty's value)
            return 0.5 * np.asarray(differentiate(ev, self.target, ("coverage",)).gradients["coverage"], dtype=float)
        names = ("coverage",) if score.feasible or score.overload <= 0 else ("coverage", "max_utilization")
        sens = differentiate(ev, self.target, names)
        coverage = np.asarray(sens.gradients["coverage"], dtype=float)
        if score.feasible:
            return coverage
        penalty = 0.5 * coverage
        return penalty - np.asarray(sens.gradients["max_utilization"], dtype=float) if score.overload > 0 else penalty
