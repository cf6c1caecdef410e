"""Association and its load Jacobian for a batch of mixes (docs/model.md §16).

:func:`edgeprefix.placement.model.batch.evaluate_batch` needs, for ``B`` mixes at once, the
association ``A_{s,q}`` and — for Newton's method on the fixed point — the two contractions of
``∂A_{s,q}/∂b_{t,q}`` that the loads use,

    ``K^p_{s,t} = Σ_q ∂A_{s,q}/∂b_{t,q} p_q``  and  ``K^w_{s,t} = Σ_q ∂A_{s,q}/∂b_{t,q} p_q / μ_{s,q}``,    (16.7)

never the ``(S, S, Q)`` derivative itself.  Inactive tiers (``π_s = 0``) carry ``λ_s = 0``.

* :class:`Alpha2Batch` (α = 2) sorts the breakpoints of every type of every mix at once
  (``(B·Q, S)``, tiers last) and runs along the ``S`` sorted positions of all columns together
  (``(S, B·Q)``): ``G_q`` is piecewise linear and ``T_{s,q} = ∫_{b_s}^∞ e^{−G_q}`` is a suffix sum
  of exact exponential integrals (the operations of
  :func:`~edgeprefix.placement.model.association.association_alpha2`, in the same order).  Then ``A = π λ_s T_s`` and,
  off the diagonal, ``∂A_{s,q}/∂b_{t,q} = π λ_s π λ_t min(T_{s,q}, T_{t,q})``, so (16.7) is two
  batched matrix–vector products with the ``(B, S, T, Q)`` array of minima; the diagonal
  follows from ``Σ_s A_{s,q} = 1``.
* :class:`FoldedBatch` (any α) lays the mixes' types side by side as columns of the spatial
  kernel (one density per column) and contracts the kernel's ``(S, S, B·Q)`` derivative.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.spatial import AnalyticKernel

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
CACHE_ELEMENTS = 1 << 17  # numbers of the (B', S, T, Q) minima formed at once (1 MB: they stay in cache)


def _fold(x: FloatArray) -> FloatArray:
    """``(B, S, Q) → (S, B·Q)``: the mixes' types side by side."""
    b, s, q = x.shape
    return x.transpose(1, 0, 2).reshape(s, b * q)


def _unfold(x: FloatArray, batch: int) -> FloatArray:
    """``(S, B·Q) → (B, S, Q)``."""
    return x.reshape(x.shape[0], batch, -1).transpose(1, 0, 2)


def _cumsum_rows(x: FloatArray, *, reverse: bool = False, out: FloatArray | None = None) -> FloatArray:
    """Running sum down axis 0 (from the last row up with ``reverse``), one vectorised add per row.

    numpy's ``cumsum`` along a short axis costs ~20× more per element than this loop over the
    ``S`` rows of an ``(S, B·Q)`` array; the additions happen in the same order.  ``out`` may be ``x``
    itself (each row is read before it is written).
    """
    if out is None:
        out = np.empty_like(x)
    rows = range(len(x) - 1, -1, -1) if reverse else range(len(x))
    previous = None
    for k in rows:
        if previous is None:
            if out is not x:
                out[k] = x[k]
        else:
            np.add(out[previous], x[k], out=out[k])
        previous = k
    return out


