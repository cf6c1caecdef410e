"""Projected SPSA (docs/model.md §10.3, Algorithm 1) with Spall's gain sequences.

Each iteration draws ``Δ_k ∈ {±1}^{|S|}`` (not all of one sign: that direction leaves the simplex), scores the pair ``π± = Proj(π_k ± c_k Δ_k)``, forms
``ĝ_k = (F(π+) − F(π−)) / (2 c_k) · Δ_k`` and steps ``π_{k+1} = Proj(π_k + a_k ĝ_k)`` with
``a_k = a / (A + k + 1)^α`` and ``c_k = c / (k + 1)^γ`` (``α = 0.602``, ``γ = 0.101``).
The best evaluated point is kept; every fixed point is warm-started from the previous one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from edgeprefix.placement.errors import plain
from edgeprefix.solvers.base import Solver
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.tracking import Problem, Tracker


def _perturbation(rng: np.random.Generator, free: np.ndarray) -> np.ndarray:
    """Bernoulli ``±1`` on the free shares, redrawn while all signs agree.

    ``Δ ∝ (1, …, 1)`` only moves off the simplex, so its projected pair is the same point and
    the estimate carries no information; with two or more free shares it is redrawn.
    """
    while True:
        delta = np.where(free, rng.choice((-1.0, 1.0), size=free.size), 0.0)
        signs = delta[free]
        if signs.size < 2 or np.any(signs != signs[0]):
            return delta


@dataclass(frozen=True)
class SpsaSolver(Solver):
    """Projected SPSA.

    Parameters
    ----------
    a : step gain; ``None`` calibrates it from the first gradient estimate so the first
        step moves ``initial_step`` (Spall's recommended practice).
    A : stability constant; ``None`` uses 10 % of the expected number of iterations.
    c : perturbation size in share units (default 0.05: 5 % of the nodes).
    alpha, gamma : Spall's exponents 0.602 and 0.101.
    initial_step : the largest share change of the first step when ``a`` is calibrated (0.1).
    max_step : cap on ``max_s |a_k ĝ_k|`` per step (0.2), which keeps a steep infeasibility
        penalty from throwing the iterate across the polytope.
    x0 : starting mix (projected); default the formulation's initial point.
    """

    name: ClassVar[str] = "spsa"
    a: float | None = None
    A: float | None = None
    c: float = 0.05
    alpha: float = 0.602
    gamma: float = 0.101
    initial_step: float = 0.1
    max_step: float = 0.2
    x0: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        for key in ("c", "initial_step", "max_step", "alpha", "gamma"):
            value = getattr(self, key)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"spsa option {key} must be > 0, got {plain(value)}")
        if self.a is not None and not self.a > 0:
            raise ValueError(f"spsa option a must be > 0, got {plain(self.a)}")
        if self.A is not None and not self.A >= 0:
            raise ValueError(f"spsa option A must be >= 0, got {plain(self.A)}")

    def run(self, problem: Problem, projection: Projection, tracker: Tracker, rng: np.random.Generator) -> Status:
        x = projection(problem.initial_point() if self.x0 is None else np.asarray(self.x0, dtype=float))
        tracker.evaluate(x)
        iterations = max(1, ((tracker.remaining or 300) - 1) // 2)
        big_a = 0.1 * iterations if self.A is None else self.A
        a = self.a
        free = projection.constraints.upper[: len(x)] > projection.constraints.lower[: len(x)]
        tracker.extras.update({"A": big_a, "c": self.c, "alpha": self.alpha, "gamma": self.gamma})
        for k in range(10**9):
            c_k = self.c / (k + 1) ** self.gamma
            delta = _perturbation(rng, free)
            plus, minus = projection(x + c_k * delta), projection(x - c_k * delta)
            f_plus = tracker.evaluate(plus).value
            f_minus = tracker.evaluate(minus).value
            gradient = (f_plus - f_minus) / (2.0 * c_k) * delta
            tracker.nit = k + 1
            if a is None:  # calibrate on the first informative estimate
                scale = np.abs(gradient).max()
                if scale == 0:
                    continue
                a = self.initial_step * (big_a + 1) ** self.alpha / scale
                tracker.extras["a"] = float(a)
            step = a / (big_a + k + 1) ** self.alpha * gradient
            largest = np.abs(step).max()
            if largest > self.max_step:
                step *= self.max_step / largest
            x = projection(x + step)
        return Status.COMPLETED  # pragma: no cover - the budget ends the loop
