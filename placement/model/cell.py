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
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, Required, TypedDict

import numpy as np
import numpy.typing as npt
from scipy.special import gammainc, gammaincinv, ndtri, roots_legendre

from edgeprefix.placement.errors import NumericalError
from edgeprefix.placement.model.blas_threads import single_blas_thread
from edgeprefix.placement.model.evaluation_registry import ROUTER_PREDICTION_REGISTRY
from edgeprefix.placement.model.mgc import variability_factor
from edgeprefix.placement.model.queueing import erlang_c
from edgeprefix.placement.model.router import ROUTER_DESCRIPTION, ROUTER_OF_QUEUE_MODEL  # noqa: F401  (re-exported)

if TYPE_CHECKING:  # annotations only: the engine law is imported where it is used
    from edgeprefix.placement.model.engine_law import EngineLawConstants, EngineTiers

FloatArray = npt.NDArray[np.float64]
QUEUE_MODELS = ROUTER_PREDICTION_REGISTRY.names()  # the registered router predictions (docs/model.md §8.6)
SECTORS = 3.85  # K: independent sectors of a region (fitted; 3.5 reproduces the Poisson–Voronoi Gamma shape, docs/model.md §14)
L_MAX = 36.0  # ℓ beyond which e^{−ℓ} < 2.4e-16
RAY_NODES = 32  # nodes of the ℓ axis (g is integrated exactly between them)
RADIAL_NODES = 16  # Gauss–Legendre nodes in v = r² on [0, v_cut] per (s, q) (the rule is normalised to the exact P1)
RADIAL_L_MAX = 20.0  # the radial integral stops where e^{−L} < 2.1e-9
LTV_NODES = 10  # nodes in v of the law-of-total-variance integral
LOAD_NODES = 24  # equal-probability bins (centroids) of the conditional load law
WAIT_TABLE = 2048  # intervals of the per-tier P^W(ρ X) (and 1/K) tables on [0, 1]
BLOCK = 1 << 15  # elements of one (pairs, radial, load) block
MIN_CONDITIONAL = 0.25  # floor of v^c_s as a share of v_s
SKEW_MAX = 12.0  # skewness of the load law is capped here (node nodes tabulated on [0, SKEW_MAX])
SKEW_GRID = 481


VORONOI_T_MAX = 36.0
VORONOI_MEAN = np.array(
    [
        1.000000,
        1.004146,
        1.015695,
        1.033519,
        1.056710,
        1.084534,
        1.116396,
        1.151802,
        1.190349,
        1.231699,
        1.275569,
        1.321721,
        1.369951,
        1.420089,
        1.471984,
        1.525510,
        1.580553,
        1.637017,
        1.694817,
        1.753876,
        1.814129,
        1.875515,
        1.937982,
        2.001480,
        2.065970,
        2.131409,
        2.197759,
        2.264992,
        2.333077,
        2.401988,
        2.471699,
        2.542187,
        2.613431,
        2.685411,
        2.758099,
        2.831484,
        2.905559,
        2.980309,
        3.055691,
        3.131719,
        3.208391,
        3.285645,
        3.363525,
        3.441990,
        3.521027,
        3.600658,
        3.680817,
        3.761569,
        3.842820,
        3.924648,
        4.006972,
        4.089831,
        4.173215,
        4.257063,
        4.341486,
        4.426308,
        4.511676,
        4.597533,
        4.683795,
        4.770612,
        4.857854,
        4.945506,
        5.033703,
        5.122313,
        5.211295,
    ]
)  # φ_V(t) on t = 36 x², x = 0, 1/64, …, 1 (eq. (14.12); tests/test_cell_model.py checks nodes by quadrature)


VORONOI_BAND = 0.35  # δ_0 of the Voronoi weight exp(−δ_{s,q}/δ_0) (fitted, docs/model.md §14)


# The router whose delivered coverage each queue model predicts (docs/model.md §14): the mean-field
# coverage is what a router that sees every node's own queue delivers (per-node balancing evens the
# loads), the cell model what Theorem 1's tier-level rule delivers.
# (named once in edgeprefix.placement.model.router)


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


