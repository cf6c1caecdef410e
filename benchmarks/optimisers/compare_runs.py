"""One optimiser run of the comparison, recorded as an anytime best-so-far curve (docs/model.md §10.3).

The gradient method, TPE, CMA-ES, QMC, random search and the scipy baselines (SLSQP with finite
differences, differential evolution) run once per seed at the largest budget ``B_max``; none of
them reads the budget (SLSQP may end earlier, on convergence), so their best-so-far after ``b``
evaluations *is* the result of a run with budget ``b`` (the COCO "anytime" reading).  The methods of :data:`PER_BUDGET_METHODS` read
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
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.benchmarks.optimisers.compare_baselines import BASELINES
from edgeprefix.formulations.placement import PlacementProblem, placement_problem
from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.instance import Instance, load_instance
from edgeprefix.solvers import Progress, Result, solve
from edgeprefix.solvers.api import run_solver
from edgeprefix.solvers.grid import feasible_lattice
from edgeprefix.solvers.optuna_common import SPACES

FloatArray = npt.NDArray[np.float64]
INSTANCES_DIR = Path(__file__).resolve().parents[1] / "instances"
MAX_GRID_RESOLUTION = 200
PER_BUDGET_METHODS = frozenset({"spsa", "grid"})  # their steps depend on the budget
SPACE_METHODS = frozenset({"tpe", "cmaes", "qmc"})  # the methods that take ``space=`` (``cmaes:box``)


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
    cpu : process CPU seconds after each evaluation (gradient solves and the method's own work
        included), shape ``(nfev,)``.
    njev : exact gradient solves of the run (0 for derivative-free methods).
    """

    instance: str
    method: str
    seed: int
    budget: int
    resolution: int
    curve: FloatArray
    elapsed: FloatArray
    best_mix: tuple[float, ...]
    cpu: FloatArray | None = None
    njev: int = 0

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

    def evaluations_at(self, budget: int) -> int:
        """Evaluations made within ``budget`` (fewer when the method ended on its own)."""
        return min(budget, self.nfev)

    def cpu_per_evaluation(self, budget: int) -> float:
        """CPU seconds per evaluation over the first ``budget`` evaluations (NaN when not recorded)."""
        if self.cpu is None or not self.nfev:
            return float("nan")
        k = self.evaluations_at(budget)
        return float(self.cpu[k - 1] / k)

    def curve_to(self, length: int) -> FloatArray:
        """The best-so-far curve over ``length`` evaluations, held at its last value after the run ended."""
        out = np.full(length, self.curve[-1] if self.nfev else -np.inf)
        k = min(length, self.nfev)
        out[:k] = self.curve[:k]
        return out


def anytime_runs(runs: Sequence[RunRecord], method: str) -> list[RunRecord]:
    """Runs of ``method`` to draw as anytime curves: for a per-budget method, those at its largest budget."""
    chosen = [r for r in runs if r.method == method]
    if method in PER_BUDGET_METHODS and chosen:
        top: dict[Any, Any] = {}
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


def instance_label(name: str, load: float = 1.0) -> str:
    """``medium_forest``, or ``medium_forest×1.3`` for the instance at 1.3 times its ``Λ``."""
    stem = Path(name).stem if name.endswith((".toml", ".json")) else name
    return stem if load == 1.0 else f"{stem}×{load:g}"


def load_benchmark(name: str, load: float = 1.0) -> Instance:
    """The benchmark instance ``name`` with its request intensity ``Λ`` scaled by ``load``."""
    instance = load_instance(resolve_instance(name))
    if load == 1.0:
        return instance
    return instance.with_network(request_intensity=load * instance.network.request_intensity)


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


def _timed_run(
    problem: PlacementProblem, method: str, budget: int, seed: int | None, **options: Any
) -> tuple[Result, FloatArray, FloatArray]:
    stamps: list[float] = []
    cpu: list[float] = []
    start, cpu_start = time.perf_counter(), time.process_time()

    def tick(_: Progress) -> None:
        stamps.append(time.perf_counter() - start)
        cpu.append(time.process_time() - cpu_start)

    if method in BASELINES:
        result = run_solver(problem, BASELINES[method](), budget=budget, seed=seed, callback=tick)
    else:
        result = solve(problem, method, budget=budget, seed=seed, callback=tick, **options)
    return result, np.asarray(stamps, dtype=float), np.asarray(cpu, dtype=float)


def split_method(method: str) -> tuple[str, dict[str, Any]]:
    """``cmaes:box`` → (``cmaes``, ``{"space": "box"}``): an Optuna method in another search space
    (:data:`edgeprefix.solvers.optuna_common.SPACES`); a plain name has no options."""
    base, sep, space = method.partition(":")
    if not sep:
        return method, {}
    if base not in SPACE_METHODS or space not in SPACES:
        raise ValueError(f"methods: {method!r} must be an Optuna method {sorted(SPACE_METHODS)} and a space {list(SPACES)}, e.g. cmaes:box")
    return base, {"space": space}


def run_method(
    name: str, method: str, seed: int, budget: int, *, resolution: int = 0, queue_model: str = "meanfield", load: float = 1.0
) -> RunRecord:
    """Run ``method`` (registered, a scipy baseline, or ``optuna_method:space``) on benchmark ``name`` at
    ``load`` times its ``Λ`` (a fresh problem: safe in a worker process)."""
    problem = placement_problem(load_benchmark(name, load), queue_model=queue_model)
    base, options = split_method(method)
    if base == "grid":
        options = {"resolution": resolution}
    result, stamps, cpu = _timed_run(problem, base, budget, None if base == "grid" else seed, **options)
    curve = feasible_best_so_far(result.feasible, result.coverages)
    best = tuple(np.asarray(result.x, dtype=float).tolist()) if result.success else ()
    for array in (curve, stamps, cpu):
        array.setflags(write=False)
    return RunRecord(
        instance_label(name, load), method, seed if method != "grid" else -1, budget, resolution, curve, stamps, best, cpu, result.njev
    )
