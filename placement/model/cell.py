"""Cell-load queue model (docs/model.md §14): the per-node load a request meets.

The mean-field model (eq. (39)) gives every node of tier ``s`` the tier's offered load
``a_s``.  In a PPP the serving regions differ, so node loads differ; a request lands in a
node with probability proportional to its region (size bias), and a far request sits in a
large region.  This module replaces ``F_W`` of eq. (39) by its average over the load of the
request's own node, given the request's type ``q`` and serving distance ``r``:

``P_cov(τ) = Σ_q p_q Σ_s ∫ f_{s,q}(r) E[ h_s(X, τ − ξ r^α − g_{s,q}) | q, r ] dr``  (14.8)–(14.9)

``h_s(x, w) = 1{a_s x < c_s} (1 − P^W(a_s x, c_s) exp(−(c_s − a_s x) w / (1/μ_s)))``  (14.7)

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

With ``K = 3.5`` the closure gives the Poisson–Voronoi case exactly (one tier, no bias: ``g ~ Exp``,
so ``X ~ Gamma(3.5)``, the law of :mod:`edgeprefix.placement.simulation.correction`); under biased
routing the closure over-states the conditional mean of far requests, and ``K = 3.85`` (one
constant, fitted to the network simulation, docs/model.md §14) removes most of that.

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
SECTORS = 3.85  # K: independent sectors of a region (fitted; 3.5 reproduces the Poisson–Voronoi Gamma shape, docs/model.md §14)
L_MAX = 36.0  # ℓ beyond which e^{−ℓ} < 2.4e-16
RAY_NODES = 32  # nodes of the ℓ axis (g is integrated exactly between them)
RADIAL_NODES = 24  # Gauss–Legendre nodes in v = r² on [0, v_cut] per (s, q)
RADIAL_L_MAX = 20.0  # the radial integral stops where e^{−L} < 2.1e-9
LTV_NODES = 10  # nodes in v of the law-of-total-variance integral
LOAD_NODES = 16  # equal-probability nodes of the conditional load law
WAIT_TABLE = 257  # nodes of the per-tier P^W(ρ) table
MIN_CONDITIONAL = 0.25  # floor of v^c_s as a share of v_s
SKEW_MAX = 12.0  # skewness of the load law is capped here (node nodes tabulated on [0, SKEW_MAX])
SKEW_GRID = 481


# The router whose delivered coverage each queue model predicts (docs/model.md §14): the mean-field
# coverage is what a router that sees every node's own queue delivers (per-node balancing evens the
# loads), the cell model what Theorem 1's tier-level rule delivers.
ROUTER_OF_QUEUE_MODEL = {"meanfield": "online", "cell": "tier"}
ROUTER_DESCRIPTION = {
    "online": "a router that sees each node's own queue (fresh per-node telemetry, docs/model.md §11)",
    "tier": "the tier-level rule of Theorem 1 (each tier's mean delay, docs/model.md §6)",
}


def check_queue_model(queue_model: str) -> str:
    """``queue_model`` must be ``meanfield`` (eq. (39)) or ``cell`` (docs/model.md §14)."""
    if queue_model not in QUEUE_MODELS:
        raise ValueError(f"queue_model: unknown {queue_model!r} (valid: {list(QUEUE_MODELS)})")
    return queue_model


@lru_cache(maxsize=4)
def _ray_axis(nodes: int = RAY_NODES) -> FloatArray:
    """ℓ nodes on ``[0, L_MAX]``, dense near 0 where ``e^{−ℓ}`` lives."""
    return L_MAX * np.linspace(0.0, 1.0, nodes) ** 2


@lru_cache(maxsize=4)
def _legendre01(nodes: int) -> tuple[FloatArray, FloatArray]:
    x, w = roots_legendre(nodes)
    return 0.5 * (x + 1.0), 0.5 * w


@lru_cache(maxsize=4)
def _probability_levels(nodes: int) -> FloatArray:
    return (np.arange(nodes) + 0.5) / nodes


def void_exponent(v: FloatArray, lam: FloatArray, delta: FloatArray, alpha: float) -> FloatArray:
    """``L_{s,q}(v) = π Σ_t λ_t ρ_{t|s,q}(v)²`` (eq. (14.1)).

    ``delta`` ``(..., T)`` holds ``b_{s,q} − b_{t,q}`` (cost offsets over ``ξ``) on its last axis;
    ``v`` ``(..., R)`` the squared distances, with the same leading axes.  Returns ``(..., R)``.
    """
    rho2 = (v[..., None] if alpha == 2.0 else v[..., None] ** (alpha / 2.0)) + delta[..., None, :]
    np.maximum(rho2, 0.0, out=rho2)  # in place: these arrays are large, a fresh one costs page faults
    if alpha != 2.0:
        np.power(rho2, 2.0 / alpha, out=rho2)
    return rho2 @ (np.pi * lam)


def _offsets(b: FloatArray) -> FloatArray:
    """``Δ[s, q, t] = b_{s,q} − b_{t,q}``."""
    return (b.T[:, :, None] - b.T[:, None, :]).transpose(1, 0, 2)


def _ray_extent_alpha2(lam: FloatArray, delta: FloatArray, ell: FloatArray) -> FloatArray:
    """α = 2: exact inverse ``V_q(ℓ) = L_{s,q}^{-1}(ℓ)`` of the piecewise-linear ``L``, ``(S, Q, N)``.

    ``L(v) = π Σ_t λ_t max(v − c_t, 0)`` with ``c_t = −Δ_t`` sorted; at ``x_j = max(c_(j), 0)`` the
    tiers ``i ≤ max(j, j_0)`` have started (``j_0``: the last ``c ≤ 0``), so the slope is the
    cumulative ``K_j`` and ``L_j = x_j K_j − Σ_{i started} π λ_(i) c_(i)``; on ``[x_j, x_{j+1}]``
    ``L = L_j + K_j (v − x_j)``.  0 where ``ℓ < L(0)`` (the region misses the nucleus).
    """
    s_count, q_count, t_count = delta.shape
    c = -delta
    order = np.argsort(c, axis=2)
    cs = np.take_along_axis(c, order, axis=2)
    ls = (np.pi * lam)[order]
    x = np.maximum(cs, 0.0)
    started = np.maximum(np.arange(t_count), (cs <= 0.0).sum(axis=2, keepdims=True) - 1)  # max(j, j_0)
    slope = np.take_along_axis(np.cumsum(ls, axis=2), started, axis=2)
    level = x * slope - np.take_along_axis(np.cumsum(ls * cs, axis=2), started, axis=2)
    rows = s_count * q_count
    top = float(max(ell[-1], level.max())) + 1.0
    offset = (np.arange(rows) * 2.0 * top)[:, None]
    flat = np.maximum.accumulate((np.minimum(level.reshape(rows, t_count), top) + offset).ravel())
    j = np.searchsorted(flat, (ell[None, :] + offset).ravel(), side="right") - 1
    base = np.repeat(np.arange(rows) * t_count, ell.size)
    j = np.clip(j, base, base + t_count - 1)
    out = x.reshape(-1)[j] + (np.tile(ell, rows) - level.reshape(-1)[j]) / slope.reshape(-1)[j]
    return np.where(ell >= level[..., :1], out.reshape(s_count, q_count, ell.size), 0.0)


def _ray_extent_table(lam: FloatArray, delta: FloatArray, alpha: float, ell: FloatArray, vmax: FloatArray) -> FloatArray:
    """Any α: the inverse of ``L`` by linear interpolation in a table of 129 values per row."""
    s_count, q_count, _ = delta.shape
    grid = vmax[:, None, None] * np.linspace(0.0, 1.0, 129) ** 2 * np.ones((1, q_count, 1))  # (S, Q, F)
    table = void_exponent(grid, lam, delta, alpha).reshape(s_count * q_count, -1)
    rows, n = table.shape
    top = float(max(ell[-1], table.max())) + 1.0
    offset = (np.arange(rows) * 2.0 * top)[:, None]
    flat = np.maximum.accumulate((np.minimum(table, top) + offset).ravel())
    queries = (ell[None, :] + offset).ravel()
    base = np.repeat(np.arange(rows) * n, ell.size)
    idx = np.clip(np.searchsorted(flat, queries, side="right"), base + 1, base + n - 1)
    lo, hi = flat[idx - 1], flat[idx]
    vv = grid.reshape(-1)
    frac = np.clip((queries - lo) / np.where(hi > lo, hi - lo, 1.0), 0.0, 1.0)
    out = (vv[idx - 1] + frac * (vv[idx] - vv[idx - 1])).reshape(s_count, q_count, ell.size)
    return np.where(ell >= table.reshape(s_count, q_count, n)[..., :1], out, 0.0)


@dataclass(frozen=True)
class CellLoad:
    """Per-tier load law of the cell model for the active tiers (arrays ``(S,)``).

    Attributes
    ----------
    variance : ``v_s`` node-level variance of ``X`` (eq. (14.3)).
    skewness : ``γ_s`` (eq. (14.3)).
    conditional_variance : ``v^c_s`` (eq. (14.5)).
    ray_mean : ``κ_1`` of the ray work; ``tail`` ``T(ℓ) e^ℓ / κ_1 = E[g | ℓ' ≥ ℓ]/κ_1`` on ``ell`` ``(S, N)`` (eq. (14.4)).
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
    request_mean: FloatArray | None = None  # E_req[M] = E[W²]/a_s² implied by (14.4) (a diagnostic of the closure)
    radial_cap: FloatArray | None = None  # v where L_{s,q}(v) = RADIAL_L_MAX, (S, Q): the radial integral stops there

    def conditional_mean_from_exponent(self, expo: FloatArray, tier: npt.NDArray[np.int64]) -> FloatArray:
        """``M`` (eq. (14.4)) from ``L = expo`` ``(P, R)`` for rows of tier ``tier`` ``(P,)``."""
        # the ℓ nodes are L_MAX x² on a uniform x grid: the cell of ℓ is found without a search
        n = self.ell.size - 1
        pos = np.sqrt(np.clip(expo, 0.0, L_MAX) / L_MAX) * n
        lo = np.minimum(pos.astype(np.int64), n - 1)
        frac = (self.ell.take(lo + 1) - np.minimum(expo, L_MAX)) / np.diff(self.ell).take(lo)
        flat = (tier * (n + 1)).reshape((-1,) + (1,) * (expo.ndim - 1)) + lo
        ratio = self.tail.take(flat) * frac + self.tail.take(flat + 1) * (1.0 - frac)  # E[g | ℓ' ≥ ℓ] / κ_1
        return 1.0 + (ratio - 1.0) / self.sectors

    def conditional_mean(self, v: FloatArray) -> FloatArray:
        """``M_{s,q}(v)`` (eq. (14.4)) at squared distances ``v`` ``(S, Q, R)``."""
        s_count, q_count, r_count = v.shape
        expo = void_exponent(v, self.lam, _offsets(self.offsets), self.alpha).reshape(s_count * q_count, r_count)
        tier = np.repeat(np.arange(s_count), q_count)
        return self.conditional_mean_from_exponent(expo, tier).reshape(s_count, q_count, r_count)


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
    ell = _ray_axis()
    delta = _offsets(b)  # (S, Q, T)
    vmax = L_MAX / (np.pi * lam)  # the own tier alone makes L ≥ 36 beyond it
    queries = np.append(ell, RADIAL_L_MAX)
    if alpha == 2.0:
        extent = _ray_extent_alpha2(lam, delta, queries)
    else:
        extent = _ray_extent_table(lam, delta, alpha, queries, vmax)
    extent, cap = extent[..., :-1], extent[..., -1]
    g = 0.5 * np.einsum("sq,sqn->sn", w, extent)  # ray work g(ℓ)
    # g is piecewise linear between the ℓ nodes (exactly so between kinks at α = 2): integrate
    # g^n e^{−ℓ} exactly on each segment, −e^{−ℓ} (g^n + n m g^{n−1} + … + n! m^n) with slope m
    m = np.diff(g, axis=1) / np.diff(ell)[None, :]
    ea, eb = np.exp(-ell[:-1])[None, :], np.exp(-ell[1:])[None, :]
    ga, gb = g[:, :-1], g[:, 1:]
    seg1 = ea * (ga + m) - eb * (gb + m)
    seg2 = ea * (ga**2 + 2 * m * ga + 2 * m**2) - eb * (gb**2 + 2 * m * gb + 2 * m**2)
    seg3 = ea * (ga**3 + 3 * m * ga**2 + 6 * m**2 * ga + 6 * m**3) - eb * (gb**3 + 3 * m * gb**2 + 6 * m**2 * gb + 6 * m**3)
    k1 = seg1.sum(axis=1)
    m2 = seg2.sum(axis=1)
    k2 = m2 - k1**2
    k3 = seg3.sum(axis=1) - 3.0 * k1 * m2 + 2.0 * k1**3
    var_g = np.maximum(k2, 1e-300)
    variance = var_g / (sectors * k1**2)
    skewness = np.maximum(k3, 0.0) / var_g**1.5 / np.sqrt(sectors)
    # E[g | ℓ' ≥ ℓ]/κ_1 = e^ℓ T(ℓ)/κ_1 with T(ℓ_i) = Σ_{segments ≥ i}; held flat beyond the last node
    tail = np.concatenate([np.cumsum(seg1[:, ::-1], axis=1)[:, ::-1], np.zeros((s_count, 1))], axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        tail = tail * np.exp(ell)[None, :] / k1[:, None]
    tail[:, -1] = tail[:, -2]
    law = CellLoad(lam, b, float(alpha), ell, tail, k1, variance, skewness, variance, sectors)
    # law of total variance over the size-biased request measure w_{s,q} p_{s,q}(v) dv
    x, xw = _legendre01(LTV_NODES)
    span = np.maximum(cap, 1e-300)[:, :, None]  # each pair's own range, up to L = RADIAL_L_MAX
    grid = span * x**2  # (S, Q, V)
    expo = void_exponent(grid, lam, delta, alpha)
    m = law.conditional_mean_from_exponent(expo.reshape(s_count * q_count, -1), np.repeat(np.arange(s_count), q_count))
    m = m.reshape(expo.shape)
    measure = w[:, :, None] * np.exp(-expo) * (span * 2.0 * x * xw)
    total = measure.sum(axis=(1, 2))
    e1 = (measure * m).sum(axis=(1, 2)) / total
    e2 = (measure * m**2).sum(axis=(1, 2)) / total
    third = skewness * variance**1.5
    conditional = np.maximum(third + variance - variance**2 - (e2 - e1**2), MIN_CONDITIONAL * variance)
    return CellLoad(lam, b, float(alpha), ell, tail, k1, variance, skewness, conditional, sectors, e1, cap)


@lru_cache(maxsize=2)
def _standard_table(nodes: int) -> tuple[FloatArray, FloatArray]:
    """Equal-probability nodes of the standardised Pearson III law on a grid of skewness ``γ``."""
    u = _probability_levels(nodes)
    gam = np.linspace(0.0, SKEW_MAX, SKEW_GRID)
    k = 4.0 / np.maximum(gam, 1e-12) ** 2
    with np.errstate(invalid="ignore"):
        z = (gammaincinv(k[1:, None], u[None, :]) - k[1:, None]) / np.sqrt(k[1:, None])
    table = np.vstack([ndtri(u)[None, :], z])
    table -= table.mean(axis=1, keepdims=True)  # the discrete law keeps mean 0 and variance 1 exactly
    table /= table.std(axis=1, keepdims=True)
    table.setflags(write=False)
    return gam, table


def standard_nodes(skewness: FloatArray, nodes: int = LOAD_NODES) -> FloatArray:
    """Equal-probability nodes of the standardised Pearson III law with skewness ``γ_s`` ``(S, J)``.

    ``Z = (G − k)/√k`` with ``G ~ Gamma(k)``, ``k = 4/γ²`` (the normal law at ``γ = 0``); linear
    interpolation in ``γ`` in a table computed once (``γ`` capped at ``SKEW_MAX``); each row is
    re-centred and re-scaled so that the ``J`` nodes have mean 0 and variance 1.
    """
    gam, table = _standard_table(nodes)
    pos = np.clip(np.asarray(skewness, dtype=float), 0.0, SKEW_MAX) / gam[1]
    lo = np.minimum(np.floor(pos).astype(np.int64), gam.size - 2)
    frac = (pos - lo)[:, None]
    return table[lo] * (1.0 - frac) + table[lo + 1] * frac


def wait_probability_table(servers: FloatArray, nodes: int = WAIT_TABLE) -> tuple[FloatArray, FloatArray]:
    """``P^W(ρ c_s, c_s)`` on a ``ρ`` grid dense near 1 (``(S, N)``, 1 at ``ρ = 1``) and the grid ``(N,)``."""
    x = np.linspace(0.0, 1.0, nodes)
    rho = 1.0 - (1.0 - x[:-1]) ** 2
    c = np.asarray(servers, dtype=float)
    table = np.asarray(erlang_c(rho[None, :] * c[:, None], np.repeat(c[:, None], rho.size, axis=1)), dtype=float)
    return np.concatenate([table, np.ones((c.size, 1))], axis=1), np.append(rho, 1.0)


def _wait_probability(rho: FloatArray, row: FloatArray) -> FloatArray:
    """Linear interpolation in one tier's ``P^W`` table; its ρ grid ``1 − (1 − x)²`` is uniform in ``x``."""
    n = row.size - 1
    pos = (1.0 - np.sqrt(np.clip(1.0 - rho, 0.0, 1.0))) * n
    lo = np.minimum(pos.astype(np.int64), n - 1)
    frac = pos - lo
    return row.take(lo) * (1.0 - frac) + row.take(lo + 1) * frac


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
    """``P(T ≤ τ, s | q)`` of the cell model (eq. (14.8)) for the active tiers, ``(S, Q)``.

    ``first_token`` is ``g_{s,q}``; ``offered_load`` ``a_s``; ``mean_service`` ``1/μ_s``; ``τ = inf``
    gives the share of requests served by stable nodes.  Pairs whose deadline is already
    spent (``g_{s,q} ≥ τ``) contribute 0 and are skipped.
    """
    lam, b, alpha, xi = law.lam, law.offsets, law.alpha, radio_scale
    s_count, q_count = b.shape
    # beyond L_{s,q}(v) = RADIAL_L_MAX (e^{−20} = 2e-9) nothing is left to integrate
    v_cap = law.radial_cap if law.radial_cap is not None else np.repeat((RADIAL_L_MAX / (np.pi * lam))[:, None], q_count, axis=1)
    if np.isfinite(tau):
        u_cut = np.maximum((tau - first_token) / xi, 0.0)
        v_cut = np.minimum(u_cut ** (2.0 / alpha), v_cap)
    else:
        v_cut = v_cap
    out = np.zeros((s_count, q_count))
    tier, kind = np.nonzero(v_cut > 0.0)
    if tier.size == 0:
        return out
    x, xw = _legendre01(RADIAL_NODES)
    cut = v_cut[tier, kind][:, None]
    v = cut * x**2  # (P, R); dv = 2 v_cut x dx
    delta = b[tier, kind][:, None] - b[:, kind].T  # (P, T)
    expo = void_exponent(v, lam, delta, alpha)
    density = (lam[tier] * np.pi)[:, None] * np.exp(-expo) * (cut * 2.0 * x * xw)  # f_{s,q}(v) dv
    mean = law.conditional_mean_from_exponent(expo, tier)  # (P, R)
    z = standard_nodes(law.skewness)  # (S, J)
    sd = np.sqrt(law.conditional_variance)
    safe = np.where(servers > 0, servers, 1.0)
    load_ratio = np.where(servers > 0, offered_load / safe, np.inf)  # ρ_s
    rate = safe / mean_service  # c_s μ_s
    table, grid = wait_probability_table(servers)
    if np.isfinite(tau):
        slack = np.maximum(tau - xi * v ** (alpha / 2.0) - first_token[tier, kind][:, None], 0.0)
    h_mean = np.empty_like(v)
    bounds = np.searchsorted(tier, np.arange(s_count + 1))  # np.nonzero sorts the pairs by tier
    for s in range(s_count):  # one tier at a time: (pairs, R, J) blocks stay in cache
        lo, hi = bounds[s], bounds[s + 1]
        if hi == lo:
            continue
        rho = mean[lo:hi, :, None] + sd[s] * z[s]  # X
        np.maximum(rho, 0.0, out=rho)
        rho *= load_ratio[s]  # ρ_s X
        if np.isfinite(tau):
            h = np.subtract(1.0, rho)
            h *= rate[s] * slack[lo:hi, :, None]  # (c − aX) μ w
            np.negative(h, out=h)
            np.exp(h, out=h)
            h *= _wait_probability(rho, table[s])  # P^W(a X, c)
            np.subtract(1.0, h, out=h)  # 1 − P^W e^{−(c μ − λ) w}
        else:
            h = np.ones_like(rho)
        h *= rho < 1.0
        h_mean[lo:hi] = h.mean(axis=2)
    out[tier, kind] = (density * h_mean).sum(axis=1)
    return out
