"""``A`` and ``∂A/∂b`` by the shared-axis quadrature without zero work (docs/model.md §6.5, (6.22)–(6.23)).

:func:`~edgeprefix.placement.model.association.association_quadrature_jacobian` builds the grid of every
tier and forms ``∂A_{s,q}/∂b_{t,q} = ∫ e^{−G_q} G'_{s,q} G'_{t,q} dy`` as one ``(S × J) · (J × S)`` product
per type.  Three kinds of its work are exactly zero or repeated:

* tiers whose breakpoint lies at or beyond the truncation ``y_max`` (6.17) have ``u ≤ 0`` at every
  node, hence ``A = 0`` and zero rows and columns of ``∂A/∂b``;
* tiers of a type with equal breakpoints (exchangeable profiles, and profiles that share a type's
  prefix depth and delay) have proportional ``G'``: ``G'_{s,q} = (λ_s/Λ_g) G'_{g,q}`` for their group ``g``
  of density ``Λ_g = Σ_{s∈g} λ_s``, so the grid needs one row per group;
* in breakpoint order, group ``r`` starts at segment ``r``: on the segments before it its ``G'`` is 0,
  so the grid and the product over a block of segments ``[k₀, k₁)`` only need the groups ``r < k₁``
  (triangular support, (6.23); with 8 blocks of segments about 0.56 of the grid's nodes and 0.4 of the
  full product's multiplications).

The tiers' values follow exactly from the groups':  ``A_{s,q} = (λ_s/Λ_g) A_{g,q}``,
``∂A_{s,q}/∂b_{t,q} = (λ_s/Λ_g)(λ_t/Λ_h) C_{g,h,q}`` for ``s ≠ t`` with ``C_{g,h,q} = ∫ e^{−G_q} G'_{g,q} G'_{h,q} dy``
(``g = h`` included, two members of one group), and the diagonal from ``Σ_s A_{s,q} = 1``:
``∂A_{s,q}/∂b_{s,q} = −(λ_s/Λ_g) [Σ_{h≠g} C_{h,g,q} + (1 − λ_s/Λ_g) C_{g,g,q}]``.  Only rounding differs from
the plain computation (measured ``≤ 10⁻¹⁵`` relative, ``tests/test_grouped_quadrature.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.association import (
    SUBSTITUTION_POWER,
    _axis_limit,
    _column_density,
    _legendre01,
    _nonempty_segments,
    _segment_scaffold,
)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
SEGMENT_BLOCKS = 8  # blocks of segments of the triangular product (Σ_i (i/8)² / 8 ≈ 0.4 of the full one)
ALIVE_MARGIN = 1e-12  # relative slack on ``b < y_max``: a tier kept by it adds exact zeros, never one dropped


def _groups(lam: FloatArray, b: FloatArray, alpha: float) -> tuple[npt.NDArray[Any], FloatArray, FloatArray, FloatArray]:
    """Per type: the group of each tier (``R`` for tiers past ``y_max``), the groups' densities ``Λ``
    and breakpoints ``(R, Q)`` in breakpoint order, and each tier's share ``λ_s/Λ_g`` (0 past ``y_max``)."""
    s_count, q_count = b.shape
    dens = _column_density(lam, b)
    cols = np.arange(q_count)
    order = np.argsort(b, axis=0, kind="stable")
    bs = b[order, cols]
    y_max = _axis_limit(b, lam, 2.0 / alpha)
    alive = bs < y_max + ALIVE_MARGIN * np.maximum(1.0, np.abs(y_max))
    alive[0] = True  # the first tier always starts the axis
    new = np.ones_like(alive)
    new[1:] = bs[1:] != bs[:-1]
    rank = np.cumsum(new, axis=0) - 1
    count = np.where(alive, rank, -1).max(axis=0) + 1  # groups per type
    width = int(count.max())
    rank = np.where(alive, rank, width)  # past y_max: the dummy group ``width``
    flat = (rank * q_count + cols).ravel()
    size = (width + 1) * q_count
    summed = np.bincount(flat, weights=dens[order, cols].ravel(), minlength=size)
    group_lam = np.asarray(summed, dtype=float).reshape(width + 1, q_count)[:width]
    group_b = np.empty((width + 1, q_count))
    group_b[rank, cols] = bs
    group_b = group_b[:width]
    pad = np.arange(width)[:, None] >= count[None, :]  # groups a type lacks: density 0 at its last breakpoint
    if pad.any():
        group_b = np.where(pad, group_b[count - 1, cols][None, :], group_b)
    tier_group = np.empty_like(rank)
    tier_group[order, cols] = rank
    own = np.where(tier_group < width, group_lam[np.minimum(tier_group, width - 1), cols], 1.0)
    share: FloatArray = np.where(tier_group < width, dens / own, 0.0)
    return tier_group, group_lam, group_b, share


