"""The stages of one evaluation, in order (docs/model.md §8.6).

1. :func:`prepare` (*mix*): the checked options, the queue law's view of the instance, ``π``, ``τ_0`` and the
   active tiers (:class:`Prepared`);
2. :class:`TierLoads` and :class:`AssociationMap` (*association*): ``A_{s,q}`` of a bias and the loads
   ``λq_s``, ``a_s``, ``1/μ_s`` (and ``C²_s``) it sends to each tier (docs/model.md §5–6);
3. :func:`equilibrium` (*fixed point*): the advertised delays ``W̄`` at the load–association fixed point
   (docs/model.md §7; none for the policies that need none), the association and loads there;
4. the queue law's :meth:`~edgeprefix.placement.model.queue_laws.QueueLaw.operating_point` (*queue law*);
5. the router prediction (:mod:`~edgeprefix.placement.model.router_predictions`), read lazily by the
   :class:`~edgeprefix.placement.model.evaluation.Evaluation` the metrics stage assembles;
6. :data:`EXTENSIONS`: the report blocks of the instance's extensions (length sub-types, serving, catalogue).

:func:`~edgeprefix.placement.model.evaluation.evaluate` composes them; a queue law or a router prediction is a
class in :mod:`~edgeprefix.placement.model.evaluation_registry`, not a branch here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import NumericalError, plain
from edgeprefix.placement.memory import check_memory, evaluation_bytes
from edgeprefix.placement.model.blas_threads import single_blas_thread
from edgeprefix.placement.model.catalogue import catalogue_evaluation
from edgeprefix.placement.model.evaluation_registry import QUEUE_LAW_REGISTRY, ROUTER_PREDICTION_REGISTRY
from edgeprefix.placement.model.fixed_point import FixedPointReport, solve_fixed_point
from edgeprefix.placement.model.policies import check_policy, needs_fixed_point, policy_bias
from edgeprefix.placement.model.queue_laws import QueueLaw, QueueLawFamily, TierQueues
from edgeprefix.placement.model.router_predictions import RouterPrediction
from edgeprefix.placement.model.serving import serving_report
from edgeprefix.placement.model.spatial import AnalyticKernel, SpatialKernel
from edgeprefix.placement.model.tier_loads import lift, unlift

if TYPE_CHECKING:
    from edgeprefix.placement.model.evaluation import Evaluation
    from edgeprefix.placement.model.instance import Instance

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
BIAS_CAP = 1e250  # largest cost offset b = β/ξ at which the fixed point evaluates T (docs/model.md (7.9))
ASSOCIATION_SLACK = 1e-2  # |Σ_s A_{s,q} − 1| beyond which the association broke down (accuracy itself is
# reported by Evaluation.quadrature_error; default nodes keep it < 2e-6, docs/model.md §20)


# -- 1. mix ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Prepared:
    """The checked inputs of one evaluation; ``instance`` is the queue law's view (e.g. in the engine's units)."""

    instance: Instance
    policy: str
    queue_model: str
    queue_law: str
    law_family: QueueLawFamily = field(repr=False)
    prediction: RouterPrediction = field(repr=False)
    mix: FloatArray  # π_s
    target: float  # τ_0
    kernel: SpatialKernel = field(repr=False)
    active: BoolArray  # π_s > 0

    @property
    def densities(self) -> FloatArray:
        """``λ_s = π_s λ_b`` of every tier."""
        return self.mix * self.instance.network.edge_density


def prepare(
    instance: Instance,
    mix: Mapping[str, float] | npt.ArrayLike | None,
    policy: str,
    target: float | None,
    kernel: SpatialKernel | None,
    queue_model: str,
    queue_law: str,
) -> Prepared:
    """Stage 1: the options checked in order (policy, queue model, queue law and its view of the instance),
    then ``π``, ``τ_0`` and the size of the evaluation (docs/model.md §20)."""
    check_policy(policy)
    prediction: RouterPrediction = ROUTER_PREDICTION_REGISTRY.get(queue_model)()
    family: QueueLawFamily = QUEUE_LAW_REGISTRY.get(queue_law)
    instance = family.view(instance, queue_model)
    pi = instance.mix_vector(mix)
    tau = instance.placement.target if target is None else float(target)
    if not (np.isfinite(tau) and tau > 0):
        raise ValueError(f"target: τ must be a positive number of seconds, got {plain(tau)}")
    active = pi > 0
    check_size(int(active.sum()), len(instance.requests), instance.network.radio_exponent, policy)
    return Prepared(instance, policy, queue_model, queue_law, family, prediction, pi, tau, kernel or AnalyticKernel(), active)


def check_size(tiers: int, types: int, alpha: float, policy: str) -> None:
    """Refuse, before allocating, an evaluation whose ``(S, S, Q)`` sensitivities or ``(S, Q, S N)``
    quadrature grid cannot fit in memory (docs/model.md §20)."""
    needed = evaluation_bytes(tiers, types, alpha, policy)  # docs/model.md §20, (20.5): fitted to the measured peak
    if needed == 0.0:
        return
    check_memory(
        needed,
        "mix",
        f"an evaluation with {tiers} active profiles and {types} request types",
        "give fewer profiles a positive share (e.g. prune dominated profiles, profiles --max-profiles)",
    )


# -- 2. association and the loads it sends -----------------------------------------------------------------
@dataclass(frozen=True)
class TierLoads:
    """The loads a type association ``A`` ``(n, Q)`` sends to the active tiers, with precomputed weights (the
    fixed point's hot path): ``λq_s``, ``a_s``, ``1/μ_s`` and ``C²_s`` (docs/model.md §5, eq. (19.17))."""

    scale: FloatArray  # Λ / λ_s
    p_q: FloatArray
    service: FloatArray  # 1/μ_{s,q}
    weighted_service: FloatArray  # p_q / μ_{s,q}
    idle_service: FloatArray  # 1/μ_s of a tier that receives nothing
    weighted_second: FloatArray  # p_q E[S_{s,q}²]
    idle_second: FloatArray

    @classmethod
    def of(cls, prepared: Prepared) -> TierLoads:
        inst, active = prepared.instance, prepared.active
        lam = prepared.densities[active]
        p_q = inst.probabilities
        service = inst.service_time[active]
        second = inst.service_second_moment[active]
        return cls(
            scale=inst.network.request_intensity / lam,
            p_q=p_q,
            service=service,
            weighted_service=p_q * service,
            idle_service=service.min(axis=1),
            weighted_second=p_q * second,
            idle_second=np.take_along_axis(second, service.argmin(axis=1)[:, None], 1)[:, 0],
        )

    def lifted(self, a_q: FloatArray) -> tuple[IntArray, FloatArray, FloatArray, FloatArray]:
        """``k`` and ``2^k λq_s``, ``2^k a_s`` on rows lifted out of underflow (:mod:`~edgeprefix.placement.model.tier_loads`), ``1/μ_s``."""
        lifted, k = lift(a_q)
        arrivals = self.scale * (lifted @ self.p_q)
        work = self.scale * (lifted * self.weighted_service).sum(axis=1)
        busy = arrivals > 0
        mean_service = np.where(busy, work / np.where(busy, arrivals, 1.0), self.idle_service)
        return k, arrivals, work, mean_service

    def loads(self, a_q: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``λq_s``, ``a_s`` and ``1/μ_s``."""
        k, arrivals, work, mean_service = self.lifted(a_q)
        return unlift(arrivals, k), unlift(work, k), mean_service

    def service_scv(self, a_q: FloatArray, mean_service: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``C_S² = E[S²] / E[S]² − 1`` (eq. (19.17)) and ``E[S²]`` (a ratio of lifted sums, as ``1/μ_s``)."""
        lifted, _ = lift(a_q)
        arrivals = self.scale * (lifted @ self.p_q)
        second = self.scale * (lifted * self.weighted_second).sum(axis=1)
        busy = arrivals > 0
        moment = np.where(busy, second / np.where(busy, arrivals, 1.0), self.idle_second)
        return np.maximum(moment / mean_service**2 - 1.0, 0.0), moment


class AssociationMap:
    """``A_{s,q}`` of a bias ``β`` ``(n, Q)`` on the active tiers (docs/model.md §6), remembering the last
    association the fixed point's Jacobian computed so that the final one is not computed twice."""

    def __init__(self, prepared: Prepared) -> None:
        net = prepared.instance.network
        self.policy = prepared.policy
        self.kernel = prepared.kernel
        self.lam = prepared.densities[prepared.active]
        self.xi, self.alpha = net.radio_scale, net.radio_exponent
        self.types = len(prepared.instance.probabilities)
        self.last: dict[str, FloatArray] = {}

    def __call__(self, bias: FloatArray) -> FloatArray:
        if self.policy == "nearest":
            return np.repeat((self.lam / self.lam.sum())[:, None], self.types, axis=1)
        if "bias" in self.last and np.array_equal(self.last["bias"], bias):
            return self.last["association"]
        return self.kernel.association(self.lam, bias / self.xi, self.alpha)

    def remember(self, bias: FloatArray, association: FloatArray) -> None:
        self.last["bias"], self.last["association"] = bias, association


def check_association(a: FloatArray) -> None:
    """``A_{s,q}`` finite, in [0, 1] and with columns summing to 1, else :class:`NumericalError`."""
    total = a.sum(axis=0)
    if not np.all(np.isfinite(a)) or np.any(a < -ASSOCIATION_SLACK) or np.any(np.abs(total - 1.0) > ASSOCIATION_SLACK):
        raise NumericalError(f"association: Σ_s A_s,q = {total.tolist()!r}, not 1 (docs/model.md §20)")


# -- 3. the load–association fixed point -------------------------------------------------------------------
@dataclass(frozen=True)
class FixedPointOptions:
    """The fixed point's options of :func:`~edgeprefix.placement.model.evaluation.evaluate`."""

    method: str
    warm_start: npt.ArrayLike | None
    tol: float
    damping: float
    max_iterations: int
    rho_clip: float
    record_history: bool


@dataclass(frozen=True)
class Equilibrium:
    """The routing at the operating point, on the active tiers."""

    advertised_wait: FloatArray  # W̄_s told to the router
    bias: FloatArray  # β_{s,q}
    association: FloatArray  # A_{s,q}
    arrival_rate: FloatArray  # λq_s
    work: FloatArray  # a_s
    mean_service: FloatArray  # 1/μ_s
    service_scv: FloatArray | None  # C²_s when the law reads it
    report: FixedPointReport | None


def delay_cap(radio_scale: float) -> float:
    """``W_max = 10²⁵⁰ ξ`` (at most ``10²⁸⁰`` s in the accepted ranges): the robust solver evaluates ``T`` at
    ``min(W, W_max)``, so a wild trial step neither overflows ``e^v`` nor pushes ``b = β/ξ`` to where the
    association's sums (``π λ Δb``) overflow (docs/model.md (7.9))."""
    return BIAS_CAP * radio_scale


def exchangeable_tiers(keys: FloatArray) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Group the active tiers whose rows of ``keys`` are equal (eq. (7.10)).

    ``keys`` is ``(S, K)``: every per-tier input of the queue map ``T_s`` except the density (the
    prefill rows ``g_{s,·}``, ``c_s``, ``1/μ_{s,·}`` and, under the M/G/c law, ``E[S²_{s,·}]``).  Returns
    ``group`` ``(S,)``, the group of each tier (numbered by first appearance), and ``first`` ``(G,)``,
    each group's first tier.
    """
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # number the groups by their first tier
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inverse.reshape(-1)], first[order]


class QueueMap:
    """The fixed point's map ``T(W) = W^adv(loads(A(g + W)))`` and its Jacobian (docs/model.md §7, (16.7))."""

    def __init__(self, prepared: Prepared, law: QueueLaw, loads: TierLoads, association: AssociationMap, rho_clip: float) -> None:
        inst, active = prepared.instance, prepared.active
        self.law, self.loads, self.association, self.rho_clip = law, loads, association, rho_clip
        self.g = inst.first_token_time[active]  # g(L_q − h_{s,q}) in the paper's model (docs/model.md §19)
        self.c = inst.concurrency[active].astype(float)
        self.kernel = prepared.kernel
        self.contracted = hasattr(prepared.kernel, "association_contracted")
        self.load_scale = 1.0  # t of the load continuation (7.12): the map at t Λ; 1 everywhere else

    def __call__(self, w: FloatArray) -> FloatArray:
        a_q = self.association(self.g + w[:, None])
        _, work, mean_service = self.loads.loads(a_q)
        if self.load_scale != 1.0:
            work = work * self.load_scale
        scv = self.loads.service_scv(a_q, mean_service)[0] if self.law.needs_scv else None
        return self.law.advertised(work, self.c, mean_service, scv, self.rho_clip)

    def jacobian(self, w: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``T(W)`` and ``∂T_s/∂W_t`` through ``∂A/∂b`` (kernel), ``a_s``, ``1/μ_s`` and the queue law."""
        loads, assoc, needs_scv = self.loads, self.association, self.law.needs_scv
        lam, xi, alpha = assoc.lam, assoc.xi, assoc.alpha
        scale_xi = (loads.scale / xi)[:, None]
        bias = self.g + w[:, None]
        if self.contracted:  # only the sums of (16.7), type block by type block (docs/model.md §16.3)
            weights = np.stack(
                [np.broadcast_to(loads.p_q, bias.shape), loads.weighted_service] + ([loads.weighted_second] if needs_scv else [])
            )
            a_q, sums, _ = self.kernel.association_contracted(lam, bias / xi, alpha, weights)  # type: ignore[attr-defined]
        else:
            a_q, d_a = self.kernel.association_jacobian(lam, bias / xi, alpha)
        assoc.remember(bias, a_q)
        k, arrivals, work, mean_service = loads.lifted(a_q)  # row s lifted by 2^{k_s}: so is ∂A_{s,·}/∂b below
        work = unlift(work, k)
        if self.load_scale != 1.0:
            work = work * self.load_scale
        scv, moment = loads.service_scv(a_q, mean_service) if needs_scv else (None, None)
        wait, slope, slope_scv = self.law.advertised_and_slopes(work, self.c, mean_service, scv, self.rho_clip)
        if self.contracted:  # lifted by lift_exponents(A), the k above
            d_arrivals, d_work = scale_xi * sums[0], scale_xi * sums[1]
        else:
            if k.any():
                d_a = np.ldexp(d_a, k[:, None, None])
            d_arrivals = scale_xi * (d_a @ loads.p_q)  # (S, T), lifted
            d_work = scale_xi * np.matmul(d_a, loads.weighted_service[:, :, None])[:, :, 0]
        lifted_arrivals = np.where(arrivals > 0, arrivals, np.inf)[:, None]  # divides lifted derivatives: no overflow
        d_mean = (d_work - mean_service[:, None] * d_arrivals) / lifted_arrivals
        d_load = unlift(d_work, k) if self.load_scale == 1.0 else self.load_scale * unlift(d_work, k)
        jac = slope[:, None] * d_load + (wait / mean_service)[:, None] * d_mean
        if needs_scv and scv is not None and moment is not None and slope_scv is not None:  # ∂C²/∂W via E[S²], 1/μ (19.24)
            d_second = scale_xi * (sums[2] if self.contracted else np.matmul(d_a, loads.weighted_second[:, :, None])[:, :, 0])
            d_moment = (d_second - moment[:, None] * d_arrivals) / lifted_arrivals
            d_scv = np.where(
                (scv > 0)[:, None], d_moment / mean_service[:, None] ** 2 - 2.0 * (moment / mean_service**3)[:, None] * d_mean, 0.0
            )
            jac = jac + slope_scv[:, None] * d_scv
        return wait, jac


def fixed_point(prepared: Prepared, queue_map: QueueMap, law: QueueLaw, options: FixedPointOptions) -> tuple[FloatArray, FixedPointReport]:
    """``W̄`` of the active tiers at the fixed point, exchangeable tiers (eq. (7.10)) sharing one unknown."""
    active, pi = prepared.active, prepared.mix
    start = np.zeros(int(active.sum()))
    if options.warm_start is not None:
        ws = np.asarray(options.warm_start, dtype=float)
        if ws.shape != pi.shape:
            raise ValueError(f"warm_start: expected shape {pi.shape}, got {ws.shape}")
        start = np.where(np.isfinite(ws[active]), ws[active], 0.0)
    has_jacobian = bool(getattr(prepared.kernel, "provides_jacobian", False))
    # Exchangeable tiers (identical profiles, eq. (7.10)) share one unknown W: their breakpoints then
    # coincide exactly at every iterate, where the quadrature is smooth, instead of crossing.
    keys = [queue_map.g, queue_map.c[:, None], queue_map.loads.service] + law.exchange_keys()
    group, first = exchangeable_tiers(np.hstack(keys))
    members = np.equal.outer(group, np.arange(first.size)).astype(float)  # (S, G) one-hot

    def group_map(w: FloatArray) -> FloatArray:
        return queue_map(w[group])[first]

    def group_jacobian(w: FloatArray) -> tuple[FloatArray, FloatArray]:
        wait, jac = queue_map.jacobian(w[group])
        return wait[first], jac[first] @ members  # ∂T_g/∂W_h = Σ_{t ∈ h} ∂T_g/∂W_t

    def solve(begin: FloatArray, fallbacks: bool = True) -> tuple[FloatArray, FixedPointReport]:
        return solve_fixed_point(
            group_map,
            begin,
            method=options.method,
            tol=options.tol,
            damping=options.damping,
            max_iterations=options.max_iterations,
            record=options.record_history,
            jacobian=group_jacobian if has_jacobian else None,
            w_shift=0.05 * float(queue_map.loads.service.mean()),
            w_max=delay_cap(prepared.instance.network.radio_scale),
            fallbacks=fallbacks,
        )

    with single_blas_thread():  # Newton's |S| × |S| solves and the kernel's products (docs/model.md (16.11))
        w_group, report = solve(start[first])
        if not report.converged and options.method == "robust" and has_jacobian and not options.record_history:
            w_group, report = load_continuation(queue_map, solve, start[first], (w_group, report))
    if report.history:
        report = dataclasses.replace(report, history=tuple(tuple(np.asarray(h)[group].tolist()) for h in report.history))
    return w_group[group], report


def load_continuation(
    queue_map: QueueMap,
    solve: Callable[[FloatArray, bool], tuple[FloatArray, FixedPointReport]],
    start: FloatArray,
    failed: tuple[FloatArray, FixedPointReport],
    halvings: int = 12,
    max_solves: int = 40,
) -> tuple[FloatArray, FixedPointReport]:
    """The fixed point at ``Λ`` followed up from a lighter load (docs/model.md (7.12)).

    Solves at ``t Λ`` (the queue map's ``load_scale``) for ``t = 2⁻¹, 2⁻², …`` until one converges from the
    start, then climbs back to ``t = 1``, each solve (Newton and the pseudo-transient continuation, no further
    fallback) warm-started at the last converged point and the step halved
    whenever a solve fails.  Returns ``failed`` (the point and report of the solve at ``Λ``), its ``evaluations``
    counting the ladder's too, when no ladder reaches ``t = 1``.
    """
    evaluations, solves = failed[1].evaluations, 0
    try:
        t_good, w_good = 0.0, None
        for j in range(1, halvings + 1):
            queue_map.load_scale = 2.0**-j
            w, rep = solve(start, False)
            evaluations, solves = evaluations + rep.evaluations, solves + 1
            if rep.converged:
                t_good, w_good = 2.0**-j, w
                break
        if w_good is None:
            return failed[0], dataclasses.replace(failed[1], evaluations=evaluations)
        step = t_good
        while t_good < 1.0 and solves < max_solves:
            t_next = min(1.0, t_good + step)
            queue_map.load_scale = t_next
            w, rep = solve(w_good, False)
            evaluations, solves = evaluations + rep.evaluations, solves + 1
            if rep.converged:
                t_good, w_good, step = t_next, w, min(2.0 * step, 1.0)
            else:
                step *= 0.5
        if t_good < 1.0:
            return failed[0], dataclasses.replace(failed[1], evaluations=evaluations)
        return w_good, FixedPointReport("robust:load-continuation", True, solves, evaluations, rep.residual)
    finally:
        queue_map.load_scale = 1.0


def equilibrium(prepared: Prepared, law: QueueLaw, options: FixedPointOptions) -> Equilibrium:
    """Stages 2–3: the fixed point (load-aware policy) or none, then the association and the loads at it."""
    loads = TierLoads.of(prepared)
    association = AssociationMap(prepared)
    queue_map = QueueMap(prepared, law, loads, association, options.rho_clip)
    report: FixedPointReport | None = None
    if needs_fixed_point(prepared.policy):
        w_adv, report = fixed_point(prepared, queue_map, law, options)
    else:
        w_adv = np.zeros(int(prepared.active.sum()))
    bias = policy_bias(prepared.policy, queue_map.g, w_adv)
    a_active = association(bias)
    check_association(a_active)
    arrivals, work, mean_service = loads.loads(a_active)  # λq_s, a_s, 1/μ_s (docs/model.md §5)
    if not (np.all(np.isfinite(arrivals)) and np.all(np.isfinite(work))):
        raise NumericalError("arrival rates λq_s are not finite (docs/model.md §20)")
    scv = loads.service_scv(a_active, mean_service)[0] if law.needs_scv else None
    if report is None:  # the delay the router would be told at this routing
        w_adv = law.advertised(work, queue_map.c, mean_service, scv, options.rho_clip)
    return Equilibrium(w_adv, bias, a_active, arrivals, work, mean_service, scv, report)


# -- 4. the queue law at the operating point ----------------------------------------------------------------
def operating_point(prepared: Prepared, law: QueueLaw, routing: Equilibrium) -> TierQueues:
    """Stage 4: ``ρ_s``, stability, ``P^W_s``, ``θ_s`` and ``W̄_s`` of the active tiers under the queue law."""
    servers = prepared.instance.concurrency[prepared.active].astype(float)
    return law.operating_point(routing.work, servers, routing.mean_service, routing.service_scv)


# -- 6. extensions ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Extension:
    """One block of ``Evaluation.to_dict()`` that exists when the instance has the extension."""

    key: str
    applies: Callable[[Evaluation], bool]
    report: Callable[[Evaluation, float], Any]


EXTENSIONS: tuple[Extension, ...] = (
    Extension("types", lambda ev: ev.type_groups.resolved, lambda ev, tau: ev.by_type(tau)),  # docs/model.md §2.3
    Extension("serving", lambda ev: ev.instance.extended, lambda ev, tau: serving_report(ev)),  # docs/model.md §19
    Extension(
        "catalogue",
        lambda ev: ev.instance.catalogue is not None,
        lambda ev, tau: catalogue_evaluation(ev.instance, ev.mix, ev.policy, target=tau).report(),
    ),
)


def extension_reports(ev: Evaluation, tau: float) -> dict[str, Any]:
    """Stage 6: the blocks of :data:`EXTENSIONS` that apply to ``ev``, in order."""
    return {ext.key: ext.report(ev, tau) for ext in EXTENSIONS if ext.applies(ev)}
