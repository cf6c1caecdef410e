"""Exact partial derivatives of the cell model's coverage (docs/model.md §14.6), by reverse mode.

The cell model acts after the fixed point: its coverage (eq. (14.9)) is a function of the active
tiers' densities ``λ_s``, cost offsets ``b_{s,q} = β_{s,q}/ξ``, offered loads ``a_s``, mean service
times ``m_s = 1/μ_s``, the service's ``C²_s`` (M/G/c law only) and the work densities
``w_{s,q} = Λ p_q / μ_{s,q}``, with ``τ``, ``ξ``, ``g_{s,q}`` and ``c_s`` fixed.
:func:`cell_coverage_gradient` returns ``J = Σ_{s,q} ω_{s,q} P(T ≤ τ, s | q)`` for weights ``ω``
(``ω_{s,q} = p_q`` gives ``P_cov(τ)``) and ``∂J`` in each of those inputs: the derivative of the
computed function itself (the same quadrature and tables as
:func:`edgeprefix.placement.model.cell.cell_coverage_pairs`), piece by piece in reverse order.
A gradient in the mix chains these partials with the mean field's (``∂λ/∂π``, ``∂b/∂W̄``,
``∂a/∂A``, ``∂m/∂A`` and the implicit ``∂W̄/∂π`` of the fixed point: the mean-field sensitivities).

The geometry — void exponent ``L_{s,q}``, ray extents ``V_{s,q}(ℓ)`` and the queue-free mass ``P1_{s,q}``
of eq. (14.14) — is the cost axis at ``α = 2`` (:class:`_Alpha2Geometry`: one piecewise-linear ``G_q`` per
type, ``P1`` in closed form) and the power path otherwise
(:class:`~edgeprefix.placement.model.cell_gradient_power.PowerGeometry`: ``L`` in closed form, ``V`` by the
table inverse, ``P1`` by the analytic kernel's quadrature); everything after it is shared.

The pieces are smooth except on sets of measure zero (a node of a table or of the ℓ axis
crossed, a clip, a floor switching; at ``α ≠ 2`` also a tie of the quadrature's breakpoints);
there the value is continuous and the derivative is that of the piece on one side (at a tie:
along the directions that keep it, docs/model.md §14.6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model import cell as C
from edgeprefix.placement.model.association import default_nodes
from edgeprefix.placement.model.cell_gradient_power import PowerGeometry
from edgeprefix.placement.model.mgc import cosmetatos_ratio, variability_interpolation

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True)
class CellGradient:
    """``J = Σ ω_{s,q} P(T ≤ τ, s | q)`` of the cell model and its partial derivatives (arrays of the active tiers).

    Attributes
    ----------
    value : ``J``.
    pairs : ``P(T ≤ τ, s | q)`` ``(S, Q)`` (as :func:`~edgeprefix.placement.model.cell.cell_coverage_pairs`).
    lam : ``∂J/∂λ_s`` ``(S,)``.
    offsets : ``∂J/∂b_{s,q}`` ``(S, Q)``.
    offered_load : ``∂J/∂a_s`` ``(S,)``.
    mean_service : ``∂J/∂m_s`` ``(S,)``, ``m_s = 1/μ_s``.
    work : ``∂J/∂w_{s,q}`` ``(S, Q)``.
    service_scv : ``∂J/∂C²_s`` ``(S,)`` under the M/G/c law, else ``None``.
    """

    value: float
    pairs: FloatArray
    lam: FloatArray
    offsets: FloatArray
    offered_load: FloatArray
    mean_service: FloatArray
    work: FloatArray
    service_scv: FloatArray | None


def _psi(z: FloatArray) -> FloatArray:
    """``ψ(z) = ∫_0^1 x e^{−z x} dx = (1 − e^{−z}(1 + z))/z²`` (a series below ``z = 0.1``)."""
    z = np.asarray(z, dtype=float)
    small = z < 0.1
    zs = np.where(small, z, 0.0)
    series = np.zeros_like(zs)
    term = np.full_like(zs, 1.0)  # (−z)^k / k!
    for k in range(12):
        series += term / (k + 2)
        term = term * -zs / (k + 1)
    zl = np.where(small, 1.0, z)
    with np.errstate(over="ignore", invalid="ignore"):
        large = (-np.expm1(-zl) - zl * np.exp(-zl)) / zl**2
    return np.where(small, series, np.where(np.isinf(zl), 0.0, large))


class _Axis:
    """The cost axis of :class:`~edgeprefix.placement.model.cell.CostAxis` with its adjoint accumulators."""

    def __init__(self, lam: FloatArray, b: FloatArray) -> None:
        self.lam, self.b = lam, b
        self.order = np.argsort(b, axis=0, kind="stable")  # (T, Q)
        self.fwd = C.cost_axis(lam, b)
        q_count, t_count = self.fwd.knots.shape
        self.knots_bar = np.zeros((q_count, t_count))
        self.slope_bar = np.zeros((q_count, t_count))
        self.level_bar = np.zeros((q_count, t_count))

    def exponent(self, kind: IntArray, u: FloatArray) -> tuple[FloatArray, IntArray]:
        j = C._row_index(self.fwd.knots, kind, u)
        rows = kind[:, None] if u.ndim == 2 else kind
        value = self.fwd.level[rows, j] + self.fwd.slope[rows, j] * np.maximum(u - self.fwd.knots[rows, j], 0.0)
        return value, j

    def exponent_vjp(self, kind: IntArray, u: FloatArray, j: IntArray, bar: FloatArray) -> FloatArray:
        """Accumulate ``∂`` of ``G_q(u)`` into the axis; return ``ū``."""
        rows = np.broadcast_to(kind[:, None] if u.ndim == 2 else kind, u.shape)
        flat = (rows * self.fwd.knots.shape[1] + j).ravel()
        slope = self.fwd.slope[rows, j]
        gap = u - self.fwd.knots[rows, j]
        on = gap > 0
        size = self.fwd.knots.size
        self.level_bar += np.bincount(flat, bar.ravel(), size).reshape(self.level_bar.shape)
        self.slope_bar += np.bincount(flat, (bar * np.where(on, gap, 0.0)).ravel(), size).reshape(self.slope_bar.shape)
        self.knots_bar -= np.bincount(flat, (bar * np.where(on, slope, 0.0)).ravel(), size).reshape(self.knots_bar.shape)
        return bar * np.where(on, slope, 0.0)

    def finish(self) -> tuple[FloatArray, FloatArray]:
        """``(λ̄, b̄)`` of the accumulated knot, slope and level seeds."""
        knots, slope = self.fwd.knots, self.fwd.slope
        knots_bar, slope_bar = self.knots_bar.copy(), self.slope_bar.copy()
        after = np.cumsum(self.level_bar[:, ::-1], axis=1)[:, ::-1]  # Σ_{j ≥ i} level̄_j
        carry = after[:, 1:]  # Σ_{j > i} level̄_j for i < T − 1
        width = np.diff(knots, axis=1)
        slope_bar[:, :-1] += carry * width
        knots_bar[:, 1:] += carry * slope[:, :-1]
        knots_bar[:, :-1] -= carry * slope[:, :-1]
        sorted_lam_bar = np.pi * np.cumsum(slope_bar[:, ::-1], axis=1)[:, ::-1]  # (Q, T)
        lam_bar = np.bincount(self.order.T.ravel(), sorted_lam_bar.ravel(), self.lam.size)
        b_bar = np.zeros_like(self.b)
        np.add.at(b_bar, (self.order, np.arange(self.b.shape[1])[None, :]), knots_bar.T)
        return lam_bar, b_bar  # type: ignore[return-value]

    # integrals on the axis (the queue-free mass P1 and its derivatives) ------------------------
    def tail(self, kind: IntArray, u: FloatArray) -> FloatArray:
        """``Φ_q(u) = ∫_u^∞ e^{−G_q}`` (0 at ``u = ∞``)."""
        fin = np.isfinite(u)
        out = np.zeros_like(u, dtype=float)
        if fin.any():
            out[fin] = self.fwd.tail_integral(kind[fin], u[fin][:, None])[:, 0]
        return out

    def density(self, kind: IntArray, u: FloatArray) -> FloatArray:
        """``e^{−G_q(u)}`` (0 at ``u = ∞``)."""
        fin = np.isfinite(u)
        out = np.zeros_like(u, dtype=float)
        if fin.any():
            out[fin] = np.exp(-self.exponent(kind[fin], u[fin])[0])
        return out

    def first_moment(self, kind: IntArray, u: FloatArray) -> FloatArray:
        """``G_q(u) = ∫_u^∞ (y − u) e^{−G_q(y)} dy`` (0 at ``u = ∞``), exact piece by piece."""
        knots, slope, level = self.fwd.knots, self.fwd.slope, self.fwd.level
        q_count, t_count = knots.shape
        after = np.concatenate([knots[:, 1:], np.full((q_count, 1), np.inf)], axis=1)
        phi_after = self.fwd._tail_at_knots[:, 1:]  # Φ_q(knot_{j+1}), 0 past the end
        at = np.zeros((q_count, t_count + 1))  # G_q(knot_j)
        at[:, t_count - 1] = np.exp(-level[:, -1]) / slope[:, -1] ** 2
        for jj in range(t_count - 2, -1, -1):
            d = after[:, jj] - knots[:, jj]
            at[:, jj] = np.exp(-level[:, jj]) * d**2 * _psi(slope[:, jj] * d) + at[:, jj + 1] + d * phi_after[:, jj]
        fin = np.isfinite(u)
        out = np.zeros_like(u, dtype=float)
        if not fin.any():
            return out
        k, uu = kind[fin], u[fin]
        j = C._row_index(knots, k, uu)
        start = np.exp(-(level[k, j] + slope[k, j] * np.maximum(uu - knots[k, j], 0.0)))
        d = after[k, j] - uu
        last = ~np.isfinite(d)
        dd = np.where(last, 0.0, d)
        piece = np.where(last, start / slope[k, j] ** 2, start * dd**2 * _psi(slope[k, j] * dd))
        out[fin] = piece + np.where(last, 0.0, at[k, j + 1] + dd * phi_after[k, j])
        return out


class _Alpha2Geometry:
    """α = 2: the void exponent, ray extents and exact queue-free mass on the cost axis (eq. (14.11)), with adjoints.

    The same interface as :class:`~edgeprefix.placement.model.cell_gradient_power.PowerGeometry` (``α ≠ 2``).
    """

    def __init__(self, lam: FloatArray, b: FloatArray) -> None:
        self.lam, self.b = lam, b
        self.axis = _Axis(lam, b)
        self.lam_bar = np.zeros(lam.size)
        self.b_bar = np.zeros_like(b)

    @staticmethod
    def radio(v: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``v^{α/2} = v`` and its slope."""
        return v, np.ones_like(v)

    def exponent(self, tier: IntArray, kind: IntArray, v: FloatArray) -> tuple[FloatArray, tuple]:
        """``L_{s,q}(v) = G_q(v + b_{s,q})`` for the pairs ``(tier, kind)`` ``(P,)`` at ``v`` ``(P, R)``."""
        u = v + self.b[tier, kind][:, None]
        expo, j = self.axis.exponent(kind, u)
        return expo, (tier, kind, u, j)

    def exponent_vjp(self, token: tuple, bar: FloatArray) -> FloatArray:
        tier, kind, u, j = token
        u_bar = self.axis.exponent_vjp(kind, u, j, bar)
        np.add.at(self.b_bar, (tier, kind), u_bar.sum(axis=1))
        return u_bar

    def extent(self, queries: FloatArray) -> FloatArray:
        """``V_{s,q}(ℓ) = max(U_q(ℓ) − b_{s,q}, 0)`` at the levels ``queries`` ``(N,)``, ``(S, Q, N)``."""
        fwd = self.axis.fwd
        q_count = self.b.shape[1]
        kinds = np.arange(q_count)
        q_grid = np.broadcast_to(queries, (q_count, queries.size))
        j_inv = C._row_index(fwd.level, kinds, q_grid)
        rows = kinds[:, None]
        inv_slope = 1.0 / fwd.slope[rows, j_inv]
        u_inv = fwd.knots[rows, j_inv] + (q_grid - fwd.level[rows, j_inv]) * inv_slope  # U_q(ℓ), (Q, N)
        v_raw = u_inv[None, :, :] - self.b[:, :, None]
        alive = v_raw > 0
        self._inverse = (j_inv, inv_slope, u_inv, alive)
        return np.where(alive, v_raw, 0.0)

    def extent_vjp(self, bar: FloatArray) -> None:
        j_inv, inv_slope, u_inv, alive = self._inverse
        axis, fwd = self.axis, self.axis.fwd
        bar = np.where(alive, bar, 0.0)
        self.b_bar -= bar.sum(axis=2)
        u_inv_bar = bar.sum(axis=0)  # (Q, N)
        rows = np.arange(self.b.shape[1])[:, None]
        flat = (rows * fwd.knots.shape[1] + j_inv).ravel()
        size = fwd.knots.size
        axis.knots_bar += np.bincount(flat, u_inv_bar.ravel(), size).reshape(axis.knots_bar.shape)
        axis.level_bar -= np.bincount(flat, (u_inv_bar * inv_slope).ravel(), size).reshape(axis.level_bar.shape)
        axis.slope_bar -= np.bincount(flat, (u_inv_bar * (u_inv - fwd.knots[rows, j_inv]) * inv_slope).ravel(), size).reshape(
            axis.slope_bar.shape
        )

    def queue_free(self, tier: IntArray, kind: IntArray, u_cut: FloatArray | None) -> FloatArray:
        """Exact ``P1_{s,q} = π λ_s (Φ_q(b_{s,q}) − Φ_q(b_{s,q} + u_cut))`` for the pairs (``u_cut`` ``(S, Q)``; ``None``: ``τ = ∞``)."""
        b_p = self.b[tier, kind]
        upper = b_p + (np.inf if u_cut is None else u_cut[tier, kind])
        p1 = np.pi * self.lam[tier] * (self.axis.tail(kind, b_p) - self.axis.tail(kind, upper))
        self._queue_free = (tier, kind, b_p, upper, p1)
        return p1

    def queue_free_vjp(self, bar: FloatArray) -> None:
        tier, kind, b_p, upper, p1 = self._queue_free
        self.lam_bar += np.bincount(tier, bar * p1, self.lam.size) / self.lam
        _p1_vjp(self.axis, self.lam, self.b, tier, kind, b_p, upper, bar, self.lam_bar, self.b_bar)

    def finish(self) -> tuple[FloatArray, FloatArray]:
        """The accumulated ``(λ̄, b̄)``, the cost axis's knots, slopes and levels included."""
        lam_bar, b_bar = self.axis.finish()
        return self.lam_bar + lam_bar, self.b_bar + b_bar


