"""Cell-load queue model (docs/model.md §14): the per-node load a request meets.

The mean-field model (eq. (39)) gives every node of tier ``s`` the tier's offered load
``a_s``.  In a PPP the serving regions differ, so node loads differ; a request lands in a
node with probability proportional to its region (size bias), and a far request sits in a
large region.  This module replaces ``F_W`` of eq. (39) by its average over the load of the
request's own node, given the request's type ``q`` and serving distance ``r``:

``P_cov(τ) = Σ_q p_q Σ_s ∫ f_{s,q}(r) E[ h_s(X, τ − ξ r^α − g_{s,q}) | q, r ] dr``  (14.9)

``h_s(x, w) = 1{a_s x < c_s} (1 − P^W(a_s x, c_s) exp(−(c_s − a_s x) w / (1/μ_s)))``  (14.8)

with ``X`` the node's work relative to the tier mean (``E X = 1`` over nodes).

The law of ``X`` comes from a *ray closure* of the node's region (derivation in
docs/model.md §14).  Along a ray from a tier-``s`` node the point at ``v = r²`` belongs to
its type-``q`` region with probability ``p_{s,q}(v) = exp(−L_{s,q}(v))``,
``L_{s,q}(v) = π Σ_t λ_t ρ_{t|s,q}(v)²``, ``ρ_{t|s,q}^α = max(0, r^α + b_{s,q} − b_{t,q})`` (14.1).
The types' extents along a ray are taken comonotone (one uniform ``U = e^{−ℓ}`` per ray:
``V_q(ℓ) = L_{s,q}^{-1}(ℓ)``), so a ray carries the work ``g(ℓ) = ½ Σ_q w_{s,q} V_q(ℓ)``,
``w_{s,q} = Λ p_q / μ_{s,q}`` (14.2), and a node's work is that of ``K`` independent rays (``K``
sectors of angle ``2π/K``).  Hence, with ``κ_n`` the cumulants of ``g`` under ``ℓ ~ Exp(1)``:

* mean ``2π κ_1 = a_s`` (exact), variance ``v_s = κ_2/(K κ_1²)``, skewness ``γ_s = κ_3/κ_2^{3/2}/√K`` (14.3);
* a request of type ``q`` at ``v`` certifies ``U ≤ p_{s,q}(v)`` on its ray:
  ``M_{s,q}(v) = E[X | q, v] = 1 + (T(L_{s,q}(v)) e^{L_{s,q}(v)}/κ_1 − 1)/K``,
  ``T(ℓ) = ∫_ℓ^∞ g e^{−ℓ'} dℓ'`` (14.4);
* the conditional variance is the rest of the size-biased variance (law of total variance):
  ``v^c_s = κ_3(X) + v_s − v_s² − Var_req(M)`` (14.5); the conditional law is a
  Pearson III (shifted Gamma) law with mean ``M``, variance ``v^c_s``, skewness ``γ_s`` (14.6).

``K = 3.5`` is the Poisson–Voronoi case (one tier, no bias): there ``g ~ Exp``, so the closure
gives the Gamma(3.5) cell area used by :mod:`edgeprefix.placement.simulation.correction`.

Everything is a deterministic, smooth function of ``(λ_s, b_{s,q}, a_s, c_s, 1/μ_s, w_{s,q})``
computed by 1-D quadratures (no sampling), vectorised over tiers, types and nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt
from scipy.special import gammaincinv, ndtri, roots_legendre

from edgeprefix.placement.model.queueing import erlang_c

FloatArray = npt.NDArray[np.float64]
QUEUE_MODELS = ("meanfield", "cell")
SECTORS = 3.5  # K: independent sectors of a region (the Poisson–Voronoi Gamma shape)
L_MAX = 36.0  # ℓ beyond which e^{−ℓ} < 2.4e-16
RAY_NODES = 160  # trapezoid nodes of the ℓ axis
RADIAL_NODES = 16  # Gauss–Legendre nodes in v = r² on [0, v_cut] per (s, q)
LOAD_NODES = 24  # equal-probability nodes of the conditional load law
WAIT_TABLE = 257  # nodes of the per-tier P^W(ρ) table
MIN_CONDITIONAL = 0.25  # floor of v^c_s as a share of v_s


def check_queue_model(queue_model: str) -> str:
    """``queue_model`` must be ``meanfield`` (eq. (39)) or ``cell`` (docs/model.md §14)."""
    if queue_model not in QUEUE_MODELS:
        raise ValueError(f"queue_model: unknown {queue_model!r} (valid: {list(QUEUE_MODELS)})")
    return queue_model


@lru_cache(maxsize=4)
def _ray_axis(nodes: int = RAY_NODES) -> tuple[FloatArray, FloatArray]:
    """ℓ nodes (dense near 0 where e^{−ℓ} lives) and trapezoid weights of ``∫ · e^{−ℓ} dℓ``."""
    x = np.linspace(0.0, 1.0, nodes)
    ell = L_MAX * x**2
    trap = np.empty_like(ell)
    d = np.diff(ell)
    trap[0], trap[-1] = d[0] / 2, d[-1] / 2
    trap[1:-1] = (d[:-1] + d[1:]) / 2
    return ell, trap * np.exp(-ell)


@lru_cache(maxsize=4)
def _legendre01(nodes: int) -> tuple[FloatArray, FloatArray]:
    x, w = roots_legendre(nodes)
    return 0.5 * (x + 1.0), 0.5 * w


@lru_cache(maxsize=4)
def _probability_levels(nodes: int) -> FloatArray:
    return (np.arange(nodes) + 0.5) / nodes


def void_exponent(v: FloatArray, lam: FloatArray, delta: FloatArray, alpha: float) -> FloatArray:
    """``L_{s,q}(v) = π Σ_t λ_t ρ_{t|s,q}(v)²`` (eq. (14.1)).

    ``v`` broadcasts against ``delta[..., None]``; ``delta`` ``(T, ...)`` is ``b_{s,q} − b_{t,q}``
    (cost offsets over ``ξ``); the sum runs over the leading tier axis ``t``.
    """
    if alpha == 2.0:
        rho2 = np.maximum(v + delta[..., None], 0.0)
    else:
        rho2 = np.maximum(v ** (alpha / 2.0) + delta[..., None], 0.0) ** (2.0 / alpha)
    return np.pi * np.tensordot(lam, rho2, axes=(0, 0))


def _invert_rows(ell: FloatArray, table: FloatArray, v: FloatArray) -> FloatArray:
    """Row-wise inverse of increasing ``table[q, :]`` (values at ``v``) at the points ``ell``;
    0 below the row's first value (the region does not reach the nucleus)."""
    rows, n = table.shape
    top = float(max(ell[-1], table.max())) + 1.0
    offset = np.arange(rows)[:, None] * (2.0 * top)
    flat = (np.minimum(table, top) + offset).ravel()
    flat = np.maximum.accumulate(flat)  # guard against round-off non-monotonicity
    queries = (ell[None, :] + offset).ravel()
    idx = np.clip(np.searchsorted(flat, queries, side="right"), 1, rows * n - 1)
    idx = np.clip(idx, (np.arange(rows)[:, None] * n + 1).repeat(ell.size, 1).ravel(),
                  (np.arange(rows)[:, None] * n + n - 1).repeat(ell.size, 1).ravel())
    lo, hi = flat[idx - 1], flat[idx]
    vv = np.tile(v, rows)
    frac = np.clip((queries - lo) / np.where(hi > lo, hi - lo, 1.0), 0.0, 1.0)
    out = (vv[idx - 1] + frac * (vv[idx] - vv[idx - 1])).reshape(rows, ell.size)
    return np.where(ell[None, :] >= table[:, :1], out, 0.0)


