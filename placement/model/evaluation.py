"""One evaluation of a placement: fixed point, queues and every metric of docs/model.md §8.

``evaluate(instance, mix, policy)`` returns a frozen :class:`Evaluation`.  Coverage is kept as a
function of the target (``Evaluation.coverage(τ)``); the scalar metrics are computed once.  ``evaluate``
composes the stages of :mod:`~edgeprefix.placement.model.pipeline` (docs/model.md §8.6); the queue law and the
router prediction are the classes registered under the options' names in
:mod:`~edgeprefix.placement.model.evaluation_registry`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import NumericalError, plain
from edgeprefix.placement.model.cell import CellLoad, NodeLaw, cell_load, cell_node_law, overload_growth, overload_shares
from edgeprefix.placement.model.cell_gradient import CellGradient, cell_coverage_gradient
from edgeprefix.placement.model.engine_law import view_tiers
from edgeprefix.placement.model.evaluation_registry import ROUTER_PREDICTION_REGISTRY
from edgeprefix.placement.model.fixed_point import (
    DEFAULT_DAMPING,
    DEFAULT_MAX_ITERATIONS,
    DEFAULT_TOLERANCE,
    FixedPointReport,
)
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.lengths import DeclaredTypes, type_groups
from edgeprefix.placement.model.pipeline import (  # noqa: F401  (ASSOCIATION_SLACK ... exchangeable_tiers re-exported)
    ASSOCIATION_SLACK,
    BIAS_CAP,
    Equilibrium,
    FixedPointOptions,
    Prepared,
    check_association,
    check_size,
    delay_cap,
    equilibrium,
    exchangeable_tiers,
    extension_reports,
    operating_point,
    prepare,
)
from edgeprefix.placement.model.queue_laws import TierQueues
from edgeprefix.placement.model.queueing import RHO_CLIP
from edgeprefix.placement.model.router_predictions import (  # noqa: F401  (the tolerances re-exported)
    MEAN_TTFT_TOLERANCE,
    OVERLOAD_TOLERANCE,
    REFERENCE_SERVICE_TIMES,
    RouterPrediction,
    meanfield_coverage_pairs,
)
from edgeprefix.placement.model.spatial import AnalyticKernel, SpatialKernel

FloatArray = npt.NDArray[np.float64]


# The GPU load up to which the engine law is validated with ample KV memory (docs/model.md §17.10 fit table).
ENGINE_LAW_VALIDATED_LOAD = 0.7
# The queue model to pair with the engine law: on engine networks the mean field misses the load spread between the
# engines (docs/model.md §17.10.1, "Why the mean field lost cells after the refit").
ENGINE_LAW_QUEUE_MODEL = "cell"
# The engine law's error on engine networks, per queue model (docs/model.md §17.10.2, §17.10.3; benchmarks/README.md §12: engine_gap
# --queue-law engine on 48 nodes, paper_baseline and mooncake_engine, both routers, 0.1-0.9 of the online router's edge;
# mean TTFT on the online router's cells; the ratio is the model's over the simulation's, finite cells only).
ENGINE_NETWORK_NODES = 48
ENGINE_LAW_NETWORK_ERROR: dict[str, dict[str, float | int]] = {
    "cell": {
        "cells": 20,
        "coverage_within": 14,
        "coverage_error_min": -0.075,
        "coverage_error_max": 0.032,
        "mean_ttft_cells": 10,
        "mean_ttft_within": 5,
        "mean_ttft_ratio_min": 0.73,
        "mean_ttft_ratio_max": 1.87,
    },
    "meanfield": {
        "cells": 20,
        "coverage_within": 6,
        "coverage_error_min": -0.201,
        "coverage_error_max": 0.128,
        "mean_ttft_cells": 10,
        "mean_ttft_within": 5,
        "mean_ttft_ratio_min": 0.73,
        "mean_ttft_ratio_max": 1.87,
    },
}


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
    wait_delay: FloatArray | None = None  # δ_s, F_W = 1 − P^W below it (the engine law's step in progress, (17.25)); None: 0
    wait_shift: FloatArray | None = None  # J_s of the engine law's shifted mixture (docs/model.md (17.26)); None: 0
    shift_weight: FloatArray | None = None  # ω_s: F_W = (1 − ω) F_0(w) + ω F_0(w − J) ((17.26)); None: 0

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
    def node_law(self) -> NodeLaw:
        """The cell model's node law of the active tiers: ``c_s`` slots, or under the engine law its stability
        edges and wait tables (docs/model.md §17.10.1); shared by the coverage and the cell gradient."""
        inst, act = self.instance, self.active
        tiers = view_tiers(inst).take(act) if self.queue_law == "engine" else None
        return cell_node_law(inst.concurrency[act].astype(float), tiers)

    @cached_property
    def cell_load(self) -> CellLoad:
        """Per-node load law of the active tiers (variance ``v_s``, skewness ``γ_s``, ``M_{s,q}``)."""
        inst, act = self.instance, self.active
        work = inst.network.request_intensity * inst.probabilities[None, :] * inst.service_time[act]
        return cell_load(self.densities[act], self.bias[act] / inst.network.radio_scale, inst.network.radio_exponent, work)

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
            **self.node_law,
            offered_load=(self.arrival_rate * self.mean_service)[act],
            mean_service=self.mean_service[act],
            service_scv=None if self.service_scv is None else self.service_scv[act],
            weights=inst.probabilities if weights is None else weights,
            alpha=net.radio_exponent,
            nodes=getattr(self.kernel, "nodes", None),
        )

    # -- coverage and quantiles -------------------------------------------------------------
    @cached_property
    def router_prediction(self) -> RouterPrediction:
        """The router prediction of :attr:`queue_model` (docs/model.md §8.6): how the queue enters the coverage."""
        prediction: RouterPrediction = ROUTER_PREDICTION_REGISTRY.get(self.queue_model)()
        return prediction

    def _coverage_pairs(self, tau: float, queue: bool) -> FloatArray:
        if queue:
            return self.router_prediction.coverage_pairs(self, tau)
        return meanfield_coverage_pairs(self, tau, queue=False)  # (8.3) whatever the router

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

        return float(brentq(lambda t: float(self.coverage(t)) - reliability, 0.0, hi, xtol=1e-9, rtol=1e-10))

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
        rho, busy, law = self._busy_load_law
        nodes, requests = np.zeros(rho.size), np.zeros(rho.size)
        if busy.any():  # no tier receives work: none overloads (and there is no load law to read)
            nodes[busy], requests[busy] = overload_shares(law, rho[busy])
        lam = self.densities[act]
        served = self.instance.probabilities @ self.association[act].T  # Σ_q p_q A_{s,q}
        out = float(lam @ nodes / lam.sum()), float(served @ requests)
        if not all(np.isfinite(out)):
            raise NumericalError(f"overloaded shares: computed {out!r} (docs/model.md §20)")
        return out

    @cached_property
    def _busy_load_law(self) -> tuple[FloatArray, npt.NDArray[np.bool_], Any]:
        """The active tiers' ``ρ_s``, which of them receive work, and the node-level load law of those."""
        act = self.active
        rho = self.utilization[act]
        busy = rho > 0  # a tier that receives no work has no load law and overloads no node
        if not busy.any():
            return rho, busy, None
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
        return rho, busy, law

    @cached_property
    def overload_wait_growth(self) -> float:
        """``κ``, seconds of mean wait per second (docs/model.md (14.17)): under the cell law the overloaded
        nodes' queues grow, and the mean wait over all requests arriving ``t`` after the plan starts grows by
        ``κ t``, ``κ = Σ_s (Σ_q p_q A_{s,q}) E[X (ρ_s X − 1)⁺]`` (0 when every tier is unstable anyway: no
        steady state to add to)."""
        act = self.active
        rho, busy, law = self._busy_load_law
        growth = np.zeros(rho.size)
        if busy.any():
            growth[busy] = overload_growth(law, rho[busy])
        served = self.instance.probabilities @ self.association[act].T
        out = float(served @ growth)
        if not np.isfinite(out):
            raise NumericalError(f"overloaded nodes' wait growth: computed {out!r} (docs/model.md §20)")
        return out

    @property
    def reference_horizon(self) -> float:
        """``H_ref``: :data:`REFERENCE_SERVICE_TIMES` request-weighted mean service times, the shortest span a
        steady state is measured over (docs/model.md (14.18), (17.17))."""
        act = self.active
        served = self.instance.probabilities @ self.association[act].T
        mean_service = float(served @ np.where(served > 0, self.mean_service[act], 0.0) / max(served.sum(), 1e-300))
        return REFERENCE_SERVICE_TIMES * mean_service

    @property
    def mean_ttft_horizon(self) -> float:
        """``H* = 2 ε T̄ / κ``: the horizon over which the overloaded nodes' growing queues add at most
        ``ε =`` :data:`MEAN_TTFT_TOLERANCE` of the steady-state mean TTFT to it (mean of ``κ t`` over
        ``[0, H]`` is ``κ H / 2``; docs/model.md (14.18)); ``inf`` without overloaded nodes."""
        kappa, ttft = self.overload_wait_growth, self.mean_ttft
        if not np.isfinite(ttft):
            return 0.0
        return float("inf") if kappa <= 0 else 2.0 * MEAN_TTFT_TOLERANCE * ttft / kappa

    @property
    def stable_on_nodes(self) -> bool:
        """What ``stable`` reports: every tier has ``ρ_s < 1`` and, under the cell model (the tier rule, whose
        node loads the law describes), at most :data:`OVERLOAD_TOLERANCE` of the nodes overload and their growing
        queues move the mean TTFT by at most :data:`MEAN_TTFT_TOLERANCE` over :data:`REFERENCE_SERVICE_TIMES` mean
        service times (docs/model.md (14.18))."""
        if not self.stable:
            return False
        return self.router_prediction.stable_on_nodes(self)

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
        measured = ENGINE_LAW_NETWORK_ERROR[self.queue_model]
        pairing = (
            f"; with the cell model (the pairing to use with the engine law), measured on {ENGINE_NETWORK_NODES}-node engine "
            f"networks at 0.1-0.9 of their stability edge: coverage within max(0.02, 3 SE) in {measured['coverage_within']} of "
            f"{measured['cells']} cells, errors {measured['coverage_error_min']:+.3f} to {measured['coverage_error_max']:+.3f} "
            "(optimistic by up to 0.03 at 0.3 of the edge; pessimistic by up to 0.08 at 0.7-0.9 of the edge on long prompts); "
            f"mean TTFT within 10 % in {measured['mean_ttft_within']} of {measured['mean_ttft_cells']} cells (it is the mean "
            "field's: 19-27 % low from 0.3 of the edge on prefill-heavy workloads, 87 % high at 0.9 on long prompts); "
            "plan-density for 0.8 simulated 0.80 on a prefill-heavy instance and 0.80 on a long-prompt one (plan-density "
            "--refine-on-engine refines the density on the engine simulation, held out within 0.01 of 0.8 on both)"
            if self.queue_model == "cell"
            else "; the mean field leaves out the load spread between the engines and is optimistic on engine networks "
            f"from 0.3 of their stability edge (coverage within max(0.02, 3 SE) in {measured['coverage_within']} of "
            f"{measured['cells']} measured cells, up to {measured['coverage_error_max']:.2f} too high, 0 near the edge; mean TTFT "
            f"within 10 % in {measured['mean_ttft_within']} of {measured['mean_ttft_cells']}; plan-density for 0.8 simulated 0.72 "
            "and 0.75): use --queue-model cell"
        )
        note = (
            f"engine law: busiest GPU load {busiest:.2f}; validated on single nodes up to {ENGINE_LAW_VALIDATED_LOAD} "
            f"with ample KV memory (coverage within 0.08, mean TTFT within 12 %)"
            + pairing
            + ("" if inside else "; beyond it the law can call a node unstable that the engine still serves")
            + " (docs/model.md §17.10.1–§17.10.3)"
        )
        return {
            "busiest_load": busiest,
            "validated_load": ENGINE_LAW_VALIDATED_LOAD,
            "inside": inside,
            "queue_model": self.queue_model,
            "recommended_queue_model": ENGINE_LAW_QUEUE_MODEL,
            "network_error": {**measured, "nodes": ENGINE_NETWORK_NODES, "source": "docs/model.md §17.10.2, §17.10.3"},
            "note": note,
        }

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
                "router": self.router_prediction.router,
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
                "mean_wait_growth": self.overload_wait_growth if converged else None,  # (14.17)
                "mean_ttft_horizon_s": num(self.mean_ttft_horizon) if converged else None,  # (14.18); null: no overload
                "reference_horizon_s": num(self.reference_horizon) if converged else None,
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
            | extension_reports(self, tau)  # stage 6: the instance's extensions
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


