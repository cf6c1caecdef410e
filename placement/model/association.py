"""Theorem 1: association probabilities and tier integrals (docs/model.md §6).

Notation.  For request type ``q`` the nearest profile-``s`` node at distance ``r`` costs
``J = ξ r^α + β_{s,q}``.  With the *cost coordinate* ``y = r^α + b_{s,q}``, ``b = β/ξ``, every
tier is a PPP whose nearest point has ``P(y_s > y) = exp(−G_{s,q}(y))`` with

    ``G_{s,q}(y) = π λ_s max(0, y − b_{s,q})^{2/α}``,   ``G_q = Σ_s G_{s,q}``.

The selected tier is the one with the smallest ``y``; hence, for any test function ``φ`` of
the serving distance, ``E[φ(R); s] = ∫ φ((y − b_{s,q})^{1/α}) e^{−G_q(y)} dG_{s,q}(y)``.  This is
Theorem 1 after the change of variable (``A_{s,q} = ∫ e^{−G_q} dG_{s,q}``, so ``Σ_s A_{s,q} = 1``
holds exactly).  All tiers of a type share one ``y`` axis, so a quadrature grid is built per
type, not per (type, profile) pair: its ``K ≤ |S|`` non-empty segments of ``N`` nodes carry every
tier, so one association costs ``O(|Q| |S| K N) ≤ O(|Q| |S|² N)``; the Newton sums ``∂A/∂b`` are formed
on the ``R ≤ K`` groups of tiers with distinct breakpoints below the truncation, over their triangular
support (:mod:`~edgeprefix.placement.model.grouped_quadrature`, ``O(|Q| R² K N)``, about 0.4 of it).
docs/model.md §16.5 gives the measured exponents (1.67 in ``|S|`` over 10–300 profiles at α = 3.5).

* α = 2: ``G_q`` is piecewise linear with breakpoints ``b_{s,q}``; association and coverage are
  exact finite sums of exponential integrals (:func:`association_alpha2`,
  :func:`truncated_alpha2`).
* any α > 0: Gauss–Legendre on every segment between consecutive breakpoints, with the
  substitution ``y = a + d x^m`` (``m = max(1, 2α)``) that makes the tier starting at the
  segment's left end a polynomial in ``x``; the axis is truncated where ``G_q ≥ 36``
  (``e^{−36} < 2.4e-16``).  :func:`association_error` reports the quadrature error estimate.

Arrays are ``[s, q]``; only *active* tiers (``λ_s > 0``) are passed to these functions.  The
densities ``lam`` are ``(S,)``, or ``(S, Q)`` with one density per column: columns are independent,
so several mixes can share one call with their types side by side (docs/model.md §16).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, overload

import numpy as np
import numpy.typing as npt
from scipy.special import roots_legendre

FloatArray = npt.NDArray[np.float64]
G_MAX = 36.0  # truncate the cost axis where e^{−G} < 2.4e-16
DEFAULT_NODES = 20  # Gauss–Legendre nodes per segment for α ≤ 2.5 (measured error < 5e-8)
STEEP_NODES = 32  # nodes per segment for 2.5 < α ≤ 3.5 (the tiers' ``(y − b)^{2/α}`` get rougher; more above)
SUBSTITUTION_POWER = 2.0  # m = max(1, 2α): the starting tier's G is (x^m)^{2/α} = x^4


def _column_density(lam: FloatArray, b: FloatArray) -> FloatArray:
    """``λ_s`` per column ``[s, q]``: ``lam`` broadcast to the shape of ``b`` (a view)."""
    return np.broadcast_to(lam[:, None], b.shape) if lam.ndim == 1 else lam


def _phi(x: FloatArray) -> FloatArray:
    """``(1 − e^{−x}) / x`` for ``x ≥ 0`` with the limit 1 at 0."""
    small = x < 1e-8
    return np.where(small, 1.0 - 0.5 * x, -np.expm1(-x) / np.where(small, 1.0, x))


def truncated_alpha2(lam: FloatArray, b: FloatArray, u_cut: FloatArray, tilt: FloatArray) -> tuple[FloatArray, FloatArray]:
    """α = 2, exact: ``P1 = π λ_s ∫_{b}^{b+u_cut} e^{−G_q(y)} dy`` and
    ``P2 = π λ_s ∫_{b}^{b+u_cut} e^{−G_q(y) − tilt (b + u_cut − y)} dy`` for every ``[s, q]``.

    ``G_q`` is linear on each segment between sorted breakpoints, so each piece is an exact
    exponential integral; the exponent is kept ``≤ 0`` (anchored at the upper limit), and a
    piece ``∫_0^d e^{e_0 − k x} dx`` is written ``e^{max(e_0, e_1)} d φ(|k| d)`` with
    ``φ(x) = (1 − e^{−x})/x``, which never overflows whatever the sign of ``k``.
    """
    order = np.argsort(b, axis=0, kind="stable")
    cols = np.arange(b.shape[1])
    dens = _column_density(lam, b)
    bs = b[order, cols].T  # (Q, K) sorted breakpoints
    slope = np.cumsum(np.pi * dens[order, cols], axis=0).T  # slope of G on [bs_k, bs_{k+1})
    g_at = np.zeros_like(bs)
    np.cumsum(slope[:, :-1] * np.diff(bs, axis=1), axis=1, out=g_at[:, 1:])
    seg_hi = np.empty_like(bs)
    seg_hi[:, :-1] = bs[:, 1:]
    seg_hi[:, -1] = np.inf
    upper = (b + u_cut)[:, :, None]
    lo = np.minimum(np.maximum(bs[None], b[:, :, None]), upper)  # empty segments sit at the upper limit
    hi = np.minimum(seg_hi[None], upper)
    live = hi > lo  # segments that meet [b_s, b_s + u_cut]; the others contribute exactly 0
    lo = np.where(live, lo, bs[None])  # keeps every exponent below <= 0 (a dead segment past the upper
    d = np.where(live, hi - lo, 0.0)  # limit would otherwise give e^{+tilt (lo − upper)} · 0 = inf · 0)
    up = np.where(live, upper, lo)
    e0 = -(g_at[None] + slope[None] * (lo - bs[None]))
    k1 = np.broadcast_to(slope[None], d.shape)
    part1 = np.exp(np.maximum(e0, e0 - k1 * d)) * d * _phi(k1 * d)
    k2 = k1 - tilt[:, :, None]
    e0_2 = e0 - tilt[:, :, None] * (up - lo)
    part2 = np.exp(np.maximum(e0_2, e0_2 - k2 * d)) * d * _phi(np.abs(k2) * d)
    scale = np.pi * dens
    return scale * part1.sum(axis=2), scale * part2.sum(axis=2)


@overload
def association_alpha2(lam: FloatArray, b: FloatArray, *, jacobian: Literal[False] = False) -> FloatArray: ...
@overload
def association_alpha2(lam: FloatArray, b: FloatArray, *, jacobian: Literal[True]) -> tuple[FloatArray, FloatArray]: ...
def association_alpha2(lam: FloatArray, b: FloatArray, *, jacobian: bool = False) -> FloatArray | tuple[FloatArray, FloatArray]:
    """Exact ``A_{s,q} = π λ_s ∫_{b_{s,q}}^∞ e^{−G_q(y)} dy`` for α = 2 (finite sum).

    With the breakpoints of type ``q`` sorted, ``G_q`` has slope ``π Σ_{j≤k} λ_(j)`` on segment
    ``k``; the integral from ``b_(k)`` to infinity is the suffix sum of the segments' exact
    exponential integrals.  With ``jacobian=True`` also ``∂A_{s,q}/∂b_{t,q} = π λ_s π λ_t
    ∫_{max(b_s, b_t)}^∞ e^{−G_q}`` (``s ≠ t``), from the same suffix sums.  This is the fixed
    point's hot path, so it is kept lean.
    """
    order = b.argsort(axis=0, kind="stable")
    cols = np.arange(b.shape[1])
    bs = b[order, cols]
    dens = _column_density(lam, b)
    weight = np.pi * dens[order, cols]
    rate = np.add.accumulate(weight, axis=0)
    seg = bs[1:] - bs[:-1]
    g_at = np.empty_like(bs)
    g_at[0] = 0.0
    np.add.accumulate(rate[:-1] * seg, axis=0, out=g_at[1:])
    part = np.exp(-g_at)
    part[:-1] *= -np.expm1(-rate[:-1] * seg)
    part /= rate
    suffix = np.add.accumulate(part[::-1], axis=0)[::-1]
    out = np.empty_like(bs)
    out[order, cols] = weight * suffix
    if not jacobian:
        return out
    tail = np.empty_like(bs)
    tail[order, cols] = suffix  # ∫_{b_s}^∞ e^{−G}, per tier
    later = np.minimum(tail[:, None, :], tail[None, :, :])  # ∫ from max(b_s, b_t): the tail decreases in b
    scale = np.pi * dens
    cross = scale[:, None, :] * scale[None, :, :] * later
    return out, _with_diagonal(cross)


@dataclass(frozen=True)
class TierGrid:
    """Quadrature on the cost axis ``y``, shared by all tiers of a type.

    ``u[s, q, j] = y_j − b_{s,q}`` (``r^α`` of tier ``s`` at node ``j``, negative when the tier has
    not started), ``mass[s, q, j]`` the weight of ``e^{−G_q} dG_{s,q}`` at the node, so that
    ``E[φ(R); s, q] ≈ Σ_j mass[s, q, j] φ(u[s, q, j]^{1/α})`` for ``u > 0``.
    """

    u: FloatArray  # (S, Q, J)
    mass: FloatArray  # (S, Q, J)
    rate: FloatArray  # G'_{s,q}(y_j), (S, Q, J)

    def jacobian(self) -> FloatArray:
        """``∂A_{s,q}/∂b_{t,q}`` ``(S, S, Q)``: ``∫ e^{−G_q} G'_{s,q} G'_{t,q} dy`` off the diagonal and
        minus the column sum on it (``Σ_s A_{s,q} = 1``)."""
        cross = np.matmul(self.mass.transpose(1, 0, 2), self.rate.transpose(1, 2, 0))  # (Q, S, T)
        return _with_diagonal(cross.transpose(1, 2, 0))


def _segment_scaffold(breaks: FloatArray, y_max: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Left ends and lengths ``(Q, K)`` of the segments between sorted finite breakpoints, clipped at ``y_max``."""
    bs = np.sort(breaks, axis=1)
    start = bs[:, :1]
    bs = np.clip(np.where(np.isfinite(bs), bs, y_max[:, None]), start, y_max[:, None])
    right = np.concatenate([bs[:, 1:], y_max[:, None]], axis=1)
    return bs, np.maximum(right - bs, 0.0)