@dataclass(frozen=True)
class CellLoad:
    """Per-tier load law of the cell model for the active tiers (arrays ``(S,)``).

    Attributes
    ----------
    variance : ``v_s`` node-level variance of ``X`` (eq. (14.3)).
    skewness : ``γ_s`` (eq. (14.3)).
    conditional_variance : ``v^c_s`` (eq. (14.5)).
    ray_mean : ``κ_1`` of the ray work; ``tail`` ``T(ℓ)`` on ``ell`` ``(S, N)`` (eq. (14.4)).
    """

    lam: FloatArray
    offsets: FloatArray  # b_{s,q} = β_{s,q}/ξ, (S, Q)
    alpha: float
    ell: FloatArray
    tail: FloatArray
    ray_mean: FloatArray
    variance: FloatArray
    skewness: FloatArray
    conditional_variance: FloatArray
    sectors: float = SECTORS

    def conditional_mean(self, v: FloatArray) -> FloatArray:
        """``M_{s,q}(v)`` (eq. (14.4)) at ``v`` ``(S, Q, R)`` (squared distances)."""
        lam, b = self.lam, self.offsets
        delta = b[None, :, :] - b[:, None, :]  # [t, s, q] = b_{s,q} − b_{t,q}
        expo = void_exponent(v, lam, delta, self.alpha)  # (S, Q, R)
        out = np.empty_like(expo)
        for s in range(lam.size):  # one shared ℓ axis per tier: np.interp is the fast path
            t_val = np.interp(expo[s], self.ell, self.tail[s])
            with np.errstate(over="ignore", invalid="ignore"):
                out[s] = 1.0 + (np.where(expo[s] < L_MAX, t_val * np.exp(np.minimum(expo[s], L_MAX)), self.ray_mean[s])
                                / self.ray_mean[s] - 1.0) / self.sectors
        return out


