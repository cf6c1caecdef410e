"""Tree knapsack of docs/model.md §9.3(c) as a Pyomo MILP, solved with HiGHS.

The model is built by a pure function (:func:`knapsack_model`); solving and checking
termination happen in :func:`solve_knapsack`.  The exact dynamic programme that it is
cross-checked against lives with the profile generators
(:func:`edgeprefix.placement.pipeline.knapsack.knapsack_dp`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyomo.environ as pyo

from edgeprefix.placement.pipeline.knapsack import (
    CAP_TOLERANCE,
    KnapsackResult,
    check_knapsack,
)

SOLVERS = ("appsi_highs", "highs")
# Exact optimum (zero gap).  On the Mooncake forest (~4k eligible vertices) HiGHS' presolve and
# symmetry detection cost seconds and gain nothing on this tree structure: switched off.
HIGHS_OPTIONS = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.0, "presolve": "off", "mip_detect_symmetry": False}


def knapsack_model(parent: npt.ArrayLike, weights: npt.ArrayLike, values: npt.ArrayLike, cap: float) -> pyo.ConcreteModel:
    """The tree-knapsack MILP as a Pyomo ``ConcreteModel`` (pure: builds, never solves)."""
    p, w, v = check_knapsack(parent, weights, values, cap)
    m = pyo.ConcreteModel(name="tree_knapsack")
    m.V = pyo.RangeSet(0, p.size - 1)
    m.x = pyo.Var(m.V, domain=pyo.Binary, doc="x_v = 1 iff vertex v is cached")
    children = [int(i) for i in np.flatnonzero(p >= 0)]
    m.E = pyo.Set(initialize=children, doc="non-root vertices")
    m.ancestor = pyo.Constraint(m.E, rule=lambda m, i: m.x[i] <= m.x[int(p[i])], doc="x_v <= x_parent(v)")
    m.budget = pyo.Constraint(expr=sum(float(w[i]) * m.x[i] for i in m.V) <= float(cap) * (1 + CAP_TOLERANCE), doc="Σ_v w_v x_v <= B_cap")
    m.value = pyo.Objective(
        expr=sum(float(v[i]) * m.x[i] for i in m.V), sense=pyo.maximize, doc="Σ_v x_v Σ_q p_q [g(L_q − ℓ_parent(v)) − g(L_q − ℓ_v)]"
    )
    return m


def _solver() -> tuple[str, object]:
    for name in SOLVERS:
        solver = pyo.SolverFactory(name)
        try:
            if solver.available():
                return name, solver
        except Exception:  # noqa: BLE001 - an unavailable plugin may raise instead of returning False
            continue
    raise RuntimeError(f"no HiGHS solver available through Pyomo (tried {list(SOLVERS)}); install highspy")


def solve_knapsack(parent: npt.ArrayLike, weights: npt.ArrayLike, values: npt.ArrayLike, cap: float) -> KnapsackResult:
    """Solve the tree knapsack exactly (``mip_rel_gap = 0``) with HiGHS through Pyomo."""
    p, w, v = check_knapsack(parent, weights, values, cap)
    # exact reduction: a vertex whose root path alone exceeds the cap can never be chosen
    path_weight = w.copy()
    for i in range(p.size):
        if p[i] >= 0:
            path_weight[i] += path_weight[p[i]]
    keep = np.flatnonzero(path_weight <= cap * (1 + CAP_TOLERANCE))
    if keep.size == 0:
        return KnapsackResult((), 0.0, 0.0, "empty")
    renumber = np.full(p.size, -1, dtype=np.int64)
    renumber[keep] = np.arange(keep.size)
    sub_parent = np.where(p[keep] >= 0, renumber[np.maximum(p[keep], 0)], -1)
    model = knapsack_model(sub_parent, w[keep], v[keep], cap)
    name, solver = _solver()
    if name == "appsi_highs":
        solver.highs_options = dict(HIGHS_OPTIONS)  # type: ignore[attr-defined]
        result = solver.solve(model)  # type: ignore[attr-defined]
    else:
        result = solver.solve(model, options=dict(HIGHS_OPTIONS))  # type: ignore[attr-defined]
    pyo.assert_optimal_termination(result)
    x = np.zeros(p.size, dtype=bool)
    x[keep] = np.array([pyo.value(model.x[i]) for i in model.V]) > 0.5
    selected = tuple(int(i) for i in np.flatnonzero(x))
    return KnapsackResult(selected, float(v[x].sum()), float(w[x].sum()), f"milp:{name}")
