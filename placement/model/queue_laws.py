"""The node's queue law in evaluate(): what a tier's offered load makes of its delay (docs/model.md §5, §8.6).

A queue law answers, per active tier, from the offered load ``a_s``, the servers ``c_s``, the mean service time
``m_s = 1/μ_s`` and (when the law reads it) the service's ``C²_s``:

* the delay the router is told, ``W^adv_s`` (the fixed point's map, docs/model.md §7), alone or with its slopes
  ``∂W^adv/∂a`` and ``∂W^adv/∂C²`` (``∂W^adv/∂m = W^adv/m`` for every law here);
* the operating point: ``ρ_s``, stability, ``P^W_s``, the waiting law's decay ``θ_s`` and ``W̄_s``
  (:class:`TierQueues`).

Each public ``--queue-law`` name is a *family* (:class:`QueueLawFamily`, registered in
:data:`~edgeprefix.placement.model.evaluation_registry.QUEUE_LAW_REGISTRY`): it may change the instance's units
(:meth:`QueueLawFamily.view`) and binds a law to the active tiers (:meth:`QueueLawFamily.for_tiers`).  ``slots``
binds the law of ``serving.queue`` (:data:`~edgeprefix.placement.model.evaluation_registry.SLOT_QUEUE_REGISTRY`):
:class:`ErlangCSlots` (eqs. (17)–(20)) or :class:`MgcSlots` (docs/model.md §19.6); ``engine`` binds
:class:`EngineQueueLaw` (docs/model.md §17.10).  The sensitivities' laws with derivatives of the waiting law are
:mod:`edgeprefix.placement.model.wait_laws`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.engine_law import (
    EngineTiers,
    check_queue_law,
    engine_advertised,
    engine_view,
    engine_wait_law,
    shipped_constants,
    stability_edge,
    view_tiers,
)
from edgeprefix.placement.model.evaluation_registry import SLOT_QUEUE_REGISTRY
from edgeprefix.placement.model.mgc import mgc_advertised_wait_and_slopes, variability_factor
from edgeprefix.placement.model.queueing import advertised_wait, advertised_wait_and_slope, erlang_c

if TYPE_CHECKING:
    from edgeprefix.placement.model.instance import Instance

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class TierQueues:
    """The queue law at the operating point, per active tier (docs/model.md §5)."""

    utilization: FloatArray  # ρ_s
    stable: BoolArray  # the tier's queue is stable
    wait_probability: FloatArray  # P^W_s (1 when unstable)
    decay: FloatArray  # θ_s of F_W(w) = 1 − P^W e^{−θ w} (≤ 0 when unstable)
    mean_wait: FloatArray  # W̄_s (inf when unstable)
    delay: FloatArray | None = None  # δ_s: F_W = 1 − P^W below it (the engine law's step in progress, docs/model.md (17.25))
    shift: FloatArray | None = None  # J_s of the engine law's shifted mixture (docs/model.md (17.26)); None: 0
    shift_weight: FloatArray | None = None  # ω_s of the shifted mixture: F = (1 − ω) F_0(w) + ω F_0(w − J); None: 0


class QueueLaw(Protocol):
    """A queue law bound to the active tiers (arrays per tier, shape ``(n,)``)."""

    @property
    def needs_scv(self) -> bool:
        """The law reads the service's ``C²_s`` (evaluate then computes it from the mix, eq. (19.17))."""
        ...

    def exchange_keys(self) -> list[FloatArray]:
        """Per-tier inputs ``(n, k)`` beyond ``g``, ``c`` and ``1/μ`` that tell exchangeable tiers apart (eq. (7.10))."""
        ...

    def advertised(self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None, rho_clip: float) -> FloatArray:
        """``W^adv_s``: the fixed point's map."""
        ...

    def advertised_and_slopes(
        self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None, rho_clip: float
    ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
        """``W^adv_s``, ``∂W^adv/∂a`` and ``∂W^adv/∂C²`` (``None`` when the law reads no ``C²``)."""
        ...

    def operating_point(self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None) -> TierQueues: ...


class QueueLawFamily(Protocol):
    """What :data:`~edgeprefix.placement.model.evaluation_registry.QUEUE_LAW_REGISTRY` holds: a class with two class methods."""

    def view(self, instance: Instance, queue_model: str) -> Instance:
        """The instance the law evaluates (checked; e.g. in the engine's units); one-line ``ValueError`` if refused."""
        ...

    def for_tiers(self, instance: Instance, active: BoolArray) -> QueueLaw:
        """The law bound to the ``active`` tiers of ``instance`` (as returned by :meth:`view`)."""
        ...


def slot_operating_point(work: FloatArray, servers: FloatArray, service: FloatArray, variability: FloatArray | None) -> TierQueues:
    """``c_s`` FCFS slots: ``ρ = a/c``, Erlang C's ``P^W``, ``θ = (c μ − λq)/K`` (``K = 1`` for Erlang C, the
    variability factor of eq. (19.21) under M/G/c) and ``W̄ = P^W/θ``."""
    rho = work / servers
    stable = rho < 1.0
    pw = erlang_c(work, servers)
    with np.errstate(divide="ignore", invalid="ignore"):
        decay = (servers - work) / service  # c μ − λq
        if variability is not None:
            decay = decay / variability
        w_bar = np.where(stable, pw / decay, np.inf)
    return TierQueues(utilization=rho, stable=stable, wait_probability=pw, decay=decay, mean_wait=w_bar)


@dataclass(frozen=True)
class ErlangCSlots:
    """``serving.queue = "mmc"``: each node is an ``M/M/c_s`` (Erlang C, eqs. (17)–(20)); the router is told the
    Erlang-C mean wait continued linearly above ``ρ_clip`` (docs/model.md §7)."""

    needs_scv: ClassVar[bool] = False

    @classmethod
    def for_tiers(cls, instance: Instance, active: BoolArray) -> ErlangCSlots:
        return cls()

    def exchange_keys(self) -> list[FloatArray]:
        return []

    def advertised(self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None, rho_clip: float) -> FloatArray:
        return advertised_wait(work, servers, service, rho_clip)

    def advertised_and_slopes(
        self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None, rho_clip: float
    ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
        wait, slope = advertised_wait_and_slope(work, servers, service, rho_clip)
        return wait, slope, None

    def operating_point(self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None) -> TierQueues:
        return slot_operating_point(work, servers, service, None)


@dataclass(frozen=True)
class MgcSlots:
    """``serving.queue = "mgc"``: the M/G/c law of docs/model.md §19.6, reading the tier's ``C²_s`` from the mix
    (eq. (19.17)); its tiers differ also by ``E[S²]`` (:meth:`exchange_keys`)."""

    second_moment: FloatArray  # E[S²_{s,q}] of the active tiers, (n, Q)
    needs_scv: ClassVar[bool] = True

    @classmethod
    def for_tiers(cls, instance: Instance, active: BoolArray) -> MgcSlots:
        return cls(instance.service_second_moment[active])

    def exchange_keys(self) -> list[FloatArray]:
        return [self.second_moment]

    def advertised(self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None, rho_clip: float) -> FloatArray:
        return mgc_advertised_wait_and_slopes(work, servers, service, _scv(scv), rho_clip)[0]

    def advertised_and_slopes(
        self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None, rho_clip: float
    ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
        return mgc_advertised_wait_and_slopes(work, servers, service, _scv(scv), rho_clip)

    def operating_point(self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None) -> TierQueues:
        return slot_operating_point(work, servers, service, variability_factor(work, servers, _scv(scv)))


def _scv(scv: FloatArray | None) -> FloatArray:
    if scv is None:
        raise ValueError("M/G/c law: the service's C² is missing (docs/model.md §19.6)")
    return scv


class SlotLaw:
    """``--queue-law slots``: the node is ``c_s`` FCFS slots, with the law named by ``serving.queue``
    (:data:`~edgeprefix.placement.model.evaluation_registry.SLOT_QUEUE_REGISTRY`)."""

    @classmethod
    def view(cls, instance: Instance, queue_model: str) -> Instance:
        return instance

    @classmethod
    def for_tiers(cls, instance: Instance, active: BoolArray) -> QueueLaw:
        law: QueueLaw = SLOT_QUEUE_REGISTRY.get(instance.queue_law).for_tiers(instance, active)
        return law


@dataclass(frozen=True)
class EngineQueueLaw:
    """``--queue-law engine``: the engine law of docs/model.md §17.10 on the instance in the engine's units
    (:func:`~edgeprefix.placement.model.engine_law.engine_view`); ``ρ_s`` is the load over the law's stability
    edge.  The cell model has no engine law (:meth:`view` refuses it)."""

    tiers: EngineTiers
    needs_scv: ClassVar[bool] = False

    @classmethod
    def view(cls, instance: Instance, queue_model: str) -> Instance:
        check_queue_law("engine", instance)
        view: Instance = engine_view(instance)
        return view

    @classmethod
    def for_tiers(cls, instance: Instance, active: BoolArray) -> EngineQueueLaw:
        tiers = view_tiers(instance)
        return cls(tiers.take(active))

    def exchange_keys(self) -> list[FloatArray]:
        tiers = self.tiers
        earlier = np.zeros_like(tiers.prefill_share) if tiers.earlier_chunks is None else tiers.earlier_chunks
        return [np.stack([tiers.prefill_share, tiers.memory_scale, tiers.delay(), tiers.shift(), earlier], axis=1)]

    def advertised(self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None, rho_clip: float) -> FloatArray:
        return engine_advertised(work, servers, service, self.tiers, rho_clip)[0]

    def advertised_and_slopes(
        self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None, rho_clip: float
    ) -> tuple[FloatArray, FloatArray, FloatArray | None]:
        wait, slope = engine_advertised(work, servers, service, self.tiers, rho_clip)  # W = m f(a): ∂W/∂m = W/m
        return wait, slope, None

    def operating_point(self, work: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None) -> TierQueues:
        law = engine_wait_law(work, servers, service, self.tiers)
        stable = law["stable"]
        return TierQueues(
            utilization=work / stability_edge(servers, self.tiers, shipped_constants()),
            stable=stable,
            wait_probability=np.where(stable, law["weight"], 1.0),
            decay=np.where(stable, law["decay"], 0.0),
            mean_wait=law["mean"],
            delay=law["delay"],
            shift=law["shift"],
            shift_weight=law["shift_weight"],
        )