def cell_load(lam: FloatArray, offsets: FloatArray, alpha: float, work: FloatArray, *, sectors: float = SECTORS) -> CellLoad:
    """The load law of every active tier (eqs. (14.1)–(14.5)).

    Parameters
    ----------
    lam : ``λ_s`` of the active tiers ``(S,)``.
    offsets : ``b_{s,q} = β_{s,q}/ξ`` ``(S, Q)``.
    alpha : radio exponent ``α``.
    work : ``w_{s,q} = Λ p_q / μ_{s,q}`` ``(S, Q)`` (work per unit area of type ``q`` at tier ``s``).
    """
    lam = np.asarray(lam, dtype=float)
    b = np.asarray(offsets, dtype=float)
    w = np.asarray(work, dtype=float)
    s_count, q_count = b.shape
    ell, weight = _ray_axis()
    x, xw = _legendre01(48)
    delta = b[None, :, :] - b[:, None, :]  # [t, s, q]
    vmax = L_MAX / (np.pi * lam)  # the own tier alone makes L ≥ 36 beyond it
    grid = vmax[:, None] * x[None, :] ** 2  # (S, V) Gauss–Legendre nodes in v
    grid_w = vmax[:, None] * 2.0 * x[None, :] * xw[None, :]
    expo = void_exponent(grid[:, None, :], lam, delta, alpha)  # (S, Q, V), increasing in v
    # ray work g(ℓ) = ½ Σ_q w V_q(ℓ); V_q from a fine table of L (inverse by interpolation)
    fine = np.linspace(0.0, 1.0, 257) ** 2
    g = np.empty((s_count, ell.size))
    for s in range(s_count):
        vf = vmax[s] * fine
        table = void_exponent(vf[None, :], lam, delta[:, s, :], alpha)  # (Q, F)
        g[s] = 0.5 * (w[s][:, None] * _invert_rows(ell, table, vf)).sum(axis=0)
    k1 = g @ weight
    k2 = (g**2) @ weight - k1**2
    k3 = (g**3) @ weight - 3.0 * k1 * ((g**2) @ weight) + 2.0 * k1**3
    var_g = np.maximum(k2, 1e-300)
    variance = var_g / (sectors * k1**2)
    skewness = np.maximum(k3, 0.0) / var_g**1.5 / np.sqrt(sectors)
    # T(ℓ) = ∫_ℓ^∞ g e^{−ℓ'} dℓ' by the trapezoid rule on the same axis
    integrand = g * np.exp(-ell)[None, :]
    pieces = 0.5 * (integrand[:, 1:] + integrand[:, :-1]) * np.diff(ell)[None, :]
    tail = np.concatenate([np.cumsum(pieces[:, ::-1], axis=1)[:, ::-1], np.zeros((s_count, 1))], axis=1)
    tail *= (k1 / np.where(tail[:, 0] > 0, tail[:, 0], 1.0))[:, None]  # T(0) = κ_1 exactly
    law = CellLoad(lam, b, float(alpha), ell, tail, k1, variance, skewness, variance, sectors)
    # law of total variance over the size-biased request measure w_{s,q} p_{s,q}(v) dv
    m = law.conditional_mean(grid[:, None, :].repeat(q_count, axis=1))
    measure = w[:, :, None] * np.exp(-expo) * grid_w[:, None, :]
    total = measure.sum(axis=(1, 2))
    e1 = (measure * m).sum(axis=(1, 2)) / total
    e2 = (measure * m**2).sum(axis=(1, 2)) / total
    third = skewness * variance**1.5
    conditional = np.maximum(third + variance - variance**2 - (e2 - e1**2), MIN_CONDITIONAL * variance)
    return CellLoad(lam, b, float(alpha), ell, tail, k1, variance, skewness, conditional, sectors)


