"""Simplex grid at resolution 1/K (docs/model.md §10.3): the global reference.

Every lattice point ``π = k / K`` (``k ∈ N^{|S|}``, ``Σ k = K``) that meets the linear
constraints is scored, in lexicographic order so neighbours warm-start each other.  The
unconstrained lattice has ``C(K + |S| − 1, |S| − 1)`` points; profiles pinned to 0 (``π_s^max
= 0``) are left out of the enumeration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from edgeprefix.formulations.linear import LinearConstraints
from edgeprefix.placement.errors import plain
from edgeprefix.solvers.base import Solver
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.tracking import Problem, Tracker

FloatArray = npt.NDArray[np.float64]
FEASIBLE_TOL = 1e-9


def simplex_lattice(n: int, resolution: int) -> FloatArray:
    """All ``k / K`` with ``k ∈ N^n``, ``Σ k = K``; shape ``(C(K+n−1, n−1), n)``, in decreasing lexicographic order."""
    if n < 1 or resolution < 1:
        raise ValueError(f"a lattice needs n >= 1 and resolution K >= 1, got n={n}, K={resolution}")
    size = math.comb(resolution + n - 1, n - 1)
    if size > 5_000_000:
        raise ValueError(f"the 1/{resolution} lattice over {n} profiles has {size} points (> 5e6): lower the resolution")
    counts = np.zeros((1, 0), dtype=np.int64)
    left = np.array([resolution])  # units not yet given to a coordinate, per partial point
    for _ in range(n - 1):  # the next coordinate takes left, left − 1, …, 0 in turn
        options = left + 1
        parent = np.repeat(np.arange(len(counts)), options)
        value = np.repeat(left, options) - (np.arange(options.sum()) - np.repeat(np.cumsum(options) - options, options))
        counts = np.hstack([counts[parent], value[:, None]])
        left = left[parent] - value
    return np.hstack([counts, left[:, None]]) / resolution


def feasible_lattice(constraints: LinearConstraints, resolution: int) -> FloatArray:
    """The lattice points meeting every linear constraint (to 1e-9), shape ``(N, n_decision)``.

    Profiles with ``π_s^max = 0`` stay at 0.  With auxiliary columns (migration flows) a point
    is kept when some auxiliary values complete it (one small LP per point).
    """
    k = constraints.n_decision
    active = np.flatnonzero(constraints.upper[:k] > 0)
    points = np.zeros((0, k))
    if active.size:
        sub = simplex_lattice(active.size, resolution)
        points = np.zeros((len(sub), k))
        points[:, active] = sub
    if not constraints.has_auxiliary:
        return points[constraints.decision_violation(points) <= FEASIBLE_TOL]
    keep = [constraints.completes(p) for p in points]
    return points[np.asarray(keep, dtype=bool)]


@dataclass(frozen=True)
class GridSolver(Solver):
    """Exhaustive search of the 1/K lattice.

    Parameters
    ----------
    resolution : ``K`` (default 20, i.e. 5 % steps).
    chunk : points scored per iteration, in one batched evaluation (``nit`` counts chunks).
    """

    name: ClassVar[str] = "grid"
    STOCHASTIC: ClassVar[bool] = False
    NEEDS_BUDGET: ClassVar[bool] = False
    resolution: int = 20
    chunk: int = 512

    def __post_init__(self) -> None:
        for key in ("resolution", "chunk"):
            value = getattr(self, key)
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"grid option {key} must be a positive integer, got {plain(value)}")

    def run(self, problem: Problem, projection: Projection, tracker: Tracker, rng: np.random.Generator) -> Status:
        points = feasible_lattice(projection.constraints, int(self.resolution))
        tracker.extras.update({"resolution": int(self.resolution), "grid_points": len(points)})
        if not len(points):
            raise ValueError(f"no point of the 1/{self.resolution} lattice meets the linear constraints: raise the resolution")
        if tracker.budget is not None and len(points) > tracker.budget:
            raise ValueError(
                f"the 1/{self.resolution} grid has {len(points)} feasible points, more than the budget {tracker.budget}: "
                "raise the budget or lower the resolution"
            )
        for start in range(0, len(points), int(self.chunk)):
            tracker.evaluate_many(points[start : start + int(self.chunk)])  # one batched evaluation per chunk
            tracker.nit += 1
        return Status.COMPLETED
