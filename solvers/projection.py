"""Euclidean projection onto the linear part of a formulation (docs/model.md §10.2, eq. (50)).

``Proj(z) = argmin_x ||x_π − z||²`` subject to the rows and bounds read from the Pyomo model
(auxiliary columns such as migration flows are free).  When the rows are the placement polytope
(simplex, share bounds, one knapsack row: :class:`edgeprefix.solvers.capped_simplex.CappedSimplex`)
the projection is computed exactly by its KKT conditions (docs/model.md §16); any other
constraint set goes to a cvxpy problem, parametrised (DPP) and built once per constraint set,
where each call only sets the parameter ``z`` and re-solves with Clarabel.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from edgeprefix.formulations.linear import LinearConstraints
from edgeprefix.placement.errors import InfeasibleConstraintsError
from edgeprefix.placement.memory import check_memory
from edgeprefix.solvers.capped_simplex import CappedSimplex

if TYPE_CHECKING:
    import cvxpy as cp


def _cvxpy() -> Any:
    """cvxpy, imported on first use: the exact projection (every placement polytope) never needs it."""
    import cvxpy

    return cvxpy


FloatArray = npt.NDArray[np.float64]
CLARABEL_OPTIONS = {"tol_gap_abs": 1e-11, "tol_gap_rel": 1e-11, "tol_feas": 1e-11, "max_iter": 200}
METHODS = ("auto", "exact", "cvxpy")


class Projection:
    """A reusable projector for one :class:`LinearConstraints`.

    The only mutable object of the solver layer: it caches the compiled cvxpy problem and
    counts calls (``calls``, ``seconds``; ``mean_seconds`` is the per-call time).

    Parameters
    ----------
    constraints : the linear part of a formulation.
    method : ``auto`` (exact for the placement polytope, else cvxpy), ``exact`` (raises unless
        the constraints are a capped simplex with at most one knapsack row) or ``cvxpy``.

    Raises
    ------
    InfeasibleConstraintsError
        At construction when the constraints admit no point, and on a call whose QP fails.
    """

    def __init__(self, constraints: LinearConstraints, method: str = "auto") -> None:
        if method not in METHODS:
            raise ValueError(f"projection method must be one of {list(METHODS)}, got {method!r}")
        self.constraints = constraints
        n, k = constraints.n_variables, constraints.n_decision
        check_memory(  # the polish step (or the exact algorithm's breakpoint table) holds a few dense n × n matrices
            8.0 * 4 * n * n,
            "profiles",
            f"projecting onto the feasible mixes of {k} profiles",
            "use fewer profiles (e.g. prune dominated profiles, profiles --max-profiles)",
        )
        self._feasible_point = constraints.check_feasible()
        self.exact = CappedSimplex.from_constraints(constraints) if method != "cvxpy" else None
        if method == "exact" and self.exact is None:
            raise ValueError(
                "projection method 'exact' needs a simplex row, share bounds and at most one knapsack row "
                f"({', '.join(constraints.eq_names + constraints.ub_names)} are something else): use method='auto'"
            )
        self.method = "exact" if self.exact is not None else "cvxpy"
        self._problem: cp.Problem | None = None
        self.calls = 0
        self.seconds = 0.0
        if self.exact is None:
            self._build()

    def _build(self) -> None:
        cp = _cvxpy()
        constraints = self.constraints
        n, k = constraints.n_variables, constraints.n_decision
        self._x = cp.Variable(n)
        self._z = cp.Parameter(k)
        rows = []
        if len(constraints.b_eq):
            rows.append(constraints.A_eq @ self._x == constraints.b_eq)
        if len(constraints.b_ub):
            rows.append(constraints.A_ub @ self._x <= constraints.b_ub)
        lo = np.flatnonzero(np.isfinite(constraints.lower))
        hi = np.flatnonzero(np.isfinite(constraints.upper))
        if lo.size:
            rows.append(self._x[lo] >= constraints.lower[lo])
        if hi.size:
            rows.append(self._x[hi] <= constraints.upper[hi])
        self._problem = cp.Problem(cp.Minimize(cp.sum_squares(self._x[:k] - self._z)), rows)
        assert self._problem.is_dpp()

    @property
    def mean_seconds(self) -> float:
        """Mean wall time of one projection so far (0 before the first call)."""
        return self.seconds / self.calls if self.calls else 0.0

    def full(self, z: npt.ArrayLike) -> FloatArray:
        """The projection with its auxiliary columns, shape ``(n_variables,)``."""
        z = np.asarray(z, dtype=float)
        k = self.constraints.n_decision
        if z.shape != (k,) or not np.all(np.isfinite(z)):
            raise ValueError(f"a point to project must be {k} finite numbers, got {z.tolist()}")
        if self.exact is not None:
            start = time.perf_counter()
            x = self.exact.project(z)
            self.seconds += time.perf_counter() - start
            self.calls += 1
            return x
        assert self._problem is not None
        cp = _cvxpy()
        start = time.perf_counter()
        self._z.value = z
        try:
            self._problem.solve(solver=cp.CLARABEL, warm_start=True, **CLARABEL_OPTIONS)
        except cp.error.SolverError as exc:
            raise InfeasibleConstraintsError(f"projection of {z.tolist()} failed: {exc}") from exc
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1
        if self._problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or self._x.value is None:
            raise InfeasibleConstraintsError(f"projection of {z.tolist()} ended with status {self._problem.status!r}")
        x = np.clip(np.asarray(self._x.value, dtype=float), self.constraints.lower, self.constraints.upper)
        if not self.constraints.has_auxiliary:
            polished = _polish(self.constraints, z, x)
            if polished is not None:
                return polished
        return x

    def __call__(self, z: npt.ArrayLike) -> FloatArray:
        """``Proj(z)`` restricted to the decision ``π``, shape ``(n_decision,)``."""
        return self.full(z)[: self.constraints.n_decision]


def _polish(constraints: LinearConstraints, z: FloatArray, x: FloatArray, active_tol: float = 1e-7) -> FloatArray | None:
    """Exact KKT solve on the active set guessed from the interior-point answer ``x``.

    With ``E x = f`` the equalities plus the active inequalities and bounds, the projection is
    ``x = z − Eᵀλ`` with ``E Eᵀ λ = E z − f``.  The polished point is returned only when it is
    feasible to 1e-10 and every inequality multiplier is ``≥ 0`` (so it is the KKT point);
    otherwise ``None`` (keep the interior-point answer).
    """
    n = constraints.n_variables
    eye = np.eye(n)
    ub_active = np.abs(constraints.A_ub @ x - constraints.b_ub) <= active_tol if len(constraints.b_ub) else np.zeros(0, bool)
    at_upper = np.isfinite(constraints.upper) & (np.abs(x - constraints.upper) <= active_tol)
    at_lower = np.isfinite(constraints.lower) & (np.abs(x - constraints.lower) <= active_tol) & ~at_upper
    e = np.vstack([constraints.A_eq, constraints.A_ub[ub_active], eye[at_upper], -eye[at_lower]])
    f = np.concatenate([constraints.b_eq, constraints.b_ub[ub_active], constraints.upper[at_upper], -constraints.lower[at_lower]])
    if not len(f):
        return z.copy() if constraints.violation(z) <= 1e-10 else None
    lam, *_ = np.linalg.lstsq(e @ e.T, e @ z - f, rcond=None)
    polished = z - e.T @ lam
    n_eq = len(constraints.b_eq)
    if np.any(lam[n_eq:] < -1e-9) or constraints.violation(polished) > 1e-10:
        return None
    return polished