def _nonempty_segments(left: FloatArray, length: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The segments of positive length first (in their order), cut to the most any type has (at least one).

    A segment of length 0 (coinciding breakpoints, e.g. exchangeable tiers, or breakpoints past the
    truncation ``y_max``) has ``dy = 0`` at all its nodes, so it adds exactly 0 to every integral
    (docs/model.md (6.21)); only the padding of types with fewer segments than the block's widest
    keeps zero-length segments.
    """
    keep = length > 0.0
    width = max(1, int(keep.sum(axis=1).max(initial=0)))
    if width == length.shape[1]:
        return left, length
    order = np.argsort(~keep, axis=1, kind="stable")[:, :width]
    return np.take_along_axis(left, order, axis=1), np.take_along_axis(length, order, axis=1)


@lru_cache(maxsize=32)
def _legendre01(nodes: int) -> tuple[FloatArray, FloatArray]:
    """Gauss–Legendre nodes and weights on [0, 1]."""
    x, w = roots_legendre(nodes)
    return 0.5 * (x + 1.0), 0.5 * w


def _axis_limit(b: FloatArray, lam: FloatArray, power: float) -> FloatArray:
    """A ``y`` per type where ``G_q(y) ≥ G_MAX`` (an upper bound from the tiers started by each breakpoint)."""
    order = np.argsort(b, axis=0, kind="stable")
    bs = np.take_along_axis(b, order, axis=0)
    started = np.cumsum(np.pi * np.take_along_axis(_column_density(lam, b), order, axis=0), axis=0)
    return np.min(bs + (G_MAX / started) ** (1.0 / power), axis=0)


def tier_grid(
    lam: FloatArray,
    b: FloatArray,
    alpha: float,
    *,
    extra_breaks: FloatArray | None = None,
    nodes: int = DEFAULT_NODES,
) -> TierGrid:
    """Build the shared quadrature grid of every type (see module notes).

    ``extra_breaks`` ``(K', Q)`` adds breakpoints (e.g. coverage cut points ``y = b_s + u_cut``)
    so that integrands with a jump there are integrated exactly piecewise.
    """
    p = 2.0 / alpha
    m = max(1.0, SUBSTITUTION_POWER * alpha)
    # Only differences of b matter.  Where a type's axis is short next to its common offset
    # (y_max − min b below 1e-6 of min b, e.g. β/ξ ≈ 1e12 with dense tiers), the axis is translated
    # to start at 0, else y_max − b would round to 0 (Σ_s A = 0).  Other types are left untouched.
    low = b.min(axis=0)
    extent = _axis_limit(b - low, lam, p)
    shift = np.where(extent < 1e-6 * np.abs(low), low, 0.0)
    if np.any(shift):
        b = b - shift
    y_max = _axis_limit(b, lam, p)
    breaks = b.T if extra_breaks is None else np.concatenate([b.T, np.asarray(extra_breaks, dtype=float).T - shift[:, None]], axis=1)
    left, length = _segment_scaffold(breaks, y_max)  # (Q, K)
    left, length = _nonempty_segments(left, length)  # (Q, K'), K' ≤ K: no nodes on empty segments (6.21)
    x, w = _legendre01(nodes)
    offset = length[:, :, None] * x**m  # (Q, K, n)
    dy = (length[:, :, None] * (m * x ** (m - 1.0) * w)).reshape(length.shape[0], -1)  # dy/dx · w, (Q, J)
    q_count = b.shape[1]
    # u_s = (a − b_s) + offset; (a − b_s) is exactly 0 for the tier starting at a.
    gap = left[None, :, :] - b[:, :, None]  # (S, Q, K)
    u = np.add(gap[:, :, :, None], offset[None]).reshape(b.shape[0], q_count, -1)
    active = u > 0
    rate = np.zeros_like(u)
    np.power(u, p - 1.0, out=rate, where=active)  # one transcendental per started tier and node
    rate *= (np.pi * p) * _column_density(lam, b)[:, :, None]  # G'_{s,q}(y)
    # e^{−G_q}, G_{s,q} = u G'_{s,q} / p: a tier not started has G' = 0 (its u ≤ 0 is finite), so adds 0
    survival = np.exp(np.einsum("sqj,sqj->qj", u, rate) / -p)
    mass = rate * (survival * dy)[None]
    np.copyto(u, -1.0, where=np.logical_not(active, out=active))
    return TierGrid(u=u, mass=mass, rate=rate)


def default_nodes(alpha: float) -> int:
    """Gauss–Legendre nodes per segment used by default for a radio exponent α.

    Chosen so that the measured max error on ``A`` stays below 2e-6 over the supported range
    α ∈ [1, 6] (docs/model.md §20; ``benchmarks/accuracy/quadrature/numerical_ranges.py`` measures it).
    """
    if alpha <= 2.5:
        return DEFAULT_NODES
    return STEEP_NODES if alpha <= 3.5 else (48 if alpha <= 4.5 else 64)


def _with_diagonal(cross: FloatArray) -> FloatArray:
    """Set ``J[s, s, q] = −Σ_{t≠s} J[t, s, q]`` (moving ``b_s`` shifts mass between tiers only)."""
    s_count = cross.shape[0]
    idx = np.arange(s_count)
    cross[idx, idx, :] = 0.0
    cross[idx, idx, :] = -cross.sum(axis=0)
    return cross


def association_quadrature_jacobian(
    lam: FloatArray, b: FloatArray, alpha: float, nodes: int = DEFAULT_NODES
) -> tuple[FloatArray, FloatArray]:
    """``A`` and ``∂A_{s,q}/∂b_{t,q}`` by the shared-axis quadrature."""
    grid = tier_grid(lam, b, alpha, nodes=nodes)
    return grid.mass.sum(axis=2), grid.jacobian()


def association_quadrature(lam: FloatArray, b: FloatArray, alpha: float, nodes: int = DEFAULT_NODES) -> FloatArray:
    """``A_{s,q} = ∫ e^{−G_q} dG_{s,q}`` by the shared-axis quadrature (any α > 0)."""
    return tier_grid(lam, b, alpha, nodes=nodes).mass.sum(axis=2)


def association(lam: FloatArray, bias: FloatArray, radio_scale: float, alpha: float, nodes: int | None = None) -> FloatArray:
    """Theorem 1 for active tiers: ``lam`` ``(S,)`` densities ``λ_s``, ``bias`` ``(S, Q)`` seconds ``β_{s,q}``.

    Uses the exact closed form when α = 2 and the quadrature otherwise.
    """
    b = np.asarray(bias, dtype=float) / radio_scale
    if lam.size == 1:
        return np.ones_like(b)
    if alpha == 2.0:
        return association_alpha2(lam, b)
    return association_quadrature(lam, b, alpha, nodes or default_nodes(alpha))


def association_error(lam: FloatArray, bias: FloatArray, radio_scale: float, alpha: float, nodes: int | None = None) -> float:
    """Estimated max abs quadrature error on ``A``: ``max |A(n) − A(n + 8)|`` (0 for the α = 2 closed form)."""
    if alpha == 2.0 or lam.size == 1:
        return 0.0
    b = np.asarray(bias, dtype=float) / radio_scale
    nodes = nodes or default_nodes(alpha)
    return float(np.max(np.abs(association_quadrature(lam, b, alpha, nodes) - association_quadrature(lam, b, alpha, nodes + 8))))
