"""What each router delivers from one evaluation: its coverage pairs and its stability (docs/model.md §8.6, §14).

An evaluation's routing equilibrium, advertised delays and mean TTFT are the mean-field ones whatever the
router; the router a prediction is for changes how the queue enters the coverage ``P(T ≤ τ, s | q)``:

* :class:`OnlinePrediction` (``queue_model = "meanfield"``, router ``online``): eq. (39), every node of a
  tier carries the tier's load (computed as in (8.2));
* :class:`TierPrediction` (``queue_model = "cell"``, router ``tier``): the per-node load law of docs/model.md
  §14 averaged into the coverage, and a plan whose overloaded nodes move its mean TTFT (docs/model.md §14.9, (14.18)) reported unstable.

Both are registered in :data:`~edgeprefix.placement.model.evaluation_registry.ROUTER_PREDICTION_REGISTRY` under the
``--queue-model`` name; the router's name (:data:`~edgeprefix.placement.model.router.ROUTER_OF_QUEUE_MODEL`) is
the class's ``router``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import NumericalError
from edgeprefix.placement.model.cell import cell_coverage_pairs

if TYPE_CHECKING:
    from edgeprefix.placement.model.evaluation import Evaluation

FloatArray = npt.NDArray[np.float64]
OVERLOAD_TOLERANCE = 0.01  # share of nodes allowed to overload before the cell model's plan is reported unstable
# Stable under the tier rule also needs (docs/model.md (14.18)): the overloaded nodes' growing queues may move the mean TTFT
# by at most this fraction of it (the accuracy the mean TTFT is held to, benchmarks/README.md 4b) ...
MEAN_TTFT_TOLERANCE = 0.10
# ... over this many request-weighted mean service times (the shortest span a steady state is measured over:
# `replay` warns below it, docs/model.md (17.17)).
REFERENCE_SERVICE_TIMES = 10.0


class RouterPrediction(Protocol):
    """The coverage and stability one router delivers, read from an :class:`~edgeprefix.placement.model.evaluation.Evaluation`."""

    @property
    def router(self) -> str:
        """The router the prediction is for (``network.router`` / ``--router``)."""
        ...

    def coverage_pairs(self, evaluation: Evaluation, tau: float) -> FloatArray:
        """``P(T ≤ τ, s | q)`` over the active tiers, ``(n, Q)``."""
        ...

    def stable_on_nodes(self, evaluation: Evaluation) -> bool:
        """Whether the plan is stable for this router, given every tier has ``ρ_s < 1``."""
        ...


def shift_of(ev: Evaluation) -> tuple[FloatArray, FloatArray] | None:
    """``(J_s, ω_s)`` of the engine law's shifted mixture on the active tiers (docs/model.md (17.26)); ``None`` where off."""
    if ev.wait_shift is None or ev.shift_weight is None:
        return None
    j, omega = ev.wait_shift[ev.active], ev.shift_weight[ev.active]
    return (j, omega) if np.any(j * omega > 0) else None


def meanfield_coverage_pairs(ev: Evaluation, tau: float, queue: bool) -> FloatArray:
    """Eq. (39)'s pairs by (8.2) (``queue = False``: the queue-free bound (8.3), ``F_W ≡ 1``), active tiers; under the
    engine law's shifted mixture (17.26) ``(1 − ω_s)`` times the pairs at ``g`` plus ``ω_s`` times those at ``g + J_s``."""
    inst, act = ev.instance, ev.active
    stable_tiers = ev.utilization[act] < 1.0
    if not np.isfinite(tau):
        return np.where(stable_tiers[:, None] | (not queue), ev.association[act], 0.0)
    g = inst.first_token_time[act]  # g(L_q − h_{s,q}) in the paper's model (docs/model.md §19)
    base = _meanfield_pairs(ev, tau, queue, g)
    mix = shift_of(ev) if queue else None
    if mix is None:
        return base
    j, omega = mix
    return (1.0 - omega)[:, None] * base + omega[:, None] * _meanfield_pairs(ev, tau, queue, g + j[:, None])


