"""Bracket, then bisect on ``λ_b`` (docs/model.md §10.4): the smallest density meeting ``ζ``.

Coverage grows with ``λ_b`` (nearer nodes, lighter queues), so the feasible densities form a
ray ``[λ*, ∞)``.  From the instance's ``λ_b`` (or from the capacity floor of :func:`capacity_floor`
when that is higher: no density below it is stable, docs/model.md §20) the bracket doubles (or halves) until it holds
one infeasible and one feasible density, then geometric bisection shrinks it until
``hi / lo ≤ 1 + rtol``; the answer is ``hi``, reported with its coverage and mix.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.formulations.density import DensityPlanningProblem
from edgeprefix.formulations.objective import Score
from edgeprefix.formulations.placement import share_caps
from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.pipeline import ASSOCIATION_SLACK
from edgeprefix.placement.model.ranges import SCALE_MAX
from edgeprefix.placement.progress import progress_bar
from edgeprefix.solvers.api import solve

FloatArray = npt.NDArray[np.float64]
MAX_DOUBLINGS = 20


def capacity_floor(problem: DensityPlanningProblem) -> float:
    """A density below which no mix the problem may use is stable: the bracket's lower end (docs/model.md §20).

    Every tier stable (``ρ_s = a_s / c_s < 1``, (5.5)) with ``a_s = (Λ / λ_s) Σ_q p_q A_{s,q} / μ_{s,q}``
    (5.4) and ``λ_s = π_s λ_b`` (4.1) gives, summed over the tiers with ``Σ_s A_{s,q} = 1``, the necessary
    condition (35) ``Λ Σ_q p_q min_{s: π_s > 0} 1/μ_{s,q} < λ_b Σ_s π_s c_s``; with ``Σ_s π_s c_s ≤ max_s c_s``
    over the profiles the mix may use, ``λ_b > Λ Σ_q p_q min_s 1/μ_{s,q} / max_s c_s`` for every such mix.
    An evaluation accepts ``|Σ_s A_{s,q} − 1|`` up to ``ASSOCIATION_SLACK``, so the floor returned is that
    bound times ``1 − ASSOCIATION_SLACK``: every density at or below it misses ``ζ`` without an evaluation.
    Only the slot law's tiers are stable exactly at ``a_s < c_s``; for the engine law (its own stability
    edge, docs/model.md §17.10) the floor is 0.
    """
    if problem.objective.queue_law != "slots":
        return 0.0
    instance = problem.instance
    usable = (share_caps(instance) > 0) if problem.mix is None else (problem.mix > 0)
    usable &= instance.concurrency >= 1
    if not usable.any():
        return 0.0
    demand = instance.network.request_intensity * float((instance.probabilities * instance.service_time[usable].min(axis=0)).sum())
    supply = float(instance.concurrency[usable].max()) if problem.mix is None else float((problem.mix * instance.concurrency).sum())
    return demand / supply * (1.0 - ASSOCIATION_SLACK)


@dataclass(frozen=True)
class DensityPlan:
    """Answer of :func:`plan_density`.

    Attributes
    ----------
    edge_density : the smallest ``λ_b`` found meeting ``ζ`` (within ``rtol``).
    coverage : ``P_cov(τ_0)`` at that density with ``mix``.
    lower : the largest density seen that misses ``ζ`` (``lower < edge_density ≤ lower·(1+rtol)``); it can be
        the capacity floor, which misses ``ζ`` by (35) without an evaluation.
    mix, x : the mix used (given, or the best found at ``edge_density`` when joint).
    evaluations : black-box evaluations in total; ``steps`` densities tried.
    """

    edge_density: float
    coverage: float
    lower: float
    reliability: float
    mix: Mapping[str, float]
    x: FloatArray = field(repr=False)
    joint: bool
    method: str
    evaluations: int
    steps: int
    seconds: float
    evaluation: Any = field(repr=False, compare=False, default=None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "edge_density": self.edge_density,
            "coverage": self.coverage,
            "mix": dict(self.mix),
            "reliability": self.reliability,
            "lower_density": self.lower,
            "joint": self.joint,
            "method": self.method,
            "evaluations": self.evaluations,
            "steps": self.steps,
            "seconds": self.seconds,
        }


def plan_density(
    problem: DensityPlanningProblem,
    *,
    method: str = "grid",
    budget: int | None = None,
    seed: int | None = 0,
    rtol: float = 1e-3,
    **options: Any,
) -> DensityPlan:
    """Smallest ``λ_b`` with ``P_cov(τ_0; π, λ_b) ≥ ζ`` (and every tier stable).

    Parameters
    ----------
    problem : from :func:`edgeprefix.formulations.density.density_problem`.
    method, budget, seed, options : the placement search run at each density when joint
        (default: the 1/10 grid, ``resolution=10``); ignored for a fixed mix.
    rtol : relative width of the final bracket.

    Raises
    ------
    ValueError
        When no density up to ``2^20 ×`` the start (and within the accepted range) meets ``ζ``, or when the
        capacity floor itself lies beyond the accepted range of ``network.edge_density``.
    """
    if not (0 < rtol < 1):
        raise ValueError(f"rtol must lie in (0, 1), got {plain(rtol)}")
    if problem.joint and method == "grid":
        options = {"resolution": 10, **options}
    start = time.perf_counter()
    counter = {"evaluations": 0, "steps": 0}
    warm: dict[str, FloatArray | None] = {"w": None}

    def attempt(density: float) -> tuple[bool, Score]:
        counter["steps"] += 1
        if problem.joint:
            result = solve(problem.placement(density), method, budget=budget, seed=seed, **options)
            counter["evaluations"] += result.nfev
            score = Score(result.fun, result.coverage, result.success, 0.0, np.asarray(result.x), result.evaluation)
        else:
            score = problem.score(density, warm_start=warm["w"])
            warm["w"] = score.warm_start
            counter["evaluations"] += 1
        bar.update(1)
        bar.set_postfix_str(f"λ_b = {density:.4g}, coverage {score.coverage:.4f}")
        return problem.meets(score), score

    # one step per density tried: at an extreme load the doubling alone takes tens of steps (docs/model.md §20)
    with progress_bar(desc="plan-density: densities tried", unit=" λ_b") as bar:
        base = problem.instance.network.edge_density
        floor = capacity_floor(problem)
        if floor >= SCALE_MAX / 2:
            raise ValueError(
                f"network.request_intensity (--intensity) Λ = {problem.instance.network.request_intensity:.3g} needs "
                f"λ_b > {floor:.3g} for every tier to be stable (docs/model.md §20), beyond the range of "
                f"network.edge_density [1e-30, {SCALE_MAX:g}]: lower --intensity"
            )
        if floor > base:  # base misses ζ (it is below the floor): start the doubling at the floor
            base, ok = floor, False
        else:
            ok, score = attempt(base)
        if ok:
            hi, hi_score, lo = base, score, base / 2
            while (found := attempt(lo))[0]:
                hi, hi_score = lo, found[1]
                lo /= 2
                if lo < base * 2.0**-MAX_DOUBLINGS:
                    raise ValueError(f"coverage stays ≥ ζ = {problem.reliability} down to λ_b = {lo:.3g}: no finite bracket")
        else:
            lo, hi = base, base * 2
            while not (found := attempt(hi))[0]:
                lo, hi = hi, hi * 2
                if hi > base * 2.0**MAX_DOUBLINGS or hi > SCALE_MAX:
                    raise ValueError(
                        f"reliability ζ = {problem.reliability} is not reached up to λ_b = {lo:.3g} "
                        f"(coverage there {found[1].coverage:.4f}, stable {found[1].feasible}): lower ζ or raise τ_0"
                    )
            hi_score = found[1]
        while hi / lo > 1 + rtol:
            mid = math.sqrt(lo * hi)
            ok, score = attempt(mid)
            if ok:
                hi, hi_score = mid, score
            else:
                lo = mid
        ids = problem.instance.profile_ids
        return DensityPlan(
            edge_density=float(hi),
            coverage=float(hi_score.coverage),
            lower=float(lo),
            reliability=problem.reliability,
            mix=dict(zip(ids, hi_score.mix.tolist())),
            x=hi_score.mix,
            joint=problem.joint,
            method=method if problem.joint else "fixed-mix",
            evaluations=counter["evaluations"],
            steps=counter["steps"],
            seconds=time.perf_counter() - start,
            evaluation=hi_score.evaluation,
        )
