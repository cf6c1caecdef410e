"""Optimality certificates: the KKT stationarity residual of a mix (docs/model.md §18.6).

At a local maximum ``π`` of a smooth objective ``f`` over the linear constraints of a formulation
(``A_eq π = b_eq``, ``A_ub π ≤ b_ub``, ``lower ≤ π ≤ upper``), the gradient is a combination of
the active constraints' normals with signs fixed by their sense:

    ``∇f(π) = A_eqᵀ ν + Σ_{i active} μ_i A_ub,i + Σ_{upper active} ω_s e_s − Σ_{lower active} κ_s e_s``,
    ``μ, ω, κ ≥ 0``.

:func:`kkt_certificate` finds the multipliers that fit best (bounded least squares) and reports
the largest entry of what is left, ``‖∇f − Σ multipliers · normals‖_∞`` — zero at a KKT point,
clearly positive away from one — with the names of the constraints it took as active.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import lsq_linear

from edgeprefix.formulations.linear import LinearConstraints
from edgeprefix.formulations.objective import Score

FloatArray = npt.NDArray[np.float64]
ACTIVE_TOLERANCE = 1e-9  # slack below which an inequality or bound counts as active


@dataclass(frozen=True)
class Certificate:
    """``residual`` (∞-norm of the unexplained gradient), the ``active`` constraint names and their
    ``multipliers`` (same order; equality multipliers are free in sign, the rest ``≥ 0``)."""

    residual: float
    active: tuple[str, ...]
    multipliers: tuple[float, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "kkt_residual": self.residual,
            "active_constraints": list(self.active),
            "multipliers": dict(zip(self.active, self.multipliers)),
        }


def kkt_certificate(
    constraints: LinearConstraints,
    x: npt.ArrayLike,
    gradient: npt.ArrayLike,
    *,
    tolerance: float = ACTIVE_TOLERANCE,
) -> Certificate:
    """KKT stationarity residual of ``x`` for *maximising* an objective with ``gradient`` at ``x``.

    Only the decision columns (the mix) are certified; ``x`` and ``gradient`` have ``n_decision``
    entries.
    """
    k = constraints.n_decision
    x = np.asarray(x, dtype=float)
    g = np.asarray(gradient, dtype=float)
    if x.shape != (k,) or g.shape != (k,):
        raise ValueError(f"x and gradient must have shape ({k},), got {x.shape} and {g.shape}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(g))):
        raise ValueError("x and gradient must be finite to certify a point")
    columns: list[FloatArray] = []
    names: list[str] = []
    lower_bounds: list[float] = []
    for row, name in zip(constraints.A_eq[:, :k], constraints.eq_names or ("eq",) * len(constraints.b_eq)):
        columns.append(row)
        names.append(str(name))
        lower_bounds.append(-np.inf)
    slack = constraints.b_ub - constraints.A_ub[:, :k] @ x
    ub_names = constraints.ub_names or ("ub",) * len(constraints.b_ub)
    for row, name, gap in zip(constraints.A_ub[:, :k], ub_names, slack):
        if gap <= tolerance * max(1.0, float(np.abs(row).sum())):
            columns.append(row)
            names.append(str(name))
            lower_bounds.append(0.0)
    var = constraints.names[:k]
    for s in range(k):
        if x[s] <= constraints.lower[s] + tolerance:
            columns.append(-np.eye(k)[s])
            names.append(f"{var[s]} >= {constraints.lower[s]:g}")
            lower_bounds.append(0.0)
        if x[s] >= constraints.upper[s] - tolerance:
            columns.append(np.eye(k)[s])
            names.append(f"{var[s]} <= {constraints.upper[s]:g}")
            lower_bounds.append(0.0)
    if not columns:
        return Certificate(float(np.max(np.abs(g))), (), ())
    normals = np.column_stack(columns)
    fit = lsq_linear(normals, g, bounds=(np.array(lower_bounds), np.full(len(columns), np.inf)), method="bvls", tol=1e-14)
    residual = float(np.max(np.abs(g - normals @ fit.x)))
    return Certificate(residual, tuple(names), tuple(float(m) for m in fit.x))


def certify_point(problem: Any, score: Score) -> tuple[Certificate | None, str | None]:
    """The certificate of a scored mix of ``problem`` with the objective's exact gradient there, or
    ``(None, why)`` when the point has none: the objective has no exact gradient (no sensitivities
    for the queue model, a simulation), the problem has auxiliary variables (only a mix is
    certified), the mix is infeasible (its value is a penalty) or its fixed point did not converge.

    The gradient reuses the point's fixed point (one adjoint solve, docs/model.md §15).
    """
    if not getattr(problem, "differentiable", False):
        why = getattr(problem, "gradient_missing", "") or f"{type(problem).__name__} has no exact gradient"
        return None, f"no certificate: {why}"
    constraints = problem.constraints
    if constraints.has_auxiliary:
        return None, "no certificate: the problem has auxiliary variables besides the mix"
    if not score.feasible:
        return None, "no certificate: the mix is not feasible (some ρ_s ≥ 1 or no converged fixed point), its value is a penalty"
    gradient = score.gradient if score.gradient is not None else problem.gradient(score)
    if gradient is None:
        return None, "no certificate: the fixed point did not converge at the mix, so it has no derivative"
    gradient = np.asarray(gradient, dtype=float)
    if not np.all(np.isfinite(gradient)):
        return None, "no certificate: the objective's gradient is not finite at the mix"
    return kkt_certificate(constraints, score.mix, gradient), None
