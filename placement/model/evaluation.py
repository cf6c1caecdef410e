"""One evaluation of a placement: fixed point, queues and every metric of docs/model.md §8.

``evaluate(instance, mix, policy)`` returns a frozen :class:`Evaluation`.  Coverage is kept as a
function of the target (``Evaluation.coverage(τ)``); the scalar metrics are computed once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import NumericalError, plain
from edgeprefix.placement.memory import check_memory, evaluation_bytes
from edgeprefix.placement.model.blas_threads import single_blas_thread
from edgeprefix.placement.model.catalogue import catalogue_evaluation
from edgeprefix.placement.model.cell import (
    ROUTER_OF_QUEUE_MODEL,
    CellLoad,
    cell_coverage_pairs,
    cell_load,
    check_queue_model,
    overload_shares,
)
from edgeprefix.placement.model.cell_gradient import CellGradient, cell_coverage_gradient
from edgeprefix.placement.model.engine_law import (
    check_queue_law,
    engine_advertised,
    engine_view,
    engine_wait_law,
    shipped_constants,
    stability_edge,
)
from edgeprefix.placement.model.fixed_point import (
    DEFAULT_DAMPING,
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_TOLERANCE,
    FixedPointReport,
    solve_fixed_point,
)
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.lengths import DeclaredTypes, type_groups
from edgeprefix.placement.model.mgc import mgc_advertised_wait_and_slopes, variability_factor
from edgeprefix.placement.model.policies import (
    check_policy,
    needs_fixed_point,
    policy_bias,
)
from edgeprefix.placement.model.queueing import (
    RHO_CLIP,
    advertised_wait,
    advertised_wait_and_slope,
    erlang_c,
)
from edgeprefix.placement.model.serving import serving_report
from edgeprefix.placement.model.spatial import AnalyticKernel, SpatialKernel
from edgeprefix.placement.model.tier_loads import lift, unlift

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
OVERLOAD_TOLERANCE = 0.01  # share of nodes allowed to overload before the cell model's plan is reported unstable


# The GPU load up to which the engine law is validated with ample KV memory (docs/model.md §17.10 fit table).
ENGINE_LAW_VALIDATED_LOAD = 0.55


@dataclass(frozen=True)
class Evaluation:
    """Result of :func:`evaluate`.  Per-tier arrays have shape ``(S,)`` in profile order (NaN for
    tiers with ``π_s = 0``); per-pair arrays are ``(S, Q)``."""

    instance: Instance
    policy: str
    mix: FloatArray  # π_s
    target: float  # τ_0 used by :attr:`coverage_at_target`
    densities: FloatArray  # λ_s = π_s λ_b
    active: npt.NDArray[np.bool_]
    association: FloatArray  # A_{s,q}
    bias: FloatArray  # β_{s,q}
    advertised_wait: FloatArray  # W̄_s seen by the router (continuous extension above ρ_clip)
    arrival_rate: FloatArray  # λq_s
    mean_service: FloatArray  # 1/μ_s
    utilization: FloatArray  # ρ_s
    wait_probability: FloatArray  # P^W_s (1 when unstable)
    mean_wait: FloatArray  # W̄_s of Erlang C (inf when unstable)
    decay: FloatArray  # c_s μ_s − λq_s (≤ 0 when unstable)
    stable: bool  # every active tier has ρ_s < 1
    capacity_condition: bool  # necessary condition eq. (35)
    fixed_point: FixedPointReport | None
    kernel: SpatialKernel = field(repr=False)
    service_scv: FloatArray | None = None  # C_S² per tier under the M/G/c law (docs/model.md §19.6), else None
    queue_model: str = "meanfield"  # "cell": coverage averaged over the per-node load (docs/model.md §14)
    rho_clip: float = RHO_CLIP  # ρ_clip of the advertised delay (docs/model.md §7)
    queue_law: str = "slots"  # "engine": the engine law of docs/model.md §17.10 (instance in the engine's units)

    # -- lazily computed spatial moments ----------------------------------------------------
    @cached_property
    def _moments(self) -> tuple[FloatArray, FloatArray]:
        xi = self.instance.network.radio_scale
        act = self.active
        mean_u, mean_r = self.kernel.moments(self.densities[act], self.bias[act] / xi, self.instance.network.radio_exponent)
        radio = np.zeros_like(self.association)
        radio[act] = xi * mean_u
        pair = np.full_like(self.association, np.nan)
        a = self.association[act]
        pair[act] = np.where(a > 0, mean_r / np.where(a > 0, a, 1.0), np.nan)
        return radio, pair

    @property
    def mean_radio(self) -> FloatArray:
        """``E[ξ r^α ; s, q]`` (joint with the selection of ``s``), ``(S, Q)``."""
        return self._moments[0]

    @property
    def mean_distance_by_pair(self) -> FloatArray:
        """``R̄_{s,q}``: mean serving distance given type ``q`` is served by ``s`` (NaN where ``A = 0``)."""
        return self._moments[1]

    @cached_property
    def quadrature_error(self) -> float:
        """Estimated max abs quadrature error on ``A`` (0 for the α = 2 closed form and ``nearest``)."""
        if self.policy == "nearest":
            return 0.0
        xi = self.instance.network.radio_scale
        return self.kernel.error(self.densities[self.active], self.bias[self.active] / xi, self.instance.network.radio_exponent)

    # -- cell-load queue model (docs/model.md §14) ------------------------------------------
    @cached_property
    def cell_load(self) -> CellLoad:
        """Per-node load law of the active tiers (variance ``v_s``, skewness ``γ_s``, ``M_{s,q}``)."""
        inst, act = self.instance, self.active
        work = inst.network.request_intensity * inst.probabilities[None, :] * inst.service_time[act]
        return cell_load(self.densities[act], self.bias[act] / inst.network.radio_scale, inst.network.radio_exponent, work)

    def _cell_pairs(self, tau: float) -> FloatArray:
        inst, act = self.instance, self.active
        xi = inst.network.radio_scale
        g = inst.first_token_time[act]
        queue_free = None  # α = 2: cell_coverage_pairs has P1_{s,q} in closed form
        if inst.network.radio_exponent != 2.0:  # P1_{s,q} of eq. (39) (F_W ≡ 1): the mass the radial rule is normalised to
            queue_free = (
                self.kernel.truncated(
                    self.densities[act], self.bias[act] / xi, inst.network.radio_exponent, (tau - g) / xi, np.zeros_like(g)
                )[0]
                if np.isfinite(tau)
                else self.association[act]
            )
        return cell_coverage_pairs(
            self.cell_load,
            tau,
            radio_scale=xi,
            first_token=g,
            servers=inst.concurrency[act].astype(float),
            offered_load=(self.arrival_rate * self.mean_service)[act],
            mean_service=self.mean_service[act],
            service_scv=None if self.service_scv is None else self.service_scv[act],
            queue_free=queue_free,
        )

    def cell_gradient(self, tau: float | None = None, weights: npt.ArrayLike | None = None) -> CellGradient:
        """``J = Σ_{s,q} ω_{s,q} P(T ≤ τ, s | q)`` of the cell model and its partial derivatives in the active
        tiers' ``λ_s``, ``b_{s,q} = β_{s,q}/ξ``, ``a_s``, ``1/μ_s``, ``w_{s,q}`` and (M/G/c law) ``C²_s``
        (docs/model.md §14.6; ``ω = p_q`` by default, so that ``J = P_cov(τ)``).  At α ≠ 2 the queue-free mass
        ``P1_{s,q}`` is the analytic kernel's quadrature with the kernel's nodes, as in :meth:`coverage`.

        These are the partials at the evaluation's operating point, with the routing held: a gradient
        in the mix chains them with the mean field's sensitivities of ``λ``, ``b``, ``a``, ``1/μ`` and
        ``C²`` (the implicit derivative of the fixed point).
        """
        inst, act = self.instance, self.active
        t = self.target if tau is None else float(tau)
        if not t > 0:
            raise ValueError(f"target: τ must be > 0 seconds, got {plain(t)}")
        net = inst.network
        if net.radio_exponent != 2.0 and not isinstance(self.kernel, AnalyticKernel):
            raise ValueError(
                f"kernel: the cell model's partials at radio_exponent ≠ 2 differentiate the analytic kernel's "
                f"quadrature (AnalyticKernel), got {type(self.kernel).__name__}"
            )
        work = net.request_intensity * inst.probabilities[None, :] * inst.service_time[act]
        return cell_coverage_gradient(
            self.densities[act],
            self.bias[act] / net.radio_scale,
            work,
            t,
            radio_scale=net.radio_scale,
            first_token=inst.first_token_time[act],
            servers=inst.concurrency[act].astype(float),
            offered_load=(self.arrival_rate * self.mean_service)[act],
            mean_service=self.mean_service[act],
            service_scv=None if self.service_scv is None else self.service_scv[act],
            weights=inst.probabilities if weights is None else weights,
            alpha=net.radio_exponent,
            nodes=getattr(self.kernel, "nodes", None),
        )

    # -- coverage and quantiles -------------------------------------------------------------
    def _coverage_pairs(self, tau: float, queue: bool) -> FloatArray:
        inst, act = self.instance, self.active
        if queue and self.queue_model == "cell":
            return self._cell_pairs(tau)
        if not np.isfinite(tau):
            return np.where(self._stable_tiers()[:, None] | (not queue), self.association[act], 0.0)
        xi = inst.network.radio_scale
        g = inst.first_token_time[act]  # g(L_q − h_{s,q}) in the paper's model (docs/model.md §19)
        u_cut = (tau - g) / xi
        tilt = np.where(self.decay[act] > 0, self.decay[act], 0.0)[:, None] * xi
        p1, p2 = self.kernel.truncated(self.densities[act], self.bias[act] / xi, inst.network.radio_exponent, u_cut, tilt)
        if not queue:
            return p1
        pairs = p1 - self.wait_probability[act][:, None] * p2
        if not (np.all(np.isfinite(p1)) and np.all(np.isfinite(p2))):
            raise NumericalError(f"coverage at τ = {tau!r} s: the tier integrals are not finite (docs/model.md §20)")
        return np.where(self._stable_tiers()[:, None], np.maximum(pairs, 0.0), 0.0)  # finite: only rounding below 0

    def _stable_tiers(self) -> npt.NDArray[np.bool_]:
        return self.utilization[self.active] < 1.0

    def coverage_by_pair(self, tau: float | None = None) -> FloatArray:
        """``P(T ≤ τ, s | q)`` as an ``(S, Q)`` table (zeros for inactive tiers)."""
        out = np.zeros_like(self.association)
        out[self.active] = self._coverage_pairs(self.target if tau is None else float(tau), queue=True)
        return out

    def coverage(self, tau: float | npt.ArrayLike | None = None) -> float | FloatArray:
        """TTFT coverage ``P_cov(τ)`` (eq. (39)); scalar in, scalar out; array in, array out."""
        return self._curve(tau, queue=True)

    def coverage_queue_free(self, tau: float | npt.ArrayLike | None = None) -> float | FloatArray:
        """Queue-free upper bound: eq. (39) with ``F_W ≡ 1``."""
        return self._curve(tau, queue=False)

    def _curve(self, tau: float | npt.ArrayLike | None, queue: bool) -> float | FloatArray:
        if tau is None or isinstance(tau, (int, float)):
            t = self.target if tau is None else float(tau)
            if not t >= 0:
                raise ValueError(f"target: τ must be >= 0 seconds, got {plain(t)}")
            pairs = self._coverage_pairs(t, queue)
            return float(checked_probability(self.instance.probabilities @ pairs.sum(axis=0), "coverage"))
        taus = np.asarray(tau, dtype=float)
        if np.any(np.isnan(taus)) or np.any(taus < 0):
            raise ValueError(f"target: τ must be >= 0 seconds, got {taus.tolist()}")
        p = self.instance.probabilities
        values = np.array([float((p * self._coverage_pairs(float(t), queue).sum(axis=0)).sum()) for t in taus.ravel()])
        values = checked_probability(values, "coverage")
        return float(values[0]) if taus.ndim == 0 else values.reshape(taus.shape)

    @property
    def coverage_at_target(self) -> float:
        return float(self.coverage(self.target))

    @property
    def max_coverage(self) -> float:
        """``lim_{τ→∞} P_cov(τ)``: the share of requests served by stable tiers."""
        return float(self.coverage(np.inf))

    def ttft_quantile(self, reliability: float) -> float:
        """``τ_ζ = inf{τ : P_cov(τ) ≥ ζ}`` (eq. (43)); ``inf`` when unstable tiers make ``ζ`` unreachable."""
        if not 0.0 < reliability < 1.0:
            raise ValueError(f"reliability: ζ must lie in (0, 1), got {plain(reliability)}")
        if self.max_coverage < reliability:
            return float("inf")
        hi = max(self.target, 1e-3)
        while self.coverage(hi) < reliability:
            hi *= 2.0
        from scipy.optimize import brentq  # only quantiles need it; keeps evaluate's start-up cheap

        return float(brentq(lambda t: self.coverage(t) - reliability, 0.0, hi, xtol=1e-9, rtol=1e-10))

    # -- scalar metrics ---------------------------------------------------------------------
    @property
    def mean_ttft(self) -> float:
        """``T̄`` (eq. (42)): mean radio + residual prefill + Erlang-C mean wait; ``inf`` if unstable."""
        inst, act = self.instance, self.active
        a = self.association[act]
        wait = np.where(a > 0, self.mean_wait[act][:, None], 0.0)  # a pair no request reaches adds nothing, not 0 × ∞
        per_pair = self.mean_radio[act] + a * (inst.first_token_time[act] + wait)
        per_pair = np.where(a > 0, per_pair, 0.0)
        return float((inst.probabilities * per_pair.sum(axis=0)).sum())

    @property
    def mean_prefix_depth(self) -> float:
        """``H̄ = Σ_q p_q Σ_s A_{s,q} h_{s,q}`` (eq. (44)), tokens."""
        inst = self.instance
        return float((inst.probabilities * (self.association * inst.reused_depth).sum(axis=0)).sum())

    @property
    def offload_ratio(self) -> float:
        """``η_off = Σ_q p_q Σ_s A_{s,q} Δ_{s,q} / Σ_q p_q g(L_q)`` (eq. (45))."""
        inst = self.instance
        saved = (inst.probabilities * (self.association * inst.saving).sum(axis=0)).sum()
        total = (inst.probabilities * inst.full_prefill).sum()
        return float(saved / total) if total > 0 else 0.0

    @property
    def mean_distance(self) -> float:
        """``R̄ = Σ_q p_q Σ_s A_{s,q} R̄_{s,q}``."""
        served = self.association > 0
        joint = np.where(served, self.association * np.where(served, self.mean_distance_by_pair, 0.0), 0.0)
        return checked_finite(float((self.instance.probabilities * joint.sum(axis=0)).sum()), "mean serving distance")

    # -- nodes whose own load reaches their slots (docs/model.md §14.9) ------------------------
    @cached_property
    def overloaded_shares(self) -> tuple[float, float]:
        """``(share of nodes, share of requests)`` at nodes whose offered load ``a_s X`` reaches ``c_s``
        under the cell model's node-level load law (eq. (14.3)), whatever the queue model: the mean field's
        every node carries its tier's load only when a router balances the nodes (docs/model.md §14.9)."""
        act = self.active
        rho = self.utilization[act]
        busy = rho > 0  # a tier that receives no work has no load law and overloads no node
        with np.errstate(divide="ignore", invalid="ignore"):
            law = (
                self.cell_load
                if busy.all()
                else cell_load(
                    self.densities[act][busy],
                    self.bias[act][busy] / self.instance.network.radio_scale,
                    self.instance.network.radio_exponent,
                    self.instance.network.request_intensity * self.instance.probabilities[None, :] * self.instance.service_time[act][busy],
                )
            )
        nodes, requests = np.zeros(rho.size), np.zeros(rho.size)
        nodes[busy], requests[busy] = overload_shares(law, rho[busy])
        lam = self.densities[act]
        served = self.instance.probabilities @ self.association[act].T  # Σ_q p_q A_{s,q}
        out = float(lam @ nodes / lam.sum()), float(served @ requests)
        if not all(np.isfinite(out)):
            raise NumericalError(f"overloaded shares: computed {out!r} (docs/model.md §20)")
        return out

    @property
    def stable_on_nodes(self) -> bool:
        """What ``stable`` reports: every tier has ``ρ_s < 1`` and, under the cell model (the tier rule, whose
        node loads the law describes), at most :data:`OVERLOAD_TOLERANCE` of the nodes overload."""
        if not self.stable:
            return False
        return self.queue_model != "cell" or self.overloaded_shares[0] <= OVERLOAD_TOLERANCE

    # -- per declared request type (length sub-types aggregated, docs/model.md §2.3) ------------
    @cached_property
    def type_groups(self) -> DeclaredTypes:
        """The declared request types and the sub-type columns of each."""
        return type_groups(self.instance.requests)

    def by_type(self, tau: float | None = None) -> dict[str, dict[str, float | None]]:
        """Per declared type ``Q``: its probability, coverage ``P(T ≤ τ | Q)``, mean TTFT, hit depth and
        offload ratio, each the sub-types' values weighted by their shares ``w_k`` (docs/model.md §2.3)."""
        inst, grp, act = self.instance, self.type_groups, self.active
        t = self.target if tau is None else float(tau)
        covered = grp.aggregate(self.coverage_by_pair(t).sum(axis=0))
        a = self.association[act]
        per_pair = np.where(a > 0, self.mean_radio[act] + a * (inst.first_token_time[act] + self.mean_wait[act][:, None]), 0.0)
        ttft = grp.aggregate(per_pair.sum(axis=0))
        depth = grp.aggregate((self.association * inst.reused_depth).sum(axis=0))
        saved = grp.aggregate((self.association * inst.saving).sum(axis=0))
        full = grp.aggregate(inst.full_prefill)
        prob = np.bincount(grp.index, weights=inst.probabilities, minlength=len(grp.ids))
        mean_length = grp.aggregate(inst.lengths)
        return {
            q: {
                "probability": float(prob[j]),
                "mean_length": float(mean_length[j]),
                "coverage": float(covered[j]),
                "mean_ttft": float(ttft[j]) if np.isfinite(ttft[j]) else None,
                "mean_prefix_depth": float(depth[j]),
                "offload_ratio": float(saved[j] / full[j]) if full[j] > 0 else 0.0,
            }
            for j, q in enumerate(grp.ids)
        }

    def _declared_pairs(self) -> tuple[tuple[str, ...], FloatArray, FloatArray]:
        """Declared type ids, ``A_{s,Q} = Σ_k w_k A_{s,k}`` and ``R̄_{s,Q}`` (the sub-types' distances
        weighted by ``w_k A_{s,k}``); the per-type arrays themselves without length sub-types."""
        grp = self.type_groups
        if not grp.resolved:
            return self.instance.request_ids, self.association, self.mean_distance_by_pair
        a = grp.aggregate(self.association)
        served = self.association > 0
        joint = grp.aggregate(np.where(served, self.association * np.where(served, self.mean_distance_by_pair, 0.0), 0.0))
        return grp.ids, a, np.where(a > 0, joint / np.where(a > 0, a, 1.0), np.nan)

    # -- export -----------------------------------------------------------------------------
    def engine_law_region(self) -> dict[str, Any] | None:
        """Under the engine law: the busiest tier's GPU load ``a_s`` against the load up to which the law was
        validated (docs/model.md §17.10: ample KV memory, ``a ≤`` :data:`ENGINE_LAW_VALIDATED_LOAD`); ``None``
        under the slot law."""
        if self.queue_law != "engine":
            return None
        loads = (self.arrival_rate * self.mean_service)[self.active]
        busiest = float(loads.max()) if loads.size else 0.0
        inside = busiest <= ENGINE_LAW_VALIDATED_LOAD
        note = (
            f"engine law: busiest GPU load {busiest:.2f}; validated on single nodes up to {ENGINE_LAW_VALIDATED_LOAD} "
            f"with ample KV memory (coverage within 0.07, mean TTFT within 10 %); on engine networks measured up to 0.10 "
            f"too high in coverage from 0.3 of the engine's stability edge"
            + ("" if inside else "; beyond it the law can call a node unstable that the engine still serves")
            + " (docs/model.md §17.10)"
        )
        return {"busiest_load": busiest, "validated_load": ENGINE_LAW_VALIDATED_LOAD, "inside": inside, "note": note}

    def to_dict(self, target: float | None = None) -> dict[str, Any]:
        """A JSON-ready dict (the ``edgeprefix evaluate --json`` contract)."""
        inst = self.instance
        tau = self.target if target is None else float(target)

        def num(x: float) -> float | None:
            return float(x) if np.isfinite(x) else None

        tiers = []
        for i, sid in enumerate(inst.profile_ids):
            on = bool(self.active[i])
            stable = on and self.utilization[i] < 1.0
            tiers.append(
                {
                    "profile": sid,
                    "share": float(self.mix[i]),
                    "concurrency": int(inst.concurrency[i]),
                    "memory": float(inst.memory[i]),
                    "arrival_rate": num(self.arrival_rate[i]) if on else None,
                    "utilization": num(self.utilization[i]) if on else None,
                    "wait_probability": num(self.wait_probability[i]) if stable else None,
                    "mean_wait": num(self.mean_wait[i]) if stable else None,
                    "advertised_wait": num(self.advertised_wait[i]) if on else None,
                    "stable": bool(stable) if on else None,
                }
            )
        fp = self.fixed_point
        converged = fp is None or fp.converged
        declared, association, distance = self._declared_pairs()
        return (
            {
                "instance": inst.name,
                "policy": self.policy,
                "queue_model": self.queue_model,
                "queue_law": self.queue_law,
                **({"engine_law_region": self.engine_law_region()} if self.queue_law == "engine" else {}),
                "router": ROUTER_OF_QUEUE_MODEL[self.queue_model],
                "target": tau,
                "mix": dict(zip(inst.profile_ids, map(float, self.mix))),
                "coverage": float(self.coverage(tau)),
                "coverage_queue_free": float(self.coverage_queue_free(tau)),
                "mean_ttft": num(self.mean_ttft),
                "offload_ratio": self.offload_ratio,
                "mean_prefix_depth": self.mean_prefix_depth,
                "mean_distance": self.mean_distance,
                "stable": self.stable_on_nodes if converged else self.stable,
                "overloaded_node_share": self.overloaded_shares[0] if converged else None,  # no operating point
                "overloaded_request_share": self.overloaded_shares[1] if converged else None,
                "capacity_condition": self.capacity_condition,
                "fixed_point": {
                    "converged": True if fp is None else fp.converged,
                    "iterations": 0 if fp is None else fp.iterations,
                    "evaluations": 0 if fp is None else fp.evaluations,
                    "residual": 0.0 if fp is None else fp.residual,
                    "method": "none (policy needs no fixed point)" if fp is None else fp.method,
                },
                "quadrature_error": self.quadrature_error,
                "tiers": tiers,
                "association": {q: {s: float(association[i, j]) for i, s in enumerate(inst.profile_ids)} for j, q in enumerate(declared)},
                "mean_distance_by_pair": {
                    q: {s: num(distance[i, j]) for i, s in enumerate(inst.profile_ids)} for j, q in enumerate(declared)
                },
            }
            | ({"types": self.by_type(tau)} if self.type_groups.resolved else {})
            | ({"serving": serving_report(self)} if inst.extended else {})
            | ({"catalogue": catalogue_evaluation(inst, self.mix, self.policy, target=tau).report()} if inst.catalogue is not None else {})
        )


