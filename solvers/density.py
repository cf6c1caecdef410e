"""Bracket, then bisect on ``λ_b`` (docs/model.md §10.4): the smallest density meeting ``ζ``.

Coverage grows with ``λ_b`` (nearer nodes, lighter queues), so the feasible densities form a
ray ``[λ*, ∞)``.  From the instance's ``λ_b`` the bracket doubles (or halves) until it holds
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
from edgeprefix.placement.errors import plain
from edgeprefix.placement.progress import progress_bar
from edgeprefix.solvers.api import solve

FloatArray = npt.NDArray[np.float64]
MAX_DOUBLINGS = 20


@dataclass(frozen=True)
class DensityPlan:
    """Answer of :func:`plan_density`.

    Attributes
    ----------
    edge_density : the smallest ``λ_b`` found meeting ``ζ`` (within ``rtol``).
    coverage : ``P_cov(τ_0)`` at that density with ``mix``.
    lower : the largest density seen that misses ``ζ`` (``lower < edge_density ≤ lower·(1+rtol)``).
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
        When no density up to ``2^20 ×`` the instance's meets ``ζ``.
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
                if hi > base * 2.0**MAX_DOUBLINGS:
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
