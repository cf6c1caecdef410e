"""The linear part of a formulation, read back from its Pyomo model (docs/model.md §10.1–10.2).

Solvers never see a second hand-written copy of the constraints: every formulation declares
them once in a Pyomo :class:`~pyomo.environ.ConcreteModel`, and :func:`read_linear_constraints`
walks the active constraints with :func:`pyomo.repn.generate_standard_repn` into the arrays
of :class:`LinearConstraints`.  The black-box objective is never touched.  One exception, for start-up:
the placement polytope (:func:`edgeprefix.formulations.placement.placement_polytope`) is also written
out as arrays, so that a search which never asks for the model does not import Pyomo; a test checks
those arrays against this read-back on every shipped instance.

Variables are ordered *decision first*: the first ``n_decision`` columns are the searched
point (a mix ``π``); further columns are auxiliary (e.g. migration flows ``m_{s→t}``) that a
projection may choose freely.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
from scipy.optimize import linprog

from edgeprefix.placement.errors import InfeasibleConstraintsError

if TYPE_CHECKING:
    import pyomo.environ as pyo

FloatArray = npt.NDArray[np.float64]
FEASIBILITY_TOLERANCE = 1e-8


def _frozen(array: npt.ArrayLike, shape: tuple[int, ...] | None = None) -> FloatArray:
    out = np.array(array, dtype=float)
    if shape is not None:
        out = out.reshape(shape)
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class LinearConstraints:
    """``A_eq x = b_eq``, ``A_ub x ≤ b_ub``, ``lower ≤ x ≤ upper`` over ``x = (π, y)``.

    Attributes
    ----------
    A_eq, b_eq : (m_eq, n), (m_eq,)
    A_ub, b_ub : (m_ub, n), (m_ub,) — every ``≥`` row is stored negated.
    lower, upper : (n,) variable bounds (``±inf`` when absent).
    names : (n,) Pyomo variable names, decision variables first.
    n_decision : number of leading decision columns (the mix ``π``); the rest are auxiliary.
    eq_names, ub_names : the Pyomo constraint each row came from (for error messages).
    """

    A_eq: FloatArray
    b_eq: FloatArray
    A_ub: FloatArray
    b_ub: FloatArray
    lower: FloatArray
    upper: FloatArray
    names: tuple[str, ...]
    n_decision: int
    eq_names: tuple[str, ...] = ()
    ub_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.names)
        if not 1 <= self.n_decision <= n:
            raise ValueError(f"n_decision must lie in [1, {n}], got {self.n_decision}")
        for key, rows in (("A_eq", self.b_eq), ("A_ub", self.b_ub)):
            shape = getattr(self, key).shape
            if shape != (len(rows), n):
                raise ValueError(f"{key} must have shape ({len(rows)}, {n}), got {shape}")
        if np.any(self.lower > self.upper):
            bad = int(np.argmax(self.lower > self.upper))
            raise InfeasibleConstraintsError(
                f"bounds of {self.names[bad]}: lower <= upper must hold, but got {self.lower[bad]} > {self.upper[bad]}"
            )

    @property
    def n_variables(self) -> int:
        return len(self.names)

    @property
    def has_auxiliary(self) -> bool:
        return self.n_variables > self.n_decision

    def violation(self, x: npt.ArrayLike) -> float:
        """Largest violation of any row or bound at a full point ``x`` (0 when feasible)."""
        x = np.asarray(x, dtype=float)
        parts = [
            np.abs(self.A_eq @ x - self.b_eq),
            np.maximum(self.A_ub @ x - self.b_ub, 0.0),
            np.maximum(self.lower - x, 0.0),
            np.maximum(x - self.upper, 0.0),
        ]
        return float(max((p.max() for p in parts if p.size), default=0.0))

    def decision_violation(self, points: npt.ArrayLike) -> FloatArray:
        """Violation of each decision point (rows of ``points``); only without auxiliaries."""
        if self.has_auxiliary:
            raise ValueError("decision_violation needs a model without auxiliary variables; use a projection")
        xt = np.atleast_2d(np.asarray(points, dtype=float)).T  # (n, N): reductions over the short axis 0 are vectorised
        worst = np.zeros(xt.shape[1])
        if len(self.b_eq):
            worst = np.maximum(worst, np.abs(self.A_eq @ xt - self.b_eq[:, None]).max(axis=0))
        if len(self.b_ub):
            worst = np.maximum(worst, np.maximum(self.A_ub @ xt - self.b_ub[:, None], 0.0).max(axis=0))
        worst = np.maximum(worst, np.maximum(self.lower[:, None] - xt, 0.0).max(axis=0))
        return np.maximum(worst, np.maximum(xt - self.upper[:, None], 0.0).max(axis=0))

    def completes(self, decision: npt.ArrayLike, tol: float = 1e-9) -> bool:
        """Whether auxiliary values exist that make ``decision`` feasible (an LP without objective)."""
        x = np.asarray(decision, dtype=float)
        k = self.n_decision
        if np.any(x < self.lower[:k] - tol) or np.any(x > self.upper[:k] + tol):
            return False
        if not self.has_auxiliary:
            return bool(self.decision_violation(x)[0] <= tol)
        a_eq, a_ub = self.A_eq[:, k:], self.A_ub[:, k:]
        aux = slice(k, None)
        bounds = [(lo if np.isfinite(lo) else None, hi if np.isfinite(hi) else None) for lo, hi in zip(self.lower[aux], self.upper[aux])]
        res = linprog(
            np.zeros(self.n_variables - k),
            A_ub=a_ub if len(self.b_ub) else None,
            b_ub=self.b_ub - self.A_ub[:, :k] @ x + tol if len(self.b_ub) else None,
            A_eq=a_eq if len(self.b_eq) else None,
            b_eq=self.b_eq - self.A_eq[:, :k] @ x if len(self.b_eq) else None,
            bounds=bounds,
            method="highs",
        )
        return bool(res.status == 0)

    def check_feasible(self) -> FloatArray:
        """Raise :class:`InfeasibleConstraintsError` unless some point meets every row.

        Returns one feasible point (HiGHS through :func:`scipy.optimize.linprog`).
        """
        n = self.n_variables
        bounds = [(lo if np.isfinite(lo) else None, hi if np.isfinite(hi) else None) for lo, hi in zip(self.lower, self.upper)]
        res = linprog(
            np.zeros(n),
            A_ub=self.A_ub if len(self.b_ub) else None,
            b_ub=self.b_ub if len(self.b_ub) else None,
            A_eq=self.A_eq if len(self.b_eq) else None,
            b_eq=self.b_eq if len(self.b_eq) else None,
            bounds=bounds,
            method="highs",
        )
        if res.status == 2:
            rows = ", ".join(self.eq_names + self.ub_names)
            raise InfeasibleConstraintsError(
                f"the linear constraints admit no point: {rows} and the bounds "
                f"{dict(zip(self.names, zip(self.lower.tolist(), self.upper.tolist())))} have an empty intersection"
            )
        if not res.success:
            raise InfeasibleConstraintsError(f"feasibility check of the linear constraints failed: {res.message}")
        return np.asarray(res.x, dtype=float)


def read_linear_constraints(model: pyo.ConcreteModel, decision: Sequence[pyo.Var] | pyo.Var) -> LinearConstraints:
    """Read every active constraint and bound of ``model`` into :class:`LinearConstraints`.

    Parameters
    ----------
    model
        A Pyomo model whose active constraints are linear (the objective is ignored).
    decision
        The decision variable component(s) whose entries come first, in their index order.

    Raises
    ------
    ValueError
        When an active constraint is not linear.
    """
    import pyomo.environ as pyo
    from pyomo.repn import generate_standard_repn

    components = [decision] if isinstance(decision, pyo.Var) or not isinstance(decision, Sequence) else list(decision)
    order: list = [v for comp in components for v in comp.values()]
    n_decision = len(order)
    column = {id(v): i for i, v in enumerate(order)}
    for v in model.component_data_objects(pyo.Var, descend_into=True):
        if id(v) not in column:
            column[id(v)] = len(order)
            order.append(v)
    eq_rows: list[tuple[dict[int, float], float, str]] = []
    ub_rows: list[tuple[dict[int, float], float, str]] = []
    for con in model.component_data_objects(pyo.Constraint, active=True, descend_into=True):
        repn = generate_standard_repn(con.body, compute_values=True)
        if not repn.is_linear():
            raise ValueError(f"constraint {con.name!r} is not linear; only linear constraints can be read back")
        coefs: dict[int, float] = {}
        for var, coef in zip(repn.linear_vars, repn.linear_coefs):
            coefs[column[id(var)]] = coefs.get(column[id(var)], 0.0) + float(coef)
        const = float(repn.constant)
        lower = None if con.lower is None else float(pyo.value(con.lower)) - const
        upper = None if con.upper is None else float(pyo.value(con.upper)) - const
        if con.equality and upper is not None:  # an equality has both bounds
            eq_rows.append((coefs, upper, con.name))
            continue
        if upper is not None:
            ub_rows.append((coefs, upper, con.name))
        if lower is not None:
            ub_rows.append(({k: -c for k, c in coefs.items()}, -lower, con.name))
    n = len(order)

    def matrix(rows: list[tuple[dict[int, float], float, str]]) -> tuple[FloatArray, FloatArray, tuple[str, ...]]:
        a = np.zeros((len(rows), n))
        for i, (coefs, _, _) in enumerate(rows):
            for j, c in coefs.items():
                a[i, j] = c
        return _frozen(a), _frozen([r[1] for r in rows]), tuple(r[2] for r in rows)

    a_eq, b_eq, eq_names = matrix(eq_rows)
    a_ub, b_ub, ub_names = matrix(ub_rows)
    lower_bounds = [-np.inf if v.lb is None else float(v.lb) for v in order]
    upper_bounds = [np.inf if v.ub is None else float(v.ub) for v in order]
    return LinearConstraints(
        A_eq=a_eq,
        b_eq=b_eq,
        A_ub=a_ub,
        b_ub=b_ub,
        lower=_frozen(lower_bounds),
        upper=_frozen(upper_bounds),
        names=tuple(v.name for v in order),
        n_decision=n_decision,
        eq_names=eq_names,
        ub_names=ub_names,
    )