PROBABILITY_SLACK = 1e-9  # rounding allowed outside [0, 1] before a probability counts as wrong


def checked_probability(value: float | FloatArray, what: str) -> FloatArray:
    """``value`` clipped to [0, 1] when it is off only by rounding; :class:`NumericalError` when it is
    NaN/inf or off by more than :data:`PROBABILITY_SLACK` (never a silent clamp)."""
    v = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(v)) or np.any(v < -PROBABILITY_SLACK) or np.any(v > 1.0 + PROBABILITY_SLACK):
        raise NumericalError(f"{what}: computed {v.tolist()!r}, not a probability (docs/model.md §20)")
    return np.clip(v, 0.0, 1.0)


def checked_finite(value: float, what: str) -> float:
    """``value`` unchanged when finite, else :class:`NumericalError`."""
    if not np.isfinite(value):
        raise NumericalError(f"{what}: computed {value!r} (docs/model.md §20)")
    return value


def _check_size(tiers: int, types: int, alpha: float, policy: str) -> None:
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


ASSOCIATION_SLACK = 1e-2  # |Σ_s A_{s,q} − 1| beyond which the association broke down (accuracy itself is
# reported by Evaluation.quadrature_error; default nodes keep it < 2e-6, docs/model.md §20)


def _check_association(a: FloatArray) -> None:
    """``A_{s,q}`` finite, in [0, 1] and with columns summing to 1, else :class:`NumericalError`."""
    total = a.sum(axis=0)
    if not np.all(np.isfinite(a)) or np.any(a < -ASSOCIATION_SLACK) or np.any(np.abs(total - 1.0) > ASSOCIATION_SLACK):
        raise NumericalError(f"association: Σ_s A_s,q = {total.tolist()!r}, not 1 (docs/model.md §20)")


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


