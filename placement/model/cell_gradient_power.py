"""The cell model's geometry at α ≠ 2 and its adjoints (docs/model.md §14.6, eq. (14.15)).

At ``α ≠ 2`` the cell model (:mod:`edgeprefix.placement.model.cell`) computes three geometric
quantities differently from the ``α = 2`` cost axis:

* the void exponent ``L_{s,q}(v) = π Σ_t λ_t max(v^{α/2} + b_{s,q} − b_{t,q}, 0)^{2/α}`` (eq. (14.1)),
  directly at every node (:func:`~edgeprefix.placement.model.cell.void_exponent`);
* the ray extents ``V_{s,q}(ℓ) = L_{s,q}^{-1}(ℓ)`` (eq. (14.2)) and the radial cap ``V_{s,q}(RADIAL_L_MAX)``,
  by linear interpolation in a table of ``L_{s,q}`` on ``v_f = v_max,s (f/128)²``, ``v_max,s = L_MAX/(π λ_s)``;
* the queue-free mass ``P1_{s,q}`` the radial rule is normalised to (eq. (14.14)): the analytic
  kernel's breakpoint-aware Gauss–Legendre quadrature of eq. (39) with ``F_W ≡ 1``
  (:func:`~edgeprefix.placement.model.association.tier_grid` with the cut points ``b_{s,q} + u_cut`` as
  extra breakpoints; the association ``A_{s,q}`` at ``τ = ∞``).

:class:`PowerGeometry` computes each of them as the forward pass does and accumulates ``∂J/∂λ_t``
and ``∂J/∂b_{t,q}`` of seeds on them, in reverse mode.  The derivative is that of the computed
function: the table interval holding each ``ℓ`` is held (as the ``α = 2`` code holds the piece of
the cost axis), and the quadrature's nodes move with the breakpoints ``b_{t,q}`` and with the
truncation point ``y_max`` exactly as the kernel places them, so the partials agree with central
differences of the cell model to rounding, not to the quadrature's error.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model import association as AS
from edgeprefix.placement.model import cell as C
from edgeprefix.placement.model.blas_threads import single_blas_thread
from edgeprefix.placement.model.spatial import column_blocks

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
TABLE_POINTS = 129  # points of the ray-extent table per (s, q) (as the forward pass)


class PowerGeometry:
    """Void exponent, ray extents and queue-free mass of the active tiers at ``α ≠ 2``, with adjoints.

    Parameters
    ----------
    lam : ``λ_s`` ``(S,)``.
    b : ``b_{s,q} = β_{s,q}/ξ`` ``(S, Q)``.
    alpha : the radio exponent ``α``.
    nodes : Gauss–Legendre nodes per segment of the queue-free mass (the evaluation's kernel's).
    """

    def __init__(self, lam: FloatArray, b: FloatArray, alpha: float, nodes: int) -> None:
        self.lam, self.b, self.alpha, self.nodes = lam, b, float(alpha), int(nodes)
        self.lam_bar = np.zeros(lam.size)
        self.b_bar = np.zeros_like(b)
        self._saved: dict[str, Any] = {}

    # -- radio cost ξ r^α = ξ v^{α/2} ------------------------------------------------------------
    def radio(self, v: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``v^{α/2}`` and its slope in ``v`` (0 at ``v = 0``, where only the value enters)."""
        half = self.alpha / 2.0
        power = v**half
        with np.errstate(divide="ignore", invalid="ignore"):
            slope = np.where(v > 0, half * power / np.where(v > 0, v, 1.0), 0.0)
        return power, slope

    # -- void exponent (14.1) --------------------------------------------------------------------
    def exponent(self, tier: IntArray, kind: IntArray, v: FloatArray) -> tuple[FloatArray, tuple]:
        """``L_{s,q}(v)`` for the pairs ``(tier, kind)`` ``(P,)`` at ``v`` ``(P, R)`` (as the forward pass)."""
        delta = self.b[tier, kind][:, None] - self.b[:, kind].T  # (P, T)
        return C.void_exponent(v, self.lam, delta, self.alpha), (tier, kind, v, delta)

    def exponent_vjp(self, token: tuple, bar: FloatArray) -> FloatArray:
        """Accumulate ``∂`` of ``Σ bar · L`` in ``λ`` and ``b``; return ``v̄``.

        With ``z_t = v^{α/2} + b_{s,q} − b_{t,q}``: ``∂L/∂λ_t = π max(z_t, 0)^{2/α}``,
        ``∂L/∂z_t = π λ_t (2/α) z_t^{2/α − 1}`` (``z_t > 0``), ``∂z_t/∂b_{s,q} = 1``, ``∂z_t/∂b_{t,q} = −1``
        (they cancel for ``t = s``), ``∂z_t/∂v = (α/2) v^{α/2 − 1}``.
        """
        tier, kind, v, delta = token
        p = 2.0 / self.alpha
        power, slope = self.radio(v)
        scale = np.pi * p * self.lam  # ∂L/∂z_t = π λ_t p z^{p − 1}
        per_t, v_bar = np.empty(delta.shape), np.empty(v.shape)
        step = max(1, C.VOID_BLOCK_ELEMENTS // max(1, v.shape[1] * delta.shape[1]))  # (rows, R, T) blocks, as the forward pass
        with single_blas_thread():
            for start in range(0, v.shape[0], step):
                rows = slice(start, start + step)
                z = power[rows, :, None] + delta[rows, None, :]  # (P, R, T)
                np.maximum(z, 0.0, out=z)
                root = np.power(z, p)  # max(z, 0)^{2/α} = ρ_t², the λ_t derivative over π
                self.lam_bar += np.pi * np.einsum("pr,prt->t", bar[rows], root)
                np.divide(root, z, out=root, where=z > 0)  # z^{p − 1} where z > 0 (0 elsewhere: root is 0 there)
                per_t[rows] = np.einsum("pr,prt->pt", bar[rows], root) * scale  # (P, T): Σ_r z̄_t
                v_bar[rows] = (root @ scale) * bar[rows] * slope[rows]
        np.add.at(self.b_bar, (tier, kind), per_t.sum(axis=1))
        t_count = self.lam.size
        flat = (np.arange(t_count)[None, :] * self.b.shape[1] + kind[:, None]).ravel()
        self.b_bar -= np.bincount(flat, per_t.ravel(), self.b.size).reshape(self.b.shape)
        return v_bar

    # -- ray extents (14.2) ------------------------------------------------------------------------
    def extent(self, queries: FloatArray) -> FloatArray:
        """``V_{s,q}(ℓ)`` at the levels ``queries`` ``(N,)``, ``(S, Q, N)``: the forward pass's table inverse."""
        lam, b = self.lam, self.b
        q_count = b.shape[1]
        vmax = C.L_MAX / (np.pi * lam)
        shape = np.linspace(0.0, 1.0, TABLE_POINTS) ** 2
        grid = vmax[:, None, None] * shape * np.ones((1, q_count, 1))  # (S, Q, F)
        table = C.void_exponent(grid, lam, C._offsets(b), self.alpha)
        out, (hit, free, upper, frac, width) = C.ray_extent_search(table, queries, grid)
        self._saved["extent"] = (hit, free, upper, frac, width, shape, vmax)
        return out

    def extent_vjp(self, bar: FloatArray) -> None:
        """Accumulate ``∂`` of ``Σ bar · V`` (``bar`` ``(S, Q, N)``) at the held table intervals.

        ``V = v_{f−1} + φ (v_f − v_{f−1})``, ``φ = (ℓ − L_{f−1})/(L_f − L_{f−1})``: ``∂V/∂L_{f−1} = Δv (φ − 1)/ΔL``,
        ``∂V/∂L_f = −Δv φ/ΔL``, and the table points ``v_f = v_max,s (f/128)²`` move with ``λ_s``.
        """
        hit, free, local, frac, width, shape, vmax = self._saved["extent"]
        s_count, q_count, n_q = bar.shape
        bar = np.where(hit, bar, 0.0)
        v_lo = vmax[:, None, None] * shape[local - 1]
        v_hi = vmax[:, None, None] * shape[local]
        frac_bar = np.where(free, bar * (v_hi - v_lo), 0.0)
        l_bar = np.stack([frac_bar * (frac - 1.0) / width, -frac_bar * frac / width], axis=-1)  # (S, Q, N, 2)
        v_bar = np.stack([bar * (1.0 - frac), bar * frac], axis=-1)
        points = np.stack([v_lo, v_hi], axis=-1)
        tier = np.repeat(np.arange(s_count), q_count)
        kind = np.tile(np.arange(q_count), s_count)
        at = points.reshape(s_count * q_count, -1)
        expo_token = self.exponent(tier, kind, at)[1]
        v_bar = v_bar.reshape(at.shape) + self.exponent_vjp(expo_token, l_bar.reshape(at.shape))
        self.lam_bar -= (v_bar * at).reshape(s_count, -1).sum(axis=1) / self.lam  # v_f ∝ 1/λ_s

    # -- queue-free mass (14.14) --------------------------------------------------------------------
    def queue_free(self, tier: IntArray, kind: IntArray, u_cut: FloatArray | None) -> FloatArray:
        """``P1_{s,q}`` for the pairs ``(tier, kind)``: the kernel's quadrature with ``u_cut`` ``(S, Q)``
        (``None``: ``τ = ∞``, the association ``A_{s,q}``)."""
        lam, b = self.lam, self.b
        if lam.size == 1 and u_cut is None:  # one tier: the kernel's association is 1 without integration
            self._saved["queue_free"] = (tier, kind, [], None)
            return np.ones(tier.size)
        values = np.empty_like(b)
        per_column = (1 if u_cut is None else 2) * b.shape[0] ** 2 * self.nodes
        blocks = []
        slices = column_blocks(b.shape[1], per_column)
        for cols in slices:
            values[:, cols], state = _mass_forward(lam, b[:, cols], self.alpha, None if u_cut is None else u_cut[:, cols], self.nodes)
            blocks.append((cols, state if len(slices) == 1 else None))  # several blocks: recomputed in reverse (bounded memory)
        self._saved["queue_free"] = (tier, kind, blocks, u_cut)
        return values[tier, kind]

    def queue_free_vjp(self, bar: FloatArray) -> None:
        """Accumulate ``∂`` of ``Σ bar · P1`` over the pairs (the kernel's nodes move with ``b`` and ``y_max``)."""
        tier, kind, blocks, u_cut = self._saved["queue_free"]
        seed = np.zeros_like(self.b)
        np.add.at(seed, (tier, kind), bar)
        for cols, state in blocks:
            if state is None:
                state = _mass_forward(self.lam, self.b[:, cols], self.alpha, None if u_cut is None else u_cut[:, cols], self.nodes)[1]
            lam_bar, b_bar = _mass_reverse(state, seed[:, cols])
            self.lam_bar += lam_bar
            self.b_bar[:, cols] += b_bar

    def finish(self) -> tuple[FloatArray, FloatArray]:
        """The accumulated ``(λ̄, b̄)``."""
        return self.lam_bar, self.b_bar


def _mass(
    lam: FloatArray, b: FloatArray, alpha: float, u_cut: FloatArray | None, nodes: int, bar: FloatArray | None = None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(P1 (S, Q), λ̄ (S,), b̄ (S, Q))`` of :func:`_mass_forward` and, with ``bar``, :func:`_mass_reverse` (zeros without)."""
    value, state = _mass_forward(lam, b, alpha, u_cut, nodes)
    if bar is None:
        return value, np.zeros(lam.size), np.zeros_like(b)
    return (value, *_mass_reverse(state, bar))


def _mass_forward(lam: FloatArray, b: FloatArray, alpha: float, u_cut: FloatArray | None, nodes: int) -> tuple[FloatArray, dict[str, Any]]:
    """The kernel's ``P1_{s,q} = Σ_{0 < u ≤ u_cut} mass`` (``A_{s,q}`` when ``u_cut`` is None) on
    :func:`~edgeprefix.placement.model.association.tier_grid`'s nodes, and what its reverse pass needs.

    The nodes are
    ``y = left_k + length_k x_i^m`` on the segments between the sorted breakpoints ``{b_{t,q}}`` (and
    ``{b_{t,q} + u_cut}``), clipped at ``y_max = min_j [b_(j) + (G_MAX/(π Σ_{i ≤ j} λ_(i)))^{α/2}]``; the
    sort order, the clip and the ``argmin`` are held; the translation of a far-off axis is a constant.
    """
    p = 2.0 / alpha
    m = max(1.0, AS.SUBSTITUTION_POWER * alpha)
    s_count, q_count = b.shape
    cols = np.arange(q_count)
    low = b.min(axis=0)
    shift = np.where(AS._axis_limit(b - low, lam, p) < 1e-6 * np.abs(low), low, 0.0)
    bb = b - shift if np.any(shift) else b
    order = np.argsort(bb, axis=0, kind="stable")
    started = np.cumsum(np.pi * lam[order], axis=0)  # (S, Q) by rank
    reach = (AS.G_MAX / started) ** (1.0 / p)
    candidates = bb[order, cols] + reach
    first = np.argmin(candidates, axis=0)
    y_max = candidates[first, cols]
    breaks = bb.T if u_cut is None else np.concatenate([bb.T, (b + u_cut).T - shift[:, None]], axis=1)  # (Q, K)
    src = np.argsort(breaks, axis=1, kind="stable")
    sorted_breaks = np.take_along_axis(breaks, src, axis=1)
    finite = np.isfinite(sorted_breaks)
    raw = np.where(finite, sorted_breaks, y_max[:, None])
    at_end = raw > y_max[:, None]
    left = np.clip(raw, sorted_breaks[:, :1], y_max[:, None])
    right = np.concatenate([left[:, 1:], y_max[:, None]], axis=1)
    length = np.maximum(right - left, 0.0)
    x, w = AS._legendre01(nodes)
    xm, dxm = x**m, m * x ** (m - 1.0) * w
    k_count = left.shape[1]
    dy = (length[:, :, None] * dxm).reshape(q_count, -1)  # (Q, J)
    gap = left[None, :, :] - bb[:, :, None]  # (S, Q, K)
    u = (gap[:, :, :, None] + (length[:, :, None] * xm)[None]).reshape(s_count, q_count, -1)
    active = u > 0
    u = np.maximum(u, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(active, np.power(u, p - 1.0), 0.0)
    rate *= (np.pi * p) * lam[:, None, None]  # G'_{s,q}(y)
    survival = np.exp(-(u * rate).sum(axis=0) / p)  # e^{−G_q}
    inside = active if u_cut is None else active & (u <= u_cut[:, :, None])
    mass = np.where(inside, rate * (survival * dy)[None], 0.0)
    names = (
        "lam",
        "p",
        "s_count",
        "q_count",
        "k_count",
        "inside",
        "active",
        "rate",
        "survival",
        "dy",
        "u",
        "gap",
        "xm",
        "dxm",
        "at_end",
        "finite",
        "breaks",
        "src",
        "order",
        "first",
        "cols",
        "reach",
        "started",
        "u_cut",
    )
    values = locals()
    return mass.sum(axis=2), {name: values[name] for name in names}  # what the reverse pass reads


def _mass_reverse(state: dict[str, Any], bar: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(λ̄, b̄)`` of ``Σ bar · P1`` through :func:`_mass_forward`'s nodes."""
    lam, p, s_count, q_count, k_count = state["lam"], state["p"], state["s_count"], state["q_count"], state["k_count"]
    inside, active, rate, survival, dy, u, gap = (state[k] for k in ("inside", "active", "rate", "survival", "dy", "u", "gap"))
    xm, dxm, at_end, finite, breaks, src = (state[k] for k in ("xm", "dxm", "at_end", "finite", "breaks", "src"))
    order, first, cols, reach, started, u_cut = (state[k] for k in ("order", "first", "cols", "reach", "started", "u_cut"))
    # mass = rate e^{−G} dy on the nodes inside the window
    m_bar = np.where(inside, bar[:, :, None], 0.0)
    rate_bar = m_bar * (survival * dy)[None]
    weighted = (m_bar * rate).sum(axis=0)  # (Q, J)
    g_bar = -weighted * survival * dy  # ∂/∂G_q
    dy_bar = weighted * survival
    # G_q = Σ_s π λ_s u^p (= u G'/p), G' = π λ p u^{p − 1}
    lam_bar = ((g_bar[None] * u * rate / p + rate_bar * rate).sum(axis=(1, 2))) / lam
    with np.errstate(divide="ignore", invalid="ignore"):
        u_bar = np.where(active, g_bar[None] * rate + rate_bar * rate * (p - 1.0) / np.where(active, u, 1.0), 0.0)
    u_bar = u_bar.reshape(s_count, q_count, k_count, -1)
    # a tier whose breakpoint is the segment's left end has u = length x^m exactly (gap = 0): its ∂u/∂left and
    # ∂u/∂b_s cancel; dropping both keeps the huge u^{p−2} terms of the nodes next to the kink out of the sums,
    # and at tied breakpoints it gives the derivative along directions that keep the tie (the quadrature itself
    # is not differentiable across a tie: a tier starting inside a segment is not polynomial there)
    gap_bar = np.where(gap == 0.0, 0.0, u_bar.sum(axis=3))  # (S, Q, K)
    b_bar = -gap_bar.sum(axis=2)
    left_bar = gap_bar.sum(axis=0)  # (Q, K)
    length_bar = (u_bar.sum(axis=0) * xm).sum(axis=2) + (dy_bar.reshape(q_count, k_count, -1) * dxm).sum(axis=2)
    left_bar -= length_bar
    left_bar[:, 1:] += length_bar[:, :-1]  # right_k = left_{k+1}
    y_max_bar = length_bar[:, -1] + np.where(at_end | ~finite, left_bar, 0.0).sum(axis=1)
    raw_bar = np.where(at_end | ~finite, 0.0, left_bar)
    breaks_bar = np.zeros_like(breaks)
    np.put_along_axis(breaks_bar, src, raw_bar, axis=1)
    b_bar += breaks_bar[:, :s_count].T
    if u_cut is not None:
        b_bar += breaks_bar[:, s_count:].T
    # y_max = b_(j*) + (G_MAX / started_{j*})^{1/p}, started_j = π Σ_{i ≤ j} λ_(i)
    lead = order[first, cols]
    b_bar[lead, cols] += y_max_bar
    started_bar = -y_max_bar * reach[first, cols] / (p * started[first, cols])
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(s_count)[:, None] * np.ones((1, q_count), dtype=order.dtype), axis=0)
    lam_bar += np.pi * ((rank <= first[None, :]) * started_bar[None, :]).sum(axis=1)
    return lam_bar, b_bar
