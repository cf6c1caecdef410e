"""Exact sensitivities of the model to the mix, by implicit differentiation (docs/model.md §15).

``sensitivity(evaluation)`` returns the partial derivatives ``∂J/∂π_s`` of a converged
:class:`~edgeprefix.placement.model.evaluation.Evaluation` with ``λ_s = π_s λ_b`` and the other
shares held fixed (not projected on the simplex: a solver does that), for

* ``coverage`` — ``P_cov(τ)`` (eq. (39)),
* ``mean_ttft`` — ``T̄`` (eq. (42)),
* ``max_utilization`` — ``max_s ρ_s`` over the active tiers (the infeasibility penalty's slope).

Method (derivation in §15).  On the cost axis ``y = r^α + b_{s,q}`` every quantity is an
integral of ``e^{−G_q(y)}`` against ``dG_{s,q}`` (or ``dy``) over a window, times a factor.  The
derivatives in ``b_{t,q}`` and ``λ_t`` are integrals of the same kind with ``G'_{t,q}`` or
``G_{t,q}/λ_t`` inserted, so one set of *atoms* per type serves them all: the exact segments
between sorted breakpoints at ``α = 2`` (zeroth and first moments of an exponential on each
segment), the Gauss–Legendre nodes of :func:`~edgeprefix.placement.model.association.tier_grid`
otherwise.  With the load–association fixed point ``W = T(W, λ)`` of ``load_aware`` routing, the
adjoint ``(I − ∂T/∂W)ᵀ v = ∂J/∂W`` (one ``|S| × |S|`` solve per objective) gives
``dJ/dλ = ∂J/∂λ + vᵀ ∂T/∂λ``; ``nearest`` and ``prefix`` need no solve.

Every product is a vector–Jacobian product contracted over the tiers first, so a gradient
costs a few passes over the atoms per objective, ``O(|Q| |S| K N)`` with ``K ≤ |S|`` (``2|S|`` with the
coverage cuts) segments of ``N`` nodes per type, i.e. ``O(|Q| |S|² N)``, on top of the sums (16.7)
of ``∂A/∂b`` for ``I − ∂T/∂W``, ``O(|Q| R² K N)`` for ``R ≤ |S|`` groups of tiers with distinct breakpoints
(about 0.4 of it with the triangular support, docs/model.md §6.5) as in the fixed point's Newton step.
Measured on ``scale_instance`` at α = 3.5 (docs/model.md §16.5): the gradient takes 1.7 times its cell-model
evaluation at 300 profiles × 10 types, and the evaluation's ``|S|`` exponent over 10–300 profiles is 1.67.
The atoms are held one block of types at a time (:func:`atom_blocks`, about 240 bytes per ``(s, q, node)``
at α ≠ 2, at most :data:`GRADIENT_BLOCK_BYTES` per block, docs/model.md §15.8).

A profile at share 0 gets the one-sided derivative at ``π_s = 0⁺``: it enters as a test tier
of density ``ε λ_b`` (:data:`ENTERING_SHARE`) whose advertised delay solves its own scalar fixed
point with the other tiers held (its effect on them is ``O(ε)``).

The queue model enters only through its :class:`~edgeprefix.placement.model.wait_laws.QueueLaw`
(advertised delay and waiting-time law as functions of ``a_s``, ``c_s``, ``1/μ_s`` and, for the
M/G/c law of docs/model.md §19.6, the service's ``C²_s``, differentiated through :class:`_Loads`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.memory import check_memory
from edgeprefix.placement.model.association import TierGrid, default_nodes, tier_grid
from edgeprefix.placement.model.cell import cell_node_law
from edgeprefix.placement.model.cell_gradient import cell_coverage_gradient
from edgeprefix.placement.model.queueing import RHO_CLIP
from edgeprefix.placement.model.spatial import AnalyticKernel, column_blocks
from edgeprefix.placement.model.tier_loads import lift, unlift
from edgeprefix.placement.model.wait_laws import EngineLaw, QueueLaw, WaitLaw, wait_law_for
from edgeprefix.placement.work_progress import blocks_done

FloatArray = npt.NDArray[np.float64]
_PSI_COEF = [1.0 / (float(np.prod(np.arange(1, n + 1))) * (n + 2)) for n in range(10)]
OBJECTIVES = ("coverage", "mean_ttft", "max_utilization")
ENTERING_SHARE = 1e-10  # ε: a profile at share 0 enters with density ε λ_b (relative error O(ε))
_PSI_SMALL = 0.1  # below it ψ(z) = Σ_{n<10} (−z)^n / (n! (n + 2)) (truncation < 1e-17); above, the closed form


@dataclass(frozen=True)
class Sensitivity:
    """Partial derivatives ``∂J/∂π_s`` of one evaluation (see module notes).

    Attributes
    ----------
    profile_ids : profile order of every gradient.
    policy, target : the evaluation's routing policy and the ``τ`` of the coverage.
    gradients : objective name → ``(S,)`` array (one-sided at ``π_s = 0⁺``).
    values : objective name → its value at the point (``P_cov(τ)``, ``T̄``, ``max ρ_s``).
    entering : profiles at share 0 whose derivative came from a test tier.
    linear_solves : adjoint solves ``(I − ∂T/∂W)ᵀ v = ∂J/∂W`` made (0 without a fixed point).
    """

    profile_ids: tuple[str, ...]
    policy: str
    target: float
    gradients: Mapping[str, FloatArray]
    values: Mapping[str, float]
    entering: tuple[str, ...]
    linear_solves: int

    def by_profile(self, objective: str = "coverage") -> dict[str, float]:
        """``{profile id: ∂J/∂π_s}`` of ``objective``."""
        if objective not in self.gradients:
            raise ValueError(f"objective: {objective!r} was not computed (computed: {list(self.gradients)})")
        return dict(zip(self.profile_ids, map(float, self.gradients[objective])))


# -- atoms: where the tier integrals are evaluated ------------------------------------------------
@dataclass(frozen=True)
class _Window:
    """One family of tier integrals ``V[s, q] = Σ_j m0[s, q, j]`` on the atoms of every type.

    ``m0[s, q, j]`` is the atom's share of ``∫ e^{−G_q} (factor_s) dG_{s,q}`` over tier ``s``'s
    window; ``m1`` the first moment ``∫ (y − y_j) …`` (α = 2 segments; ``None`` at quadrature
    nodes).  ``gprime[t, q, j] = G'_{t,q}(y_j⁺)``, ``gunit = G_{t,q}(y_j)/λ_t``,
    ``gprime_unit = G'_{t,q}(y_j⁺)/λ_t``, ``total_rate = Σ_t G'_{t,q}``; ``dist = U_s − y_j`` (the
    distance to the window's upper end, for truncated windows).  Shapes ``(n, Q, J)``.
    """

    m0: FloatArray
    m1: FloatArray | None
    gprime: FloatArray
    gunit: FloatArray
    gprime_unit: FloatArray
    total_rate: FloatArray
    dist: FloatArray | None = None

    @property
    def values(self) -> FloatArray:
        return self.m0.sum(axis=2)

    def vjp(self, w: FloatArray, lam: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(Σ_{s,q} w_{s,q} ∂V_{s,q}/∂λ_t, Σ_s w_{s,q} ∂V_{s,q}/∂b_{t,q})``: shapes ``(n,)``, ``(n, Q)``."""
        agg0 = np.einsum("sqj,sq->qj", self.m0, w)
        lam_bar = (w * self.values).sum(axis=1) / lam - np.einsum("qj,tqj->t", agg0, self.gunit)
        if self.m1 is not None:
            agg1 = np.einsum("sqj,sq->qj", self.m1, w)
            lam_bar -= np.einsum("qj,tqj->t", agg1, self.gprime_unit)
        b_bar = np.einsum("qj,tqj->tq", agg0, self.gprime) - w * np.einsum("sqj,qj->sq", self.m0, self.total_rate)
        return lam_bar, b_bar

    def tilt_derivative(self) -> FloatArray:
        """``∂V_{s,q}/∂tilt_s = −∫ (U_s − y) (…)``, shape ``(n, Q)`` (truncated, tilted windows only)."""
        assert self.dist is not None
        first = (self.dist * self.m0).sum(axis=2)
        return -(first - self.m1.sum(axis=2)) if self.m1 is not None else -first


def _phi_psi(z: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``φ(z) = ∫_0^1 e^{−zx} dx`` and ``ψ(z) = ∫_0^1 x e^{−zx} dx`` for ``z ≥ 0``, without cancellation
    (a 10-term series below :data:`_PSI_SMALL`, ``φ`` by ``expm1``)."""
    small = z < _PSI_SMALL
    big = np.where(small, 1.0, z)
    e = np.exp(-big)
    phi = np.where(z > 0, -np.expm1(-big) / big, 1.0)
    psi = (1.0 - e * (1.0 + big)) / (big * big)
    if np.any(small):
        zs = z[small]
        series = np.full(zs.shape, _PSI_COEF[-1])
        for c in _PSI_COEF[-2::-1]:  # Horner on Σ_n c_n (−z)^n, c_n = 1 / (n! (n + 2))
            series = c - zs * series
        phi_small = -np.expm1(-zs) / np.where(zs > 0, zs, 1.0)
        phi[small] = np.where(zs > 0, phi_small, 1.0)
        psi[small] = series
    return phi, psi


def _exp_moments(e0: FloatArray, k: FloatArray, d: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``∫_0^d e^{e0 − k x} dx`` and ``∫_0^d x e^{e0 − k x} dx`` (``d = inf`` only where ``k > 0``).

    The exponential is anchored at the larger end (``max(e0, e0 − k d)``), so nothing overflows
    whatever the sign of ``k``; for ``k < 0`` the first moment is ``d² (φ − ψ)(|k| d)``.  Only the
    entries with ``d > 0`` are computed (the others are 0).
    """
    m0, m1 = np.zeros(d.shape), np.zeros(d.shape)
    on = d > 0
    e0, k, d = e0[on], k[on], d[on]
    if not d.size:
        return m0, m1
    infinite = np.isinf(d)
    dd = np.where(infinite, 0.0, d)
    z = np.abs(k) * dd
    phi, psi = _phi_psi(z)
    top = np.exp(np.maximum(e0, e0 - k * dd))
    first = top * dd * phi
    second = top * dd * dd * np.where(k >= 0, psi, phi - psi)
    if np.any(infinite):
        rate = np.where(infinite, k, 1.0)
        tail = np.exp(np.where(infinite, e0, 0.0)) / rate
        first = np.where(infinite, tail, first)
        second = np.where(infinite, tail / rate, second)
    m0[on], m1[on] = first, second
    return m0, m1


@dataclass(frozen=True)
class _Segments:
    """α = 2: the sorted breakpoints of every type (left ends ``lo`` ``(Q, K)``, lengths, ``G`` and
    its slope on each segment, and the moments ``∫ e^{−G}``, ``∫ (y − lo) e^{−G}`` of each segment)
    and every tier's ``G'``, ``G`` there."""

    lo: FloatArray
    length: FloatArray
    g_at: FloatArray
    rate: FloatArray
    gprime: FloatArray
    gunit: FloatArray
    gprime_unit: FloatArray
    m0: FloatArray
    m1: FloatArray
    started: npt.NDArray[np.bool_]


def _segments(lam: FloatArray, b: FloatArray, cuts: FloatArray) -> _Segments:
    lo = np.sort(np.concatenate([b.T, cuts.T], axis=1), axis=1)
    length = np.empty_like(lo)
    length[:, :-1] = np.diff(lo, axis=1)
    length[:, -1] = np.inf
    gap = lo[None] - b[:, :, None]
    started = gap >= 0  # (n, Q, K): G_t has begun at the segment's left end
    gprime_unit = np.where(started, np.pi, 0.0)
    gprime = lam[:, None, None] * gprime_unit
    rate = np.pi * (lam @ started.reshape(lam.size, -1)).reshape(lo.shape)
    g_at = np.zeros_like(lo)
    np.cumsum(rate[:, :-1] * length[:, :-1], axis=1, out=g_at[:, 1:])
    gunit = np.pi * np.maximum(gap, 0.0)
    m0, m1 = _exp_moments(-g_at, rate, length)  # the last segment is infinite: rate > 0 there
    return _Segments(lo, length, g_at, rate, gprime, gunit, gprime_unit, m0, m1, started)


def _segment_window(
    seg: _Segments, lam: FloatArray, inside: npt.NDArray[np.bool_], upper: FloatArray | None = None, tilt: FloatArray | None = None
) -> _Window:
    """α = 2 window over the segments ``inside`` (``[b_s, U_s]``, or ``[b_s, ∞)``) with factor ``e^{−tilt_s (U_s − y)}``."""
    scale = (np.pi * lam)[:, None, None]
    if tilt is None:  # the integrand e^{−G} is the same for every tier: only the window differs
        weight = inside * scale
        return _Window(weight * seg.m0, weight * seg.m1, seg.gprime, seg.gunit, seg.gprime_unit, seg.rate)
    assert upper is not None
    s_i, q_i, k_i = np.nonzero(inside)  # only the window's segments: a tilt makes each tier's integrand its own
    dist_in = upper[s_i, q_i] - seg.lo[q_i, k_i]
    tilt_in = tilt[s_i, q_i]
    first, second = _exp_moments(-seg.g_at[q_i, k_i] - tilt_in * dist_in, seg.rate[q_i, k_i] - tilt_in, seg.length[q_i, k_i])
    m0, m1, dist = np.zeros(inside.shape), np.zeros(inside.shape), np.zeros(inside.shape)
    m0[s_i, q_i, k_i], m1[s_i, q_i, k_i], dist[s_i, q_i, k_i] = first, second, dist_in
    return _Window(m0 * scale, m1 * scale, seg.gprime, seg.gunit, seg.gprime_unit, seg.rate, dist)


class _Atoms:
    """The windows of one point: association ``A``, ``P1``, tilted ``P2`` and the ``dy`` window of ``T̄``."""

    def __init__(self, lam: FloatArray, b: FloatArray, u_cut: FloatArray, alpha: float, nodes: int) -> None:
        self.lam, self.b, self.u_cut, self.alpha = lam, b, u_cut, alpha
        if alpha == 2.0:
            self.seg = _segments(lam, b, b + u_cut)
            self.assoc = _segment_window(self.seg, lam, self.seg.started)
            self._window = self.seg.started & (self.seg.lo[None] < (b + u_cut)[:, :, None])  # U_s is a breakpoint
        else:
            p = 2.0 / alpha
            plain = tier_grid(lam, b, alpha, nodes=nodes)
            rate = plain.rate
            unit = rate / lam[:, None, None]
            self._plain = plain
            self.assoc = _Window(plain.mass, None, rate, np.maximum(plain.u, 0.0) * unit / p, unit, rate.sum(axis=0))
            self._nodes = nodes

    @cached_property
    def _cut(self) -> TierGrid:
        """α ≠ 2: the grid with the cut points ``b_s + u_cut`` as extra breakpoints (the truncated windows only)."""
        return tier_grid(self.lam, self.b, self.alpha, extra_breaks=self.b + self.u_cut, nodes=self._nodes)

    def truncated(self, tilt: FloatArray | None) -> _Window:
        """The window ``[b_s, b_s + u_cut]`` with factor ``e^{−tilt (u_cut − u)}`` (none when ``tilt`` is None)."""
        if self.alpha == 2.0:
            return _segment_window(self.seg, self.lam, self._window, self.b + self.u_cut, tilt)
        cut = self._cut
        inside = (cut.u > 0) & (cut.u <= self.u_cut[:, :, None])
        p = 2.0 / self.alpha
        dist = np.where(inside, self.u_cut[:, :, None] - cut.u, 0.0)
        mass = np.where(inside, cut.mass, 0.0)
        if tilt is not None:
            mass = mass * np.exp(-tilt[:, :, None] * dist)
        unit = cut.rate / self.lam[:, None, None]
        return _Window(mass, None, cut.rate, np.maximum(cut.u, 0.0) * unit / p, unit, cut.rate.sum(axis=0), dist)

    def axis_lambda_vjp(self, w: FloatArray) -> FloatArray:
        """``Σ_q w_q ∂/∂λ_t ∫ e^{−G_q} dy = −Σ_q w_q ∫ e^{−G_q} G_{t,q}/λ_t dy``, shape ``(n,)``."""
        if self.alpha == 2.0:
            seg = self.seg
            return -(np.einsum("qj,tqj->t", seg.m0 * w[:, None], seg.gunit) + np.einsum("qj,tqj->t", seg.m1 * w[:, None], seg.gprime_unit))
        plain = self._plain
        rate = plain.rate.sum(axis=0)
        weight = np.where(rate > 0, plain.mass.sum(axis=0) / np.where(rate > 0, rate, 1.0), 0.0)  # e^{−G} dy at the nodes
        return -np.einsum("qj,tqj->t", weight * w[:, None], self.assoc.gunit)


GRADIENT_BLOCK_BYTES = 256 * 2**20  # atoms of one block of types held at once (docs/model.md §15.8): at least one type


def _atom_bytes_per_type(tiers: int, alpha: float, nodes: int) -> float:
    """Bytes of the atoms of one type: ``2|S|`` segments (the coverage cuts) of ``N`` nodes per tier."""
    return (GRADIENT_BYTES * nodes if alpha != 2.0 else GRADIENT_BYTES_ALPHA2) * tiers * tiers


def atom_blocks(tiers: int, types: int, alpha: float, nodes: int) -> list[slice]:
    """Blocks of types whose atoms fit in :data:`GRADIENT_BLOCK_BYTES` (one type per block at least)."""
    step = max(1, int(GRADIENT_BLOCK_BYTES // max(1.0, _atom_bytes_per_type(tiers, alpha, nodes))))
    return [slice(start, min(types, start + step)) for start in range(0, types, step)]


class _BlockWindow:
    """A :class:`_Window` computed block of types by block: the same ``values``, ``vjp`` and
    ``tilt_derivative``, each pass rebuilding the block's atoms (types are independent, docs/model.md §15.8)."""

    def __init__(self, make: Any, blocks: list[slice], shape: tuple[int, int]) -> None:
        self.make, self.blocks, self.shape = make, blocks, shape

    def _each(self, fn: Any) -> FloatArray:
        out = np.empty(self.shape)
        for cols in blocks_done(self.blocks):  # counted on a long run's bar (placement/work_progress.py)
            out[:, cols] = fn(self.make(cols), cols)
        return out

    @cached_property
    def values(self) -> FloatArray:
        return self._each(lambda win, cols: win.values)

    def vjp(self, w: FloatArray, lam: FloatArray) -> tuple[FloatArray, FloatArray]:
        lam_bar, b_bar = np.zeros(self.shape[0]), np.empty(self.shape)
        for cols in blocks_done(self.blocks):
            lb, b_bar[:, cols] = self.make(cols).vjp(w[:, cols], lam)
            lam_bar += lb
        return lam_bar, b_bar

    def tilt_derivative(self) -> FloatArray:
        return self._each(lambda win, cols: win.tilt_derivative())


class _BlockedAtoms:
    """:class:`_Atoms` of blocks of types (:func:`atom_blocks`): memory of one block, whatever ``|Q|`` is."""

    def __init__(self, lam: FloatArray, b: FloatArray, u_cut: FloatArray, alpha: float, nodes: int, blocks: list[slice]) -> None:
        self.lam, self.b, self.u_cut, self.alpha, self.nodes, self.blocks = lam, b, u_cut, alpha, nodes, blocks
        self.assoc = _BlockWindow(lambda cols: self._atoms(cols).assoc, blocks, b.shape)

    def _atoms(self, cols: slice) -> _Atoms:
        return _Atoms(self.lam, self.b[:, cols], self.u_cut[:, cols], self.alpha, self.nodes)

    def truncated(self, tilt: FloatArray | None) -> _BlockWindow:
        return _BlockWindow(lambda cols: self._atoms(cols).truncated(None if tilt is None else tilt[:, cols]), self.blocks, self.b.shape)

    def axis_lambda_vjp(self, w: FloatArray) -> FloatArray:
        return sum((self._atoms(cols).axis_lambda_vjp(w[cols]) for cols in blocks_done(self.blocks)), np.zeros(self.lam.size))


def point_atoms(lam: FloatArray, b: FloatArray, u_cut: FloatArray, alpha: float, nodes: int) -> _Atoms | _BlockedAtoms:
    """The atoms of one point: all types at once when they fit in one block, else :class:`_BlockedAtoms`."""
    blocks = atom_blocks(lam.size, b.shape[1], alpha, nodes)
    if len(blocks) == 1:
        return _Atoms(lam, b, u_cut, alpha, nodes)
    return _BlockedAtoms(lam, b, u_cut, alpha, nodes, blocks)


# -- loads of the tiers ------------------------------------------------------------------------------
class _Loads:
    """Per-node loads of tiers from their association ``A`` ``(n, Q)`` (docs/model.md §5, eq. (19.17)):

    ``λq_s = σ_s Σ_q p_q A_{s,q}``, ``a_s = σ_s Σ_q A p_q/μ_{s,q}``, ``m_s = a_s/λq_s`` and, when the law
    reads it, ``E[S²]_s = σ_s Σ_q A p_q E[S²_{s,q}] / λq_s``, ``C²_s = max(0, E[S²]_s/m_s² − 1)``, with
    ``σ_s = Λ/λ_s``; a tier that receives nothing takes its shortest type's service.
    """

    def __init__(
        self,
        a_q: FloatArray,
        scale: FloatArray,
        p: FloatArray,
        weighted_service: FloatArray,
        weighted_second: FloatArray | None,
        service: FloatArray,
        second: FloatArray | None,
    ) -> None:
        self.scale, self.p, self.ws, self.w2 = scale, p, weighted_service, weighted_second
        lifted, k = lift(a_q)  # ratios of sums on rows lifted out of underflow (as in evaluate)
        arrivals = scale * (lifted @ p)
        work = scale * (lifted * weighted_service).sum(axis=1)
        self.arrivals, self.work = unlift(arrivals, k), unlift(work, k)
        self.busy = arrivals > 0
        # Seeds are divided by λq_s, never multiplied by 1/λq_s: at a subnormal λq_s the reciprocal overflows,
        # while the seeds on such a tier (∝ its A) and its ∂A keep every quotient finite.
        self.arrivals_or_inf = np.where(self.busy, self.arrivals, np.inf)  # an idle tier divides to 0
        shortest = service.argmin(axis=1)
        self.mean = np.where(self.busy, work / np.where(self.busy, arrivals, 1.0), service.min(axis=1))
        self.scv = self.moment = self.raw = None
        if weighted_second is not None and second is not None:
            raw = scale * (lifted * weighted_second).sum(axis=1)
            self.raw = unlift(raw, k)
            self.moment = np.where(self.busy, raw / np.where(self.busy, arrivals, 1.0), second[np.arange(shortest.size), shortest])
            self.scv = np.maximum(self.moment / self.mean**2 - 1.0, 0.0)

    def directional(self, d_a: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(∂a, ∂m, ∂C²)`` along ``∂A`` — ``(n, n, Q)`` columns ``t`` of ``∂A_{s,q}/∂W_t``, or ``(n, Q)``
        for one direction per tier — as ``(n, n)`` or ``(n,)`` arrays."""
        one = d_a.ndim == 2
        d_a = d_a[:, None, :] if one else d_a
        sums = np.stack(
            [np.einsum("q,stq->st", self.p, d_a), np.einsum("sq,stq->st", self.ws, d_a)]
            + ([np.einsum("sq,stq->st", self.w2, d_a)] if self.w2 is not None and self.scv is not None else [])
        )
        d_work, d_mean, d_scv = self.directional_sums(sums)
        if one:
            return d_work[:, 0], d_mean[:, 0], d_scv[:, 0]
        return d_work, d_mean, d_scv

    def contraction_weights(self) -> FloatArray:
        """``(W, n, Q)`` weights of the sums (16.7) that :meth:`directional_sums` reads: ``p_q``, ``p_q/μ_{s,q}``
        and, when the law reads ``C²``, ``p_q E[S²_{s,q}]``."""
        return np.stack(
            [np.broadcast_to(self.p, self.ws.shape), self.ws] + ([self.w2] if self.w2 is not None and self.scv is not None else [])
        )

    def directional_sums(self, sums: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(∂a, ∂m, ∂C²)`` ``(n, n)`` from ``sums[w, s, t] = Σ_q weight_w[s, q] ∂A_{s,q}/∂W_t`` (docs/model.md (16.7))."""
        col = (slice(None), None)
        d_work = self.scale[col] * sums[1]
        d_arr = self.scale[col] * sums[0]
        d_mean = (d_work - self.mean[col] * d_arr) / self.arrivals_or_inf[col]
        d_scv = np.zeros_like(d_work)
        if self.scv is not None:
            d_raw = self.scale[col] * sums[2]
            d_moment = (d_raw - self.moment[col] * d_arr) / self.arrivals_or_inf[col]  # type: ignore[index]
            d_scv = np.where((self.scv > 0)[col], d_moment / self.mean[col] ** 2 - 2.0 * (self.moment / self.mean**3)[col] * d_mean, 0.0)
        return d_work, d_mean, d_scv

    def vjp(self, work_bar: FloatArray, mean_bar: FloatArray, scv_bar: FloatArray | None, lam: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(Ā, λ̄)`` of seeds on ``a``, ``m`` and ``C²`` (``λ̄`` the direct ``1/λ_s`` of ``σ_s``)."""
        work_bar = work_bar.copy()
        arr_bar = np.zeros_like(work_bar)
        raw_bar = np.zeros_like(work_bar)
        mean_bar = mean_bar.copy()
        if scv_bar is not None and self.scv is not None:
            moment_bar = np.where(self.scv > 0, scv_bar / self.mean**2, 0.0)
            mean_bar -= np.where(self.scv > 0, 2.0 * scv_bar * self.moment / self.mean**3, 0.0)  # type: ignore[operator]
            raw_bar = moment_bar / self.arrivals_or_inf
            arr_bar -= moment_bar * self.moment / self.arrivals_or_inf
        work_bar += mean_bar / self.arrivals_or_inf
        arr_bar -= mean_bar * self.mean / self.arrivals_or_inf
        a_bar = self.scale[:, None] * (work_bar[:, None] * self.ws + arr_bar[:, None] * self.p)
        lam_bar = -(work_bar * self.work + arr_bar * self.arrivals)
        if self.w2 is not None and self.raw is not None:
            a_bar += self.scale[:, None] * raw_bar[:, None] * self.w2
            lam_bar -= raw_bar * self.raw
        return a_bar, lam_bar / lam


GRADIENT_BYTES = 240.0  # bytes per (s, q, node) of the atoms held at once, α ≠ 2 (traced peak 216, mean field, 40 × 20)
GRADIENT_BYTES_ALPHA2 = 480.0  # bytes per (s, q, segment) at α = 2 (traced peak 421, cell model, 40 × 20)


def _check_gradient_size(tiers: int, types: int, alpha: float, nodes: int) -> None:
    """Refuse, before allocating, a gradient whose atoms cannot fit in memory (docs/model.md (20.5)): they are
    held one block of types at a time (:func:`atom_blocks`), ``2|S|`` segments (the coverage cuts) of ``N`` nodes
    per tier and type, on top of ``O(|S| |Q| + |S|²)`` per-point arrays."""
    from edgeprefix.placement.memory import EVALUATION_BASE

    per_type = _atom_bytes_per_type(tiers, alpha, nodes)
    held = per_type * atom_blocks(tiers, types, alpha, nodes)[0].stop  # one block of types at a time
    per_point = 8.0 * (40 * tiers * types + 8 * tiers * tiers)  # (S, Q) seeds and loads, (S, S) matrices
    check_memory(  # on top of the floor every evaluation holds (docs/model.md (20.5)), so never below the evaluation's
        EVALUATION_BASE + held + per_point,
        "mix",
        f"the exact gradient of an evaluation with {tiers} profiles (active or entering) and {types} request types",
        "give fewer profiles a positive share or prune dominated profiles (profiles --max-profiles), or use a "
        "method without gradients (e.g. --method spsa)",
    )


# -- the linearised model at one point -------------------------------------------------------------
class _Linearisation:
    """Forward quantities and vector–Jacobian products of one evaluation over the tiers ``idx``."""

    def __init__(self, ev: Any, target: float, law: QueueLaw) -> None:
        inst = ev.instance
        net = inst.network
        if not isinstance(ev.kernel, AnalyticKernel):
            raise ValueError(f"gradient: needs the analytic kernel (AnalyticKernel), got {type(ev.kernel).__name__}")
        if ev.fixed_point is not None and not ev.fixed_point.converged:
            raise ValueError("gradient: the fixed point did not converge, so the point has no derivative; evaluate it again first")
        self.ev, self.law, self.target = ev, law, target
        self.policy = ev.policy
        self.xi, self.alpha = net.radio_scale, net.radio_exponent
        self.nodes = ev.kernel.nodes or default_nodes(self.alpha)
        self.rho_clip = float(getattr(ev, "rho_clip", RHO_CLIP))
        self.fixed_point = self.policy == "load_aware"
        conc = inst.concurrency.astype(float)
        active = np.asarray(ev.active, dtype=bool)
        entering = ~active & ((conc >= 1) | (not self.fixed_point))  # a c_s = 0 tier advertises +inf: never chosen
        self.idx = np.flatnonzero(active | entering)
        if isinstance(law, EngineLaw):  # its per-tier constants follow the tiers idx
            law = law.bind(self.idx)
            self.law = law
        _check_gradient_size(self.idx.size, len(inst.requests), self.alpha, self.nodes)
        self.active = active[self.idx]
        self.entering = entering[self.idx]
        density = net.edge_density
        self.lam = np.where(self.active, ev.mix[self.idx] * density, ENTERING_SHARE * density)
        self.g = inst.first_token_time[self.idx]  # g(L_q − h_{s,q}) in the paper's model, the bias's fixed part
        self.c = conc[self.idx]
        self.p = inst.probabilities
        self.service = inst.service_time[self.idx]
        self.weighted_service = self.p * self.service  # p_q / μ_{s,q}
        self.weighted_second = self.p * inst.service_second_moment[self.idx] if law.needs_scv else None  # p_q E[S²_{s,q}]
        self.scale = net.request_intensity / self.lam
        self.wait = np.zeros(self.idx.size)  # advertised W_s
        if self.fixed_point:
            self.wait[self.active] = ev.advertised_wait[self.idx[self.active]]
            if np.any(self.entering):
                self._solve_entering()
        self._build()

    # forward ---------------------------------------------------------------------------------
    def bias(self, wait: FloatArray) -> FloatArray:
        if self.policy == "nearest":
            return np.zeros_like(self.g)
        if self.policy == "prefix":
            return self.g / self.xi
        return (self.g + wait[:, None]) / self.xi

    def loads(self, a_q: FloatArray, rows: Any = slice(None)) -> _Loads:
        """Per-node loads of the tiers ``rows`` from their association ``a_q``."""
        second = None if self.weighted_second is None else self.weighted_second[rows]
        return _Loads(
            a_q,
            self.scale[rows],
            self.p,
            self.weighted_service[rows],
            second,
            self.service[rows],
            self.ev.instance.service_second_moment[self.idx][rows] if second is not None else None,
        )

    def _solve_entering(self) -> None:
        """Advertised delay of each test tier: ``W_e = T_e(W_e)`` with the other tiers held.

        Vectorised safeguarded Newton in ``v = log(W + w₀)`` (as the fixed point's, docs/model.md §7) on
        ``F(v) = log(T(W) + w₀) − v``, decreasing through its root: a step leaving the bracket
        ``[lo, hi]`` is replaced by bisection, so no probe drives a tier's load to zero.
        """
        e = self.entering
        shift = 0.05 * float(self.service.mean())
        association = self._test_association()
        law = self.law.bind(np.flatnonzero(e)) if isinstance(self.law, EngineLaw) else self.law

        def residual(v: FloatArray) -> tuple[FloatArray, FloatArray]:
            a_q, d_a = association(np.exp(v) - shift)  # A_{e,q} and ∂A_{e,q}/∂W_e
            loads = self.loads(a_q, e)
            t, da, dm, ds = law.advertised(loads.work, self.c[e], loads.mean, self.rho_clip, loads.scv)
            d_work, d_mean, d_scv = loads.directional(d_a)
            t_e = np.maximum(t, 0.0) + shift
            return np.log(t_e) - v, (da * d_work + dm * d_mean + ds * d_scv) * np.exp(v) / t_e - 1.0

        lo = np.full(int(e.sum()), np.log(shift))  # W = 0, where F ≥ 0
        hi = np.full_like(lo, np.inf)
        active = self.wait[self.active]
        v = np.log(np.full_like(lo, float(np.median(active)) if active.size else 0.0) + shift)
        for _ in range(200):
            f, df = residual(v)
            if np.all(np.abs(f) <= 1e-13):
                break
            lo = np.where(f > 0, v, lo)
            hi = np.where(f < 0, v, hi)
            newton = v - f / np.where(df < 0, df, -1.0)
            fallback = np.where(np.isfinite(hi), 0.5 * (lo + hi), v + 1.0)
            v = np.where((df < 0) & (newton > lo) & (newton < hi), newton, fallback)
        self.wait[e] = np.exp(v) - shift

    def _test_association(self) -> Any:
        """``W_e ↦ (A_{e,q}, ∂A_{e,q}/∂W_e)`` of the test tiers with the others held.

        At α = 2 a test tier does not change ``G_q``, so ``A_{e,q} = π λ_e ∫_{b_{e,q}}^∞ e^{−G_q}`` is a
        lookup in the active tiers' segments and ``∂A_{e,q}/∂b_{e,q} = −π λ_e e^{−G_q(b_{e,q})}``; at
        other α the kernel's association (and ``∂A/∂b``) of all tiers is taken.
        """
        e, kernel = self.entering, self.ev.kernel
        if self.alpha != 2.0:

            def through_kernel(w_e: FloatArray) -> tuple[FloatArray, FloatArray]:
                wait = self.wait.copy()
                wait[e] = w_e
                bias = self.bias(wait)
                a_q, diagonal = np.empty_like(bias), np.empty_like(bias)
                for cols in blocks_done(column_blocks(bias.shape[1], bias.shape[0] ** 2)):  # the diagonal only: (S, S) per type at a time
                    a_q[:, cols], d_a = kernel.association_jacobian(self.lam, bias[:, cols], self.alpha)
                    diagonal[:, cols] = np.einsum("ssq->sq", d_a)
                return a_q[e], diagonal[e] / self.xi

            return through_kernel
        active = self.active
        seg = _segments(self.lam[active], self.bias(self.wait)[active], np.empty((0, self.p.size)))
        fixed = self.g[e] / self.xi  # b_{e,q} = (g + W_e)/ξ
        weight = (np.pi * self.lam[e])[:, None]

        def by_lookup(w_e: FloatArray) -> tuple[FloatArray, FloatArray]:
            y = fixed + (w_e / self.xi)[:, None]  # (E, Q)
            k = (seg.lo[None] <= y[:, :, None]).sum(axis=2) - 1  # segment holding y, −1 before the first
            before = k < 0
            kk = np.maximum(k, 0)
            q = np.arange(y.shape[1])[None, :]
            lo, rate, g_at, length = seg.lo[q, kk], seg.rate[q, kk], seg.g_at[q, kk], seg.length[q, kk]
            ahead = np.zeros((seg.lo.shape[0], seg.lo.shape[1] + 1))  # ∫ from segment k's left end to ∞
            ahead[:, :-1] = np.cumsum(seg.m0[:, ::-1], axis=1)[:, ::-1]
            offset = np.where(before, 0.0, y - lo)
            g_y = np.where(before, 0.0, g_at + rate * offset)
            rest = np.where(np.isinf(length), 0.0, length - offset)  # to the segment's right end (a sum of positives)
            inside = np.exp(-g_y) * np.where(np.isinf(length), 1.0 / rate, rest * _phi_psi(rate * rest)[0]) + ahead[q, kk + 1]
            tail = np.where(before, seg.lo[:, 0][None, :] - y + ahead[:, 0][None, :], inside)
            return weight * tail, -weight * np.exp(-g_y) / self.xi

        return by_lookup

    def _build(self) -> None:
        self.b = self.bias(self.wait)
        self.u_cut = np.maximum((self.target - self.g) / self.xi, 0.0)
        self.atoms = point_atoms(self.lam, self.b, self.u_cut, self.alpha, self.nodes)
        if self.policy == "nearest":
            share = self.lam / self.lam.sum()
            self.A = np.repeat(share[:, None], self.p.size, axis=1)
        else:
            self.A = self.atoms.assoc.values
        self.load = self.loads(self.A)
        self.work, self.mean_service = self.load.work, self.load.mean
        self.waits: WaitLaw = self.law.wait_law(self.work, self.c, self.mean_service, self.load.scv)
        self.stable = self.waits.stable
        # the engine law's step in progress (docs/model.md (17.25)): the tails' windows end δ_s/ξ before the cut
        delay = self.waits.delay
        self.delayed = delay is not None and bool(np.any(delay > 0))
        self.tail_atoms = self.atoms
        if self.delayed:
            moved = np.maximum(self.u_cut - np.asarray(delay, dtype=float)[:, None] / self.xi, 0.0)
            self.tail_atoms = point_atoms(self.lam, self.b, moved, self.alpha, self.nodes)
        # the shifted mixture (docs/model.md (17.26)): the same windows with the cut J_s/ξ earlier
        self.shifted_atoms: tuple[Any, Any] | None = None
        if self.waits.shifted:
            j = np.asarray(self.waits.shift, dtype=float)[:, None] / self.xi
            cut = np.maximum(self.u_cut - j, 0.0)
            first = point_atoms(self.lam, self.b, cut, self.alpha, self.nodes)
            tail = first
            if self.delayed:
                tail = point_atoms(
                    self.lam, self.b, np.maximum(cut - np.asarray(delay, dtype=float)[:, None] / self.xi, 0.0), self.alpha, self.nodes
                )
            self.shifted_atoms = (first, tail)

    @cached_property
    def p1(self) -> _Window | _BlockWindow:
        """The mean field's ``P1`` windows (its coverage; the cell model has its own ``P1``, eq. (14.14))."""
        return self.atoms.truncated(None)

    @cached_property
    def p1_tail(self) -> _Window | _BlockWindow:
        """``P1`` up to the moved cut (the step in progress, (17.25)); :attr:`p1` without it."""
        return self.tail_atoms.truncated(None) if self.delayed else self.p1

    @cached_property
    def p2(self) -> list[_Window | _BlockWindow]:
        return [
            self.tail_atoms.truncated(np.where(self.stable, k, 0.0)[:, None] * self.xi * np.ones_like(self.b)) for k in self.waits.decay
        ]

    # reverse ---------------------------------------------------------------------------------
    def loads_vjp(self, work_bar: FloatArray, mean_bar: FloatArray, scv_bar: FloatArray | None = None) -> tuple[FloatArray, FloatArray]:
        """``(Ā, λ̄)`` of seeds on ``a_s``, ``1/μ_s`` and ``C²_s`` (see :class:`_Loads`)."""
        return self.load.vjp(work_bar, mean_bar, scv_bar, self.lam)

    def association_vjp(self, a_bar: FloatArray) -> tuple[FloatArray, FloatArray]:
        if self.policy == "nearest":  # A_{s,q} = λ_s / Σ_t λ_t
            total = self.lam.sum()
            return (a_bar.sum(axis=1) - (a_bar * self.A).sum()) / total, np.zeros_like(a_bar)
        return self.assoc_window_vjp(a_bar)

    def assoc_window_vjp(self, a_bar: FloatArray) -> tuple[FloatArray, FloatArray]:
        return self.atoms.assoc.vjp(a_bar, self.lam)

    def fixed_point_matrix(self) -> FloatArray:
        """``I − ∂T/∂W`` of the load–association map at the point (``(n, n)``)."""
        kernel = self.ev.kernel
        if hasattr(kernel, "association_contracted"):  # the sums (16.7) block by block, never the (n, n, Q) ∂A/∂b
            _, sums, k = kernel.association_contracted(self.lam, self.b, self.alpha, self.load.contraction_weights())
            d_work, d_mean, d_scv = self.load.directional_sums(np.ldexp(sums, -k[None, :, None]) / self.xi)
        else:
            d_a = kernel.association_jacobian(self.lam, self.b, self.alpha)[1] / self.xi  # ∂A_{s,q}/∂W_t, as Newton's
            d_work, d_mean, d_scv = self.load.directional(d_a)
        _, da, dm, ds = self.law.advertised(self.work, self.c, self.mean_service, self.rho_clip, self.load.scv)
        self._advertised_slopes = (da, dm, ds)
        return np.eye(self.idx.size) - (da[:, None] * d_work + dm[:, None] * d_mean + ds[:, None] * d_scv)

    def advertised_vjp(self, v: FloatArray) -> FloatArray:
        """``vᵀ ∂T/∂λ`` at fixed ``W``."""
        da, dm, ds = self._advertised_slopes
        a_bar, lam_bar = self.loads_vjp(v * da, v * dm, v * ds)
        return lam_bar + self.association_vjp(a_bar)[0]

    # objectives: seeds → (λ̄ at fixed W, W̄) -----------------------------------------------------
    def coverage(self) -> tuple[float, FloatArray, FloatArray]:
        if getattr(self.ev, "queue_model", "meanfield") == "cell":
            return self.cell_coverage()
        if self.shifted_atoms is None:
            _, per_tier, lam_bar, b_bar, weight_bar, decay_bar = self._windows(self.p1, self.p1_tail, self.p2, np.ones(self.idx.size))
            work_bar, mean_bar, scv_bar = self.waits.vjp(weight_bar, decay_bar)
            return float(per_tier.sum()), *self._through_loads(work_bar, mean_bar, lam_bar, b_bar, scv_bar)
        # (17.26): (1 − ω_J) times the pairs at g plus ω_J times those at g + J; ∂J/∂ω_J = Σ_q p_q (pair_J − pair_0)
        omega = np.where(self.stable, np.asarray(self.waits.shift_weight, dtype=float), 0.0)
        first, tail = self.shifted_atoms
        p1_j = first.truncated(None)
        tail_j = tail.truncated(None) if self.delayed else p1_j
        p2_j = [tail.truncated(np.where(self.stable, k, 0.0)[:, None] * self.xi * np.ones_like(self.b)) for k in self.waits.decay]
        pair0, v0, lam0, b0, wb0, db0 = self._windows(self.p1, self.p1_tail, self.p2, 1.0 - omega)
        pair_j, vj, lamj, bj, wbj, dbj = self._windows(p1_j, tail_j, p2_j, omega)
        shift_bar = pair_j - pair0
        work_bar, mean_bar, scv_bar = self.waits.vjp(wb0 + wbj, db0 + dbj, shift_bar)
        return float((v0 + vj).sum()), *self._through_loads(work_bar, mean_bar, lam0 + lamj, b0 + bj, scv_bar)

    def _windows(
        self, p1: Any, p1_tail: Any, p2_wins: list[Any], scale: FloatArray
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        """``Σ_q p_q`` pair per stable tier of eq. (39) (pairs ``P1 − Σ_k ω_k (P1 − P1' + P2_k)``, ``P1'`` = ``P1`` without
        the step in progress, docs/model.md (17.25)), the same times ``scale_s``, and the seeds ``λ̄``, ``b̄``, ``ω̄_k``,
        ``θ̄_k`` of the scaled sum."""
        p, stable = self.p, self.stable.astype(float)
        st = stable * scale
        weight = self.waits.weight
        p2 = [win.values for win in p2_wins]
        gap = p1.values - p1_tail.values if self.delayed else np.zeros_like(p1.values)
        pair = stable * ((p1.values - sum(w[:, None] * (gap + v) for w, v in zip(weight, p2))) @ p)
        total = weight.sum(axis=0)
        if self.delayed:
            lam_bar, b_bar = p1.vjp(p[None, :] * (st * (1.0 - total))[:, None], self.lam)
            lb, bb = p1_tail.vjp(p[None, :] * (st * total)[:, None], self.lam)
            lam_bar, b_bar = lam_bar + lb, b_bar + bb
        else:
            lam_bar, b_bar = p1.vjp(p[None, :] * st[:, None], self.lam)
        weight_bar = np.zeros_like(weight)
        decay_bar = np.zeros_like(weight)
        for k, win in enumerate(p2_wins):
            seed = -p[None, :] * (st * weight[k])[:, None]
            lb, bb = win.vjp(seed, self.lam)
            lam_bar, b_bar = lam_bar + lb, b_bar + bb
            weight_bar[k] = -st * ((gap + p2[k]) @ p)
            decay_bar[k] = self.xi * (seed * win.tilt_derivative()).sum(axis=1)
        return pair, scale * pair, lam_bar, b_bar, weight_bar, decay_bar

    def cell_coverage(self) -> tuple[float, FloatArray, FloatArray]:
        """The cell model's coverage (docs/model.md §14): its partials in ``λ``, ``b``, ``a``, ``1/μ`` and ``C²`` at
        fixed routing (eq. (14.10)), chained through the loads like the mean field's windows."""
        work = self.ev.instance.network.request_intensity * self.p * self.service  # w_{s,q} = Λ p_q / μ_{s,q}
        grad = cell_coverage_gradient(
            self.lam,
            self.b,
            work,
            self.target,
            radio_scale=self.xi,
            first_token=self.g,
            **cell_node_law(self.c, self.law.tiers if isinstance(self.law, EngineLaw) else None),
            offered_load=self.work,
            mean_service=self.mean_service,
            service_scv=self.load.scv if self.law.needs_scv else None,
            weights=self.p,
            alpha=self.alpha,
            nodes=self.nodes,
        )
        return grad.value, *self._through_loads(grad.offered_load, grad.mean_service, grad.lam, grad.offsets, grad.service_scv)

    def mean_ttft(self) -> tuple[float, FloatArray, FloatArray]:
        if not np.all(self.stable[self.active]):
            raise ValueError("objective: mean TTFT is infinite at a mix with an unstable tier (ρ_s ≥ 1), so it has no gradient")
        p = self.p
        mean_wait = np.where(self.stable, self.waits.mean(), 0.0)  # an unstable test tier: +inf, set below
        beta = self.xi * self.b
        extra = self.g + mean_wait[:, None] - beta  # g + W̄_s − β_{s,q}: 0 for load-aware below ρ_clip
        value = float(self.ev.mean_ttft)
        lam_bar = self.xi * self.atoms.axis_lambda_vjp(p)  # Σ_q p_q ξ ∂E[Y_q]/∂λ (∂E[Y_q]/∂b_t = A_{t,q} cancels −A β)
        a_bar, lb = self.loads_vjp(*self.waits.mean_vjp((self.A * p).sum(axis=1)))
        lam_bar = lam_bar + lb
        lb, bb = self.association_vjp(a_bar + p * extra)
        return value, lam_bar + lb, bb

    def max_utilization(self) -> tuple[float, FloatArray, FloatArray]:
        rho = np.where(self.active, self.work / self.c, -np.inf)
        top = int(np.argmax(rho))
        work_bar = np.zeros(self.idx.size)
        work_bar[top] = 1.0 / self.c[top]
        return float(rho[top]), *self._through_loads(work_bar, np.zeros(self.idx.size), np.zeros(self.idx.size), np.zeros_like(self.b))

    def _through_loads(
        self, work_bar: FloatArray, mean_bar: FloatArray, lam_bar: FloatArray, b_bar: FloatArray, scv_bar: FloatArray | None = None
    ) -> tuple[FloatArray, FloatArray]:
        a_bar, lb = self.loads_vjp(work_bar, mean_bar, scv_bar)
        la, ba = self.association_vjp(a_bar)
        return lam_bar + lb + la, b_bar + ba


def sensitivity(evaluation: Any, target: float | None = None, objectives: Sequence[str] = ("coverage",)) -> Sensitivity:
    """Exact ``∂J/∂π_s`` of a converged evaluation (see module notes and docs/model.md §15).

    Parameters
    ----------
    evaluation : an :class:`~edgeprefix.placement.model.evaluation.Evaluation` computed with the
        analytic kernel and a converged fixed point.
    target : ``τ`` of the coverage (default: the evaluation's ``τ_0``).
    objectives : any of ``coverage``, ``mean_ttft``, ``max_utilization``.
    """
    bad = [o for o in objectives if o not in OBJECTIVES]
    if bad or not objectives:
        raise ValueError(f"objectives: each must be one of {list(OBJECTIVES)}, got {list(objectives)}")
    tau = float(evaluation.target if target is None else target)
    if not (np.isfinite(tau) and tau > 0):
        raise ValueError(f"target: τ must be a positive number of seconds, got {tau!r}")
    mgc = getattr(evaluation.instance, "queue_law", "mmc") == "mgc"
    queue_model = str(getattr(evaluation, "queue_model", "meanfield"))
    if queue_model not in ("meanfield", "cell"):
        wait_law_for(queue_model)  # raises with the valid list
    # the cell model acts after the fixed point: routing, loads and advertised delays are the mean field's
    law = wait_law_for("mgc" if mgc else "meanfield")
    if getattr(evaluation, "queue_law", "slots") == "engine":  # docs/model.md §17.10: the instance is in the engine's units
        law = EngineLaw(evaluation.instance.engine_tiers)
    point = _Linearisation(evaluation, tau, law)
    matrix = point.fixed_point_matrix() if point.fixed_point else None
    inst = evaluation.instance
    gradients: dict[str, FloatArray] = {}
    values: dict[str, float] = {}
    solves = 0
    for name in dict.fromkeys(objectives):
        value, lam_bar, b_bar = getattr(point, name)()
        if matrix is not None:
            w_bar = b_bar.sum(axis=1) / point.xi
            try:
                v = np.linalg.solve(matrix.T, w_bar)
            except np.linalg.LinAlgError:
                raise ValueError("gradient: I − ∂T/∂W is singular at this fixed point (a bifurcation): no derivative") from None
            solves += 1
            lam_bar = lam_bar + point.advertised_vjp(v)
        grad = np.zeros(len(inst.profile_ids))
        grad[point.idx] = lam_bar * inst.network.edge_density
        if name == "mean_ttft":  # a profile that enters unstable makes T̄ jump to +inf
            grad[point.idx[point.entering & ~point.stable]] = np.inf
        grad.setflags(write=False)
        gradients[name], values[name] = grad, value
    return Sensitivity(
        profile_ids=tuple(inst.profile_ids),
        policy=evaluation.policy,
        target=tau,
        gradients=gradients,
        values=values,
        entering=tuple(inst.profile_ids[i] for i in point.idx[point.entering]),
        linear_solves=solves,
    )