BIAS_CAP = 1e250  # largest cost offset b = β/ξ at which the fixed point evaluates T (docs/model.md (7.9))


def delay_cap(radio_scale: float) -> float:
    """``W_max = 10²⁵⁰ ξ`` (at most ``10²⁸⁰`` s in the accepted ranges): the robust solver evaluates ``T`` at
    ``min(W, W_max)``, so a wild trial step neither overflows ``e^v`` nor pushes ``b = β/ξ`` to where the
    association's sums (``π λ Δb``) overflow (docs/model.md (7.9))."""
    return BIAS_CAP * radio_scale


def capacity_condition(instance: Instance, mix: FloatArray) -> bool:
    """Necessary stability condition eq. (35): ``Λ Σ_q p_q min_{s:π_s>0} 1/μ_{s,q} < λ_b Σ_s π_s c_s``."""
    active = mix > 0
    demand = instance.network.request_intensity * (instance.probabilities * instance.service_time[active].min(axis=0)).sum()
    supply = instance.network.edge_density * float((mix * instance.concurrency).sum())
    return bool(demand < supply)


def evaluate(
    instance: Instance,
    mix: Mapping[str, float] | npt.ArrayLike | None = None,
    policy: str = "load_aware",
    *,
    target: float | None = None,
    method: str = "robust",
    warm_start: npt.ArrayLike | None = None,
    tol: float = DEFAULT_TOLERANCE,
    damping: float = DEFAULT_DAMPING,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    rho_clip: float = RHO_CLIP,
    kernel: SpatialKernel | None = None,
    record_history: bool = False,
    queue_model: str = "meanfield",
    queue_law: str = "slots",
) -> Evaluation:
    """Evaluate a profile mix ``π`` under a routing policy (docs/model.md §5–8).

    Parameters
    ----------
    instance : the validated instance.
    mix : ``π`` as a mapping by profile id or an array in profile order; ``None`` uses the
        instance's default mix.
    policy : ``load_aware`` (fixed point), ``prefix`` or ``nearest``.
    target : ``τ_0`` for :attr:`Evaluation.coverage_at_target` (default: the instance's).
    method : fixed-point method, ``robust`` or ``damped`` (the paper's iteration).
    warm_start : advertised delays ``W̄`` ``(S,)`` to start from (e.g. a neighbouring point's).
    kernel : spatial kernel (default :class:`AnalyticKernel`).
    queue_model : ``meanfield`` (eq. (39): every node carries its tier's load) or ``cell`` (the
        per-node load law of docs/model.md §14 in coverage and quantiles; the routing
        equilibrium, ``W̄`` and ``T̄`` are the mean-field ones).
    queue_law : ``slots`` (the node is ``c_s`` FCFS slots, the law of ``serving.queue``) or ``engine`` (the
        engine law of docs/model.md §17.10, fitted to the instance's ``[engine]``; the evaluation's
        ``instance`` is then the instance in the engine's units, :func:`~edgeprefix.placement.model.engine_law.engine_view`).
    """
    check_policy(policy)
    check_queue_model(queue_model)
    check_queue_law(queue_law, instance)
    engine = queue_law == "engine"
    if engine:
        if queue_model == "cell":
            raise ValueError(
                "--queue-law engine: the cell model (--queue-model cell) has no engine law yet; use "
                "--queue-model meanfield with --queue-law engine"
            )
        instance = engine_view(instance)
    pi = instance.mix_vector(mix)
    tau = instance.placement.target if target is None else float(target)
    if not (np.isfinite(tau) and tau > 0):
        raise ValueError(f"target: τ must be a positive number of seconds, got {plain(tau)}")
    kernel = kernel or AnalyticKernel()
    net = instance.network
    xi, alpha = net.radio_scale, net.radio_exponent
    active = pi > 0
    _check_size(int(active.sum()), len(instance.requests), alpha, policy)
    lam_all = pi * net.edge_density
    lam = lam_all[active]
    g = instance.first_token_time[active]  # g(L_q − h_{s,q}) in the paper's model (docs/model.md §19)
    c = instance.concurrency[active].astype(float)
    tiers = instance.engine_tiers.take(active) if engine else None

    last: dict[str, FloatArray] = {}  # the fixed point's last association, reused at the end

    def assoc(bias: FloatArray) -> FloatArray:
        if policy == "nearest":
            return np.repeat((lam / lam.sum())[:, None], g.shape[1], axis=1)
        if "bias" in last and np.array_equal(last["bias"], bias):
            return last["association"]
        return kernel.association(lam, bias / xi, alpha)

    # Hot path of the fixed point: λq_s, a_s and 1/μ_s from A with precomputed weights.
    scale = net.request_intensity / lam
    p_q = instance.probabilities
    service = instance.service_time[active]
    weighted_service = p_q * service  # p_q / μ_{s,q}
    idle_service = service.min(axis=1)  # 1/μ_s of a tier that receives nothing
    scale_xi = (scale / xi)[:, None]

    def lifted_loads(a_q: FloatArray) -> tuple[IntArray, FloatArray, FloatArray, FloatArray]:
        """``k`` and ``2^k λq_s``, ``2^k a_s`` on rows lifted out of underflow (:mod:`~edgeprefix.placement.model.tier_loads`), ``1/μ_s``."""
        lifted, k = lift(a_q)
        arrivals = scale * (lifted @ p_q)
        work = scale * (lifted * weighted_service).sum(axis=1)
        busy = arrivals > 0
        mean_service = np.where(busy, work / np.where(busy, arrivals, 1.0), idle_service)
        return k, arrivals, work, mean_service

    def loads(a_q: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        k, arrivals, work, mean_service = lifted_loads(a_q)
        return unlift(arrivals, k), unlift(work, k), mean_service

    mgc = instance.queue_law == "mgc" and not engine  # M/G/c law of docs/model.md §19.6: the tier's C_S² from the mix
    weighted_second = p_q * instance.service_second_moment[active]  # p_q E[S_{s,q}²]
    idle_second = np.take_along_axis(instance.service_second_moment[active], service.argmin(axis=1)[:, None], 1)[:, 0]

    def service_scv(a_q: FloatArray, mean_service: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``C_S² = E[S²] / E[S]² − 1`` (eq. (19.17)) and ``E[S²]`` (a ratio of lifted sums, as ``1/μ_s``)."""
        lifted, _ = lift(a_q)
        arrivals = scale * (lifted @ p_q)
        second = scale * (lifted * weighted_second).sum(axis=1)
        busy = arrivals > 0
        moment = np.where(busy, second / np.where(busy, arrivals, 1.0), idle_second)
        return np.maximum(moment / mean_service**2 - 1.0, 0.0), moment

    def queue_map(w: FloatArray) -> FloatArray:
        a_q = assoc(g + w[:, None])
        _, work, mean_service = loads(a_q)
        if mgc:
            scv = service_scv(a_q, mean_service)[0]
            return mgc_advertised_wait_and_slopes(work, c, mean_service, scv, rho_clip)[0]
        if engine:
            return engine_advertised(work, c, mean_service, tiers, rho_clip)[0]
        return advertised_wait(work, c, mean_service, rho_clip)

    contracted = hasattr(kernel, "association_contracted")

    def queue_map_jacobian(w: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``T(W)`` and ``∂T_s/∂W_t`` through ``∂A/∂b`` (kernel), ``a_s``, ``1/μ_s`` and Erlang C."""
        bias = g + w[:, None]
        if contracted:  # only the sums of (16.7), type block by type block (docs/model.md §16.3)
            weights = np.stack([np.broadcast_to(p_q, bias.shape), weighted_service] + ([weighted_second] if mgc else []))
            a_q, sums, _ = kernel.association_contracted(lam, bias / xi, alpha, weights)
        else:
            a_q, d_a = kernel.association_jacobian(lam, bias / xi, alpha)
        last["bias"], last["association"] = bias, a_q
        k, arrivals, work, mean_service = lifted_loads(a_q)  # row s lifted by 2^{k_s}: so is ∂A_{s,·}/∂b below
        work = unlift(work, k)
        if mgc:
            scv, moment = service_scv(a_q, mean_service)
            wait, slope, slope_scv = mgc_advertised_wait_and_slopes(work, c, mean_service, scv, rho_clip)
        elif engine:  # W = m f(a): ∂W/∂m = W/m as for Erlang C
            wait, slope = engine_advertised(work, c, mean_service, tiers, rho_clip)
        else:
            wait, slope = advertised_wait_and_slope(work, c, mean_service, rho_clip)
        if contracted:  # lifted by lift_exponents(A), the k above
            d_arrivals, d_work = scale_xi * sums[0], scale_xi * sums[1]
        else:
            if k.any():
                d_a = np.ldexp(d_a, k[:, None, None])
            d_arrivals = scale_xi * (d_a @ p_q)  # (S, T), lifted
            d_work = scale_xi * np.matmul(d_a, weighted_service[:, :, None])[:, :, 0]
        lifted_arrivals = np.where(arrivals > 0, arrivals, np.inf)[:, None]  # divides lifted derivatives: no overflow
        d_mean = (d_work - mean_service[:, None] * d_arrivals) / lifted_arrivals
        jac = slope[:, None] * unlift(d_work, k) + (wait / mean_service)[:, None] * d_mean
        if mgc:  # ∂C²/∂W through E[S²] and 1/μ (eq. (19.24))
            d_second = scale_xi * (sums[2] if contracted else np.matmul(d_a, weighted_second[:, :, None])[:, :, 0])
            d_moment = (d_second - moment[:, None] * d_arrivals) / lifted_arrivals
            d_scv = np.where(
                (scv > 0)[:, None], d_moment / mean_service[:, None] ** 2 - 2.0 * (moment / mean_service**3)[:, None] * d_mean, 0.0
            )
            jac = jac + slope_scv[:, None] * d_scv
        return wait, jac

    report: FixedPointReport | None = None
    if needs_fixed_point(policy):
        start = np.zeros(lam.size)
        if warm_start is not None:
            ws = np.asarray(warm_start, dtype=float)
            if ws.shape != pi.shape:
                raise ValueError(f"warm_start: expected shape {pi.shape}, got {ws.shape}")
            start = np.where(np.isfinite(ws[active]), ws[active], 0.0)
        has_jacobian = bool(getattr(kernel, "provides_jacobian", False))
        # Exchangeable tiers (identical profiles, eq. (7.10)) share one unknown W: their breakpoints then
        # coincide exactly at every iterate, where the quadrature is smooth, instead of crossing.
        keys = (
            [g, c[:, None], service]
            + ([instance.service_second_moment[active]] if mgc else [])
            + ([] if tiers is None else [np.stack([tiers.prefill_share, tiers.memory_scale], axis=1)])
        )
        group, first = exchangeable_tiers(np.hstack(keys))
        members = np.equal.outer(group, np.arange(first.size)).astype(float)  # (S, G) one-hot

        def group_map(w: FloatArray) -> FloatArray:
            return queue_map(w[group])[first]

        def group_jacobian(w: FloatArray) -> tuple[FloatArray, FloatArray]:
            wait, jac = queue_map_jacobian(w[group])
            return wait[first], jac[first] @ members  # ∂T_g/∂W_h = Σ_{t ∈ h} ∂T_g/∂W_t

        with single_blas_thread():  # Newton's |S| × |S| solves and the kernel's products (docs/model.md (16.11))
            w_group, report = solve_fixed_point(
                group_map,
                start[first],
                method=method,
                tol=tol,
                damping=damping,
                max_iterations=max_iterations,
                record=record_history,
                jacobian=group_jacobian if has_jacobian else None,
                w_shift=0.05 * float(service.mean()),
                w_max=delay_cap(xi),
            )
        w_adv = w_group[group]
        if report.history:
            report = dataclasses.replace(report, history=tuple(tuple(np.asarray(h)[group].tolist()) for h in report.history))
    else:
        w_adv = np.zeros(lam.size)
    bias = policy_bias(policy, g, w_adv)
    a_active = assoc(bias)
    _check_association(a_active)
    arrivals, work, mean_service = loads(a_active)  # λq_s, a_s, 1/μ_s (docs/model.md §5)
    if not (np.all(np.isfinite(arrivals)) and np.all(np.isfinite(work))):
        raise NumericalError("arrival rates λq_s are not finite (docs/model.md §20)")
    scv_active = service_scv(a_active, mean_service)[0] if mgc else None
    if not needs_fixed_point(policy):
        w_adv = (
            mgc_advertised_wait_and_slopes(work, c, mean_service, scv_active, rho_clip)[0]
            if mgc
            else engine_advertised(work, c, mean_service, tiers, rho_clip)[0]
            if engine
            else advertised_wait(work, c, mean_service, rho_clip)
        )
    if engine:  # ρ_s = a_s / a*_s, the load over the engine law's stability edge (docs/model.md §17.10)
        law = engine_wait_law(work, c, mean_service, tiers)
        rho = work / stability_edge(c, tiers, shipped_constants())
        stable_tier = law["stable"]
        pw = np.where(stable_tier, law["weight"], 1.0)
        decay = np.where(stable_tier, law["decay"], 0.0)
        w_bar = law["mean"]
    else:
        rho = work / c
        stable_tier = rho < 1.0
        pw = erlang_c(work, c)
        with np.errstate(divide="ignore", invalid="ignore"):
            decay = (c - work) / mean_service  # c μ − λq
            if mgc:
                decay = decay / variability_factor(work, c, scv_active)  # θ = P^W / W̄, eq. (19.21)
            w_bar = np.where(stable_tier, pw / decay, np.inf)

    per_tier = np.full((7, pi.size), np.nan)  # scatter the active tiers' vectors in one step
    per_tier[:, active] = np.vstack([w_adv, arrivals, mean_service, rho, pw, w_bar, decay])
    association_full = np.zeros((pi.size, g.shape[1]))
    association_full[active] = a_active
    bias_full = np.full((pi.size, g.shape[1]), np.nan)
    bias_full[active] = bias

    return Evaluation(
        instance=instance,
        policy=policy,
        mix=pi,
        target=tau,
        densities=lam_all,
        active=active,
        association=association_full,
        bias=bias_full,
        advertised_wait=per_tier[0],
        arrival_rate=per_tier[1],
        mean_service=per_tier[2],
        utilization=per_tier[3],
        wait_probability=per_tier[4],
        mean_wait=per_tier[5],
        decay=per_tier[6],
        stable=bool(np.all(stable_tier)),
        capacity_condition=capacity_condition(instance, pi),
        fixed_point=report,
        kernel=kernel,
        service_scv=_scatter(scv_active, active) if mgc else None,  # type: ignore[arg-type]
        queue_model=queue_model,
        rho_clip=rho_clip,
        queue_law=queue_law,
    )


def _scatter(values: FloatArray, active: npt.NDArray[np.bool_]) -> FloatArray:
    out = np.full(active.size, np.nan)
    out[active] = values
    return out