def _tables(
    servers: FloatArray, scv: FloatArray | None, tables: tuple[FloatArray, FloatArray] | None = None
) -> dict[str, FloatArray | None]:
    """Flat ``P^W`` and ``1/K`` tables with slopes (as the forward pass) and the ``∂(1/K)/∂C²`` table
    (``tables``: the engine law's ``(P^W, ι)``, which do not read ``C²``)."""
    pw_table, ik_table = C.wait_tables(servers, scv) if tables is None else tables
    out: dict[str, FloatArray | None] = {"n": np.array(pw_table.shape[1] - 1)}
    out["pw"], out["pw_slope"] = C._interpolant(pw_table)
    out["ik"] = out["ik_slope"] = out["dik"] = out["dik_slope"] = None
    if tables is not None:
        out["ik"], out["ik_slope"] = C._interpolant(ik_table)  # type: ignore[arg-type]
        return out
    if ik_table is not None and scv is not None:
        out["ik"], out["ik_slope"] = C._interpolant(ik_table)
        c = np.asarray(servers, dtype=float)
        load = np.linspace(0.0, 1.0, pw_table.shape[1])[None, :] * c[:, None]
        k = cosmetatos_ratio(load, np.broadcast_to(c[:, None], load.shape))[0]
        big_k, _, d_scv, _ = variability_interpolation(k, np.broadcast_to(np.asarray(scv, dtype=float)[:, None], load.shape))
        out["dik"], out["dik_slope"] = C._interpolant(-d_scv / big_k**2)
    return out


