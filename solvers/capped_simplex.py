"""Exact Euclidean projection onto the placement polytope (docs/model.md §16, eq. (50)).

The linear part of the placement problem (docs/model.md §10.1) is a *capped simplex with one
knapsack row*:

    ``P = {π : Σ_s π_s = 1,  l_s ≤ π_s ≤ u_s,  Σ_s B_s π_s ≤ B̄}``

(``u_s = π_s^max``, ``l_0 = π_min`` for the fallback, ``u_s = 0`` where ``c_s < 1``).  Its KKT
conditions say that the projection of ``z`` is

    ``π(ν, μ) = clip(z − ν 1 − μ B, l, u)``,  ``μ ≥ 0``,  ``μ (B·π − B̄) = 0``                (16.4)

with ``ν`` fixed by ``Σ_s π_s = 1``.  For a given ``μ``, ``h(ν) = Σ_s clip(z_s − μ B_s − ν, l_s, u_s)`` is
piecewise linear and non-increasing with breakpoints ``z_s − μ B_s − l_s`` and
``z_s − μ B_s − u_s``, so ``ν(μ)`` is exact: locate the piece that brackets 1, then solve the
linear equation on its free set ``F`` (16.5).  If ``B·π(ν(0), 0) ≤ B̄`` that is the answer;
otherwise ``φ(μ) = B·π(ν(μ), μ) − B̄`` is non-increasing and piecewise linear, with slope
``−Σ_{s∈F} (B_s − B̄_F)²`` on a piece (``B̄_F`` the mean of ``B`` over ``F``), and its root is found by
Newton's method on the pieces, safeguarded by bisection on a bracket ``[0, μ_max]`` whose right
end makes the knapsack row as small as the box and simplex allow (16.6).  Newton's step is exact
once it lands on the root's piece, so a handful of steps suffice.

:meth:`CappedSimplex.from_constraints` recognises this structure in
:class:`edgeprefix.formulations.linear.LinearConstraints` read back from the Pyomo model (rows of
one variable become bounds); any other constraint set returns ``None`` and is projected by the
general QP of :class:`edgeprefix.solvers.projection.Projection`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.formulations.linear import LinearConstraints

FloatArray = npt.NDArray[np.float64]
MAX_STEPS = 200  # safeguarded Newton steps on μ (bisection halves the bracket: ≤ 60 are ever needed)
ROW_TOLERANCE = 1e-13  # relative: |B·π − B̄| at which the knapsack row counts as met with equality


@dataclass(frozen=True)
class CappedSimplex:
    """``{x : Σ x = total, lower ≤ x ≤ upper, knapsack·x ≤ budget}`` (the knapsack row is optional).

    Attributes
    ----------
    lower, upper : (n,) finite bounds (``l_s``, ``u_s``).
    total : right-hand side of the simplex row (1 for a mix).
    knapsack, budget : the row ``B`` and its bound ``B̄`` (``None`` when absent).
    """

    lower: FloatArray
    upper: FloatArray
    total: float = 1.0
    knapsack: FloatArray | None = None
    budget: float | None = None

    def __post_init__(self) -> None:
        if self.lower.shape != self.upper.shape or self.lower.ndim != 1:
            raise ValueError(f"lower and upper must be vectors of one length, got {self.lower.shape} and {self.upper.shape}")
        if not (np.all(np.isfinite(self.lower)) and np.all(np.isfinite(self.upper))):
            raise ValueError("a capped simplex needs finite bounds")
        if (self.knapsack is None) != (self.budget is None):
            raise ValueError("knapsack and budget come together")

    @classmethod
    def from_constraints(cls, constraints: LinearConstraints) -> CappedSimplex | None:
        """The capped simplex that ``constraints`` describe, or ``None`` when they are something else.

        Recognised: no auxiliary columns; one equality row with equal non-zero coefficients on
        every variable; further rows with a single non-zero (folded into the bounds); at most one
        other inequality row (the knapsack); finite bounds.
        """
        if constraints.has_auxiliary:
            return None
        n = constraints.n_variables
        lower, upper = constraints.lower.copy(), constraints.upper.copy()
        total = None
        for row, rhs in zip(constraints.A_eq, constraints.b_eq):
            nonzero = np.flatnonzero(row)
            if nonzero.size == 1:
                value = rhs / row[nonzero[0]]
                lower[nonzero] = np.maximum(lower[nonzero], value)
                upper[nonzero] = np.minimum(upper[nonzero], value)
            elif nonzero.size == n and total is None and np.all(row == row[0]):
                total = float(rhs / row[0])
            else:
                return None
        knapsack, budget = None, None
        for row, rhs in zip(constraints.A_ub, constraints.b_ub):
            nonzero = np.flatnonzero(row)
            if nonzero.size == 1:
                i, coef = nonzero[0], row[nonzero[0]]
                if coef > 0:
                    upper[i] = min(upper[i], rhs / coef)
                else:
                    lower[i] = max(lower[i], rhs / coef)
            elif nonzero.size > 1 and knapsack is None:
                knapsack, budget = np.array(row, dtype=float), float(rhs)
            elif nonzero.size > 1 or rhs < 0:
                return None
        if total is None or not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))) or np.any(lower > upper):
            return None
        if knapsack is not None and np.ptp(knapsack) == 0:  # B ∝ 1: the row is a constant on the simplex
            if knapsack[0] * total > budget:
                return None
            knapsack, budget = None, None
        return cls(lower=lower, upper=upper, total=total, knapsack=knapsack, budget=budget)

    # -- ν(μ): the simplex row for a shifted point (16.5) ------------------------------------
    def _simplex(self, shifted: FloatArray) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        """``clip(shifted − ν, l, u)`` with ``ν`` such that it sums to ``total``; also its free set ``F``."""
        lo, hi = self.lower, self.upper
        breaks = np.concatenate((shifted - hi, shifted - lo))
        breaks.sort()
        grid = shifted[None, :] - breaks[:, None]
        np.maximum(grid, lo, out=grid)
        np.minimum(grid, hi, out=grid)
        k = int(np.count_nonzero(grid.sum(axis=1) >= self.total)) - 1  # h(ν) is non-increasing: last breakpoint with h ≥ total
        k = min(max(k, 0), breaks.size - 2)
        mid = 0.5 * (breaks[k] + breaks[k + 1])
        value = shifted - mid
        at_upper = value >= hi
        at_lower = value <= lo
        free = ~(at_upper | at_lower)
        n_free = int(np.count_nonzero(free))
        if n_free:
            rest = self.total - float(hi @ at_upper) - float(lo @ at_lower)
            nu = (float(shifted @ free) - rest) / n_free
        else:  # h is flat (= total) on the whole piece
            nu = mid
        x = shifted - nu
        np.maximum(x, lo, out=x)
        np.minimum(x, hi, out=x)
        return x, free

    def _mu_max(self, z: FloatArray, a: FloatArray) -> float:
        """A ``μ`` beyond which ``π(ν(μ), μ)`` minimises ``B·π`` over the box and simplex (the bracket's right end).

        Once ``μ (B_s − B_t)`` exceeds the spread of ``z − l`` and ``z − u`` for every pair with
        ``B_s ≠ B_t``, the clip fills the shares in increasing ``B`` order, the greedy minimiser.
        """
        spread = np.ptp(np.concatenate([z - self.lower, z - self.upper]))
        gaps = np.diff(np.unique(a))
        return 2.0 * (spread + 1.0) / float(gaps.min())

    def project(self, z: npt.ArrayLike) -> FloatArray:
        """The Euclidean projection of ``z`` onto the polytope (16.4)–(16.6)."""
        return self.project_with_multipliers(z)[0]

    def project_with_multipliers(self, z: npt.ArrayLike) -> tuple[FloatArray, float, float]:
        """The projection ``π`` with its multipliers: ``π = clip(z − ν − μ B, l, u)`` (``μ = 0`` without a knapsack row).

        ``ν`` is recovered from the free shares (the middle of the admissible interval when none is free).
        """
        z = np.asarray(z, dtype=float)
        x, free = self._simplex(z)
        a, budget = self.knapsack, self.budget
        if a is None or budget is None or float(a @ x) <= budget + ROW_TOLERANCE * max(1.0, abs(budget)):
            return x, self._nu(z, x, free, 0.0), 0.0
        budget = float(self.budget)  # type: ignore[arg-type]
        scale = ROW_TOLERANCE * max(1.0, abs(budget), float(np.abs(a).max()))
        lo_mu, hi_mu = 0.0, self._mu_max(z, a)
        mu = 0.0
        phi = float(a @ x) - budget
        for _ in range(MAX_STEPS):
            if phi > 0:
                lo_mu = mu
            else:
                hi_mu = mu
            centred = a[free] - a[free].mean() if free.any() else a[free]
            slope = float(centred @ centred)
            step = mu + phi / slope if slope > 0 else np.nan
            mu = step if lo_mu < step < hi_mu else 0.5 * (lo_mu + hi_mu)
            x, free = self._simplex(z - mu * a)
            phi = float(a @ x) - budget
            if abs(phi) <= scale or hi_mu - lo_mu <= 1e-15 * max(1.0, hi_mu):
                return x, self._nu(z - mu * a, x, free, mu), mu
        raise RuntimeError(f"the capped-simplex projection of {z.tolist()} did not settle in {MAX_STEPS} steps")  # pragma: no cover

    def _nu(self, shifted: FloatArray, x: FloatArray, free: npt.NDArray[np.bool_], mu: float) -> float:
        if free.any():
            return float(np.mean(shifted[free] - x[free]))
        # no free share: any ν with clip(shifted − ν) = x works; take the middle of the admissible range
        low = np.max(np.where(x >= self.upper, shifted - self.upper, -np.inf), initial=-np.inf)
        high = np.min(np.where(x <= self.lower, shifted - self.lower, np.inf), initial=np.inf)
        if np.isfinite(low) and np.isfinite(high):
            return float(0.5 * (low + high))
        return float(low if np.isfinite(low) else high)