def voronoi_mean(excess: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``φ_V(e)`` and its slope: the Poisson–Voronoi conditional mean (eq. (14.12)).

    ``φ_V(t) = λ E[|C| | x ∈ C]`` for a point ``x`` at ``t = π λ |x|²`` from the nucleus of a
    Poisson–Voronoi cell (exact: quadrature of the two-point void probability; ``E_{t~Exp(1)} φ_V = 1.2800``,
    one plus the variance of the cell area), linear between the nodes ``t = 36 (k/64)²`` and beyond
    the last.  Negative arguments count as 0.
    """
    n = VORONOI_MEAN.size - 1
    if not np.all(np.isfinite(excess)):  # a NaN would reach the integer cast below (docs/model.md §20.1)
        raise NumericalError(
            "cell model: the conditional load of a node is not finite (an input beyond the ranges of "
            "docs/model.md §20); use --queue-model meanfield or bring the instance into range"
        )
    e = np.maximum(excess, 0.0)
    pos = np.sqrt(np.minimum(e, VORONOI_T_MAX) / VORONOI_T_MAX) * n
    lo = np.minimum(pos.astype(np.int64), n - 1)
    t_lo = VORONOI_T_MAX * (lo / n) ** 2
    slope = (VORONOI_MEAN.take(lo + 1) - VORONOI_MEAN.take(lo)) / (VORONOI_T_MAX * ((lo + 1) / n) ** 2 - t_lo)
    return VORONOI_MEAN.take(lo) + slope * (e - t_lo), np.where(excess > 0, slope, 0.0)


def voronoi_weight(lam: FloatArray, offsets: FloatArray, groups: _Groups | None = None) -> FloatArray:
    """``θ_{s,q} = exp(−δ_{s,q}/δ_0)``, ``δ_{s,q} = π Σ_t λ_t |b_{t,q} − b_{s,q}|`` (eq. (14.13)), ``(S, Q)``.

    ``δ`` counts the nodes in the band of costs between the tier and its competitors (0 when every
    tier has the same offset for the type: the Poisson–Voronoi geometry, ``θ = 1``).  With ``groups``
    the sum runs over the tier's own group (its mix).
    """
    b = np.asarray(offsets, dtype=float)
    lam = np.asarray(lam, dtype=float)
    if groups is None:
        delta = np.pi * np.einsum("t,tsq->sq", lam, np.abs(b[:, None, :] - b[None, :, :]))
    else:  # the group's tiers, padded with λ = 0
        pad_b, pad_lam = groups.padded(b), groups.padded(lam)  # (G, T, Q), (G, T)
        rows = groups.of_tier
        delta = np.pi * np.einsum("st,stq->sq", pad_lam[rows], np.abs(pad_b[rows] - b[:, None, :]))
    return np.exp(-delta / VORONOI_BAND)


@dataclass(frozen=True)
class _Groups:
    """Tiers of several independent networks (mixes) side by side: ``of_tier[s]`` is tier ``s``'s group."""

    of_tier: npt.NDArray[np.int64]
    count: int

    @cached_property
    def slots(self) -> tuple[npt.NDArray[np.int64], int]:
        """Each tier's slot within its group and the largest group size."""
        order = np.argsort(self.of_tier, kind="stable")
        starts = np.searchsorted(self.of_tier[order], np.arange(self.count))
        slot = np.empty_like(self.of_tier)
        slot[order] = np.arange(self.of_tier.size) - starts[self.of_tier[order]]
        return slot, int(np.bincount(self.of_tier, minlength=self.count).max())

    def padded(self, values: FloatArray, fill: float = 0.0) -> FloatArray:
        """``(G, T_max, …)`` from per-tier ``values`` ``(S, …)``, empty slots ``fill``."""
        slot, width = self.slots
        out = np.full((self.count, width) + values.shape[1:], fill)
        out[self.of_tier, slot] = values
        return out


VOID_BLOCK_ELEMENTS = 1 << 22  # largest (rows, R, T) work array of void_exponent: 32 MB (docs/model.md §16.5)


def void_exponent(v: FloatArray, lam: FloatArray, delta: FloatArray, alpha: float) -> FloatArray:
    """``L_{s,q}(v) = π Σ_t λ_t ρ_{t|s,q}(v)²`` (eq. (14.1)).

    ``delta`` ``(..., T)`` holds ``b_{s,q} − b_{t,q}`` (cost offsets over ``ξ``) on its last axis;
    ``v`` ``(..., R)`` the squared distances, with the same leading axes.  Returns ``(..., R)``.
    Rows (the leading axes) are independent: they are computed in blocks whose ``(rows, R, T)`` work
    array holds at most :data:`VOID_BLOCK_ELEMENTS` numbers (the whole ``(S, Q, R, T)`` array is 9 GB at
    300 profiles × 100 types with the 129-point tables).
    """
    lead, r_count, t_count = v.shape[:-1], v.shape[-1], delta.shape[-1]
    v_rows = v.reshape(-1, r_count)
    d_rows = np.broadcast_to(delta, lead + (t_count,)).reshape(-1, t_count)
    weights = np.pi * lam
    step = max(1, VOID_BLOCK_ELEMENTS // max(1, r_count * t_count))
    out = np.empty(v_rows.shape)
    with single_blas_thread():  # many products of many rows: threads only spin on a shared machine (docs/model.md (16.11))
        for start in range(0, v_rows.shape[0], step):
            block = slice(start, start + step)
            rho2 = (v_rows[block, :, None] if alpha == 2.0 else v_rows[block, :, None] ** (alpha / 2.0)) + d_rows[block, None, :]
            np.maximum(rho2, 0.0, out=rho2)  # in place: a fresh array costs page faults
            if alpha != 2.0:
                np.power(rho2, 2.0 / alpha, out=rho2)
            out[block] = rho2 @ weights
    return out.reshape(lead + (r_count,))


def translated_offsets(lam: FloatArray, b: FloatArray, groups: npt.NDArray[np.int64] | None = None) -> FloatArray:
    """α = 2: ``b_{s,q}`` less its type's smallest offset where the cost axis is too short to resolve (docs/model.md §20, (20.4)).

    Only differences of ``b`` within a network enter the cell model.  Where the axis of a type,
    ``L_MAX / (π Σ_t λ_t)``, is shorter than ``10⁻⁶`` of its smallest offset (e.g. ``λ_b = 10³⁰``), the
    extents ``U_q(ℓ) − b_{s,q}`` would round to 0; the type's offsets are then measured from that
    smallest offset (per network with ``groups``).  Other types are returned untouched (bit for bit).
    """
    if groups is None:
        low = b.min(axis=0)[None, :]  # (1, Q)
        total = np.full((1, 1), float(np.sum(lam)))
    else:
        count = int(groups.max()) + 1
        low_g = np.full((count, b.shape[1]), np.inf)
        np.minimum.at(low_g, groups, b)
        low = low_g[groups]  # (S, Q)
        total = np.bincount(groups, lam, minlength=count)[groups][:, None]
    axis_length = L_MAX / (np.pi * total)
    shift = np.where(axis_length < 1e-6 * np.abs(low), low, 0.0)
    return b - shift if np.any(shift) else b


def _offsets(b: FloatArray) -> FloatArray:
    """``Δ[s, q, t] = b_{s,q} − b_{t,q}``."""
    return (b.T[:, :, None] - b.T[:, None, :]).transpose(1, 0, 2)


@dataclass(frozen=True)
class CostAxis:
    """α = 2: the void exponent of every type on the cost axis ``u = r² + b`` (eq. (14.1)).

    ``L_{s,q}(v) = G_q(v + b_{s,q})`` with ``G_q(u) = π Σ_t λ_t max(u − b_{t,q}, 0)``: one piecewise-linear
    function per type, shared by all tiers.  Arrays ``(Q, T)``: ``knots`` the sorted ``b_{t,q}``,
    ``slope`` of ``G_q`` on ``[knot_j, knot_{j+1})``, ``level = G_q(knot_j)``.
    """

    knots: FloatArray
    slope: FloatArray
    level: FloatArray

    def exponent(self, kind: npt.NDArray[np.int64], u: FloatArray) -> FloatArray:
        """``G_q(u)`` for rows of type ``kind`` ``(P,)`` at ``u`` ``(P, R)``."""
        j = _row_index(self.knots, kind, u)
        rows = kind[:, None]
        return self.level[rows, j] + self.slope[rows, j] * np.maximum(u - self.knots[rows, j], 0.0)

    def tail_integral(self, kind: npt.NDArray[np.int64], u: FloatArray) -> FloatArray:
        """``F_q(u) = ∫_u^∞ e^{−G_q(y)} dy`` for rows of type ``kind`` ``(P,)`` at ``u ≥ knot_0`` ``(P, R)``.

        Exact (``G_q`` is linear between knots); summed from the far end, so a difference
        ``F_q(b) − F_q(b + u)`` keeps the relative accuracy of ``F_q(b)``.
        """
        j = _row_index(self.knots, kind, u)
        rows = kind[:, None]
        slope = self.slope[rows, j]
        start = self.level[rows, j] + slope * np.maximum(u - self.knots[rows, j], 0.0)
        right = self._knot_after[rows, j]
        piece = np.exp(-start) * -np.expm1(-slope * np.maximum(right - u, 0.0)) / slope
        return self._tail_at_knots[rows, j + 1] + piece

    @cached_property
    def _knot_after(self) -> FloatArray:
        return np.concatenate([self.knots[:, 1:], np.full((self.knots.shape[0], 1), np.inf)], axis=1)

    @cached_property
    def _tail_at_knots(self) -> FloatArray:
        """``F_q(knot_j)`` ``(Q, T + 1)`` (0 at the end)."""
        seg = np.exp(-self.level) * -np.expm1(-self.slope * (self._knot_after - self.knots)) / self.slope
        out = np.zeros((self.knots.shape[0], self.knots.shape[1] + 1))
        out[:, :-1] = np.cumsum(seg[:, ::-1], axis=1)[:, ::-1]
        return out

    def inverse(self, ell: FloatArray) -> FloatArray:
        """``U_q(ℓ) = G_q^{-1}(ℓ)`` on the levels ``ell`` ``(N,)`` for every type, ``(Q, N)``."""
        q_count = self.knots.shape[0]
        kind = np.arange(q_count)
        queries = np.broadcast_to(ell, (q_count, ell.size))
        j = _row_index(self.level, kind, queries)
        rows = kind[:, None]
        return self.knots[rows, j] + (queries - self.level[rows, j]) / self.slope[rows, j]


def cost_axis(lam: FloatArray, b: FloatArray) -> CostAxis:
    """The :class:`CostAxis` of densities ``λ_t`` ``(T,)`` (or one per column, ``(T, Q)``) and offsets
    ``b_{t,q}`` ``(T, Q)`` (α = 2)."""
    order = np.argsort(b, axis=0, kind="stable")
    cols = np.arange(b.shape[1])
    knots = b[order, cols].T  # (Q, T)
    dens = lam[order] if lam.ndim == 1 else lam[order, cols]
    slope = np.cumsum(np.pi * dens.T, axis=1)  # > 0: the first tier has started at knot_0
    level = np.zeros_like(knots)
    np.cumsum(slope[:, :-1] * np.diff(knots, axis=1), axis=1, out=level[:, 1:])
    return CostAxis(knots, slope, level)


def _row_index(table: FloatArray, rows: npt.NDArray[np.int64], queries: FloatArray) -> npt.NDArray[np.int64]:
    """Last ``j`` with ``table[row, j] ≤ query`` (0 if none) for non-decreasing rows: one search for all rows.

    Rows are laid end to end on one axis, each shifted by its own band; entries above the largest
    query are capped there (they are never ``≤`` a query), which keeps the bands short.
    """
    r_count, k = table.shape
    top = float(np.max(queries))
    low = min(float(table[:, 0].min()), float(np.min(queries)))
    band = top - low + 1.0
    shift = band * np.arange(r_count, dtype=float)
    flat = (np.minimum(table, top + 0.5) - low + shift[:, None]).ravel()
    q = queries - low + shift[rows].reshape((-1,) + (1,) * (queries.ndim - 1))
    j = np.searchsorted(flat, q.ravel(), side="right").reshape(q.shape) - 1
    j -= (k * rows).reshape(j.shape[:1] + (1,) * (j.ndim - 1))
    np.clip(j, 0, k - 1, out=j)
    return j


def _ray_extent_table(lam: FloatArray, delta: FloatArray, alpha: float, ell: FloatArray, vmax: FloatArray) -> FloatArray:
    """Any α: the inverse of ``L`` by linear interpolation in a table of 129 values per row."""
    s_count, q_count, _ = delta.shape
    grid = vmax[:, None, None] * np.linspace(0.0, 1.0, 129) ** 2 * np.ones((1, q_count, 1))  # (S, Q, F)
    table = void_exponent(grid, lam, delta, alpha)
    return ray_extent_search(table, ell, grid)[0]


def ray_extent_search(table: FloatArray, ell: FloatArray, grid: FloatArray) -> tuple[FloatArray, tuple]:
    """``V(ℓ)`` by linear interpolation of the rows ``table`` ``(S, Q, F)`` (``L`` at the points ``grid``) at the levels ``ell`` ``(N,)``.

    Returns the extents ``(S, Q, N)`` (0 where ``ℓ < L(0)``) and, for the derivative, ``(hit, free, upper, frac, width)``:
    where the level is covered, where the interpolation weight is not clipped, the upper table point of each
    level's interval, the weight and the interval's ``ΔL``.  One search for all rows: rows are laid end to
    end, each shifted by its own band; the search runs on the rows capped just above the largest level
    (so the bands stay short and the shifted values keep their precision whatever ``L`` reaches), the
    interpolation on the table itself.
    """
    s_count, q_count, n = table.shape
    rows = s_count * q_count
    flat_table = table.reshape(rows, n)
    top = float(np.max(ell)) + 1.0
    offset = (np.arange(rows) * 2.0 * top)[:, None]
    flat = np.maximum.accumulate((np.minimum(flat_table, top) + offset).ravel())
    queries = (ell[None, :] + offset).ravel()
    base = np.repeat(np.arange(rows) * n, ell.size)
    idx = np.clip(np.searchsorted(flat, queries, side="right"), base + 1, base + n - 1)
    values = np.maximum.accumulate(flat_table, axis=1).ravel()
    lo, hi = values[idx - 1], values[idx]
    level = np.tile(ell, rows)
    width = np.where(hi > lo, hi - lo, 1.0)
    raw = (level - lo) / width
    frac = np.clip(raw, 0.0, 1.0)
    vv = grid.reshape(-1)
    shape = (s_count, q_count, ell.size)
    out = (vv[idx - 1] + frac * (vv[idx] - vv[idx - 1])).reshape(shape)
    hit = ell >= table[..., :1]
    free = ((raw > 0.0) & (raw < 1.0) & (hi > lo)).reshape(shape)
    return np.where(hit, out, 0.0), (hit, free, (idx - base).reshape(shape), frac.reshape(shape), width.reshape(shape))


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
    axis: CostAxis | None = None  # α = 2: L_{s,q}(v) = G_q(v + b_{s,q}), one function per type
    weight: FloatArray | None = None  # θ_{s,q} of eq. (14.13), (S, Q); None: the ray closure alone
    groups: _Groups | None = None  # several mixes side by side (each tier's group), α = 2 only

    def axis_row(self, tier: npt.NDArray[np.int64], kind: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The row of :attr:`axis` of type ``kind`` in the network of tier ``tier``."""
        if self.groups is None:
            return kind
        return self.groups.of_tier[tier] * self.offsets.shape[1] + kind

    def exponent(self, tier: npt.NDArray[np.int64], kind: npt.NDArray[np.int64], v: FloatArray) -> FloatArray:
        """``L_{s,q}(v)`` (eq. (14.1)) for the pairs ``(tier, kind)`` ``(P,)`` at ``v`` ``(P, R)``."""
        if self.axis is not None:
            return self.axis.exponent(self.axis_row(tier, kind), v + self.offsets[tier, kind][:, None])
        delta = self.offsets[tier, kind][:, None] - self.offsets[:, kind].T  # (P, T)
        return void_exponent(v, self.lam, delta, self.alpha)

    def conditional_mean_from_exponent(self, expo: FloatArray, tier: npt.NDArray[np.int64], kind: npt.NDArray[np.int64]) -> FloatArray:
        """``M`` (eq. (14.4)) from ``L = expo`` ``(P, R)`` for the pairs ``(tier, kind)`` ``(P,)``."""
        # the ℓ nodes are L_MAX x² on a uniform x grid: the cell of ℓ is found without a search
        n = self.ell.size - 1
        pos = np.sqrt(np.clip(expo, 0.0, L_MAX) / L_MAX) * n
        lo = np.minimum(pos.astype(np.int64), n - 1)
        frac = (self.ell.take(lo + 1) - np.minimum(expo, L_MAX)) / np.diff(self.ell).take(lo)
        flat = (tier * (n + 1)).reshape((-1,) + (1,) * (expo.ndim - 1)) + lo
        excess = self.tail.take(flat) * frac + self.tail.take(flat + 1) * (1.0 - frac) - 1.0  # E[g | ℓ' ≥ ℓ]/κ_1 − 1
        closure = 1.0 + excess / self.sectors
        if self.weight is None:
            return closure
        theta = self.weight[tier, kind].reshape((-1,) + (1,) * (expo.ndim - 1))
        return closure + theta * (voronoi_mean(excess)[0] - closure)

    def conditional_mean(self, v: FloatArray) -> FloatArray:
        """``M_{s,q}(v)`` (eq. (14.4)) at squared distances ``v`` ``(S, Q, R)``."""
        s_count, q_count, r_count = v.shape
        tier, kind = np.repeat(np.arange(s_count), q_count), np.tile(np.arange(q_count), s_count)
        expo = self.exponent(tier, kind, v.reshape(s_count * q_count, r_count))
        return self.conditional_mean_from_exponent(expo, tier, kind).reshape(s_count, q_count, r_count)


def cell_load(
    lam: FloatArray,
    offsets: FloatArray,
    alpha: float,
    work: FloatArray,
    *,
    sectors: float | None = None,
    groups: npt.ArrayLike | None = None,
) -> CellLoad:
    """The load law of every active tier (eqs. (14.1)–(14.5)).

    Parameters
    ----------
    lam : ``λ_s`` of the active tiers ``(S,)``.
    offsets : ``b_{s,q} = β_{s,q}/ξ`` ``(S, Q)``.
    alpha : radio exponent ``α``.
    work : ``w_{s,q} = Λ p_q / μ_{s,q}`` ``(S, Q)`` (work per unit area of type ``q`` at tier ``s``).
    groups : the network (mix) of each tier ``(S,)``, for several mixes in one call (α = 2): tiers compete
        only within their group; every result is the one-group call's, row for row.
    """
    sectors = SECTORS if sectors is None else float(sectors)
    lam = np.asarray(lam, dtype=float)
    b = np.asarray(offsets, dtype=float)
    w = np.asarray(work, dtype=float)
    s_count, q_count = b.shape
    ell = _ray_axis(RAY_NODES)
    queries = np.append(ell, RADIAL_L_MAX)
    axis = None
    grouped = None
    of_tier = None if groups is None else np.asarray(groups, dtype=np.int64)
    if alpha == 2.0:
        b = translated_offsets(lam, b, of_tier)
    if groups is not None:
        if alpha != 2.0:
            raise ValueError(f"groups: several mixes in one call need radio_exponent = 2, got {alpha!r}")
        grouped = _Groups(of_tier, int(of_tier.max()) + 1)  # type: ignore[arg-type,union-attr]
        # one axis row per (group, type); a group's missing tiers sit far beyond every query with λ = 0
        beyond = float(np.abs(b).max()) + 1e9
        pad_b = grouped.padded(b, beyond).transpose(1, 0, 2).reshape(-1, grouped.count * q_count)  # (T, G Q)
        pad_lam = np.repeat(grouped.padded(lam).T, q_count, axis=1)  # (T, G Q)
        axis = cost_axis(pad_lam, pad_b)
        extent = axis.inverse(queries).reshape(grouped.count, q_count, -1)[of_tier] - b[:, :, None]
        np.maximum(extent, 0.0, out=extent)
    elif alpha == 2.0:  # V_{s,q}(ℓ) = max(U_q(ℓ) − b_{s,q}, 0): one inverse per type
        axis = cost_axis(lam, b)
        extent = axis.inverse(queries)[None, :, :] - b[:, :, None]
        np.maximum(extent, 0.0, out=extent)
    else:
        vmax = L_MAX / (np.pi * lam)  # the own tier alone makes L ≥ 36 beyond it
        extent = _ray_extent_table(lam, _offsets(b), alpha, queries, vmax)
    extent, cap = extent[..., :-1], extent[..., -1]
    g = 0.5 * np.einsum("sq,sqn->sn", w, extent)  # ray work g(ℓ)
    # The law depends on g only up to a factor (v_s, γ_s and T/κ_1 are ratios): a tier whose ray work is
    # far from 1 (e.g. Λ = 10³⁰ with long decodes) is rescaled so that g³ stays inside the float range.
    top = g.max(axis=1, keepdims=True)
    scale = np.where((top > 0) & ((top > 1e50) | (top < 1e-50)), top, 1.0)
    if np.any(scale != 1.0):
        g = g / scale
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
    # A tier whose region is empty up to ℓ = L_MAX (its cost offset exceeds every competitor's by more than
    # the axis, e.g. an overloaded tier at extreme load) carries no ray work: κ_1 = 0.  No request lands
    # there (its radial cap is 0); its load law is the degenerate X ≡ 1 instead of 0/0 (docs/model.md §20.1).
    empty = ~(k1 > 0)
    if np.any(empty):
        k1 = np.where(empty, 1.0, k1)
        k2, k3, seg1 = np.where(empty, 0.0, k2), np.where(empty, 0.0, k3), np.where(empty[:, None], 0.0, seg1)
    var_g = np.maximum(k2, 1e-300)
    variance = var_g / (sectors * k1**2)
    spread = var_g**1.5
    if np.any(empty):
        spread = np.where(empty, 1.0, spread)
    skewness = np.maximum(k3, 0.0) / spread / np.sqrt(sectors)
    # E[g | ℓ' ≥ ℓ]/κ_1 = e^ℓ T(ℓ)/κ_1 with T(ℓ_i) = Σ_{segments ≥ i}; held flat beyond the last node
    tail = np.concatenate([np.cumsum(seg1[:, ::-1], axis=1)[:, ::-1], np.zeros((s_count, 1))], axis=1)
    with np.errstate(over="ignore", invalid="ignore"):
        tail = tail * np.exp(ell)[None, :] / k1[:, None]
    tail[:, -1] = tail[:, -2]
    if np.any(empty):
        tail[empty] = 1.0
    weight = voronoi_weight(lam, b, grouped) if VORONOI_BAND > 0 else None  # δ_0 = 0: the ray closure alone
    law = CellLoad(lam, b, float(alpha), ell, tail, k1, variance, skewness, variance, sectors, axis=axis, weight=weight, groups=grouped)
    # law of total variance over the size-biased request measure w_{s,q} p_{s,q}(v) dv
    x, xw = _legendre01(LTV_NODES)
    span = np.maximum(cap, 1e-300)[:, :, None]  # each pair's own range, up to L = RADIAL_L_MAX
    grid = span * x**2  # (S, Q, V)
    tier, kind = np.repeat(np.arange(s_count), q_count), np.tile(np.arange(q_count), s_count)
    expo = law.exponent(tier, kind, grid.reshape(s_count * q_count, -1))
    m = law.conditional_mean_from_exponent(expo, tier, kind).reshape(grid.shape)
    expo = expo.reshape(grid.shape)
    measure = w[:, :, None] * np.exp(-expo) * (span * 2.0 * x * xw)
    total = measure.sum(axis=(1, 2))
    reached = total > 0  # False only for a tier no request reaches (κ_1 = 0 above): M ≡ 1 there
    if not np.all(reached):
        total = np.where(reached, total, 1.0)
        measure = np.where(reached[:, None, None], measure, 0.0)
        m = np.where(reached[:, None, None], m, 1.0)
    e1 = (measure * m).sum(axis=(1, 2)) / total
    e2 = (measure * m**2).sum(axis=(1, 2)) / total
    if not np.all(reached):
        e1, e2 = np.where(reached, e1, 1.0), np.where(reached, e2, 1.0)
    third = skewness * variance**1.5
    conditional = np.maximum(third + variance - variance**2 - (e2 - e1**2), MIN_CONDITIONAL * variance)
    return CellLoad(lam, b, float(alpha), ell, tail, k1, variance, skewness, conditional, sectors, e1, cap, axis, weight, grouped)


@lru_cache(maxsize=2)
def _standard_table(nodes: int) -> tuple[FloatArray, FloatArray]:
    """Bin centroids of the standardised Pearson III law in ``J`` equal-probability bins, on a grid of ``γ``.

    ``z_j = E[Z | Z in bin j]``: ``J (φ(e_j) − φ(e_{j+1}))`` for the normal law, and for
    ``Z = (G − k)/√k``, ``G ~ Gamma(k)``: ``E[G; G in (e_j, e_{j+1})] = k (P(k + 1, e_{j+1}) − P(k + 1, e_j))``.
    The nodes keep the mean 0 exactly (their variance is the between-bin part, < 1).
    """
    levels = np.linspace(0.0, 1.0, nodes + 1)
    gam = np.linspace(0.0, SKEW_MAX, SKEW_GRID)
    k = 4.0 / gam[1:, None] ** 2
    edges = gammaincinv(k, levels[None, :])
    centroid = k * nodes * np.diff(gammainc(k + 1.0, edges), axis=1)
    z = (centroid - k) / np.sqrt(k)
    normal = nodes * -np.diff(np.exp(-0.5 * ndtri(levels) ** 2) / np.sqrt(2.0 * np.pi))
    table = np.vstack([normal[None, :], z])
    table -= table.mean(axis=1, keepdims=True)  # rounding only (|mean| < 1e-12)
    table.setflags(write=False)
    return gam, table


def standard_nodes(skewness: FloatArray, nodes: int = LOAD_NODES) -> FloatArray:
    """Equal-weight nodes of the standardised Pearson III law with skewness ``γ_s`` ``(S, J)``.

    ``Z = (G − k)/√k`` with ``G ~ Gamma(k)``, ``k = 4/γ²`` (the normal law at ``γ = 0``): the centroids
    of ``J`` equal-probability bins (eq. (14.6)), linear in ``γ`` between the rows of a table computed
    once (``γ`` capped at ``SKEW_MAX``).
    """
    gam, table = _standard_table(nodes)
    pos = np.clip(np.asarray(skewness, dtype=float), 0.0, SKEW_MAX) / gam[1]
    lo = np.minimum(np.floor(pos).astype(np.int64), gam.size - 2)
    frac = (pos - lo)[:, None]
    return table[lo] * (1.0 - frac) + table[lo + 1] * frac


def wait_tables(servers: FloatArray, scv: FloatArray | None = None, nodes: int = WAIT_TABLE) -> tuple[FloatArray, FloatArray | None]:
    """Per-tier tables on the uniform grid ``y = ρ_s X = k/n``, ``k = 0 … n`` (``(S, n + 1)``, ``n = nodes``).

    ``P^W(y c_s, c_s)`` (Erlang C, 1 at ``y = 1``) and, with ``scv`` ``C²_s`` (the M/G/c law of
    docs/model.md §19.6), ``1/K(y c_s, c_s, C²_s)``: the node's decay is ``θ = (c − a X) μ / K``
    (eq. (19.21)).  ``None`` for Erlang C (``K = 1``).
    """
    c = np.asarray(servers, dtype=float)
    table = np.vstack([_wait_row(float(ci), nodes) for ci in c])
    if scv is None:
        return table, None
    load = np.linspace(0.0, 1.0, nodes + 1)[None, :] * c[:, None]
    cc = np.broadcast_to(c[:, None], load.shape)
    return table, 1.0 / variability_factor(load, cc, np.broadcast_to(np.asarray(scv, dtype=float)[:, None], load.shape))


def engine_wait_tables(
    servers: FloatArray, tiers: EngineTiers, constants: EngineLawConstants | None = None, nodes: int = WAIT_TABLE
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The engine law's node tables for the cell model (docs/model.md §17.10, "The cell model with the engine law").

    Per tier: its stability edge ``a*_s`` (the load at which the engine law's node saturates) and, on the
    uniform grid ``y = a_s X / a*_s = k/n``, ``P^W(y a*_s)`` (1 at ``y = 1``) and ``ι(y) = θ m / (a*_s (1 − y))``,
    the engine law's decay per unit of ``(1 − y) a*_s / m``.  Passed as ``servers = a*_s`` and ``tables =
    (P^W, ι)`` to :func:`cell_coverage_pairs`, a node of load ``a_s X`` has ``F_W(w) = 1 − P^W e^{−θ w}``, the
    engine law at its own load, exactly as a slot node has Erlang C at its own (``ι`` takes the place of
    ``1/K``).  In the slot limit of the law (no compute, ``θ_3 = 0``, ``θ_4 = 1``, ``r = 1``) ``a*_s = c_s``,
    ``P^W`` is Erlang C and ``ι ≡ 1``: the slot cell model.  ``ι`` at ``y = 1`` is continued linearly (``θ``
    and ``1 − y`` both vanish there; the value multiplies ``1 − y = 0``).
    """
    from edgeprefix.placement.model.engine_law import EngineTiers, engine_wait_law, shipped_constants, stability_edge

    k = shipped_constants() if constants is None else constants
    c = np.asarray(servers, dtype=float)
    t = tiers  # EngineTiers of the active tiers
    assert isinstance(t, EngineTiers)
    edge = stability_edge(c, t, k)
    y = np.linspace(0.0, 1.0, nodes + 1)[:-1]
    column = EngineTiers(np.asarray(t.prefill_share, dtype=float)[:, None], np.asarray(t.memory_scale, dtype=float)[:, None])
    law = engine_wait_law(edge[:, None] * y[None, :], c[:, None], 1.0, column, k)
    pw = np.ones((c.size, nodes + 1))
    pw[:, :-1] = law["weight"]
    iota = np.empty_like(pw)
    iota[:, :-1] = law["decay"] / (edge[:, None] * (1.0 - y[None, :]))
    iota[:, -1] = np.maximum(2.0 * iota[:, -2] - iota[:, -3], 0.0)
    return edge, pw, iota


class NodeLaw(TypedDict, total=False):
    """What :func:`cell_node_law` gives: ``servers``, and ``tables``, ``wait_delay`` and the shifted mixture's ``wait_shift``
    ``J_s`` and ``shift_rate`` ``θ_9 T_s`` for the engine law."""

    servers: Required[FloatArray]
    tables: tuple[FloatArray, FloatArray]
    wait_delay: FloatArray
    wait_shift: FloatArray
    shift_rate: FloatArray


def shift_weight(
    shift_rate: FloatArray | None, offered_load: FloatArray, mean_service: FloatArray, wait_shift: FloatArray | None
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """The shifted mixture's ``ω_s = 1 − e^{−θ_9 T_s a_s/m_s}`` (docs/model.md (17.26)) with ``∂ω/∂a`` and ``∂ω/∂m``;
    ``None`` where it is off everywhere (no ``J_s > 0`` or no rate)."""
    if shift_rate is None or wait_shift is None:
        return None
    j = np.asarray(wait_shift, dtype=float)
    a, m = np.asarray(offered_load, dtype=float), np.asarray(mean_service, dtype=float)
    safe = np.where(m > 0, m, 1.0)
    rate = np.where(j > 0, np.asarray(shift_rate, dtype=float), 0.0) / safe
    if not np.any(rate * a > 0):
        return None
    x = rate * a
    da = rate * np.exp(-x)
    return -np.expm1(-x), da, -da * a / safe


def cell_node_law(servers: FloatArray, engine_tiers: EngineTiers | None = None) -> NodeLaw:
    """The node law's keyword arguments of :func:`cell_coverage_pairs` and the cell gradient: the slots'
    ``servers = c_s`` (``engine_tiers`` None), or the engine law's stability edges and tables
    (:func:`engine_wait_tables`, the shipped constants) and its step in progress ``δ_s`` (docs/model.md (17.25)) for the
    tiers ``engine_tiers`` describes."""
    c = np.asarray(servers, dtype=float)
    if engine_tiers is None:
        return {"servers": c}
    pi = np.ascontiguousarray(engine_tiers.prefill_share, dtype=float)
    r = np.ascontiguousarray(engine_tiers.memory_scale, dtype=float)
    edge, pw, iota = _engine_tables(c.tobytes(), pi.tobytes(), r.tobytes())
    from edgeprefix.placement.model.engine_law import shipped_constants

    k = shipped_constants()
    earlier = np.zeros_like(pi) if engine_tiers.earlier_chunks is None else np.asarray(engine_tiers.earlier_chunks, dtype=float)
    return {
        "servers": edge,
        "tables": (pw, iota),
        "wait_delay": engine_tiers.delay(k),
        "wait_shift": engine_tiers.shift(k),
        "shift_rate": k.theta_9 * earlier,
    }


@lru_cache(maxsize=64)
def _engine_tables(servers: bytes, prefill_share: bytes, memory_scale: bytes) -> tuple[FloatArray, FloatArray, FloatArray]:
    """:func:`engine_wait_tables` of the shipped constants, computed once per tier set (read-only arrays)."""
    from edgeprefix.placement.model.engine_law import EngineTiers

    tiers = EngineTiers(np.frombuffer(prefill_share), np.frombuffer(memory_scale))
    out = engine_wait_tables(np.frombuffer(servers), tiers)
    for arr in out:
        arr.setflags(write=False)
    return out


@lru_cache(maxsize=512)
def _wait_row(servers: float, nodes: int) -> FloatArray:
    """``P^W(y c, c)`` on ``y = k/nodes`` (1 at ``y = 1``; 0 for ``c = 0``): one row per server count, computed once."""
    if servers <= 0:
        return np.zeros(nodes + 1)
    y = np.linspace(0.0, 1.0, nodes + 1)
    row = np.ones(nodes + 1)
    row[:-1] = erlang_c(y[:-1] * servers, np.full(nodes, servers))
    row.setflags(write=False)
    return row


def _interpolant(table: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Rows laid end to end with their slopes (``value[i] + frac · slope[i]``; slope 0 at each row's end)."""
    slope = np.zeros_like(table)
    slope[:, :-1] = np.diff(table, axis=1)
    return table.ravel(), slope.ravel()


def cell_coverage_pairs(
    law: CellLoad,
    tau: float,
    *,
    first_token: FloatArray,
    offered_load: FloatArray,
    mean_service: FloatArray,
    queue_free: FloatArray | None = None,
    wait_shift: FloatArray | None = None,
    shift_rate: FloatArray | None = None,
    queue_free_shifted: FloatArray | None = None,
    **node: Any,
) -> FloatArray:
    """:func:`_cell_coverage_pairs` with the engine law's shifted mixture (docs/model.md (17.26)): with ``ω_s`` of
    :func:`shift_weight`, ``(1 − ω_s)`` times the pairs at ``g`` plus ``ω_s`` times those at ``g + J_s``.  At ``α ≠ 2``
    with ``queue_free`` given, ``queue_free_shifted`` is ``P1_{s,q}`` at ``g + J_s``."""
    base = _cell_coverage_pairs(
        law, tau, first_token=first_token, offered_load=offered_load, mean_service=mean_service, queue_free=queue_free, **node
    )
    mix = shift_weight(shift_rate, offered_load, mean_service, wait_shift)
    if mix is None or not np.isfinite(tau):
        return base
    if queue_free is not None and queue_free_shifted is None:
        raise ValueError("cell coverage: the shifted mixture needs queue_free_shifted (P1 at g + J) with queue_free")
    assert wait_shift is not None  # mix is None without it
    moved = _cell_coverage_pairs(
        law,
        tau,
        first_token=np.asarray(first_token, dtype=float) + np.asarray(wait_shift, dtype=float)[:, None],
        offered_load=offered_load,
        mean_service=mean_service,
        queue_free=queue_free_shifted,
        **node,
    )
    omega = mix[0][:, None]
    return (1.0 - omega) * base + omega * moved


def _cell_coverage_pairs(
    law: CellLoad,
    tau: float,
    *,
    radio_scale: float,
    first_token: FloatArray,
    servers: FloatArray,
    offered_load: FloatArray,
    mean_service: FloatArray,
    service_scv: FloatArray | None = None,
    queue_free: FloatArray | None = None,
    tables: tuple[FloatArray, FloatArray] | None = None,
    wait_delay: FloatArray | None = None,
) -> FloatArray:
    """``P(T ≤ τ, s | q)`` of the cell model (eq. (14.8)) for the active tiers, ``(S, Q)``.

    ``tables`` ``(P^W, ι)`` replaces the node law's tables of :func:`wait_tables` (the engine law:
    :func:`engine_wait_tables`, with ``servers`` its stability edges); ``wait_delay`` ``δ_s`` (the engine law's step in
    progress, docs/model.md (17.25)) makes a node's law ``1 − P^W`` below ``δ_s`` and its tail start at ``δ_s``.

    ``first_token`` is ``g_{s,q}``; ``offered_load`` ``a_s``; ``mean_service`` ``1/μ_s``; ``τ = inf``
    gives the share of requests served by stable nodes.  ``service_scv`` ``C²_s`` selects the M/G/c
    law per node (docs/model.md §19.6; ``None``: Erlang C).  ``queue_free`` (``P1_{s,q}``, eq. (39) with
    ``F_W ≡ 1``, exact at α = 2) normalises the radial rule (eq. (14.14)): the pair's value is
    ``P1_{s,q}`` times the rule's ratio ``Σ f h / Σ f``.  Pairs whose deadline is already spent
    (``g_{s,q} ≥ τ``) contribute 0 and are skipped.
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
    if queue_free is not None:
        queue_free = np.asarray(queue_free, dtype=float)[tier, kind]
    elif law.axis is not None:  # α = 2: P1_{s,q} = π λ_s (F_q(b_{s,q}) − F_q(b_{s,q} + u_cut)), exact
        start = b[tier, kind][:, None]
        rows = law.axis_row(tier, kind)
        queue_free = law.axis.tail_integral(rows, start)[:, 0]
        if np.isfinite(tau):
            queue_free = queue_free - law.axis.tail_integral(rows, start + u_cut[tier, kind][:, None])[:, 0]
        queue_free = queue_free * np.pi * lam[tier]
    x, xw = _legendre01(RADIAL_NODES)
    cut = v_cut[tier, kind][:, None]
    v = cut * x**2  # (P, R); dv = 2 v_cut x dx
    expo = law.exponent(tier, kind, v)
    density = (lam[tier] * np.pi)[:, None] * np.exp(-expo) * (cut * 2.0 * x * xw)  # f_{s,q}(v) dv
    mean = law.conditional_mean_from_exponent(expo, tier, kind)  # (P, R)
    safe = np.where(servers > 0, servers, 1.0)
    load_ratio = np.where(servers > 0, offered_load / safe, 0.0)  # ρ_s; a tier without servers: y ≡ 1 below
    rate = safe / mean_service  # c_s μ_s
    spread = (load_ratio * np.sqrt(law.conditional_variance))[:, None] * standard_nodes(law.skewness, LOAD_NODES)  # ρ_s sd_s z_j, (S, J)
    table, inverse_k = wait_tables(servers, service_scv) if tables is None else tables
    n = table.shape[1] - 1
    pw, pw_slope = _interpolant(table)
    ik, ik_slope = _interpolant(inverse_k) if inverse_k is not None else (None, None)
    if np.isfinite(tau):  # κ = c_s μ_s (τ − ξ v^{α/2} − g_{s,q} − δ_s) ≥ 0
        delay = 0.0 if wait_delay is None else np.asarray(wait_delay, dtype=float)[tier][:, None]
        kappa = np.maximum(tau - xi * (v if alpha == 2.0 else v ** (alpha / 2.0)) - first_token[tier, kind][:, None] - delay, 0.0)
        kappa *= rate[tier][:, None]
    else:
        kappa = None
    loaded = np.where((servers[tier] > 0)[:, None], mean * load_ratio[tier][:, None], 1.0)  # ρ_s M, (P, R)
    base = (tier * (n + 1)).astype(float)
    miss = np.empty_like(v)  # E[1 − h | q, v] = E[P^W(y) e^{−(1 − y) κ / K(y)}], y = ρ_s X clipped to [0, 1]
    step = max(1, BLOCK // (v.shape[1] * spread.shape[1]))
    for lo in range(0, tier.size, step):  # blocks of pairs: the (pairs, R, J) arrays stay in cache
        hi = min(tier.size, lo + step)
        y = loaded[lo:hi, :, None] + spread[tier[lo:hi], None, :]
        np.clip(y, 0.0, 1.0, out=y)
        if kappa is None:  # τ = ∞: only the nodes at or above saturation miss
            miss[lo:hi] = (y >= 1.0).mean(axis=2)
            continue
        e = y - 1.0
        e *= kappa[lo:hi, :, None]
        y *= n
        y += base[lo:hi, None, None]
        i = y.astype(np.intp)
        y -= i  # the fraction within the table's cell
        w = pw.take(i)
        w += y * pw_slope.take(i)
        if ik is not None:
            e *= ik.take(i) + y * ik_slope.take(i)  # type: ignore[union-attr]
        np.exp(e, out=e)
        w *= e
        miss[lo:hi] = w.mean(axis=2)
    h_mean = 1.0 - miss
    if queue_free is None:
        out[tier, kind] = (density * h_mean).sum(axis=1)
    else:
        mass = density.sum(axis=1)
        ratio = np.where(mass > 0, (density * h_mean).sum(axis=1) / np.where(mass > 0, mass, 1.0), 0.0)
        out[tier, kind] = queue_free * ratio
    return out


def overload_shares(law: CellLoad, utilization: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per active tier, under the node-level load law of eq. (14.3) (``X`` of mean 1, variance ``v_s``,
    skewness ``γ_s``, a Pearson III law): the share of its nodes whose offered load reaches their slots,
    ``P(ρ_s X ≥ 1)``, and the share of its requests that land on such nodes, ``E[X; ρ_s X ≥ 1]`` (a node
    receives requests in proportion to its work, ``E X = 1``).  ``ρ_s ≥ 1`` gives the whole tier's
    mass above its mean.  Arrays ``(S,)`` of the active tiers (docs/model.md §14.9).
    """
    from scipy.special import gammaincc, ndtr

    rho = np.asarray(utilization, dtype=float)
    with np.errstate(divide="ignore"):
        x0 = np.where(rho > 0, 1.0 / np.where(rho > 0, rho, 1.0), np.inf)
    sd = np.sqrt(np.maximum(law.variance, 0.0))
    gam = np.clip(law.skewness, 0.0, SKEW_MAX)
    skewed = gam > 1e-6
    safe_gam = np.where(skewed, gam, 1.0)
    safe_sd = np.where(sd > 0, sd, 1.0)
    # normal law at γ = 0
    z = np.where(sd > 0, (x0 - 1.0) / safe_sd, np.where(x0 <= 1.0, -np.inf, np.inf))
    p_normal = ndtr(-z)
    with np.errstate(invalid="ignore", over="ignore"):
        e_normal = p_normal + sd * np.where(np.isfinite(z), np.exp(-0.5 * np.where(np.isfinite(z), z, 0.0) ** 2), 0.0) / np.sqrt(2 * np.pi)
    # Pearson III: X = loc + θ G, G ~ Gamma(k), k = 4/γ², θ = sd γ/2, loc = 1 − 2 sd/γ
    k = 4.0 / safe_gam**2
    theta = np.where(sd > 0, sd * safe_gam / 2.0, 1.0)
    loc = 1.0 - k * theta
    g0 = np.maximum(np.where(np.isfinite(x0), (np.where(np.isfinite(x0), x0, 0.0) - loc) / theta, np.inf), 0.0)
    p_gamma = np.where(np.isfinite(g0), gammaincc(k, np.where(np.isfinite(g0), g0, 0.0)), 0.0)
    e_gamma = np.where(np.isfinite(g0), loc * p_gamma + theta * k * gammaincc(k + 1.0, np.where(np.isfinite(g0), g0, 0.0)), 0.0)
    nodes = np.where(skewed & (sd > 0), p_gamma, p_normal)
    requests = np.where(skewed & (sd > 0), e_gamma, e_normal)
    return np.clip(nodes, 0.0, 1.0), np.clip(requests, 0.0, 1.0)


def overload_growth(law: CellLoad, utilization: FloatArray) -> FloatArray:
    """Per active tier, the rate at which overloaded nodes grow the mean wait of the tier's requests,
    ``E[X (ρ_s X − 1)⁺]`` seconds per second (docs/model.md (14.17)): a node of load ``ρ = ρ_s X > 1`` gets work
    at ``ρ`` times what its slots serve, so a request arriving ``t`` after the plan starts waits ``(ρ − 1) t``
    (fluid limit), and it receives requests in proportion to ``X``.  Written as
    ``ρ_s E[(X − x_0)² + x_0 (X − x_0); X ≥ x_0]``, ``x_0 = 1/ρ_s``, whose partial moments need no cancellation.
    Same law as :func:`overload_shares`; ``(S,)``."""
    from scipy.special import gammaincc, ndtr

    rho = np.asarray(utilization, dtype=float)
    out = np.zeros(rho.shape)
    busy = rho > 0
    if not busy.any():
        return out
    r = rho[busy]
    x0 = 1.0 / r
    sd = np.sqrt(np.maximum(np.asarray(law.variance, dtype=float)[busy], 0.0))
    gam = np.clip(np.asarray(law.skewness, dtype=float)[busy], 0.0, SKEW_MAX)
    skewed = (gam > 1e-3) & (sd > 0)  # below, the gamma's partial moments lose digits to its huge shape
    # normal law: X − x_0 = sd (Z − z_0)
    safe_sd = np.where(sd > 0, sd, 1.0)
    z0 = np.where(sd > 0, (x0 - 1.0) / safe_sd, 0.0)
    phi = np.exp(-0.5 * z0**2) / np.sqrt(2.0 * np.pi)
    tail = ndtr(-z0)
    m1 = sd * (phi - z0 * tail)
    m2 = sd**2 * ((1.0 + z0**2) * tail - z0 * phi)
    normal = np.where(sd > 0, m2 + x0 * m1, np.maximum(1.0 - x0, 0.0))  # sd = 0: every node at X = 1
    # Pearson III: X − x_0 = θ (G − g_0), G ~ Gamma(k)
    safe_gam = np.where(skewed, gam, 1.0)
    k = 4.0 / safe_gam**2
    theta = safe_sd * safe_gam / 2.0
    g0 = (x0 - (1.0 - k * theta)) / theta
    gc = np.maximum(g0, 0.0)
    q0, q1, q2 = gammaincc(k, gc), gammaincc(k + 1.0, gc), gammaincc(k + 2.0, gc)
    e1 = k * q1 - g0 * q0
    e2 = k * (k + 1.0) * q2 - 2.0 * g0 * k * q1 + g0**2 * q0
    gamma = theta**2 * e2 + x0 * theta * e1
    out[busy] = np.maximum(r * np.where(skewed, gamma, normal), 0.0)
    return out


# ------------------------------------------------------------------------------------------
# Measured accuracy out of sample (docs/model.md §14.10)
# ------------------------------------------------------------------------------------------
ACCURACY_LIMIT = 0.015  # |cell − simulation| the validation of §14.5 keeps to
# Measured on random instances the constants were not fitted on (docs/model.md §14.10), load-aware,
# 35–95 % of the stability edge: (α from, α to, cells, cells over ACCURACY_LIMIT, most negative and
# most positive cell − simulation).  Errors over the limit were spread over loads and profile counts;
# only the α band separated them.
OUT_OF_SAMPLE_ACCURACY = (
    (2.0, 2.5, 20, 10, -0.0281, 0.0146),
    (2.5, 4.0, 48, 11, -0.0220, 0.0094),
)


def accuracy_region(alpha: float, profiles: int, max_utilization: float) -> str | None:
    """A one-line note on the cell model's measured accuracy where ``(α, active profiles, max ρ_s)`` lies
    (docs/model.md §14.10); ``None`` for an overloaded network (no steady state to be accurate about)."""
    if not max_utilization < 1.0 or profiles < 1:
        return None
    for lo, hi, cells, over, low, high in OUT_OF_SAMPLE_ACCURACY:
        if lo <= alpha < hi or (alpha == hi == OUT_OF_SAMPLE_ACCURACY[-1][1]):
            close = "]" if hi == OUT_OF_SAMPLE_ACCURACY[-1][1] else ")"
            return (
                f"cell model, α in [{lo:g}, {hi:g}{close}: on random instances it was not fitted on, cell − simulation "
                f"ranged {low:+.3f} … {high:+.3f} ({over} of {cells} cells beyond ±{ACCURACY_LIMIT}; "
                "docs/model.md §14.10): read it as a lower estimate within about 0.03"
            )
    return f"cell model: α = {alpha:g} lies outside [2, 4], where its accuracy was measured (docs/model.md §14.10): no error bound is known"