_check_size = check_size  # the names before the pipeline (docs/model.md §20)
_check_association = check_association


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
        equilibrium, ``W̄`` and ``T̄`` are the mean-field ones); any name of ``ROUTER_PREDICTION_REGISTRY``.
    queue_law : ``slots`` (the node is ``c_s`` FCFS slots, the law of ``serving.queue``) or ``engine`` (the
        engine law of docs/model.md §17.10, fitted to the instance's ``[engine]``; the evaluation's
        ``instance`` is then the instance in the engine's units, :func:`~edgeprefix.placement.model.engine_law.engine_view`);
        any name of ``QUEUE_LAW_REGISTRY`` (docs/model.md §8.6).
    """
    prepared = prepare(instance, mix, policy, target, kernel, queue_model, queue_law)  # 1. mix
    law = prepared.law_family.for_tiers(prepared.instance, prepared.active)
    options = FixedPointOptions(method, warm_start, tol, damping, max_iterations, rho_clip, record_history)
    routing = equilibrium(prepared, law, options)  # 2-3. association and fixed point
    queues = operating_point(prepared, law, routing)  # 4. queue law
    return assemble(prepared, routing, queues, rho_clip)  # 5-6. router prediction and metrics (lazily)


def assemble(prepared: Prepared, routing: Equilibrium, queues: TierQueues, rho_clip: float = RHO_CLIP) -> Evaluation:
    """The metrics stage: the active tiers' vectors scattered into the :class:`Evaluation` (NaN for inactive tiers)."""
    pi, active, instance = prepared.mix, prepared.active, prepared.instance
    per_tier = np.full((7, pi.size), np.nan)  # scatter the active tiers' vectors in one step
    per_tier[:, active] = np.vstack(
        [routing.advertised_wait, routing.arrival_rate, routing.mean_service, queues.utilization]
        + [queues.wait_probability, queues.mean_wait, queues.decay]
    )
    types = routing.association.shape[1]
    association_full = np.zeros((pi.size, types))
    association_full[active] = routing.association
    bias_full = np.full((pi.size, types), np.nan)
    bias_full[active] = routing.bias
    return Evaluation(
        instance=instance,
        policy=prepared.policy,
        mix=pi,
        target=prepared.target,
        densities=prepared.densities,
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
        stable=bool(np.all(queues.stable)),
        capacity_condition=capacity_condition(instance, pi),
        fixed_point=routing.report,
        kernel=prepared.kernel,
        service_scv=None if routing.service_scv is None else _scatter(routing.service_scv, active),
        queue_model=prepared.queue_model,
        rho_clip=rho_clip,
        queue_law=prepared.queue_law,
        wait_delay=None if queues.delay is None else _scatter(queues.delay, active),
        wait_shift=None if queues.shift is None else _scatter(queues.shift, active),
        shift_weight=None if queues.shift_weight is None else _scatter(queues.shift_weight, active),
    )


def _scatter(values: FloatArray, active: npt.NDArray[np.bool_]) -> FloatArray:
    out = np.full(active.size, np.nan)
    out[active] = values
    return out