@dataclass(frozen=True)
class _Segments:
    """The sorted breakpoints of every column and ``G_q`` on them (α = 2), layout ``(K, M)``.

    ``order[m]`` sorts the tiers of column ``m``; ``bs[k, m]`` is the ``k``-th breakpoint, ``rate[k, m]``
    the slope ``G'`` on ``[bs_k, bs_{k+1})`` and ``g_at[k, m] = G(bs_k)``.
    """

    order: IntArray  # (M, S)
    flat: IntArray  # (M, S) flat index of the k-th smallest breakpoint of each column
    bs: FloatArray
    rate: FloatArray
    g_at: FloatArray
    rise: FloatArray  # (K − 1, M) G over each bounded segment

    @classmethod
    def of(cls, b: FloatArray, weight: FloatArray) -> _Segments:
        """From breakpoints ``b`` and weights ``π λ_s`` laid out ``(M, S)`` (types major, tiers minor)."""
        order = np.argsort(b, axis=1)  # ties may come in any order: their segment is empty
        flat = order + (np.arange(len(b)) * b.shape[1])[:, None]  # flat positions (faster than take_along_axis)
        rows = flat.T  # gathering with it lands the sorted values directly in the (K, M) layout
        bs = b.ravel()[rows]
        rate = weight.ravel()[rows]
        _cumsum_rows(rate, out=rate)
        rise = np.subtract(bs[1:], bs[:-1])  # G(bs_{k+1}) − G(bs_k) = G'_k (bs_{k+1} − bs_k)
        rise *= rate[:-1]
        g_at = np.empty_like(bs)
        g_at[0] = 0.0
        _cumsum_rows(rise, out=g_at[1:])
        return cls(order, flat, bs, rate, g_at, rise)

    def unsort(self, sorted_values: FloatArray, out: FloatArray | None = None) -> FloatArray:
        """``(K, M)`` values in sorted order back to ``(M, S)`` tier order (into ``out``, C-contiguous ``(M, S)``, if given)."""
        if out is None:
            out = np.empty(self.order.shape)
        out.reshape(-1)[self.flat] = sorted_values.T
        return out

    def ranks(self) -> IntArray:
        """Position of every tier among the sorted breakpoints of its column, ``(M, S)``."""
        out = np.empty_like(self.order)
        out.ravel()[self.flat] = np.arange(self.order.shape[1])
        return out

    def tails(self, out: FloatArray | None = None) -> FloatArray:
        """``T_{s} = ∫_{b_s}^∞ e^{−G(y)} dy`` ``(M, S)``: suffix sums of the segments' exact integrals (into ``out``)."""
        part = np.negative(self.g_at)  # e^{−G(bs_k)} (1 − e^{−rise_k}) / G'_k, in place
        np.exp(part, out=part)
        drop = np.negative(self.rise)
        np.expm1(drop, out=drop)
        np.negative(drop, out=drop)
        part[:-1] *= drop
        part /= self.rate
        return self.unsort(_cumsum_rows(part, reverse=True, out=part), out)