def _triangular_grid(lam: FloatArray, b: FloatArray, alpha: float, nodes: int) -> tuple[FloatArray, FloatArray]:
    """``A`` ``(R, Q)`` and ``C[q, g, h] = Σ_j mass[g, q, j] G'_h(y_j)`` ``(Q, R, R)`` of the groups ``(lam, b)`` in breakpoint order.

    The nodes are :func:`~edgeprefix.placement.model.association.tier_grid`'s (same axis, truncation, segments and
    substitution); they are built block of segments by block, each block only for the groups started by its last
    segment (group ``r`` starts at segment ``r``), so neither the grid's zeros nor their products are formed.
    """
    p = 2.0 / alpha
    m = max(1.0, SUBSTITUTION_POWER * alpha)
    low = b.min(axis=0)
    extent = _axis_limit(b - low, lam, p)
    shift = np.where(extent < 1e-6 * np.abs(low), low, 0.0)  # as tier_grid: a far-off short axis is translated
    if np.any(shift):
        b = b - shift
    y_max = _axis_limit(b, lam, p)
    left, length = _nonempty_segments(*_segment_scaffold(b.T, y_max))  # (Q, K)
    x, w = _legendre01(nodes)
    offset = length[:, :, None] * x**m  # (Q, K, n)
    dy = length[:, :, None] * (m * x ** (m - 1.0) * w)  # (Q, K, n)
    groups, q_count = b.shape
    segments = left.shape[1]
    dens = (np.pi * p) * _column_density(lam, b)
    a_group, products = np.zeros((groups, q_count)), np.zeros((q_count, groups, groups))
    step = max(1, -(-segments // SEGMENT_BLOCKS))
    for k0 in range(0, segments, step):
        k1 = min(segments, k0 + step)
        rows = min(groups, k1)  # groups r < k1 have started by segment k1 − 1
        u = ((left[None, :, k0:k1] - b[:rows, :, None])[:, :, :, None] + offset[None, :, k0:k1]).reshape(rows, q_count, -1)
        active = u > 0
        rate = np.zeros_like(u)
        np.power(u, p - 1.0, out=rate, where=active)
        rate *= dens[:rows, :, None]  # G'_{g,q}(y)
        survival = np.exp(np.einsum("gqj,gqj->qj", u, rate) / -p)  # e^{−G_q}: the groups not started add 0
        mass = rate * (survival * dy[:, k0:k1].reshape(q_count, -1))[None]
        a_group[:rows] += mass.sum(axis=2)
        products[:, :rows, :rows] += np.matmul(mass.transpose(1, 0, 2), rate.transpose(1, 2, 0))
    return a_group, products


def grouped_quadrature_jacobian(lam: FloatArray, b: FloatArray, alpha: float, nodes: int) -> tuple[FloatArray, FloatArray]:
    """``A`` ``(S, Q)`` and ``∂A_{s,q}/∂b_{t,q}`` ``(S, S, Q)`` of the shared-axis quadrature on groups (module notes)."""
    s_count, q_count = b.shape
    tier_group, group_lam, group_b, share = _groups(lam, b, alpha)
    width = group_lam.shape[0]
    cols = np.arange(q_count)
    a_group, c_full = _triangular_grid(group_lam, group_b, alpha, nodes)  # (R, Q), (Q, R, R)
    padded = np.zeros((width + 1, q_count))
    padded[:width] = a_group
    a_q = share * padded[tier_group, cols]
    self_term = np.einsum("qgg->qg", c_full).copy()  # ∫ e^{−G} G'_g² dy
    off = c_full.copy()
    idx = np.arange(width)
    off[:, idx, idx] = 0.0
    col_off = off.sum(axis=1)  # Σ_{h≠g} C[h, g]
    c_pad = np.zeros((q_count, width + 1, width + 1))
    c_pad[:, :width, :width] = c_full
    lin = tier_group.T[:, :, None] * (width + 1) + tier_group.T[:, None, :]  # (Q, S, T)
    cross = np.take_along_axis(c_pad.reshape(q_count, -1), lin.reshape(q_count, -1), axis=1).reshape(q_count, s_count, s_count)
    share_t = share.T
    cross *= share_t[:, :, None] * share_t[:, None, :]
    g_safe = np.minimum(tier_group, width - 1)
    diag = -share * (col_off.T[g_safe, cols] + (1.0 - share) * self_term.T[g_safe, cols])
    jac = cross.transpose(1, 2, 0)  # (S, T, Q)
    jac[np.arange(s_count), np.arange(s_count), :] = diag
    return a_q, np.ascontiguousarray(jac)
