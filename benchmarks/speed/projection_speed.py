"""Per-call time of the projection onto the placement polytope: exact KKT algorithm vs cvxpy/Clarabel.

Part of ``python -m edgeprefix.benchmarks.speed.perf`` (docs/model.md §16).  For each case the same
points are projected by :class:`edgeprefix.solvers.projection.Projection` with ``method="exact"``
(:class:`edgeprefix.solvers.capped_simplex.CappedSimplex`) and ``method="cvxpy"`` (the DPP
problem re-solved by Clarabel, then polished on its active set), in the same run.  The points
are what the samplers propose: Dirichlet(1) draws plus Gaussian steps of 0.1 (SPSA- and
CMA-ES-like), seeded.  Reported: the median per-call time of each path over the points, their
ratio, how often the knapsack row (memory budget) binds at the answer, and the largest
``|x_exact − x_cvxpy|`` and ``‖x − z‖²`` difference (the exact path's distance is never larger).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import dataclass

import numpy as np

from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.formulations.linear import LinearConstraints
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.instance import Instance
from edgeprefix.solvers.projection import Projection

GOAL_MS = 0.3  # per call at 10 profiles


@dataclass(frozen=True)
class ProjectionRow:
    """One case: ``profiles`` decision variables, ``points`` projected by both paths."""

    case: str
    profiles: int
    points: int
    exact_ms: float
    cvxpy_ms: float
    knapsack_binding: float  # share of answers with the memory-budget row tight
    max_dx: float
    max_distance_gain: float  # max(‖x_cvxpy − z‖² − ‖x_exact − z‖²): ≥ 0 when the exact path is never worse

    @property
    def ratio(self) -> float:
        return self.cvxpy_ms / self.exact_ms


def ten_profile_instance() -> Instance:
    """Seeded synthetic instance with 10 profiles, fallback ``π_min = 0.05`` and a memory budget at the median ``B_s``."""
    inst = synthetic_instance(16, 10, alpha=2.0, seed=0)
    return inst.replace(placement=dataclasses.replace(inst.placement, memory_budget=float(np.median(inst.memory))))


def proposals(n: int, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(n), size=count) + rng.normal(0.0, 0.1, size=(count, n))


def _per_call_ms(projection: Projection, points: np.ndarray) -> tuple[float, np.ndarray]:
    times, out = [], []
    for z in points:
        start = time.perf_counter()
        out.append(projection(z))
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times), np.array(out)


def measure(case: str, constraints: LinearConstraints, count: int, seed: int = 0) -> ProjectionRow:
    exact, reference = Projection(constraints, method="exact"), Projection(constraints, method="cvxpy")
    points = proposals(constraints.n_decision, count, seed)
    exact_ms, x = _per_call_ms(exact, points)
    cvxpy_ms, y = _per_call_ms(reference, points)
    simplex = exact.exact
    knap = simplex.knapsack if simplex is not None else None
    budget = simplex.budget if simplex is not None else None
    binding = 0.0 if knap is None or budget is None else float(np.mean(np.abs(x @ knap - budget) <= 1e-9))
    gain = np.sum((y - points) ** 2, axis=1) - np.sum((x - points) ** 2, axis=1)
    return ProjectionRow(case, constraints.n_decision, count, exact_ms, cvxpy_ms, binding, float(np.abs(x - y).max()), float(gain.max()))


def projection_rows(count: int) -> list[ProjectionRow]:
    """The projection cases: 10 profiles with a binding memory budget (the goal's case) and the benchmark instances."""
    from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark

    cases = [("synthetic 10 profiles, B̄ = median B_s", placement_problem(ten_profile_instance()).constraints)]
    cases += [(name, placement_problem(load_benchmark(name)).constraints) for name in ("paper_baseline", "medium_forest", "mooncake_large")]
    return [measure(name, cons, count) for name, cons in cases]


def render(rows: list[ProjectionRow]) -> str:
    head = f"{'projection case':<40}{'|S|':>4}{'points':>7}{'exact ms':>10}{'cvxpy ms':>10}{'ratio':>7}{'B̄ tight':>9}{'max|Δx|':>10}{'max Δdist':>11}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.case:<40}{r.profiles:>4}{r.points:>7}{r.exact_ms:>10.3f}{r.cvxpy_ms:>10.3f}{r.ratio:>7.0f}"
            f"{r.knapsack_binding:>9.2f}{r.max_dx:>10.1e}{r.max_distance_gain:>11.1e}"
        )
    lines.append(f"goal: ≤ {GOAL_MS} ms per call at 10 profiles (first row)")
    return "\n".join(lines)