def cell_coverage_gradient(
    lam: npt.ArrayLike,
    offsets: npt.ArrayLike,
    work: npt.ArrayLike,
    tau: float,
    *,
    first_token: npt.ArrayLike,
    offered_load: npt.ArrayLike,
    mean_service: npt.ArrayLike,
    weights: npt.ArrayLike | None = None,
    wait_shift: npt.ArrayLike | None = None,
    shift_rate: npt.ArrayLike | None = None,
    **rest: Any,
) -> CellGradient:
    """:func:`_cell_coverage_gradient` with the engine law's shifted mixture (docs/model.md (17.26)): ``J`` of the pairs
    ``(1 − ω_s) P_{s,q}(g) + ω_s P_{s,q}(g + J_s)``, ``ω_s`` of :func:`~edgeprefix.placement.model.cell.shift_weight`; the
    seed of ``ω_s`` is ``Σ_q ω_{s,q} (P_{s,q}(g + J) − P_{s,q}(g))``, chained to ``a_s`` and ``m_s``."""
    a = np.asarray(offered_load, dtype=float)
    m = np.asarray(mean_service, dtype=float)
    mix = C.shift_weight(
        None if shift_rate is None else np.asarray(shift_rate, dtype=float),
        a,
        m,
        None if wait_shift is None else np.asarray(wait_shift, dtype=float),
    )
    common = {"offered_load": a, "mean_service": m, **rest}
    if mix is None or not np.isfinite(tau):
        return _cell_coverage_gradient(lam, offsets, work, tau, first_token=first_token, weights=weights, **common)
    g = np.asarray(first_token, dtype=float)
    b = np.asarray(offsets, dtype=float)
    q_count = b.shape[1]
    base = np.broadcast_to(np.ones(q_count) if weights is None else np.asarray(weights, dtype=float), b.shape)
    omega, d_da, d_dm = mix
    j = np.asarray(wait_shift, dtype=float)
    at_g = _cell_coverage_gradient(lam, offsets, work, tau, first_token=g, weights=base * (1.0 - omega)[:, None], **common)
    at_j = _cell_coverage_gradient(lam, offsets, work, tau, first_token=g + j[:, None], weights=base * omega[:, None], **common)
    seed = (base * (at_j.pairs - at_g.pairs)).sum(axis=1)  # ∂J/∂ω_s
    pairs = (1.0 - omega)[:, None] * at_g.pairs + omega[:, None] * at_j.pairs
    scv = None if at_g.service_scv is None or at_j.service_scv is None else at_g.service_scv + at_j.service_scv
    return CellGradient(
        at_g.value + at_j.value,
        pairs,
        at_g.lam + at_j.lam,
        at_g.offsets + at_j.offsets,
        at_g.offered_load + at_j.offered_load + seed * d_da,
        at_g.mean_service + at_j.mean_service + seed * d_dm,
        at_g.work + at_j.work,
        scv,
    )


