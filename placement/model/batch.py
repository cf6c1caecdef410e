"""Many mixes evaluated in one vectorised call (docs/model.md §16).

:func:`evaluate_batch` scores ``B`` mixes of one instance at once.  The load–association fixed
point of every mix is solved by the single-mix Newton method of :func:`evaluate` — the residual
``F(v) = log(T(e^v − w₀) + w₀) − v``, its exact Jacobian, Armijo backtracking, the same stopping
test — run in lock-step over the batch; the Jacobian is formed only where a new Newton direction
is needed (not at the trial points of the line search, nor at the last point), and only through
the two contractions the loads use (:mod:`edgeprefix.placement.model.batch_kernel`).  The coverage
at ``τ_0`` of every mix comes from one kernel call (at α = 2 over the non-empty pieces only).  Inactive tiers (``π_s = 0``) take part with
``λ_s = 0`` and a breakpoint beyond the cost where the active tiers' ``G_q`` exceeds 800
(``e^{−800}`` is 0 in double precision) and beyond the coverage cut, so they change neither the
sums nor the segments of the active tiers; their Newton rows are the identity.

A mix whose iteration fails (a singular Jacobian, a stalled line search, no convergence in
:data:`MAX_STEPS`) is evaluated again by :func:`evaluate` alone, i.e. by the robust solver with
its MINPACK and adaptive-damping fallbacks; :attr:`BatchEvaluation.fallback` says which.  Every
other mix follows the single-mix iterates, so the two agree to rounding (and in any case within
the fixed point's tolerance).  Kernels other than :class:`AnalyticKernel`, the ``damped``
method and the M/G/c queue law (docs/model.md §19.6) are evaluated one mix at a time.  Under the cell
queue model (docs/model.md §14) the fixed point is the mean field's and is batched as well; the cell
coverage of the converged mixes is then one call with their tiers side by side (α = 2; mix by mix
otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import NumericalError, plain
from edgeprefix.placement.model.batch_kernel import Alpha2Batch, FoldedBatch
from edgeprefix.placement.model.cell import cell_coverage_pairs, cell_load, check_queue_model
from edgeprefix.placement.model.engine_law import check_queue_law
from edgeprefix.placement.model.evaluation import ASSOCIATION_SLACK, Evaluation, checked_probability, delay_cap, evaluate
from edgeprefix.placement.model.fixed_point import DEFAULT_TOLERANCE, FixedPointReport
from edgeprefix.placement.model.instance import MIX_TOLERANCE, Instance
from edgeprefix.placement.model.policies import check_policy, needs_fixed_point
from edgeprefix.placement.model.queueing import RHO_CLIP, advertised_wait, advertised_wait_and_slope, erlang_c
from edgeprefix.placement.model.spatial import AnalyticKernel, SpatialKernel
from edgeprefix.placement.model.tier_loads import lift, unlift

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.intp]
MAX_STEPS = 50  # Newton steps, as in the single-mix solver
SENTINEL_G = 800.0  # G_q at an inactive tier's breakpoint: e^{−800} == 0.0
BATCH_METHOD = "robust:newton-batch"


@dataclass(frozen=True)
class BatchEvaluation:
    """Result of :func:`evaluate_batch`.

    Attributes
    ----------
    evaluations : one :class:`Evaluation` per mix, in input order.
    coverage : ``P_cov(τ_0)`` per mix, ``(B,)`` (what ``evaluations[i].coverage()`` returns).
    fallback : ``(B,)`` mixes that the batched iteration left to :func:`evaluate`.
    route : ``"batched"``, or why every mix was evaluated by :func:`evaluate` one at a time.
    """

    evaluations: tuple[Evaluation, ...]
    coverage: FloatArray
    fallback: BoolArray
    route: str = "batched"

    def __len__(self) -> int:
        return len(self.evaluations)

    def __repr__(self) -> str:
        """One line (the instances inside the evaluations would print several KB each)."""
        cov = np.asarray(self.coverage, dtype=float)
        name = self.evaluations[0].instance.name if self.evaluations else "—"
        span = f"coverage {np.nanmin(cov):.4g}…{np.nanmax(cov):.4g}" if cov.size and np.isfinite(cov).any() else "no coverage"
        return f"BatchEvaluation({len(self)} mixes of {name!r}, {span}, {int(np.count_nonzero(self.fallback))} fallback)"


class _Loads(NamedTuple):
    """A tier's lifted loads at one point (:meth:`_Batch.lifted_loads`), ``(B, S)`` each."""

    k: npt.NDArray[np.int64]
    arrivals: FloatArray
    work: FloatArray
    mean_service: FloatArray

    def take(self, idx: IntArray) -> _Loads:
        return _Loads(self.k[idx], self.arrivals[idx], self.work[idx], self.mean_service[idx])

    def put(self, idx: IntArray, other: _Loads) -> None:
        for mine, theirs in zip(self, other):
            mine[idx] = theirs


