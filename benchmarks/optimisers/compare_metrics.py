"""Statistics of the optimiser comparison: reference optimum, per-budget summaries, COCO ECDF.

Symbols: ``P*`` the reference optimum of an instance (best ``P_cov(τ_0)`` known), ``b`` a budget
of black-box evaluations, ``Δ`` a target precision (a run reaches target ``P* − Δ`` once its
best-so-far feasible coverage is at least that).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.benchmarks.optimisers.compare_runs import PER_BUDGET_METHODS, RunRecord

FloatArray = npt.NDArray[np.float64]
SUCCESS_TOL = 0.005
STRICT_TOL = 0.001  # a second, tighter success level (the 0.005 one saturates on flat instances)
FINE_TOL = 1e-4  # the gradient method's goal
TARGET_PRECISIONS = (0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001)  # Δ, COCO-style targets P* − Δ
RELATIVE_TARGETS = (1e-3, 1e-4, 1e-6)  # δ: targets P* (1 − δ) of an instance whose P* is known exactly


@dataclass(frozen=True)
class Reference:
    """The reference optimum ``P*`` of one instance and where it came from.

    ``source`` is ``grid 1/K`` when the ``1/K`` lattice was searched exhaustively and nothing
    better was found, ``best found`` (the best of every run, at the longest budget), or
    ``known optimum (…)`` for an instance whose file carries its exact ``P*`` (docs/model.md §18).
    """

    instance: str
    coverage: float
    source: str
    grid_coverage: float | None
    grid_resolution: int
    grid_points: int
    best_found: float


@dataclass(frozen=True)
class Summary:
    """Best-so-far feasible coverage of one (instance, method, budget ``b``) over the seeds.

    ``median``, ``q25``, ``q75`` of the best coverage (a run with no feasible point counts as
    0); ``gap`` is ``P* − median``; ``success`` the share of seeds within :data:`SUCCESS_TOL`
    of ``P*`` (``success_strict``: within :data:`STRICT_TOL`, ``success_fine``: within
    :data:`FINE_TOL`); ``seconds`` the median wall time of the first ``b`` evaluations;
    ``feasible`` the share of seeds with a feasible mix; ``evaluations`` the median number of
    evaluations made within ``b`` (fewer for a method that ended on its own); ``cpu_ms`` the median
    CPU milliseconds per evaluation, everything the method did included (NaN if not recorded).
    """

    instance: str
    method: str
    budget: int
    runs: int
    median: float
    q25: float
    q75: float
    gap: float
    success: float
    seconds: float
    feasible: float
    success_strict: float
    success_fine: float = float("nan")
    evaluations: float = float("nan")
    cpu_ms: float = float("nan")

    @property
    def iqr(self) -> float:
        return self.q75 - self.q25


def make_reference(instance: str, runs: Sequence[RunRecord], grid: RunRecord | None, known: tuple[float, str] | None = None) -> Reference:
    """``P* = max(grid 1/K optimum, best of every run)``; the source names the larger.

    ``known`` = ``(P*, method)``: the instance's exact optimum, taken as is (a run above it shows
    as a negative gap, never as a new reference).
    """
    found = max((r.best for r in runs if r.instance == instance), default=float("-inf"))
    grid_cov = grid.best if grid is not None and np.isfinite(grid.best) else None
    if known is not None:
        coverage, source = float(known[0]), f"known optimum ({known[1]})"
    elif grid is not None and grid_cov is not None and grid_cov >= found:
        coverage, source = grid_cov, f"grid 1/{grid.resolution}"
    else:
        coverage, source = found, "best found"
    if not np.isfinite(coverage):
        raise ValueError(f"instance {instance!r}: no run found a feasible mix, so there is no reference optimum")
    return Reference(instance, float(coverage), source, grid_cov, grid.resolution if grid else 0, grid.nfev if grid else 0, float(found))


def _floor(values: FloatArray) -> FloatArray:
    return np.where(np.isfinite(values), values, 0.0)


def summarise(runs: Sequence[RunRecord], ref: Reference, method: str, budget: int, *, tol: float = SUCCESS_TOL) -> Summary:
    """Summary of the runs of ``method`` on ``ref.instance`` at budget ``b``.

    Methods of :data:`PER_BUDGET_METHODS` (SPSA, grid) are matched by their own budget (one run
    per budget and seed); the others are read at ``b`` evaluations of their longest run.
    """
    chosen = [
        r for r in runs if r.instance == ref.instance and r.method == method and (method not in PER_BUDGET_METHODS or r.budget == budget)
    ]
    if not chosen:
        raise ValueError(f"no runs of method {method!r} on instance {ref.instance!r} at budget {budget}")
    raw = np.array([r.best_at(budget) for r in chosen])
    best = _floor(raw)
    q25, median, q75 = np.percentile(best, [25, 50, 75])
    return Summary(
        instance=ref.instance,
        method=method,
        budget=budget,
        runs=len(chosen),
        median=float(median),
        q25=float(q25),
        q75=float(q75),
        gap=float(ref.coverage - median),
        success=float(np.mean(best >= ref.coverage - tol)),
        seconds=float(np.median([r.seconds_at(budget) for r in chosen])),
        feasible=float(np.mean(np.isfinite(raw))),
        success_strict=float(np.mean(best >= ref.coverage - STRICT_TOL)),
        success_fine=float(np.mean(best >= ref.coverage - FINE_TOL)),
        evaluations=float(np.median([r.evaluations_at(budget) for r in chosen])),
        cpu_ms=float(np.median([1e3 * r.cpu_per_evaluation(budget) for r in chosen])),
    )


def ecdf(
    runs: Sequence[RunRecord],
    refs: dict[str, Reference],
    method: str,
    evaluations: npt.ArrayLike,
    precisions: Sequence[float] = TARGET_PRECISIONS,
    *,
    relative: bool = False,
) -> FloatArray:
    """COCO-style ECDF: share of (run, target ``P* − Δ``) pairs reached within ``n`` evaluations.

    Pools every run of ``method`` on the instances of ``refs``; returns one value per entry
    of ``evaluations``.  Non-decreasing in ``n`` because each curve is a best-so-far.  With
    ``relative`` the targets are ``P* (1 − δ)`` for ``δ`` in ``precisions``.
    """
    n = np.asarray(evaluations, dtype=int)
    chosen = [r for r in runs if r.method == method and r.instance in refs]
    if not chosen:
        raise ValueError(f"no runs of method {method!r} on instances {sorted(refs)}")
    hits = np.zeros(n.size)
    for r in chosen:
        at = np.array([r.best_at(int(k)) if k >= 1 else -np.inf for k in n])
        for delta in precisions:
            hits += at >= _target(refs[r.instance].coverage, delta, relative)
    return hits / (len(chosen) * len(precisions))


def _target(optimum: float, delta: float, relative: bool) -> float:
    return optimum - delta * abs(optimum) if relative else optimum - delta


@dataclass(frozen=True)
class TargetSummary:
    """Runs of one (instance, method, budget ``b``) against an exactly known ``P*``.

    ``reached`` is the share of (run, target) pairs with the best-so-far after ``b`` evaluations at
    least ``P* (1 − δ)``, pooled over ``targets`` (the ECDF at ``n = b``); ``by_target`` the share of
    runs per ``δ``; ``gap`` the median of ``P* − best`` and ``relative_gap`` the median of
    ``(P* − best) / P*`` (a run with no feasible point counts as coverage 0); ``min_gap`` the smallest
    gap of any run (negative only if a run beat ``P*``).
    """

    instance: str
    method: str
    budget: int
    runs: int
    targets: tuple[float, ...]
    reached: float
    by_target: tuple[float, ...]
    gap: float
    relative_gap: float
    min_gap: float


def summarise_targets(
    runs: Sequence[RunRecord], ref: Reference, method: str, budget: int, targets: Sequence[float] = RELATIVE_TARGETS
) -> TargetSummary:
    """:class:`TargetSummary` of ``method`` on ``ref.instance`` at budget ``b`` (runs matched as in :func:`summarise`)."""
    chosen = [
        r for r in runs if r.instance == ref.instance and r.method == method and (method not in PER_BUDGET_METHODS or r.budget == budget)
    ]
    if not chosen:
        raise ValueError(f"no runs of method {method!r} on instance {ref.instance!r} at budget {budget}")
    best = _floor(np.array([r.best_at(budget) for r in chosen]))
    hit = np.array([[b >= _target(ref.coverage, d, True) for d in targets] for b in best], dtype=float)
    gaps = ref.coverage - best
    return TargetSummary(
        instance=ref.instance,
        method=method,
        budget=budget,
        runs=len(chosen),
        targets=tuple(float(d) for d in targets),
        reached=float(hit.mean()),
        by_target=tuple(float(v) for v in hit.mean(axis=0)),
        gap=float(np.median(gaps)),
        relative_gap=float(np.median(gaps) / abs(ref.coverage)),
        min_gap=float(gaps.min()),
    )
