"""Throughput of batched evaluation against one mix at a time (docs/model.md §16).

Run ``python -m edgeprefix.benchmarks.speed.batch_speed [--quick | --smoke] [--out DIR]``.  Every case
scores the same points both ways in one run (``--repeats`` interleaved rounds, median times),
through the solvers' own path
(:class:`edgeprefix.solvers.tracking.Tracker`):

* **single** — ``Tracker.evaluate`` point by point, each fixed point warm-started from the
  previous point (how every method scored before batching);
* **batched** — ``Tracker.evaluate_many`` on chunks of the method's size (grid 512, random 64,
  QMC 16), every fixed point of a chunk started from the previous chunk's last point.

The points: the exhaustive ``1/20`` lattice of ``medium_forest`` (2,997 points; the issue's
case) and of ``paper_baseline`` (143), and projected Dirichlet(1) proposals on
``mooncake_large`` (a random-search population).  Reported: points per second of each path, the
ratio, the largest ``|ΔP_cov|`` between the two, and how many mixes the batched Newton iteration
left to the single-mix robust solver.  A last table times whole ``solve`` runs (grid, random,
QMC; CMA-ES, which stays one proposal at a time, as a control) with and without the batched path,
same seeds.  The load average is printed with the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, TypeVar
from unittest import mock

import numpy as np

from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
from edgeprefix.formulations.placement import PlacementProblem, placement_problem
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.model.batch import BATCH_METHOD
from edgeprefix.solvers import solve
from edgeprefix.solvers.grid import feasible_lattice
from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.tracking import Tracker

GOALS = {"medium_forest": 8.0, "mooncake_large": 3.0}
T = TypeVar("T")


@dataclass(frozen=True)
class BatchRow:
    case: str
    points: int
    chunk: int
    single_seconds: float
    batched_seconds: float
    max_coverage_diff: float
    fallbacks: int  # mixes the batched iteration left to the single-mix robust solver
    goal: float | None = None  # the ratio asked for

    @property
    def ratio(self) -> float:
        return self.single_seconds / self.batched_seconds


@dataclass(frozen=True)
class SolveRow:
    instance: str
    method: str
    budget: int
    unbatched_seconds: float
    batched_seconds: float
    unbatched_best: float
    batched_best: float


def _timed(fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def compare_paths(
    case: str, problem: PlacementProblem, points: np.ndarray, chunk: int, goal: float | None = None, repeats: int = 1
) -> BatchRow:
    """Score ``points`` one by one and in chunks (same run, same order), ``repeats`` times interleaved; median times."""

    def single() -> Tracker:
        tracker = Tracker(problem, None)
        for p in points:
            tracker.evaluate(p)
        return tracker

    def batched() -> tuple[Tracker, int]:
        tracker = Tracker(problem, None)
        fallbacks = 0
        for start in range(0, len(points), chunk):
            scores = tracker.evaluate_many(points[start : start + chunk])
            fallbacks += sum(s.evaluation.fixed_point.method != BATCH_METHOD for s in scores if s.evaluation.fixed_point is not None)
        return tracker, fallbacks

    single_times, batched_times = [], []
    for _ in range(repeats):
        seconds, one = _timed(single)
        single_times.append(seconds)
        seconds, (many, fallbacks) = _timed(batched)
        batched_times.append(seconds)
    diff = float(np.max(np.abs(np.array(one.coverages) - np.array(many.coverages))))
    return BatchRow(case, len(points), chunk, float(np.median(single_times)), float(np.median(batched_times)), diff, int(fallbacks), goal)


def batch_rows(mode: str, repeats: int = 1, queue_model: str = "meanfield") -> list[BatchRow]:
    """Lattices of ``paper_baseline`` and ``medium_forest`` and Dirichlet proposals on ``mooncake_large``."""
    rows = []
    for name, resolution in (("paper_baseline", 20), ("medium_forest", 5 if mode == "smoke" else 20)):
        problem = placement_problem(load_benchmark(name), queue_model=queue_model)
        points = feasible_lattice(problem.constraints, resolution)
        goal = GOALS.get(name) if resolution == 20 else None
        rows.append(compare_paths(f"{name} 1/{resolution} grid", problem, points, 512, goal, repeats))
    problem = placement_problem(load_benchmark("mooncake_large"), queue_model=queue_model)
    count = {"smoke": 16, "quick": 128, "full": 512}[mode]
    projection = Projection(problem.constraints)
    rng = np.random.default_rng(0)
    points = np.array([projection(z) for z in rng.dirichlet(np.ones(problem.dimension), size=count)])
    rows.append(compare_paths(f"mooncake_large {count} random mixes", problem, points, 64, GOALS["mooncake_large"], repeats))
    return rows


def solve_rows(mode: str) -> list[SolveRow]:
    """Whole ``solve`` runs with the batched path and with it switched off (same seed)."""
    from edgeprefix.solvers import optuna_search

    budget = {"smoke": 20, "quick": 100, "full": 300}[mode]
    runs: list[tuple[str, str, int | None, dict[str, Any]]] = [
        ("medium_forest", "grid", None, {"resolution": 5 if mode == "smoke" else 20})
    ]
    runs += [(name, method, budget, {}) for name in ("medium_forest", "mooncake_large") for method in ("random", "cmaes", "qmc")]
    rows = []
    for name, method, run_budget, options in runs:
        problem = placement_problem(load_benchmark(name))
        batched_seconds, batched = _timed(lambda: solve(problem, method, budget=run_budget, seed=0, **options))
        unbatched_problem = _Unbatched(problem)
        with mock.patch.object(optuna_search.QmcSolver, "batch_size", lambda self, study: 1):
            unbatched_seconds, unbatched = _timed(lambda: solve(unbatched_problem, method, budget=run_budget, seed=0, **options))
        rows.append(SolveRow(name, method, len(batched.values), unbatched_seconds, batched_seconds, unbatched.coverage, batched.coverage))
    return rows


class _Unbatched:
    """``problem`` without ``score_many``: the tracker scores one point at a time."""

    def __init__(self, problem: PlacementProblem) -> None:
        self._problem = problem

    def __getattr__(self, name: str) -> Any:
        if name == "score_many":
            raise AttributeError(name)
        return getattr(self._problem, name)


def render(rows: list[BatchRow], solves: list[SolveRow]) -> str:
    head = (
        f"{'case':<34}{'points':>7}{'chunk':>6}{'single pt/s':>12}{'batched pt/s':>13}{'ratio':>7}{'goal':>6}{'max|ΔP|':>10}{'fallback':>9}"
    )
    lines = [f"load average {[round(v, 2) for v in os.getloadavg()]}", head, "-" * len(head)]
    for r in rows:
        goal = "" if r.goal is None else f"≥{r.goal:.0f}"
        lines.append(
            f"{r.case:<34}{r.points:>7}{r.chunk:>6}{r.points / r.single_seconds:>12.0f}{r.points / r.batched_seconds:>13.0f}"
            f"{r.ratio:>7.1f}{goal:>6}{r.max_coverage_diff:>10.1e}{r.fallbacks:>9}"
        )
    if solves:
        head = f"{'solve':<28}{'budget':>7}{'unbatched s':>12}{'batched s':>10}{'ratio':>7}{'best unbatched':>15}{'best batched':>13}"
        lines += ["", head, "-" * len(head)]
        for s in solves:
            lines.append(
                f"{s.instance + ' ' + s.method:<28}{s.budget:>7}{s.unbatched_seconds:>12.2f}{s.batched_seconds:>10.2f}"
                f"{s.unbatched_seconds / s.batched_seconds:>7.1f}{s.unbatched_best:>15.6f}{s.batched_best:>13.6f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.batch_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer mixes on mooncake_large, budget 100")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (for the tests)")
    parser.add_argument("--no-solve", action="store_true", help="skip the whole-solve table")
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        metavar="N",
        help="interleaved single/batched rounds per case, median times (default 3; --smoke: 1)",
    )
    parser.add_argument(
        "--queue-model",
        default="meanfield",
        choices=("meanfield", "cell"),
        help="queue model of the scored problem (docs/model.md §14; the whole-solve table stays meanfield)",
    )
    parser.add_argument("--out", default=None, help="folder for batch_speed.json")
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    repeats = args.repeats if args.repeats is not None else (1 if args.smoke else 3)
    if repeats < 1:
        parser.error(f"--repeats must be >= 1, got {repeats}")
    rows = batch_rows(mode, repeats, args.queue_model)
    solves = [] if args.no_solve else solve_rows(mode)
    print(render(rows, solves))
    if args.out is not None:
        payload = {
            "load_average": os.getloadavg(),
            "rows": [{**asdict(r), "ratio": r.ratio} for r in rows],
            "solve": [asdict(s) for s in solves],
        }
        atomic_write_text(os.path.join(args.out, "batch_speed.json"), json.dumps(payload, indent=2) + "\n")
        print(f"wrote {os.path.join(args.out, 'batch_speed.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
