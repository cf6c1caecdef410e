"""The one result type of every search (docs/model.md §10.3), its statuses and their messages."""

from __future__ import annotations

import csv
import enum
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.solvers.certificate import Certificate

FloatArray = npt.NDArray[np.float64]


class Status(enum.Enum):
    """How a search ended; ``message`` is the one place the wording lives."""

    BUDGET_EXHAUSTED = "budget_exhausted"
    COMPLETED = "completed"
    CALLBACK_STOP = "callback_stop"
    NO_FEASIBLE_POINT = "no_feasible_point"

    @property
    def message(self) -> str:
        return _MESSAGES[self]


_MESSAGES = {
    Status.BUDGET_EXHAUSTED: "the evaluation budget is exhausted",
    Status.COMPLETED: "the search visited every point it plans to visit",
    Status.CALLBACK_STOP: "the callback asked the search to stop",
    Status.NO_FEASIBLE_POINT: "no evaluated mix was stable with a converged fixed point (every ρ_s < 1)",
}


@dataclass(frozen=True)
class Progress:
    """What a callback sees after every evaluation (return ``True`` to stop the search)."""

    nfev: int
    budget: int | None
    best_value: float
    best_coverage: float
    best_x: FloatArray | None  # None until a point scores above -inf
    value: float
    feasible: bool


@dataclass(frozen=True)
class Result:
    """The best mix found and how the search got there.

    Attributes
    ----------
    method : solver name (``gradient``, ``spsa``, ``tpe``, ``cmaes``, ``qmc``, ``grid``, ``random``).
    x : best mix ``π`` in profile order, shape ``(S,)``; ``mix`` maps profile id → share.
    fun : best objective value (``P_cov(τ_0)`` when feasible); ``coverage`` its coverage.
    success : the best point is feasible (stable, converged) and the search ended normally.
    status, message : see :class:`Status`.
    nfev : black-box evaluations (fixed-point solves), including those replayed from a resumed study.
    nit : iterations of the method (SPSA steps, Optuna trials, grid chunks).
    njev : exact gradient solves (one adjoint solve each at an already evaluated point; 0 for
        derivative-free methods).
    seconds : wall time of this run.
    history : best-so-far objective after each evaluation, shape ``(nfev,)``.
    points, values, coverages, feasible : every evaluated mix and its score, in order.
    evaluation : the model's ``Evaluation`` of the best mix.
    extras : method-specific facts (projection time, SPSA gains, grid size, resumed trials).
    certificate : the KKT certificate of ``x`` (docs/model.md §18.6: stationarity residual with the
        exact gradient, active constraints, multipliers), ``None`` when ``x`` has none;
        ``certificate_note`` then says why.
    certified : ``None`` unless the result was polished by
        :func:`edgeprefix.solvers.polish.certify`: then whether ``certificate.residual`` met its
        tolerance; ``polish`` holds what the polishing did.
    """

    method: str
    x: FloatArray
    mix: Mapping[str, float]
    fun: float
    coverage: float
    success: bool
    status: Status
    message: str
    nfev: int
    nit: int
    seconds: float
    history: FloatArray = field(repr=False)
    points: FloatArray = field(repr=False)
    values: FloatArray = field(repr=False)
    coverages: FloatArray = field(repr=False)
    feasible: npt.NDArray[np.bool_] = field(repr=False)
    evaluation: Any = field(repr=False, compare=False, default=None)
    extras: Mapping[str, Any] = field(default_factory=dict)
    njev: int = 0
    certificate: Certificate | None = None
    certificate_note: str | None = None
    certified: bool | None = None
    polish: Mapping[str, Any] | None = None

    @property
    def best_coverage_history(self) -> FloatArray:
        """Coverage of the best-so-far point after each evaluation."""
        out = np.empty(len(self.values))
        best, cov = -np.inf, np.nan
        for i, (v, c) in enumerate(zip(self.values, self.coverages)):
            if v > best:
                best, cov = v, c
            out[i] = cov
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the ``solve --json`` keys plus status details)."""
        return {
            "method": self.method,
            "mix": dict(self.mix),
            "coverage": self.coverage,
            "objective": self.fun,
            "feasible": self.success,
            "status": self.status.value,
            "message": self.message,
            "evaluations": self.nfev,
            "nfev": self.nfev,
            "njev": self.njev,
            "iterations": self.nit,
            "seconds": self.seconds,
            "history": self.best_coverage_history.tolist(),
            "extras": {k: v for k, v in self.extras.items()},
            **self.certificate_dict(),
        }

    def certificate_dict(self) -> dict[str, Any]:
        """``kkt_residual`` (``None`` without a certificate), ``active_constraints``, ``multipliers``,
        ``kkt_note`` (why there is no certificate, else ``None``), ``certified`` and ``certify``."""
        cert = self.certificate
        out: dict[str, Any] = cert.to_dict() if cert is not None else {"kkt_residual": None, "active_constraints": [], "multipliers": {}}
        out["kkt_note"] = None if cert is not None else (self.certificate_note or "no certificate was computed")
        out["certified"] = self.certified
        out["certify"] = None if self.polish is None else dict(self.polish)
        return out


def history_csv(result: Result, names: tuple[str, ...]) -> str:
    """One row per evaluation: value, coverage, feasibility, best-so-far and the mix."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["evaluation", "objective", "coverage", "feasible", "best_objective", "best_coverage", *names])
    best_coverage = result.best_coverage_history
    for i in range(result.nfev):
        writer.writerow(
            [
                i + 1,
                repr(float(result.values[i])),
                repr(float(result.coverages[i])),
                int(result.feasible[i]),
                repr(float(result.history[i])),
                repr(float(best_coverage[i])),
                *(repr(float(v)) for v in result.points[i]),
            ]
        )
    return out.getvalue()