@dataclass(frozen=True)
class _Batch:
    """The per-mix constants of one chunk (``B`` mixes)."""

    instance: Instance
    spatial: Alpha2Batch | FoldedBatch
    active: BoolArray  # (B, S)
    lam: FloatArray  # (B, S) λ_s = π_s λ_b
    scale: FloatArray  # (B, S) Λ / λ_s (0 for inactive tiers)
    servers: FloatArray  # (B, S) c_s (1 for inactive tiers: their queue is empty)
    reach: FloatArray  # (B,) past the last active breakpoint: G_q ≥ 800 there, and beyond the coverage cut

    @classmethod
    def of(cls, instance: Instance, kernel: AnalyticKernel, mix: FloatArray, u_cut_max: float) -> _Batch:
        net = instance.network
        active = mix > 0
        lam = mix * net.edge_density
        with np.errstate(divide="ignore"):
            scale = np.where(active, net.request_intensity / np.where(active, lam, 1.0), 0.0)
        servers = np.where(active, instance.concurrency.astype(float)[None, :], 1.0)
        reach = (SENTINEL_G / (np.pi * lam.sum(axis=1))) ** (net.radio_exponent / 2.0) + max(u_cut_max, 0.0) + 1.0
        work_weights = instance.probabilities * instance.service_time
        spatial: Alpha2Batch | FoldedBatch
        if net.radio_exponent == 2.0:
            spatial = Alpha2Batch(np.pi * lam, instance.probabilities, work_weights)
        else:
            lam_columns = np.repeat(lam.T, instance.first_token_time.shape[1], axis=1)
            spatial = FoldedBatch(kernel, net.radio_exponent, lam_columns, instance.probabilities, work_weights)
        return cls(instance, spatial, active, lam, scale, servers, reach)

    def take(self, idx: IntArray) -> _Batch:
        return _Batch(
            self.instance,
            self.spatial.take(idx),
            self.active[idx],
            self.lam[idx],
            self.scale[idx],
            self.servers[idx],
            self.reach[idx],
        )

    def cost_offsets(self, bias: FloatArray) -> FloatArray:
        """``b = β/ξ`` ``(B, S, Q)`` with inactive tiers moved past every active breakpoint and cut.

        The array is stored types-major (a ``(B, Q, S)`` block seen as ``(B, S, Q)``), the layout in which the
        kernel sorts each type's breakpoints, so that no copy is made there.
        """
        n, s, q = bias.shape
        b = np.empty((n, q, s)).transpose(0, 2, 1)
        np.divide(bias, self.instance.network.radio_scale, out=b)
        inactive = ~self.active
        if inactive.any():  # beyond the largest breakpoint of the mix (active or not: all are finite)
            far = b.reshape(len(b), -1).max(axis=1) + self.reach
            b[inactive] = np.broadcast_to(far[:, None], inactive.shape)[inactive][:, None]
        return b

    def loads(self, a_q: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``λq_s``, ``a_s`` and ``1/μ_s`` ``(B, S)`` from ``A`` (as in :func:`evaluate`)."""
        k, arrivals, work, mean_service = self.lifted_loads(a_q)
        return unlift(arrivals, k), unlift(work, k), mean_service

    def lifted_loads(self, a_q: FloatArray) -> tuple[npt.NDArray[np.int64], FloatArray, FloatArray, FloatArray]:
        """``k`` and ``2^k λq_s``, ``2^k a_s`` ``(B, S)`` on rows lifted out of underflow (:mod:`~edgeprefix.placement.model.tier_loads`), ``1/μ_s``."""
        inst = self.instance
        lifted, k = lift(a_q)
        arrivals = self.scale * (lifted @ inst.probabilities)
        work = self.scale * (lifted * (inst.probabilities * inst.service_time)[None]).sum(axis=2)
        busy = arrivals > 0
        mean_service = np.where(busy, work / np.where(busy, arrivals, 1.0), inst.service_time.min(axis=1)[None, :])
        return k, arrivals, work, mean_service

    # -- the fixed point's residual in v = log(W + w₀) ------------------------------------------
    def v_max(self, shift: FloatArray) -> FloatArray:
        """``log(W_max + w₀)`` ``(B, 1)``: ``T`` is evaluated at ``W = e^{min(v, v_max)} − w₀`` (docs/model.md (7.9))."""
        return np.log(delay_cap(self.instance.network.radio_scale) + shift)[:, None]

    def residual(self, v: FloatArray, shift: FloatArray, rho_clip: float) -> tuple[FloatArray, FloatArray, _Loads]:
        """``F(v)`` ``(B, S)`` (0 on inactive tiers), the association at ``W = e^v − w₀`` and its lifted loads
        (:meth:`lifted_loads`, which :meth:`jacobian` reuses at the same point)."""
        w = np.exp(np.minimum(v, self.v_max(shift))) - shift[:, None]  # the robust solver's cap (docs/model.md (7.9))
        bias = (self.instance.first_token_time.T[None] + w[:, None, :]).transpose(0, 2, 1)  # g + W, types-major
        a_q = self.spatial.association(self.cost_offsets(bias))
        loads = _Loads(*self.lifted_loads(a_q))
        work = unlift(loads.work, loads.k)
        tw = np.maximum(advertised_wait(work, self.servers, loads.mean_service, rho_clip), 0.0) + shift[:, None]
        return np.where(self.active, np.log(tw) - v, 0.0), a_q, loads

    def jacobian(
        self, v: FloatArray, shift: FloatArray, rho_clip: float, association: FloatArray, loads: _Loads | None = None
    ) -> FloatArray:
        """``∂F/∂v`` ``(B, S, S)``: ``∂T_s/∂W_t`` through (16.7), ``a_s``, ``1/μ_s`` and Erlang C (as in :func:`evaluate`).

        ``association`` is ``A`` at ``v`` and ``loads`` its lifted loads (both from :meth:`residual`; at α = 2
        the loads are not formed again).  Inactive rows and columns are those of ``−I`` (their ``v`` never moves).
        """
        inst = self.instance
        inside = v < self.v_max(shift)
        ev = np.exp(np.where(inside, v, self.v_max(shift)))
        offsets = (
            None
            if isinstance(self.spatial, Alpha2Batch)
            else self.cost_offsets(inst.first_token_time[None] + (ev - shift[:, None])[:, :, None])
        )
        a_q, k_p, k_w = self.spatial.association_and_contractions(offsets, association)
        if loads is None or offsets is not None:  # the folded kernel forms A again with its derivative
            loads = _Loads(*self.lifted_loads(a_q))
        k, arrivals, work, mean_service = loads
        wait, slope = advertised_wait_and_slope(unlift(work, k), self.servers, mean_service, rho_clip)
        scale_xi = (self.scale / inst.network.radio_scale)[:, :, None]
        d_arrivals, d_work = scale_xi * k_p, scale_xi * k_w
        lifted = np.where(arrivals > 0, arrivals, np.inf)[:, :, None]  # 2^k λq_s: the contractions are lifted alike
        d_mean = (unlift(d_work, -k) - mean_service[:, :, None] * unlift(d_arrivals, -k)) / lifted
        d_t = slope[:, :, None] * d_work + (wait / mean_service)[:, :, None] * d_mean
        tw = np.maximum(np.where(self.active, wait, 0.0), 0.0) + shift[:, None]
        eye = np.eye(v.shape[1])
        with np.errstate(invalid="ignore"):
            jac = np.where(inside[:, None, :], d_t * ev[:, None, :], 0.0) / tw[:, :, None] - eye
        off = ~self.active
        return np.where(off[:, :, None] | off[:, None, :], 0.0, jac) - np.where(off[:, :, None], eye, 0.0)


def _solve(
    batch: _Batch, w0: FloatArray, shift: FloatArray, tol: float, rho_clip: float
) -> tuple[FloatArray, FloatArray, _Loads, BoolArray, npt.NDArray[np.int64], npt.NDArray[np.int64], FloatArray]:
    """Lock-step Newton on ``F(v)`` (see the module notes).

    Returns ``W``, the association there and its lifted loads, success, Newton steps, evaluations of ``T`` (the
    single-mix count: the start and every trial point) and the final residual
    ``max_s |T(W)_s − W_s|`` per mix.
    """
    n, s = w0.shape
    v = np.log(np.maximum(w0, 0.0) + shift[:, None])
    f, assoc, loads = batch.residual(v, shift, rho_clip)
    jac = np.zeros((n, s, s))
    stale = np.ones(n, dtype=bool)  # the Jacobian is to be formed at v
    steps = np.zeros(n, dtype=np.int64)
    evaluations = np.ones(n, dtype=np.int64)
    failed = np.zeros(n, dtype=bool)
    done = np.zeros(n, dtype=bool)
    while True:
        with np.errstate(over="ignore", invalid="ignore"):
            w_res = np.max(np.abs(np.exp(v) * np.expm1(f)), axis=1)
            w_now = np.where(batch.active, np.exp(np.minimum(v, batch.v_max(shift))) - shift[:, None], 0.0)
        w_res = np.where(np.any(v >= batch.v_max(shift), axis=1), np.inf, w_res)  # at the cap: not a fixed point
        tol_w = 0.5 * tol * np.maximum(1.0, np.abs(w_now).max(axis=1))  # docs/model.md (7.6), as the single-mix solver
        done |= ~failed & (w_res <= tol_w)
        failed |= ~done & (steps >= MAX_STEPS)
        todo = np.flatnonzero(~done & ~failed)
        if not todo.size:
            break
        renew = todo[stale[todo]]
        if renew.size:
            jac[renew] = batch.take(renew).jacobian(v[renew], shift[renew], rho_clip, assoc[renew], loads.take(renew))
            stale[renew] = False
        direction, solved = _directions(jac[todo], f[todo])
        failed[todo[~solved]] = True
        todo, direction = todo[solved], direction[solved]
        norm = np.sqrt(np.einsum("bs,bs->b", f[todo], f[todo]))
        length = np.ones(todo.size)
        pending = np.arange(todo.size)
        while pending.size:  # Armijo backtracking, as in the single-mix solver
            idx = todo[pending]
            trial = v[idx] + length[pending, None] * direction[pending]
            f_t, a_t, l_t = batch.take(idx).residual(trial, shift[idx], rho_clip)
            evaluations[idx] += 1
            with np.errstate(over="ignore", invalid="ignore"):
                trial_norm = np.sqrt(np.einsum("bs,bs->b", f_t, f_t))
                ok = np.isfinite(trial_norm) & (trial_norm <= (1.0 - 1e-4 * length[pending]) * norm[pending])
            take = idx[ok]
            v[take], f[take], assoc[take] = trial[ok], f_t[ok], a_t[ok]
            loads.put(take, l_t.take(np.flatnonzero(ok)))
            steps[take] += 1
            stale[take] = True
            rejected = pending[~ok]
            length[rejected] *= 0.5
            low = length[rejected] < 1e-4
            failed[todo[rejected[low]]] = True
            pending = rejected[~low]
    ok = done & ~failed
    with np.errstate(over="ignore"):
        w = np.where(batch.active, np.exp(v) - shift[:, None], 0.0)
    return w, assoc, loads, ok, steps, evaluations, w_res


def _directions(jac: FloatArray, f: FloatArray) -> tuple[FloatArray, BoolArray]:
    """Solve ``J d = −F`` for every row; ``solved`` is false where ``J`` is singular or not finite."""
    direction = np.zeros(f.shape)
    solved = np.all(np.isfinite(jac), axis=(1, 2)) & np.all(np.isfinite(f), axis=1)
    rows = np.flatnonzero(solved)
    try:
        direction[rows] = np.linalg.solve(jac[rows], -f[rows][:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:  # one singular matrix spoils the stack: solve them one by one
        for k in rows:
            try:
                direction[k] = np.linalg.solve(jac[k], -f[k])
            except np.linalg.LinAlgError:
                solved[k] = False
    return direction, solved


CHUNK_ELEMENTS = 1 << 22  # (B, S, S, Q) numbers per chunk (32 MB; its minima are formed a cache-sized group at a time)


def _chunk_size(instance: Instance) -> int:
    """Mixes per chunk so that the ``(B, S, S, Q)`` Jacobian holds about :data:`CHUNK_ELEMENTS` numbers."""
    s, q = instance.first_token_time.shape
    return int(max(1, min(1024, CHUNK_ELEMENTS // (s * s * q))))


def _mixes(instance: Instance, mixes: Sequence[object] | npt.ArrayLike) -> FloatArray:
    """The mixes as a ``(B, S)`` array, checked as :meth:`Instance.mix_vector` checks one (its message on failure)."""
    s = len(instance.profiles)
    if isinstance(mixes, np.ndarray) and mixes.ndim == 2 and mixes.shape[1] == s:
        pi = np.asarray(mixes, dtype=float)
        with np.errstate(invalid="ignore"):
            bad = (
                ~np.all(np.isfinite(pi), axis=1)
                | np.any(pi < 0, axis=1)
                | (np.abs(pi.sum(axis=1) - 1.0) > MIX_TOLERANCE)
                | np.any((pi > 0) & (instance.concurrency < 1)[None, :], axis=1)
            )
        if bad.any():
            i = int(np.argmax(bad))
            instance.mix_vector(pi[i], field_name=f"mixes[{i}]")  # raises with the reason
        return pi
    rows = [instance.mix_vector(m, field_name=f"mixes[{i}]") for i, m in enumerate(mixes)]  # type: ignore[arg-type]
    return np.array(rows, dtype=float).reshape(len(rows), s)


def evaluate_batch(
    instance: Instance,
    mixes: Sequence[object] | npt.ArrayLike,
    policy: str = "load_aware",
    *,
    target: float | None = None,
    warm_start: npt.ArrayLike | None = None,
    tol: float = DEFAULT_TOLERANCE,
    rho_clip: float = RHO_CLIP,
    kernel: SpatialKernel | None = None,
    method: str = "robust",
    queue_model: str = "meanfield",
    queue_law: str = "slots",
) -> BatchEvaluation:
    """Evaluate ``B`` mixes ``π`` of ``instance`` (docs/model.md §5–8, §16), each as :func:`evaluate` would.

    The parameters not listed here are those of :func:`evaluate`.

    Parameters
    ----------
    mixes : ``(B, S)`` shares in profile order (or a sequence of mappings by profile id).
    warm_start : advertised delays ``W̄`` to start every fixed point from, ``(S,)`` or ``(B, S)``.
    method : ``robust`` (batched Newton, fallback to :func:`evaluate`) or ``damped`` (one by one).
    queue_model : ``meanfield`` or ``cell``: the fixed point is the mean field's under both (docs/model.md
        §14), so it is batched under both; the cell model's coverage of the batch is then one call with
        the mixes' tiers side by side (α = 2; mix by mix otherwise).
    queue_law : ``slots`` or ``engine`` (docs/model.md §17.10; the engine law's mixes go to :func:`evaluate`
        one at a time).
    """
    check_policy(policy)
    check_queue_model(queue_model)
    check_queue_law(queue_law, instance)
    pi = _mixes(instance, mixes)
    tau = instance.placement.target if target is None else float(target)
    if not (np.isfinite(tau) and tau > 0):
        raise ValueError(f"target: τ must be a positive number of seconds, got {plain(tau)}")
    kernel = kernel or AnalyticKernel()
    starts = np.zeros(pi.shape)
    if warm_start is not None:
        ws = np.asarray(warm_start, dtype=float)
        if ws.shape not in (pi.shape[1:], pi.shape):
            raise ValueError(f"warm_start: expected shape {pi.shape[1:]} or {pi.shape}, got {ws.shape}")
        starts = np.broadcast_to(np.where(np.isfinite(ws), ws, 0.0), pi.shape)
    route = "loop: the engine law" if queue_law != "slots" else _loop_reason(instance, kernel, method)
    if route is not None:
        singles = [
            evaluate(
                instance,
                row,
                policy,
                target=tau,
                method=method,
                warm_start=start,
                tol=tol,
                rho_clip=rho_clip,
                kernel=kernel,
                queue_model=queue_model,
                queue_law=queue_law,
            )
            for row, start in zip(pi, starts)
        ]
        return BatchEvaluation(tuple(singles), np.array([ev.coverage(tau) for ev in singles]), np.ones(len(pi), dtype=bool), route)
    assert isinstance(kernel, AnalyticKernel)  # _loop_reason sends every other kernel to the loop above
    evaluations: list[Evaluation] = []
    coverage, fallback = np.empty(len(pi)), np.zeros(len(pi), dtype=bool)
    size = _chunk_size(instance)
    for start in range(0, len(pi), size):
        chunk = slice(start, start + size)
        evs, cov, fb = _evaluate_chunk(instance, pi[chunk], starts[chunk], policy, tau, tol, rho_clip, kernel, queue_model)
        evaluations.extend(evs)
        coverage[chunk], fallback[chunk] = cov, fb
    return BatchEvaluation(tuple(evaluations), coverage, fallback)


BATCH_QUADRATURE = False  # batch the mixes at α ≠ 2 too (the folded layout of §16.3; off: measured slower)


def _loop_reason(instance: Instance, kernel: SpatialKernel, method: str) -> str | None:
    """Why the mixes go to :func:`evaluate` one at a time (docs/model.md §16.3), or ``None`` to batch them."""
    if type(kernel) is not AnalyticKernel:
        return "loop: a spatial kernel other than the analytic one"
    if method != "robust":
        return "loop: the damped method"
    if instance.queue_law != "mmc":
        return "loop: the M/G/c law"
    if instance.network.radio_exponent != 2.0 and not BATCH_QUADRATURE:
        # measured on mooncake_large at α = 3.5: the folded (S, B·Q) quadrature is 0.6–0.8× one mix at a time,
        # and 0.5–1.15× with 1 to 40 mixes per chunk, 0.57–0.88× again with converged mixes dropped: the quadrature
        # nodes follow each mix's breakpoints (benchmarks/README.md, batching at trace size; docs/model.md §16.3)
        return "loop: α ≠ 2 (the batched quadrature is slower than one mix at a time)"
    return None


def _evaluate_chunk(
    instance: Instance,
    pi: FloatArray,
    starts: FloatArray,
    policy: str,
    tau: float,
    tol: float,
    rho_clip: float,
    kernel: AnalyticKernel,
    queue_model: str = "meanfield",
) -> tuple[list[Evaluation], FloatArray, BoolArray]:
    net = instance.network
    xi = net.radio_scale
    g = instance.first_token_time
    u_cut = (tau - g) / xi  # (S, Q), the coverage cut in r^α
    batch = _Batch.of(instance, kernel, pi, float(u_cut.max()))
    n = len(pi)
    reports: list[FixedPointReport | None] = [None] * n
    fallback = np.zeros(n, dtype=bool)
    if needs_fixed_point(policy):
        service_mean = instance.service_time.mean(axis=1)
        shift = 0.05 * (batch.active * service_mean).sum(axis=1) / batch.active.sum(axis=1)
        w0 = np.where(batch.active, starts, 0.0)
        w_adv, a_q, solved_loads, ok, steps, calls, residual = _solve(batch, w0, shift, tol, rho_clip)
        fallback = ~ok
        for i in np.flatnonzero(ok):
            reports[i] = FixedPointReport(BATCH_METHOD, True, int(steps[i]), int(calls[i]), float(residual[i]))
        bias = g[None] + w_adv[:, :, None]
    else:
        bias = np.broadcast_to(np.zeros_like(g) if policy == "nearest" else g, (n, *g.shape)).copy()
        if policy == "nearest":
            share = batch.lam / batch.lam.sum(axis=1, keepdims=True)
            a_q = np.repeat(share[:, :, None], g.shape[1], axis=2)
        else:
            a_q = batch.spatial.association(batch.cost_offsets(bias))
    total = np.where(batch.active[:, :, None], a_q, 0.0).sum(axis=1)  # the single-mix checks (docs/model.md §20)
    if not np.all(np.isfinite(a_q)) or np.any(a_q < -ASSOCIATION_SLACK) or np.any(np.abs(total - 1.0) > ASSOCIATION_SLACK):
        raise NumericalError(
            f"association: Σ_s A_s,q = {total[np.argmax(np.abs(total - 1.0).max(axis=1))].tolist()!r}, not 1 (docs/model.md §20)"
        )
    if needs_fixed_point(policy):  # the loads of the last iterate, formed by its residual
        arrivals, work = unlift(solved_loads.arrivals, solved_loads.k), unlift(solved_loads.work, solved_loads.k)
        mean_service = solved_loads.mean_service
    else:
        arrivals, work, mean_service = batch.loads(a_q)
    if not (np.all(np.isfinite(arrivals)) and np.all(np.isfinite(work))):
        raise NumericalError("arrival rates λq_s are not finite (docs/model.md §20)")
    c = batch.servers
    if not needs_fixed_point(policy):
        w_adv = advertised_wait(work, c, mean_service, rho_clip)
    rho = work / c
    stable_tier = (rho < 1.0) | ~batch.active
    pw = erlang_c(work, c)
    with np.errstate(divide="ignore", invalid="ignore"):
        decay = (c - work) / mean_service
        w_bar = np.where(stable_tier, pw / decay, np.inf)
    # coverage at τ_0 (eq. (39)) of every mix in one kernel call
    tilt = np.where(batch.active & (decay > 0), decay, 0.0)[:, :, None] * xi
    p1, p2 = batch.spatial.truncated(
        batch.cost_offsets(bias), np.broadcast_to(np.maximum(u_cut, 0.0), bias.shape), np.broadcast_to(tilt, bias.shape)
    )
    pairs = p1 - pw[:, :, None] * p2
    pairs = np.where((stable_tier & batch.active)[:, :, None], np.maximum(pairs, 0.0), 0.0)
    if not (np.all(np.isfinite(p1)) and np.all(np.isfinite(p2))):
        raise NumericalError(f"coverage at τ = {tau!r} s: the tier integrals are not finite (docs/model.md §20)")
    coverage = checked_probability((pairs.sum(axis=1) * instance.probabilities).sum(axis=1), "coverage")
    demand = net.request_intensity * (
        instance.probabilities * np.where(batch.active[:, :, None], instance.service_time, np.inf).min(axis=1)
    ).sum(axis=1)
    capacity = demand < net.edge_density * (pi * instance.concurrency).sum(axis=1)
    tiers = np.stack([w_adv, arrivals, mean_service, rho, pw, w_bar, decay])  # (7, B, S)
    tiers = np.where(batch.active[None], tiers, np.nan)
    assoc_full = np.where(batch.active[:, :, None], a_q, 0.0)
    bias_full = np.where(batch.active[:, :, None], bias, np.nan)
    stable = np.all(stable_tier, axis=1)
    evaluations: list[Evaluation] = []
    for i in range(n):  # type: ignore[assignment]
        if fallback[i]:
            ev = evaluate(
                instance,
                pi[i],
                policy,
                target=tau,
                warm_start=starts[i],
                tol=tol,
                rho_clip=rho_clip,
                kernel=kernel,
                queue_model=queue_model,
            )
            evaluations.append(ev)
            coverage[i] = ev.coverage(tau)
            continue
        evaluations.append(
            Evaluation(
                instance=instance,
                policy=policy,
                mix=pi[i],
                target=tau,
                densities=batch.lam[i],
                active=batch.active[i],
                association=assoc_full[i],
                bias=bias_full[i],
                advertised_wait=tiers[0, i],
                arrival_rate=tiers[1, i],
                mean_service=tiers[2, i],
                utilization=tiers[3, i],
                wait_probability=tiers[4, i],
                mean_wait=tiers[5, i],
                decay=tiers[6, i],
                stable=bool(stable[i]),
                capacity_condition=bool(capacity[i]),
                fixed_point=reports[i],
                kernel=kernel,
                queue_model=queue_model,
            )
        )
    if queue_model == "cell":  # the per-node load law of docs/model.md §14, after the batched fixed point
        rows = np.flatnonzero(~fallback)
        if net.radio_exponent == 2.0 and rows.size:
            coverage[rows] = _cell_coverage([evaluations[i] for i in rows], tau)
        else:
            for i in rows:
                coverage[i] = evaluations[i].coverage(tau)
    return evaluations, coverage, fallback


def _cell_coverage(evaluations: list[Evaluation], tau: float) -> FloatArray:
    """The cell model's ``P_cov(τ)`` of several mixes (α = 2) in one call: their active tiers side by side,
    each competing only within its own mix (:func:`~edgeprefix.placement.model.cell.cell_load` ``groups``)."""
    inst = evaluations[0].instance
    net = inst.network
    xi = net.radio_scale
    work_rows = net.request_intensity * inst.probabilities[None, :] * inst.service_time
    parts: dict[str, list[FloatArray]] = {k: [] for k in ("lam", "b", "w", "g", "c", "a", "m", "group")}
    for i, ev in enumerate(evaluations):
        act = ev.active
        parts["lam"].append(ev.densities[act])
        parts["b"].append(ev.bias[act] / xi)
        parts["w"].append(work_rows[act])
        parts["g"].append(inst.first_token_time[act])
        parts["c"].append(inst.concurrency[act].astype(float))
        parts["a"].append((ev.arrival_rate * ev.mean_service)[act])
        parts["m"].append(ev.mean_service[act])
        parts["group"].append(np.full(int(act.sum()), i))
    cat = {k: np.concatenate(v) for k, v in parts.items()}
    law = cell_load(cat["lam"], cat["b"], net.radio_exponent, cat["w"], groups=cat["group"])
    pairs = cell_coverage_pairs(
        law, tau, radio_scale=xi, first_token=cat["g"], servers=cat["c"], offered_load=cat["a"], mean_service=cat["m"]
    )
    per_mix = np.bincount(cat["group"], (inst.probabilities * pairs).sum(axis=1), minlength=len(evaluations))
    return checked_probability(per_mix, "coverage")  # type: ignore[arg-type]  # numpy's stub: bincount is intp even with float weights
