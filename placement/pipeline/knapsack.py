"""Tree knapsack of docs/model.md §9.3(c): the exact dynamic programme and the common result.

Choose an ancestor-closed vertex set maximising ``Σ_v x_v val_v`` subject to
``Σ_v w_v x_v ≤ B_cap`` and ``x_v ≤ x_{parent(v)}``, ``x_v ∈ {0, 1}``.

Vertices are indexed ``0..n−1`` with ``parent[v] < v`` (``-1`` for a root), which is the
order :class:`edgeprefix.placement.pipeline.forest.RadixForest` uses.  :func:`knapsack_dp` is exact
(Pareto frontiers of (weight, value) per subtree; exact for real weights, exponential only in
pathological cases).  The same problem declared as a Pyomo MILP and solved with HiGHS is
:func:`edgeprefix.formulations.tree_knapsack.solve_knapsack`; both return a :class:`KnapsackResult`
and either can be passed to :func:`~edgeprefix.placement.pipeline.profile_generation.generate_profiles`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain

CAP_TOLERANCE = 1e-9  # relative slack on the memory budget


@dataclass(frozen=True)
class KnapsackResult:
    """Selected vertices (sorted), objective ``Σ val_v``, weight ``Σ w_v`` and the method."""

    selected: tuple[int, ...]
    objective: float
    weight: float
    method: str


KnapsackSolver = Callable[[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike, float], KnapsackResult]


def check_knapsack(
    parent: npt.ArrayLike, weights: npt.ArrayLike, values: npt.ArrayLike, cap: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        raise ValueError(f"the memory cap B_cap must be finite and >= 0, got {plain(cap)}")
    return p, w, v


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
    p, w, v = check_knapsack(parent, weights, values, cap)
    limit = cap * (1 + CAP_TOLERANCE)
    children: list[list[int]] = [[] for _ in range(p.size)]
    for i in range(p.size):
        if p[i] >= 0:
            children[int(p[i])].append(i)
    frontier: list[list[tuple[float, float, tuple[int, ...]]]] = [[] for _ in range(p.size)]
    for i in reversed(range(p.size)):  # children before parents
        if w[i] > limit:
            continue
        opts: list[tuple[float, float, tuple[int, ...]]] = [(float(w[i]), float(v[i]), (i,))]
        for c in children[i]:
            opts = _pareto(opts + [(a + b, x + y, s + t) for a, x, s in opts for b, y, t in frontier[c] if a + b <= limit])
        frontier[i] = opts
    best: list[tuple[float, float, tuple[int, ...]]] = [(0.0, 0.0, ())]
    for r in np.flatnonzero(p < 0):
        best = _pareto(best + [(a + b, x + y, s + t) for a, x, s in best for b, y, t in frontier[int(r)] if a + b <= limit])
    weight, value, chosen = max(best, key=lambda o: (o[1], -o[0]))
    return KnapsackResult(tuple(sorted(chosen)), value, weight, "dp")
