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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.association import (
    association_alpha2,
    association_error,
    association_quadrature,
    default_nodes,
    tier_grid,
    truncated_alpha2,
)
from edgeprefix.placement.model.blas_threads import single_blas_thread
from edgeprefix.placement.model.grouped_quadrature import grouped_quadrature_jacobian
from edgeprefix.placement.model.tier_loads import lift_exponents
from edgeprefix.placement.work_progress import blocks_done

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


BLOCK_ELEMENTS = 1 << 22  # largest (S, types, nodes) work array of one kernel call: 32 MB of float64
CACHE_BLOCK_ELEMENTS = 1 << 18  # at α ≠ 2: 2 MB, the L2 cache of one core here (measured on mooncake_large at
# α = 3.5: 1.4× faster than 2²²); the α = 2 closed forms keep 2²² (2¹⁸ was 2.4× slower at 300 profiles × 100 types)


def column_blocks(n_columns: int, per_column: int, elements: int | None = None) -> list[slice]:
    """Slices of the type axis whose work arrays hold at most ``elements`` numbers (:data:`BLOCK_ELEMENTS`).

    Types (columns) are independent in every integral of Theorem 1, so computing them block by
    block gives the same numbers as one call while the memory stays bounded (docs/model.md §16).
    """
    step = max(1, min(BLOCK_ELEMENTS, elements or BLOCK_ELEMENTS) // max(1, per_column))
    return [slice(start, min(n_columns, start + step)) for start in range(0, n_columns, step)]


def _blocks(n_columns: int, per_column: int, alpha: float) -> Iterator[slice]:
    """:func:`column_blocks` with cache-sized blocks at α ≠ 2 (the quadrature, docs/model.md (16.10)),
    each counted on a long run's progress bar once done (:mod:`edgeprefix.placement.work_progress`)."""
    return blocks_done(column_blocks(n_columns, per_column, None if alpha == 2.0 else CACHE_BLOCK_ELEMENTS))


def _columns(lam: FloatArray, cols: slice) -> FloatArray:
    return lam if lam.ndim == 1 else lam[:, cols]


@dataclass(frozen=True)
class AnalyticKernel:
    """Closed form at α = 2, breakpoint-aware Gauss–Legendre otherwise.

    nodes : Gauss–Legendre nodes per segment (``None``: :func:`default_nodes`, 20 for α ≤ 2.5 up to 64
        above α = 4.5; docs/model.md eq. (6.18)).

    Densities ``lam`` may be ``(S,)`` or one per column ``(S, Q)`` (several mixes side by side).
    Every method works on blocks of types (:func:`column_blocks`), so its memory is bounded
    whatever ``|S|`` and ``|Q|`` are.
    """

    nodes: int | None = None
    provides_jacobian = True  # association_jacobian() gives exact ∂A/∂b

    def _n(self, alpha: float) -> int:
        return self.nodes or default_nodes(alpha)

    def association(self, lam: FloatArray, b: FloatArray, alpha: float) -> FloatArray:
        if lam.shape[0] == 1:
            return np.ones_like(b)
        if alpha == 2.0:
            return association_alpha2(lam, b)
        out = np.empty_like(b)
        for cols in _blocks(b.shape[1], b.shape[0] ** 2 * self._n(alpha), alpha):
            out[:, cols] = association_quadrature(_columns(lam, cols), b[:, cols], alpha, self._n(alpha))
        return out

    def association_jacobian(self, lam: FloatArray, b: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
        s_count = b.shape[0]
        if s_count == 1:
            return np.ones_like(b), np.zeros((1, 1, b.shape[1]))
        out, jac = np.empty_like(b), np.empty((s_count, s_count, b.shape[1]))
        per_column = s_count**2 if alpha == 2.0 else s_count**2 * self._n(alpha)
        if alpha == 2.0:
            for cols in _blocks(b.shape[1], per_column, alpha):
                out[:, cols], jac[:, :, cols] = association_alpha2(_columns(lam, cols), b[:, cols], jacobian=True)
            return out, jac
        with single_blas_thread():  # many small products (16.11)
            for cols in _blocks(b.shape[1], per_column, alpha):
                out[:, cols], jac[:, :, cols] = grouped_quadrature_jacobian(_columns(lam, cols), b[:, cols], alpha, self._n(alpha))
        return out, jac

    def association_contracted(
        self, lam: FloatArray, b: FloatArray, alpha: float, weights: FloatArray
    ) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int64]]:
        """``A``, the lifted sums ``K[w, s, t] = 2^{k_s} Σ_q weights[w, s, q] ∂A_{s,q}/∂b_{t,q}`` and ``k``.

        These are the only contractions of ``∂A/∂b`` the fixed point's Newton step needs (docs/model.md
        (16.7)); ``weights`` is ``(W, S, Q)`` and ``k`` the row lifts of :func:`~edgeprefix.placement.model.tier_loads.lift_exponents`
        on ``A``, so a tier whose row of ``A`` is subnormal keeps its digits.  Computed on the blocks of
        types of :meth:`association_jacobian`, it never holds the ``(S, S, Q)`` array: memory
        ``O(W S² + S Q)`` beyond one block.
        """
        s_count, q_count = b.shape
        n_w = weights.shape[0]
        if s_count == 1:
            return np.ones_like(b), np.zeros((n_w, 1, 1)), np.zeros(1, dtype=np.int64)
        per_column = s_count**2 if alpha == 2.0 else s_count**2 * self._n(alpha)
        with single_blas_thread():  # many small products (16.11)
            return self._contracted(lam, b, alpha, weights, per_column)

    def _contracted(
        self, lam: FloatArray, b: FloatArray, alpha: float, weights: FloatArray, per_column: int
    ) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int64]]:
        s_count, q_count = b.shape
        n_w = weights.shape[0]
        out = np.empty_like(b)
        total, k = np.zeros((n_w, s_count, s_count)), np.zeros(s_count, dtype=np.int64)
        for index, cols in enumerate(_blocks(q_count, per_column, alpha)):
            if alpha == 2.0:
                a_block, d_a = association_alpha2(_columns(lam, cols), b[:, cols], jacobian=True)
            else:
                a_block, d_a = grouped_quadrature_jacobian(_columns(lam, cols), b[:, cols], alpha, self._n(alpha))
            out[:, cols] = a_block
            k_block = lift_exponents(a_block)
            if k_block.any():
                d_a = np.ldexp(d_a, k_block[:, None, None])
            part = np.einsum("wsq,stq->wst", weights[:, :, cols], d_a)
            if index == 0:
                total, k = part, k_block
                continue
            # running sum lifted by the smallest lift so far (= lift_exponents of A over the types seen);
            # 2^{k − k_block} ≤ 1 is exact unless that part is far below the largest one
            k_new = np.minimum(k, k_block)
            if not np.array_equal(k_new, k):
                total = np.ldexp(total, (k_new - k)[None, :, None])
            total += part if np.array_equal(k_new, k_block) else np.ldexp(part, (k_new - k_block)[None, :, None])
            k = k_new
        return out, total, k

    def truncated(self, lam: FloatArray, b: FloatArray, alpha: float, u_cut: FloatArray, tilt: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``P1``, ``P2`` (see module notes); ``u_cut`` ``(S, Q)`` may be ≤ 0 (then both are 0)."""
        u_cut = np.maximum(np.asarray(u_cut, dtype=float), 0.0)
        tilt = np.broadcast_to(np.asarray(tilt, dtype=float), b.shape)
        p1, p2 = np.empty_like(b), np.empty_like(b)
        per_column = b.shape[0] ** 2 if alpha == 2.0 else 2 * b.shape[0] ** 2 * self._n(alpha)
        for cols in _blocks(b.shape[1], per_column, alpha):
            p1[:, cols], p2[:, cols] = self._truncated(_columns(lam, cols), b[:, cols], alpha, u_cut[:, cols], tilt[:, cols])
        return p1, p2

    def _truncated(
        self, lam: FloatArray, b: FloatArray, alpha: float, u_cut: FloatArray, tilt: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        if alpha == 2.0:
            return truncated_alpha2(lam, b, u_cut, np.asarray(tilt, dtype=float))
        grid = tier_grid(lam, b, alpha, extra_breaks=b + u_cut, nodes=self._n(alpha))
        inside = (grid.u > 0) & (grid.u <= u_cut[:, :, None])
        mass = np.where(inside, grid.mass, 0.0)
        with np.errstate(over="ignore"):
            discount = np.exp(-tilt[:, :, None] * (u_cut[:, :, None] - np.where(inside, grid.u, 0.0)))
        return mass.sum(axis=2), (mass * discount).sum(axis=2)

    def moments(self, lam: FloatArray, b: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
        mean_u, mean_r = np.empty_like(b), np.empty_like(b)
        for cols in _blocks(b.shape[1], b.shape[0] ** 2 * self._n(alpha), alpha):
            grid = tier_grid(_columns(lam, cols), b[:, cols], alpha, nodes=self._n(alpha))
            u = np.maximum(grid.u, 0.0)
            radius = np.sqrt(u) if alpha == 2.0 else u ** (1.0 / alpha)
            mean_u[:, cols], mean_r[:, cols] = (grid.mass * u).sum(axis=2), (grid.mass * radius).sum(axis=2)
        return mean_u, mean_r

    def error(self, lam: FloatArray, b: FloatArray, alpha: float) -> float:
        if alpha == 2.0 or lam.shape[0] == 1:
            return 0.0
        worst = 0.0
        for cols in _blocks(b.shape[1], b.shape[0] ** 2 * (self._n(alpha) + 8), alpha):
            worst = max(worst, association_error(_columns(lam, cols), b[:, cols], 1.0, alpha, self._n(alpha)))
        return worst