def _meanfield_pairs(ev: Evaluation, tau: float, queue: bool, g: FloatArray) -> FloatArray:
    """Eq. (39)'s pairs at first-token times ``g`` (finite ``τ``)."""
    inst, act = ev.instance, ev.active
    stable_tiers = ev.utilization[act] < 1.0
    xi = inst.network.radio_scale
    u_cut = (tau - g) / xi
    tilt = np.where(ev.decay[act] > 0, ev.decay[act], 0.0)[:, None] * xi
    p1, p2 = ev.kernel.truncated(ev.densities[act], ev.bias[act] / xi, inst.network.radio_exponent, u_cut, tilt)
    if not queue:
        return p1
    pw = ev.wait_probability[act][:, None]
    if ev.wait_delay is not None and np.any(ev.wait_delay[act] > 0):
        # (17.25): F_W = 1 − P^W below δ_s, then the tail from δ_s: P1 − P^W (P1 − P1' + P2') with the cut moved by δ/ξ
        moved = np.maximum(u_cut - ev.wait_delay[act][:, None] / xi, 0.0)
        p1d, p2 = ev.kernel.truncated(ev.densities[act], ev.bias[act] / xi, inst.network.radio_exponent, moved, tilt)
        p2 = p1 - p1d + p2
    pairs = p1 - pw * p2
    if not (np.all(np.isfinite(p1)) and np.all(np.isfinite(p2))):
        raise NumericalError(f"coverage at τ = {tau!r} s: the tier integrals are not finite (docs/model.md §20)")
    return np.where(stable_tiers[:, None], np.maximum(pairs, 0.0), 0.0)  # finite: only rounding below 0


class OnlinePrediction:
    """``queue_model = "meanfield"``: a router that sees each node's own queue, predicted by eq. (39)."""

    router: ClassVar[str] = "online"

    def coverage_pairs(self, evaluation: Evaluation, tau: float) -> FloatArray:
        return meanfield_coverage_pairs(evaluation, tau, queue=True)

    def stable_on_nodes(self, evaluation: Evaluation) -> bool:
        return True  # per-node balancing evens the loads: the tiers' ρ_s < 1 is the whole condition


class TierPrediction:
    """``queue_model = "cell"``: Theorem 1's tier-level rule, predicted by the cell model (docs/model.md §14)."""

    router: ClassVar[str] = "tier"

    def coverage_pairs(self, evaluation: Evaluation, tau: float) -> FloatArray:
        ev = evaluation
        inst, act = ev.instance, ev.active
        xi = inst.network.radio_scale
        g = inst.first_token_time[act]

        def queue_free_at(first: FloatArray) -> FloatArray | None:
            if inst.network.radio_exponent == 2.0:  # α = 2: cell_coverage_pairs has P1_{s,q} in closed form
                return None
            if not np.isfinite(tau):  # P1_{s,q} of eq. (39) (F_W ≡ 1): the mass the radial rule is normalised to
                return ev.association[act]
            lam, b = ev.densities[act], ev.bias[act] / xi
            return ev.kernel.truncated(lam, b, inst.network.radio_exponent, (tau - first) / xi, np.zeros_like(first))[0]

        queue_free = queue_free_at(g)
        law = ev.node_law
        shifted = None
        if queue_free is not None and "wait_shift" in law:
            shifted = queue_free_at(g + np.asarray(law["wait_shift"], dtype=float)[:, None])
        return cell_coverage_pairs(
            ev.cell_load,
            tau,
            radio_scale=xi,
            first_token=g,
            **ev.node_law,
            offered_load=(ev.arrival_rate * ev.mean_service)[act],
            mean_service=ev.mean_service[act],
            service_scv=None if ev.service_scv is None else ev.service_scv[act],
            queue_free=queue_free,
            queue_free_shifted=shifted,
        )

    def stable_on_nodes(self, evaluation: Evaluation) -> bool:
        # the tier rule's node loads follow the law: few nodes overload, and they do not move the mean TTFT (14.18)
        return evaluation.overloaded_shares[0] <= OVERLOAD_TOLERANCE and evaluation.mean_ttft_horizon >= evaluation.reference_horizon
