"""Spatial kernels: the tier integrals that association, coverage and the moments need.

A kernel computes, for the active tiers ``λ_s`` and cost offsets ``b_{s,q} = β_{s,q}/ξ``:

* ``association`` — ``A_{s,q} = ∫ e^{−G_q} dG_{s,q}`` (Theorem 1);
* ``truncated`` — ``P1 = ∫_{u ≤ u_cut} e^{−G_q} dG_{s,q}`` and
  ``P2 = ∫_{u ≤ u_cut} e^{−G_q} e^{−θ_s ξ (u_cut − u)} dG_{s,q}`` with ``u = r^α``, from which the
  coverage of eq. (39) is ``Σ_q p_q Σ_s (P1 − P^W_s P2)`` (``F_W(w) = 1 − P^W e^{−θ w}``);
* ``moments`` — ``E[r^α; s, q]`` and ``E[r; s, q]`` (for mean TTFT and ``R̄_{s,q}``).

:class:`AnalyticKernel` is the package's fast kernel (α = 2 closed form, shared-axis
quadrature otherwise).  A reference kernel built on ``scipy.integrate.quad`` lives in
``benchmarks`` and plugs into the same fixed point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.association import (
    association_alpha2,
    association_error,
    association_quadrature,
    association_quadrature_jacobian,
    default_nodes,
    tier_grid,
    truncated_alpha2,
)

FloatArray = npt.NDArray[np.float64]


class SpatialKernel(Protocol):
    """What the fixed point and the metrics need from the spatial model (arrays ``[s, q]``)."""

    def association(self, lam: FloatArray, b: FloatArray, alpha: float) -> FloatArray: ...

    def association_jacobian(self, lam: FloatArray, b: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
        """``A`` and ``∂A_{s,q}/∂b_{t,q}`` ``(S, S, Q)``; only called when ``provides_jacobian`` is true."""
        ...

    def truncated(
        self, lam: FloatArray, b: FloatArray, alpha: float, u_cut: FloatArray, tilt: FloatArray
    ) -> tuple[FloatArray, FloatArray]: ...

    def moments(self, lam: FloatArray, b: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]: ...

    def error(self, lam: FloatArray, b: FloatArray, alpha: float) -> float: ...


@dataclass(frozen=True)
class AnalyticKernel:
    """Closed form at α = 2, breakpoint-aware Gauss–Legendre otherwise.

    nodes : Gauss–Legendre nodes per segment (``None``: 20 for α ≤ 2.5, else 32).
    """

    nodes: int | None = None
    provides_jacobian = True  # association_jacobian() gives exact ∂A/∂b

    def _n(self, alpha: float) -> int:
        return self.nodes or default_nodes(alpha)

    def association(self, lam: FloatArray, b: FloatArray, alpha: float) -> FloatArray:
        if lam.size == 1:
            return np.ones_like(b)
        if alpha == 2.0:
            return association_alpha2(lam, b)
        return association_quadrature(lam, b, alpha, self._n(alpha))

    def association_jacobian(self, lam: FloatArray, b: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
        if lam.size == 1:
            return np.ones_like(b), np.zeros((1, 1, b.shape[1]))
        if alpha == 2.0:
            return association_alpha2(lam, b, jacobian=True)  # type: ignore[return-value]
        return association_quadrature_jacobian(lam, b, alpha, self._n(alpha))

    def truncated(
        self, lam: FloatArray, b: FloatArray, alpha: float, u_cut: FloatArray, tilt: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        """``P1``, ``P2`` (see module notes); ``u_cut`` ``(S, Q)`` may be ≤ 0 (then both are 0)."""
        u_cut = np.maximum(np.asarray(u_cut, dtype=float), 0.0)
        tilt = np.broadcast_to(np.asarray(tilt, dtype=float), b.shape)
        if alpha == 2.0:
            return truncated_alpha2(lam, b, u_cut, np.asarray(tilt, dtype=float))
        grid = tier_grid(lam, b, alpha, extra_breaks=b + u_cut, nodes=self._n(alpha))
        inside = (grid.u > 0) & (grid.u <= u_cut[:, :, None])
        mass = np.where(inside, grid.mass, 0.0)
        with np.errstate(over="ignore"):
            discount = np.exp(-tilt[:, :, None] * (u_cut[:, :, None] - np.where(inside, grid.u, 0.0)))
        return mass.sum(axis=2), (mass * discount).sum(axis=2)

    def moments(self, lam: FloatArray, b: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
        grid = tier_grid(lam, b, alpha, nodes=self._n(alpha))
        u = np.maximum(grid.u, 0.0)
        return (grid.mass * u).sum(axis=2), (grid.mass * u ** (1.0 / alpha)).sum(axis=2)

    def error(self, lam: FloatArray, b: FloatArray, alpha: float) -> float:
        return association_error(lam, b, 1.0, alpha, self._n(alpha))
