"""Per-tier waiting-time laws with their derivatives: the queue model's part of the sensitivities.

A queue model enters the gradient of docs/model.md §15 through two per-tier maps of the offered
load ``a_s``, the servers ``c_s`` and the mean service time ``m_s = 1/μ_s``:

* the delay the router is told, ``W^adv_s(a_s, c_s, m_s)`` (the fixed point's map, §7), with
  ``∂W^adv/∂a`` and ``∂W^adv/∂m``;
* the waiting-time law behind the coverage, written as a mixture of exponential tails
  ``F_{W_s}(w) = 1 − Σ_k ω_{k,s} e^{−θ_{k,s} w}`` (``w ≥ 0``), with ``∂ω/∂a``, ``∂ω/∂m``,
  ``∂θ/∂a``, ``∂θ/∂m``.  The mean wait is ``W̄_s = Σ_k ω_{k,s} / θ_{k,s}``.

A law may also read the squared coefficient of variation ``C²_s`` of the tier's service
(``needs_scv``), which the sensitivities then differentiate through the tier's second moment.
The association and coverage integrals do not depend on the queue model, so a new model (for
instance a cell-load law, a mixture over node loads) only adds a class here and an entry in
:data:`WAIT_LAWS`.  :class:`ErlangCLaw` is the paper's mean-field ``M/M/c_s`` (one component,
``ω = P^W_s``, ``θ = c_s μ_s − λq_s``, eqs. (17)–(20)); :class:`MgcLaw` the M/G/c law of
docs/model.md §19.6 (``ω = P^W_s``, ``θ = (c − a)/(m K(a, c, C²))``, eq. (19.21)); :class:`EngineLaw` the
engine law of docs/model.md §17.10 (an equivalent M/M/c of a batching-engine node).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.engine_law import EngineLawConstants, EngineTiers, engine_advertised, engine_wait_law
from edgeprefix.placement.model.mgc import cosmetatos_ratio, mgc_advertised_wait_and_slopes, variability_interpolation
from edgeprefix.placement.model.queueing import advertised_wait_and_slope, erlang_b, erlang_b_over_load

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class WaitLaw:
    """``F_{W_s}(w) = 1 − Σ_k weight[k, s] e^{−decay[k, s] w}`` for the tiers with ``stable[s]``.

    Arrays are ``(K, n)`` (component × tier); the ``d_*_da`` / ``d_*_dm`` / ``d_*_dscv`` arrays are
    the partial derivatives in the offered load ``a_s``, the mean service time ``m_s = 1/μ_s`` and
    the service's ``C²_s`` (``None``: the law does not read it; the servers ``c_s`` are fixed by the
    profile).  Entries of unstable tiers are 0 and unused: an unstable tier has ``F_W ≡ 0``
    (docs/model.md §5).
    """

    weight: FloatArray
    decay: FloatArray
    d_weight_da: FloatArray
    d_weight_dm: FloatArray
    d_decay_da: FloatArray
    d_decay_dm: FloatArray
    stable: npt.NDArray[np.bool_]
    d_weight_dscv: FloatArray | None = None
    d_decay_dscv: FloatArray | None = None
    delay: FloatArray | None = None  # δ_s (n,): F_W = 1 − Σ ω for w < δ, the tails from δ on (the engine law, (17.25))
    # the shifted mixture (the engine law, (17.26)): F = (1 − ω_J) F_0(w) + ω_J F_0(w − J), ω_J and J per tier (n,)
    shift: FloatArray | None = None
    shift_weight: FloatArray | None = None
    d_shift_weight_da: FloatArray | None = None
    d_shift_weight_dm: FloatArray | None = None

    @property
    def components(self) -> int:
        return int(self.weight.shape[0])

    @property
    def shifted(self) -> bool:
        """Whether the shifted mixture is on at some tier (``ω_J J > 0``)."""
        return self.shift is not None and self.shift_weight is not None and bool(np.any(self.shift * self.shift_weight > 0))

    def mean(self) -> FloatArray:
        """``W̄_s = Σ_k ω_k (1/θ_k + δ_s) + ω_J J_s`` (``inf`` for unstable tiers)."""
        safe = np.where(self.stable, self.decay, 1.0)
        out = (self.weight * (1.0 / safe + self._delay())).sum(axis=0)
        if self.shifted:
            out = out + np.asarray(self.shift_weight) * np.asarray(self.shift)
        return np.where(self.stable, out, np.inf)

    def _delay(self) -> FloatArray:
        return np.zeros(self.weight.shape[1]) if self.delay is None else np.asarray(self.delay, dtype=float)

    def mean_vjp(self, bar: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``bar · ∂W̄/∂a``, ``bar · ∂W̄/∂m`` and ``bar · ∂W̄/∂C²`` per tier (0 where unstable)."""
        safe = np.where(self.stable, self.decay, 1.0)
        d_weight = np.where(self.stable, bar * (1.0 / safe + self._delay()), 0.0)  # ∂W̄/∂ω_k
        d_decay = np.where(self.stable, -bar * self.weight / safe**2, 0.0)  # ∂W̄/∂θ_k
        shift_bar = np.where(self.stable, bar * self._shift(), 0.0) if self.shifted else None  # ∂W̄/∂ω_J = J
        return self.vjp(d_weight, d_decay, shift_bar)

    def _shift(self) -> FloatArray:
        return np.zeros(self.weight.shape[1]) if self.shift is None else np.asarray(self.shift, dtype=float)

    def vjp(
        self, weight_bar: FloatArray, decay_bar: FloatArray, shift_weight_bar: FloatArray | None = None
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(ā, m̄, C̄²)`` of seeds on ``ω`` and ``θ`` (``(K, n)`` each) and on the shift weight ``ω_J`` (``(n,)``)."""
        da = (weight_bar * self.d_weight_da + decay_bar * self.d_decay_da).sum(axis=0)
        dm = (weight_bar * self.d_weight_dm + decay_bar * self.d_decay_dm).sum(axis=0)
        if shift_weight_bar is not None and self.d_shift_weight_da is not None and self.d_shift_weight_dm is not None:
            da = da + shift_weight_bar * self.d_shift_weight_da
            dm = dm + shift_weight_bar * self.d_shift_weight_dm
        ds = np.zeros_like(da)
        if self.d_weight_dscv is not None and self.d_decay_dscv is not None:
            ds = (weight_bar * self.d_weight_dscv + decay_bar * self.d_decay_dscv).sum(axis=0)
        return da, dm, ds


class QueueLaw(Protocol):
    """What the sensitivities need from a queue model (all arrays per tier, shape ``(n,)``)."""

    @property
    def name(self) -> str: ...

    @property
    def needs_scv(self) -> bool:  # reads the service's C²_s (``scv``); otherwise ``scv`` is None
        ...

    def advertised(
        self, load: FloatArray, servers: FloatArray, service: FloatArray, rho_clip: float, scv: FloatArray | None = None
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """``W^adv``, ``∂W^adv/∂a``, ``∂W^adv/∂m`` and ``∂W^adv/∂C²`` (the fixed point's map and its slopes)."""
        ...

    def wait_law(self, load: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None = None) -> WaitLaw: ...


def erlang_c_and_slope(load: FloatArray, servers: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``P^W(a)`` and ``dP^W/da`` for ``0 ≤ a < c`` (Erlang B ``E`` with ``dE/da = E (c/a − 1 + E)``).

    ``P^W = E / (1 − ρ (1 − E))`` (eq. (17) without factorials), differentiated in ``a`` with ``ρ = a/c``.
    """
    a = np.asarray(load, dtype=float)
    c = np.asarray(servers, dtype=float)
    e = erlang_b(a, c)
    de = c * erlang_b_over_load(a, c, e) - e + e * e  # exact at subnormal loads and at a = 0
    rho = a / c
    den = 1.0 - rho * (1.0 - e)
    pw = e / den
    dden = -(1.0 - e) / c + rho * de
    return pw, (de * den - e * dden) / den**2


@dataclass(frozen=True)
class ErlangCLaw:
    """The paper's mean-field queue: every node of tier ``s`` is an ``M/M/c_s`` at offered load ``a_s``.

    ``F_W(w) = 1 − P^W e^{−θ w}`` with ``θ = (c − a)/m`` (eqs. (19)–(20)); the router is told the
    Erlang-C mean wait ``P^W m / (c − a)``, continued linearly in ``a`` above ``ρ_clip``
    (docs/model.md §7), which is ``C¹`` in ``a`` and linear in ``m``.
    """

    name: str = "meanfield"
    needs_scv: bool = False

    def advertised(
        self, load: FloatArray, servers: FloatArray, service: FloatArray, rho_clip: float, scv: FloatArray | None = None
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        wait, slope = advertised_wait_and_slope(load, servers, service, rho_clip)
        return wait, slope, wait / service, np.zeros_like(wait)

    def wait_law(self, load: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None = None) -> WaitLaw:
        a, c, m = (np.asarray(v, dtype=float) for v in (load, servers, service))
        stable = (c >= 1) & (a < c)
        a_safe = np.where(stable, a, 0.0)
        c_safe = np.where(stable, c, 1.0)
        pw, dpw = erlang_c_and_slope(a_safe, c_safe)
        decay = (c_safe - a_safe) / m
        zero = np.zeros_like(a)

        def keep(x: FloatArray) -> FloatArray:
            return np.where(stable, x, 0.0)[None, :]

        return WaitLaw(
            weight=keep(pw),
            decay=keep(decay),
            d_weight_da=keep(dpw),
            d_weight_dm=keep(zero),
            d_decay_da=keep(-1.0 / m),
            d_decay_dm=keep(-decay / m),
            stable=stable,
        )


@dataclass(frozen=True)
class MgcLaw:
    """The M/G/c law of docs/model.md §19.6: Erlang C's ``P^W``, the mean wait scaled by
    ``K(a, c, C²)`` (Cosmetatos' ratio interpolated in ``C²``), the waiting law's decay
    ``θ = P^W / W̄ = (c − a)/(m K)`` (eq. (19.21)) and the advertised delay of eq. (19.23)."""

    name: str = "mgc"
    needs_scv: bool = True

    def advertised(
        self, load: FloatArray, servers: FloatArray, service: FloatArray, rho_clip: float, scv: FloatArray | None = None
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        assert scv is not None
        wait, slope, d_scv = mgc_advertised_wait_and_slopes(load, servers, service, scv, rho_clip)
        return wait, slope, wait / service, d_scv

    def wait_law(self, load: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None = None) -> WaitLaw:
        assert scv is not None
        a, c, m, s = (np.asarray(v, dtype=float) for v in (load, servers, service, scv))
        stable = (c >= 1) & (a < c)
        a_safe = np.where(stable, a, 0.0)
        c_safe = np.where(stable, c, 1.0)
        pw, dpw = erlang_c_and_slope(a_safe, c_safe)
        k, dk_da = cosmetatos_ratio(a_safe, c_safe)
        big_k, dk_dk, dk_ds, _ = variability_interpolation(k, s)
        decay = (c_safe - a_safe) / (m * big_k)

        def keep(x: FloatArray) -> FloatArray:
            return np.where(stable, x, 0.0)[None, :]

        return WaitLaw(
            weight=keep(pw),
            decay=keep(decay),
            d_weight_da=keep(dpw),
            d_weight_dm=keep(np.zeros_like(a)),
            d_decay_da=keep(-1.0 / (m * big_k) - decay * dk_dk * dk_da / big_k),
            d_decay_dm=keep(-decay / m),
            stable=stable,
            d_weight_dscv=keep(np.zeros_like(a)),
            d_decay_dscv=keep(-decay * dk_ds / big_k),
        )


@dataclass(frozen=True)
class EngineLaw:
    """The engine law of docs/model.md §17.10 on the instance in the engine's units
    (:func:`~edgeprefix.placement.model.engine_law.engine_view`): a compute and a memory equivalent M/M/c in
    tandem, ``F_W(w) = 1 − P^W e^{−θ w}`` with ``P^W = 1 − (1 − P_c)(1 − P_m)`` and ``θ = P^W/W̄``; the router
    is told ``m F(a)``, each component continued linearly above its ``ρ_clip`` edge (``∂W^adv/∂m = W^adv/m``).
    Its per-tier constants (``π_s``, ``r_s``) are bound to the tiers the arrays hold (:meth:`bind`)."""

    tiers: EngineTiers | None = None
    constants: EngineLawConstants | None = None
    name: str = "engine"
    needs_scv: bool = False

    def bind(self, rows: object) -> EngineLaw:
        """The law over the tiers ``rows`` of its current tiers."""
        if self.tiers is None:
            raise ValueError("engine law: no tiers bound (build it from engine_view(instance).engine_tiers)")
        return EngineLaw(self.tiers.take(rows), self.constants)

    def _tiers(self) -> EngineTiers:
        if self.tiers is None:
            raise ValueError("engine law: no tiers bound (build it from engine_view(instance).engine_tiers)")
        return self.tiers

    def advertised(
        self, load: FloatArray, servers: FloatArray, service: FloatArray, rho_clip: float, scv: FloatArray | None = None
    ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        wait, slope = engine_advertised(load, servers, service, self._tiers(), rho_clip, self.constants)
        m = np.asarray(service, dtype=float)
        return wait, slope, wait / m, np.zeros_like(wait)

    def wait_law(self, load: FloatArray, servers: FloatArray, service: FloatArray, scv: FloatArray | None = None) -> WaitLaw:
        law = engine_wait_law(load, servers, service, self._tiers(), self.constants)
        zero = np.zeros_like(law["weight"])
        return WaitLaw(
            weight=law["weight"][None, :],
            decay=law["decay"][None, :],
            d_weight_da=law["d_weight_da"][None, :],
            d_weight_dm=zero[None, :],
            d_decay_da=law["d_decay_da"][None, :],
            d_decay_dm=law["d_decay_dm"][None, :],
            stable=law["stable"],
            delay=law["delay"],
            shift=law["shift"],
            shift_weight=law["shift_weight"],
            d_shift_weight_da=law["d_shift_weight_da"],
            d_shift_weight_dm=law["d_shift_weight_dm"],
        )


WAIT_LAWS: dict[str, QueueLaw] = {"meanfield": ErlangCLaw(), "mgc": MgcLaw(), "engine": EngineLaw()}


def wait_law_for(queue_model: str) -> QueueLaw:
    """The registered law of ``queue_model``; unknown names raise with the valid list."""
    try:
        return WAIT_LAWS[queue_model]
    except KeyError:
        raise ValueError(f"queue_model: no sensitivities for {queue_model!r} (valid: {list(WAIT_LAWS)})") from None
