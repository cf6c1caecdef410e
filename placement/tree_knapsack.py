"""Tree knapsack of MODEL.md §9.3(c): a Pyomo MILP solved with HiGHS, and an exact tree DP.

Choose an ancestor-closed vertex set maximising ``Σ_v x_v val_v`` subject to
``Σ_v w_v x_v ≤ B_cap`` and ``x_v ≤ x_{parent(v)}``, ``x_v ∈ {0, 1}``.

Vertices are indexed ``0..n−1`` with ``parent[v] < v`` (``-1`` for a root), which is the
order :class:`placement.forest.RadixForest` uses.  The MILP is built by a pure function
(:func:`knapsack_model`); solving and checking termination happen in :func:`solve_knapsack`.
:func:`knapsack_dp` is the exact reference (Pareto frontiers of (weight, value) per subtree;
exact for real weights, exponential only in pathological cases — use it on small forests).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyomo.environ as pyo

SOLVERS = ("appsi_highs", "highs")
CAP_TOLERANCE = 1e-9  # relative slack on the memory budget
# Exact optimum (zero gap).  On the Mooncake forest (~4k eligible vertices) HiGHS' presolve and
# symmetry detection cost seconds and gain nothing on this tree structure: switched off.
HIGHS_OPTIONS = {"mip_rel_gap": 0.0, "mip_abs_gap": 0.0, "presolve": "off", "mip_detect_symmetry": False}


@dataclass(frozen=True)
class KnapsackResult:
    """Selected vertices (sorted), objective ``Σ val_v``, weight ``Σ w_v`` and the method."""

    selected: tuple[int, ...]
    objective: float
    weight: float
    method: str


def _check(parent: npt.ArrayLike, weights: npt.ArrayLike, values: npt.ArrayLike, cap: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = np.asarray(parent, dtype=np.int64)
    w = np.asarray(weights, dtype=float)
    v = np.asarray(values, dtype=float)
    if not (p.shape == w.shape == v.shape and p.ndim == 1):
        raise ValueError(f"parent, weights and values must be 1-D of equal length, got {p.shape}, {w.shape}, {v.shape}")
    if np.any(p >= np.arange(p.size)) or np.any(p < -1):
        raise ValueError("parent[v] must be -1 or an index < v (parents first)")
    if np.any(w < 0) or not np.all(np.isfinite(w)) or not np.all(np.isfinite(v)):
        raise ValueError("weights must be finite and >= 0, values finite")
    if not (np.isfinite(cap) and cap >= 0):
        raise ValueError(f"the memory cap B_cap must be finite and >= 0, got {cap!r}")
    return p, w, v


def knapsack_model(parent: npt.ArrayLike, weights: npt.ArrayLike, values: npt.ArrayLike, cap: float) -> pyo.ConcreteModel:
    """The tree-knapsack MILP as a Pyomo ``ConcreteModel`` (pure: builds, never solves)."""
    p, w, v = _check(parent, weights, values, cap)
    m = pyo.ConcreteModel(name="tree_knapsack")
    m.V = pyo.RangeSet(0, p.size - 1)
    m.x = pyo.Var(m.V, domain=pyo.Binary, doc="x_v = 1 iff vertex v is cached")
    children = [int(i) for i in np.flatnonzero(p >= 0)]
    m.E = pyo.Set(initialize=children, doc="non-root vertices")
    m.ancestor = pyo.Constraint(m.E, rule=lambda m, i: m.x[i] <= m.x[int(p[i])], doc="x_v <= x_parent(v)")
    m.budget = pyo.Constraint(expr=sum(float(w[i]) * m.x[i] for i in m.V) <= float(cap) * (1 + CAP_TOLERANCE),
                              doc="Σ_v w_v x_v <= B_cap")
    m.value = pyo.Objective(expr=sum(float(v[i]) * m.x[i] for i in m.V), sense=pyo.maximize,
                            doc="Σ_v x_v Σ_q p_q [g(L_q − ℓ_parent(v)) − g(L_q − ℓ_v)]")
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
    p, w, v = _check(parent, weights, values, cap)
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


def _pareto(options: list[tuple[float, float, tuple[int, ...]]]) -> list[tuple[float, float, tuple[int, ...]]]:
    """Keep options not dominated in (less weight, more value)."""
    options.sort(key=lambda o: (o[0], -o[1]))
    out: list[tuple[float, float, tuple[int, ...]]] = []
    for opt in options:
        if not out or opt[1] > out[-1][1]:
            out.append(opt)
    return out


def knapsack_dp(parent: npt.ArrayLike, weights: npt.ArrayLike, values: npt.ArrayLike, cap: float) -> KnapsackResult:
    """Exact tree knapsack by dynamic programming over Pareto frontiers (small forests)."""
    p, w, v = _check(parent, weights, values, cap)
    limit = cap * (1 + CAP_TOLERANCE)
    children: list[list[int]] = [[] for _ in range(p.size)]
    for i in range(p.size):
        if p[i] >= 0:
            children[int(p[i])].append(i)
    frontier: list[list[tuple[float, float, tuple[int, ...]]]] = [[] for _ in range(p.size)]
    for i in reversed(range(p.size)):  # children before parents
        if w[i] > limit:
            continue
        opts = [(float(w[i]), float(v[i]), (i,))]
        for c in children[i]:
            opts = _pareto(opts + [(a + b, x + y, s + t) for a, x, s in opts for b, y, t in frontier[c] if a + b <= limit])
        frontier[i] = opts
    best: list[tuple[float, float, tuple[int, ...]]] = [(0.0, 0.0, ())]
    for r in np.flatnonzero(p < 0):
        best = _pareto(best + [(a + b, x + y, s + t) for a, x, s in best for b, y, t in frontier[int(r)] if a + b <= limit])
    weight, value, chosen = max(best, key=lambda o: (o[1], -o[0]))
    return KnapsackResult(tuple(sorted(chosen)), value, weight, "dp")