def standard_nodes(skewness: FloatArray, nodes: int = LOAD_NODES) -> FloatArray:
    """Equal-probability nodes of the standardised Pearson III law with skewness ``γ_s`` ``(S, J)``.

    ``Z = (G − k)/√k`` with ``G ~ Gamma(k)``, ``k = 4/γ²`` (the normal law as ``γ → 0``).
    """
    u = _probability_levels(nodes)
    gam = np.asarray(skewness, dtype=float)
    small = gam < 1e-3
    k = 4.0 / np.where(small, 1.0, gam) ** 2
    z = (gammaincinv(k[:, None], u[None, :]) - k[:, None]) / np.sqrt(k)[:, None]
    return np.where(small[:, None], ndtri(u)[None, :], z)


def wait_probability_table(servers: FloatArray, nodes: int = WAIT_TABLE) -> tuple[FloatArray, FloatArray]:
    """``P^W(ρ c_s, c_s)`` on a ``ρ`` grid dense near 1, ``(S, N)``, and the grid ``(N,)``."""
    x = np.linspace(0.0, 1.0, nodes)
    rho = 1.0 - (1.0 - x) ** 2  # 0 … 1 (1 excluded below)
    rho = rho[:-1]
    c = np.asarray(servers, dtype=float)
    table = np.asarray(erlang_c(rho[None, :] * c[:, None], np.repeat(c[:, None], rho.size, axis=1)), dtype=float)
    return np.concatenate([table, np.ones((c.size, 1))], axis=1), np.append(rho, 1.0)


def _wait_probability(rho: FloatArray, table: FloatArray) -> FloatArray:
    """Linear interpolation of the table at ``ρ`` ``(S, ...)`` (the grid is analytic: no search)."""
    n = table.shape[1] - 1
    pos = n * (1.0 - np.sqrt(np.clip(1.0 - rho, 0.0, 1.0)))
    lo = np.clip(np.floor(pos).astype(np.int64), 0, n - 1)
    frac = pos - lo
    rows = np.arange(table.shape[0]).reshape((-1,) + (1,) * (rho.ndim - 1))
    return table[rows, lo] * (1.0 - frac) + table[rows, lo + 1] * frac


def cell_coverage_pairs(
    law: CellLoad,
    tau: float,
    *,
    radio_scale: float,
    first_token: FloatArray,
    servers: FloatArray,
    offered_load: FloatArray,
    mean_service: FloatArray,
) -> FloatArray:
    """``P(T ≤ τ, s | q)`` of the cell model (eq. (14.9)) for the active tiers, ``(S, Q)``.

    ``first_token`` is ``g_{s,q}``; ``offered_load`` ``a_s``; ``mean_service`` ``1/μ_s``; ``τ = inf``
    gives the share of requests served by stable nodes.
    """
    lam, b, alpha, xi = law.lam, law.offsets, law.alpha, radio_scale
    s_count, q_count = b.shape
    vmax = L_MAX / (np.pi * lam)
    if np.isfinite(tau):
        u_cut = np.maximum((tau - first_token) / xi, 0.0)
        v_cut = np.minimum(u_cut ** (2.0 / alpha), vmax[:, None])
    else:
        v_cut = np.repeat(vmax[:, None], q_count, axis=1)
    x, xw = _legendre01(RADIAL_NODES)
    v = v_cut[:, :, None] * x**2  # (S, Q, R); dv = 2 v_cut x dx
    dv = v_cut[:, :, None] * 2.0 * x * xw
    delta = b[None, :, :] - b[:, None, :]
    density = lam[:, None, None] * np.pi * np.exp(-void_exponent(v, lam, delta, alpha))  # f_{s,q} in v
    mean = law.conditional_mean(v)  # (S, Q, R)
    z = standard_nodes(law.skewness)  # (S, J)
    sd = np.sqrt(law.conditional_variance)
    load = np.maximum(mean[..., None] + (sd[:, None] * z)[:, None, None, :], 0.0)  # X, (S, Q, R, J)
    rho = load * (offered_load / servers)[:, None, None, None]
    table, _ = wait_probability_table(servers)
    pw = _wait_probability(rho, table)
    stable = rho < 1.0
    if np.isfinite(tau):
        slack = np.maximum(tau - xi * v ** (alpha / 2.0) - first_token[:, :, None], 0.0)
        decay = (1.0 - rho) * (servers / mean_service)[:, None, None, None]
        with np.errstate(over="ignore"):
            h = 1.0 - pw * np.exp(-decay * slack[..., None])
    else:
        h = np.ones_like(rho)
    h = np.where(stable, h, 0.0).mean(axis=3)
    return (density * h * dv).sum(axis=2)
