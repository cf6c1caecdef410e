"""One optimiser run of the comparison, recorded as an anytime best-so-far curve (docs/model.md §10.3).

TPE, CMA-ES, QMC and random search run once per seed at the largest budget ``B_max``; none of
them reads the budget, so their best-so-far after ``b`` evaluations *is* the result of a run
with budget ``b`` (the COCO "anytime" reading).  The methods of :data:`PER_BUDGET_METHODS` read
the budget and run once per budget: SPSA sets its gain constant ``A`` to 10 % of the expected
iterations, and the grid runs the finest lattice ``1/K`` whose feasible points fit in ``b``
(:func:`grid_resolution_for`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from pathlib import Path

import numpy as np
import numpy.typing as npt

from edgeprefix.formulations.placement import PlacementProblem, placement_problem
from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.instance import Instance, load_instance
from edgeprefix.solvers import Progress, solve
from edgeprefix.solvers.grid import feasible_lattice

FloatArray = npt.NDArray[np.float64]
INSTANCES_DIR = Path(__file__).resolve().parent / "instances"
MAX_GRID_RESOLUTION = 200
PER_BUDGET_METHODS = frozenset({"spsa", "grid"})  # their steps depend on the budget


@dataclass(frozen=True)
class RunRecord:
    """One search of one instance.

    Attributes
    ----------
    instance, method, seed : what ran (``seed`` is ``-1`` for the deterministic grid).
    budget : evaluations allowed; ``resolution`` the grid's ``K`` (0 for other methods).
    curve : best-so-far *feasible* coverage ``P_cov(τ_0)`` after each evaluation, shape
        ``(nfev,)``; ``-inf`` until the first stable, converged mix.
    elapsed : wall seconds after each evaluation, shape ``(nfev,)``.
    best_mix : the best feasible mix ``π`` found (empty when none).
    """

    instance: str
    method: str
    seed: int
    budget: int
    resolution: int
    curve: FloatArray
    elapsed: FloatArray
    best_mix: tuple[float, ...]

    @property
    def nfev(self) -> int:
        return int(self.curve.size)

    @property
    def best(self) -> float:
        """Best feasible coverage of the whole run (``-inf`` when none was feasible)."""
        return float(self.curve[-1]) if self.curve.size else float("-inf")

    def best_at(self, budget: int) -> float:
        """Best feasible coverage within the first ``budget`` evaluations."""
        if budget < 1:
            raise ValueError(f"budget must be >= 1, got {plain(budget)}")
        return float(self.curve[min(budget, self.nfev) - 1]) if self.nfev else float("-inf")

    def seconds_at(self, budget: int) -> float:
        """Wall seconds spent on the first ``budget`` evaluations."""
        return float(self.elapsed[min(budget, self.nfev) - 1]) if self.nfev else 0.0


def anytime_runs(runs: Sequence[RunRecord], method: str) -> list[RunRecord]:
    """Runs of ``method`` to draw as anytime curves: for a per-budget method, those at its largest budget."""
    chosen = [r for r in runs if r.method == method]
    if method in PER_BUDGET_METHODS and chosen:
        top = {}
        for r in chosen:
            top[r.instance] = max(top.get(r.instance, 0), r.budget)
        chosen = [r for r in chosen if r.budget == top[r.instance]]
    return chosen


def resolve_instance(name: str) -> Path | str:
    """A benchmark name (``medium_forest``) → its file in ``benchmarks/instances``; else as given."""
    candidate = INSTANCES_DIR / f"{name}.toml"
    if candidate.is_file():
        return candidate
    return name


def instance_label(name: str) -> str:
    return Path(name).stem if name.endswith((".toml", ".json")) else name


def load_benchmark(name: str) -> Instance:
    return load_instance(resolve_instance(name))


def feasible_best_so_far(values_feasible: npt.NDArray[np.bool_], coverages: FloatArray) -> FloatArray:
    """Cumulative maximum of ``P_cov`` over the feasible evaluations (``-inf`` before the first)."""
    masked = np.where(np.asarray(values_feasible, dtype=bool), np.asarray(coverages, dtype=float), -np.inf)
    return np.maximum.accumulate(masked) if masked.size else masked


def lattice_size(problem: PlacementProblem, resolution: int) -> int:
    """Feasible points of the ``1/K`` lattice (the grid's cost in evaluations)."""
    return len(feasible_lattice(problem.constraints, resolution))


def grid_resolution_for(problem: PlacementProblem, budget: int) -> int:
    """Largest ``K`` whose feasible lattice has between 1 and ``budget`` points (0 if none fits).

    The feasible count is not monotone in ``K`` (a fine lattice can miss a thin polytope), so
    every ``K`` is tried until the unconstrained lattice ``C(K+|S|−1, |S|−1)`` alone exceeds 50
    budgets.
    """
    best = 0
    n = problem.dimension
    for k in range(1, MAX_GRID_RESOLUTION + 1):
        if comb(k + n - 1, n - 1) > 50 * budget:
            break
        size = lattice_size(problem, k)
        if 1 <= size <= budget:
            best = k
    return best


def _timed_run(problem: PlacementProblem, method: str, budget: int, seed: int | None, **options: object) -> tuple[object, FloatArray]:
    stamps: list[float] = []
    start = time.perf_counter()

    def tick(_: Progress) -> None:
        stamps.append(time.perf_counter() - start)

    result = solve(problem, method, budget=budget, seed=seed, callback=tick, **options)
    return result, np.asarray(stamps, dtype=float)


def run_method(name: str, method: str, seed: int, budget: int, *, resolution: int = 0, queue_model: str = "meanfield") -> RunRecord:
    """Run ``method`` on benchmark ``name`` (a fresh problem: safe in a worker process)."""
    problem = placement_problem(load_benchmark(name), queue_model=queue_model)
    options = {"resolution": resolution} if method == "grid" else {}
    result, stamps = _timed_run(problem, method, budget, None if method == "grid" else seed, **options)
    curve = feasible_best_so_far(result.feasible, result.coverages)
    best = tuple(np.asarray(result.x, dtype=float).tolist()) if result.success else ()
    for array in (curve, stamps):
        array.setflags(write=False)
    return RunRecord(instance_label(name), method, seed if method != "grid" else -1, budget, resolution, curve, stamps, best)