def _cell_coverage_gradient(
    lam: npt.ArrayLike,
    offsets: npt.ArrayLike,
    work: npt.ArrayLike,
    tau: float,
    *,
    radio_scale: float,
    first_token: npt.ArrayLike,
    servers: npt.ArrayLike,
    offered_load: npt.ArrayLike,
    mean_service: npt.ArrayLike,
    service_scv: npt.ArrayLike | None = None,
    weights: npt.ArrayLike | None = None,
    alpha: float = 2.0,
    nodes: int | None = None,
    tables: tuple[FloatArray, FloatArray] | None = None,
    wait_delay: npt.ArrayLike | None = None,
) -> CellGradient:
    """``J = Σ_{s,q} ω_{s,q} P(T ≤ τ, s | q)`` of the cell model (eq. (14.9)) and its partial derivatives.

    Parameters
    ----------
    lam : ``λ_s`` of the active tiers ``(S,)``.
    offsets : ``b_{s,q} = β_{s,q}/ξ`` ``(S, Q)``.
    work : ``w_{s,q} = Λ p_q / μ_{s,q}`` ``(S, Q)``.
    tau : ``τ`` in seconds (``inf``: the share served by stable nodes).
    radio_scale, first_token, servers, offered_load, mean_service, service_scv : ``ξ``, ``g_{s,q}``,
        ``c_s``, ``a_s``, ``1/μ_s`` and ``C²_s`` as in :func:`~edgeprefix.placement.model.cell.cell_coverage_pairs`.
    weights : ``ω_{s,q}`` (``(Q,)`` per type, or ``(S, Q)``); default 1.
    alpha : the radio exponent ``α`` (the cost axis at ``α = 2``, the power path otherwise).
    nodes : at ``α ≠ 2``, Gauss–Legendre nodes per segment of the queue-free mass ``P1_{s,q}`` (eq. (14.14)),
        as the evaluation's kernel (default :func:`~edgeprefix.placement.model.association.default_nodes`).
    tables : the engine law's node tables ``(P^W, ι)`` with ``servers`` its stability edges, as in
        :func:`~edgeprefix.placement.model.cell.cell_coverage_pairs` (constants of the profiles: no partials).
    wait_delay : the engine law's step in progress ``δ_s`` (docs/model.md (17.25)), a constant of the profiles.
    """
    lam = np.asarray(lam, dtype=float)
    b = np.asarray(offsets, dtype=float)
    w = np.asarray(work, dtype=float)
    g_first = np.asarray(first_token, dtype=float)
    c = np.asarray(servers, dtype=float)
    a = np.asarray(offered_load, dtype=float)
    m_serv = np.asarray(mean_service, dtype=float)
    scv = None if service_scv is None else np.asarray(service_scv, dtype=float)
    s_count, q_count = b.shape
    omega = np.broadcast_to(np.ones(q_count) if weights is None else np.asarray(weights, dtype=float), (s_count, q_count))
    xi, sectors = float(radio_scale), C.SECTORS

    # ---------------- forward: the load law (eqs. (14.1)–(14.5)) ----------------
    geo: _Alpha2Geometry | PowerGeometry
    if alpha == 2.0:  # only differences of b matter: J is invariant under the translation, and so is ∂J/∂b
        b = C.translated_offsets(lam, b)
        geo = _Alpha2Geometry(lam, b)
    else:
        geo = PowerGeometry(lam, b, alpha, default_nodes(alpha) if nodes is None else nodes)
    ell = C._ray_axis(C.RAY_NODES)
    n_ell = ell.size
    queries = np.append(ell, C.RADIAL_L_MAX)
    extent = geo.extent(queries)  # V_{s,q}(ℓ), (S, Q, N + 1)
    cap = extent[..., -1]
    g = 0.5 * np.einsum("sq,sqn->sn", w, extent[..., :-1])
    dl = np.diff(ell)
    slope_g = np.diff(g, axis=1) / dl[None, :]
    ea, eb = np.exp(-ell[:-1])[None, :], np.exp(-ell[1:])[None, :]
    ga, gb, mm = g[:, :-1], g[:, 1:], slope_g
    seg1 = ea * (ga + mm) - eb * (gb + mm)
    seg2 = ea * (ga**2 + 2 * mm * ga + 2 * mm**2) - eb * (gb**2 + 2 * mm * gb + 2 * mm**2)
    seg3 = ea * (ga**3 + 3 * mm * ga**2 + 6 * mm**2 * ga + 6 * mm**3) - eb * (gb**3 + 3 * mm * gb**2 + 6 * mm**2 * gb + 6 * mm**3)
    k1, m2, m3 = seg1.sum(axis=1), seg2.sum(axis=1), seg3.sum(axis=1)
    k2 = m2 - k1**2
    k3 = m3 - 3.0 * k1 * m2 + 2.0 * k1**3
    empty = ~(k1 > 0)  # a tier no request reaches (as in cell_load): the degenerate law X ≡ 1, no pairs, zero partials
    if np.any(empty):
        k1 = np.where(empty, 1.0, k1)
        k2, k3, m2 = np.where(empty, 0.0, k2), np.where(empty, 0.0, k3), np.where(empty, 1.0, m2)
        seg1 = np.where(empty[:, None], 0.0, seg1)
    var_floor = k2 <= 1e-300
    var_g = np.where(var_floor, 1e-300, k2)
    variance = var_g / (sectors * k1**2)
    skew_pos = k3 > 0
    spread_g = var_g**1.5 if not np.any(empty) else np.where(empty, 1.0, var_g**1.5)
    skewness = np.where(skew_pos, k3, 0.0) / spread_g / np.sqrt(sectors)
    rest = np.cumsum(seg1[:, ::-1], axis=1)[:, ::-1]  # (S, N − 1): Σ_{i ≥ n} seg1
    e_ell = np.exp(ell[:-1])
    tail = np.empty((s_count, n_ell))
    tail[:, :-1] = rest * e_ell[None, :] / k1[:, None]
    tail[:, -1] = tail[:, -2]
    if np.any(empty):
        tail[empty] = 1.0

    theta_all = C.voronoi_weight(lam, b) if C.VORONOI_BAND > 0 else np.zeros_like(b)  # θ_{s,q} (eq. (14.13))

    def conditional_mean(expo: FloatArray, tier: IntArray, kind: IntArray) -> tuple[FloatArray, tuple]:
        n = n_ell - 1
        pos = np.sqrt(np.clip(expo, 0.0, C.L_MAX) / C.L_MAX) * n
        lo = np.minimum(pos.astype(np.int64), n - 1)
        inside = expo < C.L_MAX
        frac = (ell.take(lo + 1) - np.minimum(expo, C.L_MAX)) / dl.take(lo)
        t_rows = tier.reshape((-1,) + (1,) * (expo.ndim - 1))
        t_lo, t_hi = tail[t_rows, lo], tail[t_rows, lo + 1]
        excess = t_lo * frac + t_hi * (1.0 - frac) - 1.0
        closure = 1.0 + excess / sectors
        theta = theta_all[tier, kind].reshape((-1,) + (1,) * (expo.ndim - 1))
        phi, phi_slope = C.voronoi_mean(excess)
        mean = closure + theta * (phi - closure)
        slope = (1.0 - theta) / sectors + theta * phi_slope  # dM/d(excess)
        return mean, (lo, frac, inside, t_lo, t_hi, t_rows, slope, phi - closure, tier, kind)

    # law of total variance (eq. (14.5))
    xl, xlw = C._legendre01(C.LTV_NODES)
    span = np.maximum(cap, 1e-300)
    grid = span[:, :, None] * xl**2
    tier_all = np.repeat(np.arange(s_count), q_count)
    kind_all = np.tile(np.arange(q_count), s_count)
    expo_l, tok_l = geo.exponent(tier_all, kind_all, grid.reshape(s_count * q_count, -1))
    m_l, cm_l = conditional_mean(expo_l, tier_all, kind_all)
    expo_l, m_l = expo_l.reshape(grid.shape), m_l.reshape(grid.shape)
    meas = w[:, :, None] * np.exp(-expo_l) * (span[:, :, None] * 2.0 * xl * xlw)
    total = meas.sum(axis=(1, 2))
    reached = total > 0
    if not np.all(reached):  # the empty tiers above: M ≡ 1, no measure
        total = np.where(reached, total, 1.0)
        meas = np.where(reached[:, None, None], meas, 0.0)
        m_l = np.where(reached[:, None, None], m_l, 1.0)
    e1 = (meas * m_l).sum(axis=(1, 2)) / total
    e2 = (meas * m_l**2).sum(axis=(1, 2)) / total
    third = skewness * variance**1.5
    raw = third + variance - variance**2 - (e2 - e1**2)
    floored = raw < C.MIN_CONDITIONAL * variance
    conditional = np.where(floored, C.MIN_CONDITIONAL * variance, raw)

    # ---------------- forward: the coverage pairs (eqs. (14.6)–(14.9)) ----------------
    finite_tau = bool(np.isfinite(tau))
    u_cut = np.maximum((tau - g_first) / xi, 0.0) if finite_tau else np.full_like(b, np.inf)
    v_reach = u_cut if alpha == 2.0 else u_cut ** (2.0 / alpha)  # v = r² where the deadline is spent
    capped = v_reach >= cap
    v_cut = np.where(capped, cap, v_reach)
    pairs_out = np.zeros((s_count, q_count))
    zero = np.zeros
    tier, kind = np.nonzero(v_cut > 0.0)
    lam_bar, a_bar, m_bar = zero(s_count), zero(s_count), zero(s_count)
    b_bar, w_bar = zero((s_count, q_count)), zero((s_count, q_count))
    scv_bar = None if scv is None else zero(s_count)
    if tier.size == 0:
        return CellGradient(0.0, pairs_out, lam_bar, b_bar, a_bar, m_bar, w_bar, scv_bar)
    p1 = geo.queue_free(tier, kind, u_cut if finite_tau else None)  # P1_{s,q} (eq. (14.14))
    xr, xrw = C._legendre01(C.RADIAL_NODES)
    cut = v_cut[tier, kind]
    v = cut[:, None] * xr**2
    expo, tok_r = geo.exponent(tier, kind, v)
    quad = 2.0 * xr * xrw
    dens = (lam[tier] * np.pi)[:, None] * np.exp(-expo) * (cut[:, None] * quad)
    mean, cm_r = conditional_mean(expo, tier, kind)
    has = c > 0
    safe = np.where(has, c, 1.0)
    rho = np.where(has, a / safe, 0.0)
    rate = safe / m_serv
    z = C.standard_nodes(skewness, C.LOAD_NODES)
    sd = np.sqrt(conditional)
    spread = (rho * sd)[:, None] * z
    tab = _tables(c, scv, tables)
    n_tab = int(tab["n"])  # type: ignore[arg-type]
    radio, radio_slope = geo.radio(v)  # v^{α/2} = r^α
    slack_raw = tau - xi * radio - g_first[tier, kind][:, None] if finite_tau else np.zeros_like(v)
    if wait_delay is not None and finite_tau:  # (17.25): the tail starts at δ_s; below it F_W = 1 − P^W
        slack_raw = slack_raw - np.asarray(wait_delay, dtype=float)[tier][:, None]
    slack_on = slack_raw > 0
    kappa = np.where(slack_on, slack_raw, 0.0) * rate[tier][:, None]
    on_row = has[tier][:, None]
    loaded = np.where(on_row, mean * rho[tier][:, None], 1.0)
    jn = z.shape[1]
    seed = omega[tier, kind]
    good = dens.sum(axis=1) > 0
    # the load block, forward and reverse, in blocks of pairs (everything it needs is per pair)
    ratio = np.zeros(tier.size)
    num_bar, mass_bar = np.zeros(tier.size), np.zeros(tier.size)
    h_mean = np.empty_like(v)
    loaded_bar = np.zeros_like(v)
    kappa_bar = np.zeros_like(kappa)
    spread_bar = np.zeros((s_count, jn))
    base = (tier * (n_tab + 1)).astype(float)
    step = max(1, C.BLOCK // (v.shape[1] * jn))
    for lo in range(0, tier.size, step):
        hi = min(tier.size, lo + step)
        y_raw = loaded[lo:hi, :, None] + spread[tier[lo:hi], None, :]
        y_in = (y_raw > 0.0) & (y_raw < 1.0)
        y = np.clip(y_raw, 0.0, 1.0)
        if finite_tau:
            pos = y * n_tab + base[lo:hi, None, None]
            idx = pos.astype(np.intp)
            frac = pos - idx
            pw = tab["pw"].take(idx) + frac * tab["pw_slope"].take(idx)  # type: ignore[union-attr]
            ik = 1.0 if tab["ik"] is None else tab["ik"].take(idx) + frac * tab["ik_slope"].take(idx)  # type: ignore[union-attr]
            kap = kappa[lo:hi, :, None]
            expn = np.exp((y - 1.0) * kap * ik)
            big_w = pw * expn
        else:
            big_w = (y >= 1.0).astype(float)
        hm = 1.0 - big_w.mean(axis=2)
        h_mean[lo:hi] = hm
        d = dens[lo:hi]
        mass = d.sum(axis=1)
        num = (d * hm).sum(axis=1)
        ok = good[lo:hi]
        safe_mass = np.where(ok, mass, 1.0)
        ratio[lo:hi] = np.where(ok, num / safe_mass, 0.0)
        # reverse: ratio = num/mass, num = Σ f h, h = 1 − mean_j W
        ratio_bar = seed[lo:hi] * p1[lo:hi]
        nb = np.where(ok, ratio_bar / safe_mass, 0.0)
        num_bar[lo:hi] = nb
        mass_bar[lo:hi] = np.where(ok, -ratio_bar * num / safe_mass**2, 0.0)
        if not finite_tau:
            continue
        wb = (-nb[:, None] * d)[:, :, None] / jn  # ∂/∂W
        e_bar = wb * big_w  # ∂/∂e of pw e^e
        gap = y - 1.0
        y_bar = wb * expn * tab["pw_slope"].take(idx) * n_tab  # type: ignore[union-attr]
        y_bar += e_bar * kap * ik
        kappa_bar[lo:hi] = (e_bar * gap * ik).sum(axis=2)
        if tab["ik"] is not None:
            ik_bar = e_bar * gap * kap
            y_bar += ik_bar * tab["ik_slope"].take(idx) * n_tab  # type: ignore[union-attr]
            if tab["dik"] is not None:
                d_scv = tab["dik"].take(idx) + frac * tab["dik_slope"].take(idx)  # type: ignore[union-attr]
                scv_bar += np.bincount(tier[lo:hi], (ik_bar * d_scv).sum(axis=(1, 2)), s_count)  # type: ignore[operator]
        y_bar *= y_in
        loaded_bar[lo:hi] = y_bar.sum(axis=2)
        np.add.at(spread_bar, tier[lo:hi], y_bar.sum(axis=1))
    pairs_out[tier, kind] = p1 * ratio
    value = float((omega * pairs_out).sum())

    # ---------------- reverse ----------------
    p1_bar = seed * ratio
    dens_bar = num_bar[:, None] * h_mean + mass_bar[:, None]
    loaded_bar = np.where(on_row, loaded_bar, 0.0)
    mean_bar = loaded_bar * rho[tier][:, None]
    rho_bar = np.bincount(tier, (loaded_bar * mean).sum(axis=1), s_count)
    rho_bar += (spread_bar * sd[:, None] * z).sum(axis=1)
    sd_bar = (spread_bar * rho[:, None] * z).sum(axis=1)
    z_bar = spread_bar * (rho * sd)[:, None]
    # κ = c μ max(τ − ξ v − g, 0)
    m_bar += np.bincount(tier, (kappa_bar * -kappa).sum(axis=1), s_count) / m_serv
    v_bar = np.where(slack_on, -kappa_bar * rate[tier][:, None] * xi * radio_slope, 0.0)
    # M(expo) on the radial nodes
    tail_bar = np.zeros_like(tail)
    theta_bar = np.zeros_like(b)
    expo_bar = _mean_vjp(mean_bar, cm_r, tail_bar, theta_bar, dl, tail.shape)
    # density f dv
    lam_bar += np.bincount(tier, (dens_bar * dens).sum(axis=1), s_count) / lam
    expo_bar -= dens_bar * dens
    cut_bar = (dens_bar * dens).sum(axis=1) / cut
    v_bar += geo.exponent_vjp(tok_r, expo_bar)
    cut_bar += (v_bar * xr**2).sum(axis=1)
    cap_bar = np.zeros_like(cap)
    np.add.at(cap_bar, (tier, kind), np.where(capped[tier, kind], cut_bar, 0.0))
    geo.queue_free_vjp(p1_bar)
    # the load law: conditional variance, skewness (nodes z), variance, tail, cap
    cond_bar = sd_bar / (2.0 * sd)
    gam_bar = (z_bar * _standard_nodes_slope(skewness)).sum(axis=1)
    var_bar = np.where(floored, C.MIN_CONDITIONAL * cond_bar, cond_bar * (1.0 - 2.0 * variance))
    third_bar = np.where(floored, 0.0, cond_bar)
    e2_bar = np.where(floored, 0.0, -cond_bar)
    e1_bar = np.where(floored, 0.0, 2.0 * e1 * cond_bar)
    gam_bar += third_bar * variance**1.5
    var_bar += third_bar * 1.5 * skewness * np.sqrt(variance)
    # e1, e2 over the measure
    tot = total[:, None, None]
    m_l_bar = (e1_bar[:, None, None] + 2.0 * m_l * e2_bar[:, None, None]) * meas / tot
    meas_bar = (e1_bar[:, None, None] * (m_l - e1[:, None, None]) + e2_bar[:, None, None] * (m_l**2 - e2[:, None, None])) / tot
    w_bar += (meas_bar * meas).sum(axis=2) / np.where(w > 0, w, np.inf)
    expo_l_bar = -meas_bar * meas
    span_bar = (meas_bar * meas).sum(axis=2) / span
    expo_l_bar = expo_l_bar.reshape(s_count * q_count, -1) + _mean_vjp(
        m_l_bar.reshape(s_count * q_count, -1), cm_l, tail_bar, theta_bar, dl, tail.shape
    )
    v_l_bar = geo.exponent_vjp(tok_l, expo_l_bar)
    span_bar += (v_l_bar.reshape(grid.shape) * xl**2).sum(axis=2)
    cap_bar += np.where(cap > 1e-300, span_bar, 0.0)
    # variance, skewness ← κ_1, κ_2, κ_3
    k1_bar = -2.0 * var_bar * variance / k1
    vg_bar = var_bar / (sectors * k1**2)
    k3_bar = np.where(skew_pos, gam_bar / spread_g / np.sqrt(sectors), 0.0)
    vg_bar += -1.5 * gam_bar * skewness / var_g
    k2_bar = np.where(var_floor, 0.0, vg_bar)
    # tail ← rest, κ_1 (the last column is a copy of the one before)
    tail_bar[:, -2] += tail_bar[:, -1]
    tb = tail_bar[:, :-1]
    rest_bar = tb * e_ell[None, :] / k1[:, None]
    k1_bar -= (tb * tail[:, :-1]).sum(axis=1) / k1
    seg1_bar = np.cumsum(rest_bar, axis=1)  # rest_n = Σ_{i ≥ n} seg1_i
    # κ's ← raw moments
    m2_bar = k2_bar - 3.0 * k1 * k3_bar
    m3_bar = k3_bar
    k1_bar += -2.0 * k1 * k2_bar + k3_bar * (-3.0 * m2 + 6.0 * k1**2)
    seg1_bar += k1_bar[:, None]
    seg2_bar = np.broadcast_to(m2_bar[:, None], seg2.shape)
    seg3_bar = np.broadcast_to(m3_bar[:, None], seg3.shape)
    # segments ← g at the ℓ nodes (exact piecewise integrals)
    ga_bar = ea * (seg1_bar * 1.0 + seg2_bar * (2 * ga + 2 * mm) + seg3_bar * (3 * ga**2 + 6 * mm * ga + 6 * mm**2))
    gb_bar = -(eb * (seg1_bar * 1.0 + seg2_bar * (2 * gb + 2 * mm) + seg3_bar * (3 * gb**2 + 6 * mm * gb + 6 * mm**2)))
    mm_bar = (
        seg1_bar * (ea - eb)
        + seg2_bar * (ea * (2 * ga + 4 * mm) - eb * (2 * gb + 4 * mm))
        + seg3_bar * (ea * (3 * ga**2 + 12 * mm * ga + 18 * mm**2) - eb * (3 * gb**2 + 12 * mm * gb + 18 * mm**2))
    )
    g_bar = np.zeros_like(g)
    g_bar[:, :-1] += ga_bar - mm_bar / dl[None, :]
    g_bar[:, 1:] += gb_bar + mm_bar / dl[None, :]
    # g = ½ Σ_q w V; cap = V at ℓ = RADIAL_L_MAX
    ext_bar = np.zeros_like(extent)
    ext_bar[..., :-1] = 0.5 * w[:, :, None] * g_bar[:, None, :]
    ext_bar[..., -1] = cap_bar
    w_bar += 0.5 * np.einsum("sn,sqn->sq", g_bar, extent[..., :-1])
    geo.extent_vjp(ext_bar)
    # θ = exp(−δ/δ_0), δ_{s,q} = π Σ_t λ_t |b_{t,q} − b_{s,q}|
    delta_bar = -theta_bar * theta_all / C.VORONOI_BAND if C.VORONOI_BAND > 0 else np.zeros_like(b)
    gap = b[:, None, :] - b[None, :, :]  # [t, s, q] = b_{t,q} − b_{s,q}
    lam_bar += np.pi * np.einsum("sq,tsq->t", delta_bar, np.abs(gap))
    sign = np.pi * lam[:, None, None] * np.sign(gap)  # ∂δ_{s,q}/∂b_{t,q} (t ≠ s)
    b_bar += np.einsum("sq,tsq->tq", delta_bar, sign) - delta_bar * sign.sum(axis=0)
    la, ba = geo.finish()
    lam_bar += la
    b_bar += ba
    a_bar += np.where(has, rho_bar / safe, 0.0)
    return CellGradient(value, pairs_out, lam_bar, b_bar, a_bar, m_bar, w_bar, scv_bar)


def _mean_vjp(
    mean_bar: FloatArray, saved: tuple, tail_bar: FloatArray, theta_bar: FloatArray, dl: FloatArray, shape: tuple[int, int]
) -> FloatArray:
    """Adjoint of ``M = c(e) + θ (φ_V(e) − c(e))``, ``c = 1 + e/K``, ``e = tail[lo] frac + tail[lo + 1](1 − frac) − 1``.

    Fills ``tail_bar`` and ``theta_bar``; returns ``expō``.
    """
    lo, frac, inside, t_lo, t_hi, t_rows, slope, gap, tier, kind = saved
    r = mean_bar * slope
    t_rows = np.broadcast_to(t_rows, lo.shape)
    n = shape[1]
    flat = (t_rows * n + lo).ravel()
    tail_bar += np.bincount(flat, (r * frac).ravel(), tail_bar.size).reshape(shape)
    tail_bar += np.bincount(flat + 1, (r * (1.0 - frac)).ravel(), tail_bar.size).reshape(shape)
    pair = tier * theta_bar.shape[1] + kind
    theta_bar += np.bincount(pair, (mean_bar * gap).reshape(pair.size, -1).sum(axis=1), theta_bar.size).reshape(theta_bar.shape)
    return np.where(inside, r * (t_hi - t_lo) / dl.take(lo), 0.0)


def _standard_nodes_slope(skewness: FloatArray) -> FloatArray:
    """``∂z_j/∂γ`` of :func:`~edgeprefix.placement.model.cell.standard_nodes` (0 where ``γ`` is clipped)."""
    gam, table = C._standard_table(C.LOAD_NODES)
    raw = np.asarray(skewness, dtype=float)
    pos = np.clip(raw, 0.0, C.SKEW_MAX) / gam[1]
    lo = np.minimum(np.floor(pos).astype(np.int64), gam.size - 2)
    inside = ((raw > 0.0) & (raw < C.SKEW_MAX))[:, None]
    return np.where(inside, (table[lo + 1] - table[lo]) / gam[1], 0.0)


def _p1_vjp(
    axis: _Axis,
    lam: FloatArray,
    b: FloatArray,
    tier: IntArray,
    kind: IntArray,
    lower: FloatArray,
    upper: FloatArray,
    p1_bar: FloatArray,
    lam_bar: FloatArray,
    b_bar: FloatArray,
) -> None:
    """Adjoint of ``P1 = π λ_s ∫_{b_s}^{upper} e^{−G_q}`` through ``G_q`` (all tiers) and the limits (λ_s's own factor aside).

    ``∂Φ_q(u)/∂b_t = π λ_t Φ_q(max(u, b_t))``, ``∂Φ_q(u)/∂λ_t = −π Ψ_{q,t}(u)`` with
    ``Ψ_{q,t}(u) = G_q(u') + (u' − b_t) Φ_q(u')``, ``u' = max(u, b_t)``, ``G_q(u) = ∫_u^∞ (y − u) e^{−G_q}``.
    """
    s_count = lam.size
    scale = p1_bar * np.pi * lam[tier]  # (P,)
    # the limits
    d_lower = -axis.density(kind, lower)
    d_upper = -axis.density(kind, upper)
    np.add.at(b_bar, (tier, kind), scale * (d_lower - d_upper))
    # through G_q: every tier t
    bt = b[:, kind].T  # (P, T)
    lo = np.maximum(lower[:, None], bt)
    hi = np.maximum(upper[:, None], bt)
    kk = np.repeat(kind[:, None], s_count, axis=1)
    phi_lo, phi_hi = axis.tail(kk.ravel(), lo.ravel()).reshape(lo.shape), axis.tail(kk.ravel(), hi.ravel()).reshape(hi.shape)
    g_lo, g_hi = axis.first_moment(kk.ravel(), lo.ravel()).reshape(lo.shape), axis.first_moment(kk.ravel(), hi.ravel()).reshape(hi.shape)
    psi_lo = g_lo + (lo - bt) * phi_lo
    psi_hi = np.where(np.isfinite(hi), g_hi + np.where(np.isfinite(hi), hi - bt, 0.0) * phi_hi, 0.0)
    lam_bar += -np.pi * (scale[:, None] * (psi_lo - psi_hi)).sum(axis=0)
    contrib = scale[:, None] * np.pi * lam[None, :] * (phi_lo - phi_hi)  # (P, T)
    np.add.at(b_bar, (np.broadcast_to(np.arange(s_count)[None, :], kk.shape), kk), contrib)