def _contract(cross_p: FloatArray, cross_w: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Add the diagonals ``∂A_{s,q}/∂b_{s,q} = −Σ_{t≠s} ∂A_{t,q}/∂b_{s,q}`` to the contracted off-diagonal terms.

    ``cross_p`` is symmetric, so its diagonal is minus its row sums; for ``K^w`` the weight
    ``p_q/μ_{s,q}`` belongs to the row ``s``, and ``Σ_q ∂A_{s,q}/∂b_{s,q} w_{s,q} = −Σ_{t≠s} K^w_{s,t}``
    holds because the minima are symmetric in ``(s, t)``.
    """
    idx = np.arange(cross_p.shape[-1])
    cross_p[:, idx, idx] = 0.0
    cross_w[:, idx, idx] = 0.0
    cross_p[:, idx, idx] = -cross_p.sum(axis=2)
    cross_w[:, idx, idx] = -cross_w.sum(axis=2)
    return cross_p, cross_w


@dataclass(frozen=True)
class Alpha2Batch:
    """α = 2: exact association, (16.7) and the coverage integrals for ``B`` mixes.

    weight : ``π λ_s`` ``(B, S)``.
    probabilities, work_weights : ``p_q`` ``(Q,)`` and ``p_q / μ_{s,q}`` ``(S, Q)``.
    """

    weight: FloatArray
    probabilities: FloatArray
    work_weights: FloatArray

    def take(self, idx: IntArray) -> Alpha2Batch:
        return Alpha2Batch(self.weight[idx], self.probabilities, self.work_weights)

    def _segments(self, b: FloatArray) -> _Segments:
        n, s, q = b.shape
        return _Segments.of(b.transpose(0, 2, 1).reshape(n * q, s), np.repeat(self.weight, q, axis=0))

    def _tails(self, b: FloatArray) -> FloatArray:
        """``T_{s,q}`` ``(B, S, Q)`` from the cost offsets ``b`` ``(B, S, Q)``, a cache-sized group of mixes at a time."""
        n, s, q = b.shape
        group = max(1, CACHE_ELEMENTS // (4 * s * q))
        out = np.empty((n, q, s))
        for i in range(0, n, group):
            part = b[i : i + group]
            self.take(np.arange(i, i + len(part)))._segments(part).tails(out[i : i + group].reshape(len(part) * q, s))
        return out.transpose(0, 2, 1)

    def association(self, b: FloatArray) -> FloatArray:
        """``A`` ``(B, S, Q)`` from the cost offsets ``b`` ``(B, S, Q)``."""
        tails = self._tails(b)
        tails *= self.weight[:, :, None]
        return tails

    def association_and_contractions(
        self, b: FloatArray | None, association: FloatArray | None = None
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``A`` ``(B, S, Q)`` and ``K^p``, ``K^w`` ``(B, S, T)`` of (16.7) at the offsets ``b``, or from ``A`` there if known."""
        if association is None:
            assert b is not None
            tails = np.ascontiguousarray(self._tails(b))  # (B, S, Q)
        else:  # T = A / (π λ_s) in the (B, S, Q) layout the minima read; an inactive tier's T never counts (its weight is 0)
            w = self.weight[:, :, None]
            tails = np.ascontiguousarray(association)
            tails = np.divide(tails, np.where(w > 0, w, 1.0), out=tails if tails is not association else None)
            if not np.all(w > 0):
                tails = np.where(w > 0, tails, 0.0)
        n, s_count, q = tails.shape
        weights = np.stack([np.broadcast_to(self.probabilities, self.work_weights.shape), self.work_weights], axis=-1)  # (S, Q, 2)
        group = max(1, CACHE_ELEMENTS // (s_count * s_count * q))  # mixes whose (S, T, Q) minima stay in cache
        nearest = np.empty((min(group, n), s_count, s_count, q))
        both = np.empty((n, s_count, s_count, 2))  # weights p_q and p_q/μ_{s,q} of the row s
        for start in range(0, n, group):
            part = tails[start : start + group]
            np.minimum(part[:, :, None, :], part[:, None, :, :], out=nearest[: len(part)])
            np.matmul(nearest[: len(part)], weights[None], out=both[start : start + len(part)])
        cross_p, cross_w = both[..., 0], both[..., 1]
        pair = self.weight[:, :, None] * self.weight[:, None, :]
        k_p, k_w = _contract(pair * cross_p, pair * cross_w)
        return (self.weight[:, :, None] * tails if association is None else association), k_p, k_w

    def truncated(self, b: FloatArray, u_cut: FloatArray, tilt: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``P1``, ``P2`` ``(B, S, Q)`` of :func:`~edgeprefix.placement.association.truncated_alpha2`, over the non-empty pieces.

        The piece on segment ``k`` of tier ``s`` is empty unless ``b_s ≤ bs_k < b_s + u_cut``: tier ``s``
        at rank ``r_s`` owns the pieces ``r_s … e_s − 1`` (``e_s`` breakpoints lie below its cut).  Those
        pieces are listed, evaluated with the closed forms of ``truncated_alpha2`` and summed per tier
        (a fifth of the ``S² Q`` pieces on the Mooncake instance).  ``u_cut ≥ 0`` and ``tilt``: ``(B, S, Q)``.
        """
        n, s_count, q = b.shape
        group = max(1, 4 * CACHE_ELEMENTS // (s_count * s_count * q))  # mixes per pass: the pieces' arrays stay in cache
        if n > group:
            parts = [
                self.take(np.arange(i, min(n, i + group)))._truncated(b[i : i + group], u_cut[i : i + group], tilt[i : i + group])
                for i in range(0, n, group)
            ]
            return np.concatenate([p for p, _ in parts]), np.concatenate([p for _, p in parts])
        return self._truncated(b, u_cut, tilt)

    def _truncated(self, b: FloatArray, u_cut: FloatArray, tilt: FloatArray) -> tuple[FloatArray, FloatArray]:
        n, s_count, q = b.shape
        m_count = n * q
        seg = self._segments(b)
        rank = seg.ranks()
        upper = (b + u_cut).transpose(0, 2, 1).reshape(m_count, s_count)
        end = np.zeros((m_count, s_count), dtype=np.intp)  # breakpoints below each cut
        for row in seg.bs:
            end += row[:, None] < upper
        counts = np.maximum(end - rank, 0).ravel()
        pair = np.repeat(np.arange(m_count * s_count), counts)  # flat (m, s) of every piece
        first = np.cumsum(counts) - counts
        # the segment tables transposed to (M, K), where the pieces of one tier are neighbours: piece i of pair
        # (m, s) is segment k = r_s + (i − first piece of the pair), at flat m K + k
        lead = (np.arange(m_count) * s_count)[:, None] + rank
        at = np.arange(pair.size) + np.repeat(lead.ravel() - first, counts)
        bs_t = np.ascontiguousarray(seg.bs.T)
        hi_t = np.empty_like(bs_t)  # bs_{k+1}; the last segment is unbounded
        hi_t[:, :-1] = bs_t[:, 1:]
        hi_t[:, -1] = np.inf
        # every listed piece has b_s ≤ lo = bs_k < top = b_s + u_cut and bs_k ≤ bs_{k+1}, so its length and
        # ``top − lo`` are ≥ 0 without clipping; the arithmetic is that of ``truncated_alpha2``, in place
        lo = np.take(bs_t, at)
        top = np.repeat(upper.ravel(), counts)
        d = np.take(hi_t, at)
        np.minimum(d, top, out=d)
        d -= lo
        k1 = np.take(np.ascontiguousarray(seg.rate.T), at)
        g0 = np.take(np.ascontiguousarray(seg.g_at.T), at)
        part1 = np.negative(g0)
        np.exp(part1, out=part1)
        x = np.multiply(k1, d)
        np.negative(x, out=x)
        np.expm1(x, out=x)
        part1 *= x
        np.negative(part1, out=part1)
        part1 /= k1  # k1 = G' > 0 on every listed piece
        t = np.repeat(tilt.transpose(0, 2, 1).ravel(), counts)
        k2 = np.subtract(k1, t, out=k1)
        e0_2 = np.subtract(top, lo, out=top)
        e0_2 *= t
        np.negative(g0, out=g0)
        np.subtract(g0, e0_2, out=e0_2)
        part2 = np.multiply(k2, d, out=lo)
        np.subtract(e0_2, part2, out=part2)
        np.maximum(e0_2, part2, out=part2)
        np.exp(part2, out=part2)
        part2 *= d
        np.abs(k2, out=k2)
        k2 *= d
        part2 *= _phi_in_place(k2)
        size = m_count * s_count
        scale = np.repeat(self.weight, q, axis=0)  # π λ_s, (M, S)
        p1 = (scale * np.bincount(pair, weights=part1, minlength=size).reshape(m_count, s_count)).reshape(n, q, s_count)
        p2 = (scale * np.bincount(pair, weights=part2, minlength=size).reshape(m_count, s_count)).reshape(n, q, s_count)
        return p1.transpose(0, 2, 1), p2.transpose(0, 2, 1)


def _phi_in_place(x: FloatArray) -> FloatArray:
    """``(1 − e^{−x}) / x`` for ``x ≥ 0`` with the limit ``1 − x/2`` below 1e-8, the numbers of
    :func:`~edgeprefix.placement.model.association._phi` (``x`` is left unchanged, one new array)."""
    small = x < 1e-8
    out = np.negative(x)
    np.expm1(out, out=out)
    np.negative(out, out=out)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(out, x, out=out)
    if small.any():
        out[small] = 1.0 - 0.5 * x[small]
    return out


@dataclass(frozen=True)
class FoldedBatch:
    """Any α: the spatial kernel on the ``(S, B·Q)`` layout (one density ``λ_s`` per column)."""

    kernel: AnalyticKernel
    alpha: float
    lam_columns: FloatArray  # (S, B·Q)
    probabilities: FloatArray
    work_weights: FloatArray

    def take(self, idx: IntArray) -> FoldedBatch:
        q = self.probabilities.size
        columns = (idx[:, None] * q + np.arange(q)[None, :]).ravel()
        return FoldedBatch(self.kernel, self.alpha, self.lam_columns[:, columns], self.probabilities, self.work_weights)

    def association(self, b: FloatArray) -> FloatArray:
        return _unfold(self.kernel.association(self.lam_columns, _fold(b), self.alpha), b.shape[0])

    def association_and_contractions(
        self, b: FloatArray | None, association: FloatArray | None = None
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        assert b is not None
        n, s, q = b.shape
        a, d_a = self.kernel.association_jacobian(self.lam_columns, _fold(b), self.alpha)
        d_a = d_a.reshape(s, s, n, q).transpose(2, 0, 1, 3)  # (B, S, T, Q)
        return _unfold(a, n), d_a @ self.probabilities, np.einsum("bstq,sq->bst", d_a, self.work_weights)

    def truncated(self, b: FloatArray, u_cut: FloatArray, tilt: FloatArray) -> tuple[FloatArray, FloatArray]:
        n = b.shape[0]
        p1, p2 = self.kernel.truncated(self.lam_columns, _fold(b), self.alpha, _fold(u_cut), _fold(tilt))
        return _unfold(p1, n), _unfold(p2, n)
