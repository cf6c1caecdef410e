"""Book-keeping shared by every search: budget, best point, history, callback, warm starts.

A :class:`Tracker` lives for one ``solve`` call.  Methods call :meth:`Tracker.evaluate` with a
feasible mix; the tracker scores it (warm-starting the fixed point from the previous
evaluation, docs/model.md §7), records it, and raises :class:`StopSearch` when the budget is
spent or the callback asks to stop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from edgeprefix.formulations.linear import LinearConstraints
from edgeprefix.formulations.objective import Score
from edgeprefix.placement.errors import plain
from edgeprefix.solvers.result import Progress, Status

FloatArray = npt.NDArray[np.float64]
Callback = Callable[[Progress], Any]


class Problem(Protocol):
    """What a solver needs from a formulation (placement, a migration epoch, ...)."""

    @property
    def constraints(self) -> LinearConstraints: ...

    @property
    def variable_names(self) -> tuple[str, ...]: ...

    @property
    def dimension(self) -> int: ...

    def initial_point(self) -> FloatArray: ...

    def clean(self, x: npt.ArrayLike) -> FloatArray: ...

    def score(self, x: npt.ArrayLike, warm_start: FloatArray | None = None) -> Score: ...


class StopSearch(Exception):
    """Raised inside a search to end it with ``status``."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


class Tracker:
    """Counts evaluations against ``budget`` and keeps the best point and the history."""

    def __init__(self, problem: Problem, budget: int | None, callback: Callback | None = None) -> None:
        if budget is not None and (isinstance(budget, bool) or int(budget) != budget or budget < 1):
            raise ValueError(f"budget must be a positive whole number of evaluations, got {plain(budget)}")
        self.problem = problem
        self.budget = None if budget is None else int(budget)
        self.callback = callback
        self.points: list[FloatArray] = []
        self.values: list[float] = []
        self.coverages: list[float] = []
        self.feasible: list[bool] = []
        self.history: list[float] = []
        self.best: Score | None = None
        self.best_value = -np.inf
        self.best_x: FloatArray | None = None
        self.best_coverage = np.nan
        self.warm_start: FloatArray | None = None
        self.replayed = 0
        self.nit = 0
        self.njev = 0  # gradient solves (each at a point also counted in nfev)
        self.extras: dict[str, Any] = {}

    @property
    def nfev(self) -> int:
        return len(self.values)

    @property
    def remaining(self) -> int | None:
        return None if self.budget is None else self.budget - self.nfev

    def _check_budget(self) -> None:
        if self.budget is not None and self.nfev >= self.budget:
            raise StopSearch(Status.BUDGET_EXHAUSTED)

    def _record(self, x: FloatArray, value: float, coverage: float, feasible: bool) -> None:
        self.points.append(x)
        self.values.append(value)
        self.coverages.append(coverage)
        self.feasible.append(feasible)
        if value > self.best_value:
            self.best_value, self.best_x, self.best_coverage = value, x, coverage
        self.history.append(self.best_value)

    def evaluate(self, x: npt.ArrayLike) -> Score:
        """Score a feasible mix (one budget unit: one fixed-point solve), record it, and maybe stop the search."""
        self._check_budget()
        score = self.problem.score(x, warm_start=self.warm_start)
        self._accept(score)
        return score

    def evaluate_many(self, points: Iterable[npt.ArrayLike]) -> list[Score]:
        """Score several feasible mixes in one batched evaluation (docs/model.md §16), recorded in order.

        Every fixed point starts from the tracker's warm start.  Only as many points as the budget
        has left are scored (the returned list may be shorter; the next call stops the search);
        the callback sees every recorded point and may stop the search in the middle of the batch.
        Problems without ``score_many`` score the points one by one.
        """
        self._check_budget()
        points = list(points)[: self.remaining] if self.remaining is not None else list(points)
        score_many = getattr(self.problem, "score_many", None)
        if score_many is None:
            return [self.evaluate(x) for x in points]
        scores = score_many(points, warm_start=self.warm_start)
        for score in scores:
            self._accept(score)
        return scores

    def _accept(self, score: Score) -> None:
        warm = score.warm_start
        if warm is not None:
            self.warm_start = warm
        self._record(score.mix, score.value, score.coverage, score.feasible)
        if self.best_x is score.mix:
            self.best = score
        if self.callback is not None:
            progress = Progress(
                nfev=self.nfev,
                budget=self.budget,
                best_value=self.best_value,
                best_coverage=self.best_coverage,
                best_x=self.best_x,
                value=score.value,
                feasible=score.feasible,
            )
            if self.callback(progress) is True:
                raise StopSearch(Status.CALLBACK_STOP)

    def gradient(self, score: Score) -> FloatArray | None:
        """Exact ``∂value/∂π`` at a scored point (one adjoint solve, counted in ``njev``, not in the budget:
        it reuses the point's fixed point); ``None`` where the fixed point did not converge."""
        self.njev += 1
        return self.problem.gradient(score)  # type: ignore[attr-defined]

    def replay(self, x: npt.ArrayLike, value: float, coverage: float, feasible: bool) -> None:
        """Record an evaluation done by an earlier run (a resumed study) without re-scoring it."""
        self._record(np.asarray(x, dtype=float), float(value), float(coverage), bool(feasible))
        self.replayed += 1

    def best_score(self) -> Score | None:
        """The best :class:`Score`, re-scoring it once if it was replayed from an earlier run."""
        if self.best_x is None:
            return None
        if self.best is None or self.best.mix is not self.best_x:
            self.best = self.problem.score(self.best_x, warm_start=self.warm_start)
        return self.best
