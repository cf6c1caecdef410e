"""The engine law: a queue law of one continuous-batching node, fitted to the engine (docs/model.md §17.10).

``queue_law="slots"`` (the default) keeps the node the model has always had: ``c_s`` FCFS slots,
Erlang C or the M/G/c law as the instance's ``serving.queue`` says.  ``queue_law="engine"``
replaces it by the node of the instance's ``[engine]`` (docs/model.md §17.9), in the engine's units
(:func:`engine_view`):

- **prefill** ``u_{s,q}``: the engine's prefill of type ``q`` on profile ``s`` alone on the node
  (``⌈n/B⌉`` chunks of the token budget ``B``, each a step of the fitted step time, over the
  ``n = L_q − h_{s,q}`` uncached tokens and their attention to the cached context); it is the
  first-token time in place of ``g(L_q − h_{s,q})``;
- **work** ``w_{s,q} = u_{s,q} + o_q δ_q``, ``δ_q = t_b + t_K (L_q + o_q/2)``: GPU seconds of the
  request (its prefill and its ``o_q = round(D_q/d)`` decode tokens' share of their steps), in place
  of ``1/μ_{s,q}``, so the offered load ``a_s = λq_s w̄_s`` is the node's GPU utilisation;
- **servers** ``c_s = c_kv``: the KV places, ``min(max_running, (1 − watermark)(M − B_s)/(κ E[k]))``
  with ``k = n + o`` the tokens a request holds at its end.

The wait before the first token is two equivalent ``M/M/c`` queues in tandem:

- **compute** (the prefill queue): ``c_0`` servers at ``a_c = s_c a φ_c(a)``, ``s_c = π + θ_6 (1 − π)``, ``π = ū/w̄``
  (a prefill queues behind the other prefills and behind the share ``θ_6`` of the decodes that run in its steps),
  ``φ_c = θ_1/(1 − θ_2 a)``, its mean wait scaled by ``θ_5`` (the prefill is nearly deterministic);
- **memory** (admission): ``c_kv`` servers at ``a_m = r a φ_m(a)``, ``r = E[k R]/(E[k] w̄)`` with
  ``R_{s,q} = u + o (t_0 + c_kv δ̄)`` the residence in a full batch, ``φ_m = θ_4/(1 − θ_3 π a)``
  (prefill steps stall every decode).

``P^W = 1 − (1 − P_c)(1 − P_m)``, ``W̄ = W̄_c + W̄_m`` (``P_·`` Erlang C continued to real ``c``
through the incomplete gamma function), ``F_W(w) = 1 − P^W e^{−θ w}`` with ``θ = P^W/W̄``; stable
iff both components are.  ``W̄`` is ``m`` times a function of ``a`` alone, smooth and increasing in
``a``; the advertised delay continues each component linearly above its ``ρ_clip`` edge, as (7.1).

**The step in progress and the joined last chunk** (docs/model.md §17.10.3, (17.25)): a request that waits does not
start within a moment: it waits at least ``δ_s = θ_7 ū_s + θ_8 J_s`` (``ū_s`` the profile's mean alone prefill; ``J_s``
the mean stretch of a prefill of two or more chunks whose last chunk a newcomer joins, :func:`join_stretch`; both
constants of the profile), so ``F_W(w) = 1 − P^W`` for ``0 ≤ w < δ`` and ``1 − P^W e^{−θ (w − δ)}`` from ``δ`` on; the
mean wait is ``W̄ + P^W δ``.  ``θ_7 = θ_8 = 0`` is the law without it; without compute (``ū = 0``, a step time that
does not grow with the prefill, ``J = 0``) ``δ = 0``.  The advertised delay stays ``m F(a)`` (the router is told the
queue's ``W̄``).
**The shifted mixture** (docs/model.md (17.26)): an arrival during a prefill's earlier chunks joins its last chunk and is
delayed by its stretch: every request is delayed by ``J_s`` with probability ``ω_s = 1 − e^{−θ_9 λ_s T_s}`` (``λ_s = a/m``,
``T_s`` the mean alone time of the earlier chunks, 0 for a prefill of one chunk), ``F_W(w) = (1 − ω) F_0(w) + ω F_0(w − J)``
with ``F_0`` the law above (0 below 0), the mean ``W̄ + P^W δ + ω J``; monotone in the load by construction.
Slot limit: with no compute (``π = 0``, ``θ_6 = 0``), ``θ_3 = 0``, ``θ_4 = 1`` and ``r`` the slot's service over
``m`` the law is Erlang C exactly (``ū = J = T = 0``: no step in progress to wait for, ``δ = 0``, ``ω = 0``).  The constants
``c_0, θ_1 … θ_9`` are fitted to single-node engine runs (``python -m edgeprefix.benchmarks.accuracy.engine.engine_law_fit``)
and shipped in ``engine_law.json`` beside this module.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt
from scipy.special import gammaincc, gammaln

from edgeprefix.placement.model.evaluation_registry import QUEUE_LAW_REGISTRY

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
QUEUE_LAWS = QUEUE_LAW_REGISTRY.names()  # --queue-law: the model's slots (serving.queue's law) or the engine law
LAW_FILE = Path(__file__).with_name("engine_law.json")


def check_queue_law(queue_law: str, instance: Any = None) -> None:
    """``queue_law`` is ``slots`` or ``engine``; ``engine`` needs the instance's ``[engine]`` section."""
    if queue_law not in QUEUE_LAWS:
        raise ValueError(f"--queue-law: must be one of {list(QUEUE_LAWS)}, got {queue_law!r}")
    if queue_law == "engine" and instance is not None and getattr(instance, "engine", None) is None:
        raise ValueError(
            f"--queue-law engine: instance {getattr(instance, 'name', '?')!r} has no [engine] section; add "
            "[engine.timings] (model, hardware, tensor_parallel; docs/instances.md) or use --queue-law slots"
        )
    if queue_law == "engine" and instance is not None:
        serving = getattr(instance, "serving", None)
        gpu = getattr(instance, "gpu", None)
        if (
            getattr(gpu, "tiers", ())
            or getattr(instance, "remote", None) is not None
            or getattr(instance, "compression", None) is not None
            or (serving is not None and (serving.mode != "colocated" or serving.chunk_size is not None))
        ):
            raise ValueError(
                f"--queue-law engine: instance {getattr(instance, 'name', '?')!r} uses serving extensions (memory "
                "tiers, KV pool, compression, disaggregation or chunks of [serving]), which the engine law does "
                "not model (its [engine] chunks by token_budget): drop them or use --queue-law slots"
            )


@dataclass(frozen=True)
class EngineLawConstants:
    """The fitted constants of the engine law (see the module docstring)."""

    compute_servers: float = 1.0  # c_0
    theta_1: float = 1.0  # φ(0)
    theta_2: float = 0.0  # the compute's pole in the GPU's load: φ_c = θ_1 / (1 − θ_2 a)
    theta_3: float = 0.0  # the memory's pole in the prefill's load: φ_m = θ_4 / (1 − θ_3 π a)
    theta_4: float = 1.0  # the memory's residence over R at low load
    theta_5: float = 1.0  # the compute's mean wait over its M/M/c_0 one (the prefill's service is nearly deterministic)
    theta_6: float = 0.0  # the share of the decode work that stands in front of a prefill: s_c = π + θ_6 (1 − π)
    theta_7: float = 0.0  # the step in progress: a waiting request waits at least δ = θ_7 ū (docs/model.md (17.25))
    theta_8: float = 0.0  # the joined last chunk: δ = θ_7 ū + θ_8 J (docs/model.md (17.25), §17.10.3)
    theta_9: float = 0.0  # the shifted mixture: ω = 1 − e^{−θ_9 λ T} of the requests are delayed by J (docs/model.md (17.26))

    def __post_init__(self) -> None:
        for name in ("compute_servers", "theta_1", "theta_2", "theta_3", "theta_4", "theta_5", "theta_6", "theta_7", "theta_8", "theta_9"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"engine law: {name} must be a finite number >= 0, got {v!r}")
        if self.compute_servers < 1 or self.theta_1 <= 0 or self.theta_4 <= 0:
            raise ValueError(f"engine law: c_0 must be >= 1 and θ_1 > 0, got {self.compute_servers!r}, {self.theta_1!r}")


@lru_cache(maxsize=1)
def shipped_constants() -> EngineLawConstants:
    """The constants in ``engine_law.json`` (written by ``python -m edgeprefix.benchmarks.accuracy.engine.engine_law_fit``)."""
    data = json.loads(LAW_FILE.read_text(encoding="utf-8"))
    return EngineLawConstants(**{k: float(v) for k, v in data["constants"].items()})


# -- Erlang C for a real number of servers ------------------------------------------------------------


def erlang_b_real(load: npt.ArrayLike, servers: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Erlang B ``E(a, c) = p(c; a) / Q(c + 1, a)`` for real ``c ≥ 1`` and ``E/a`` (``p`` the Poisson
    density continued by the gamma function, ``Q`` the regularised upper incomplete gamma function);
    equal to the recursion (5.6) at whole ``c``."""
    a = np.asarray(load, dtype=float)
    c = np.asarray(servers, dtype=float)
    a, c = np.broadcast_arrays(a, c)
    pos = a > 0
    safe = np.where(pos, a, 1.0)
    q = gammaincc(c + 1.0, safe)
    with np.errstate(under="ignore", over="ignore", divide="ignore"):
        log_ratio = (c - 1.0) * np.log(safe) - safe - gammaln(c + 1.0)  # log(p(c; a)/a)
        over_a = np.exp(log_ratio) / q
    over_a = np.where(pos, over_a, np.where(c == 1.0, 1.0, 0.0))
    return np.minimum(a * over_a, 1.0), over_a


def erlang_c_real(load: npt.ArrayLike, servers: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``P^W = E/(1 − ρ(1 − E))`` and ``dP^W/da`` for ``0 ≤ a < c`` (``dE/da = c E/a − E + E²``)."""
    a = np.asarray(load, dtype=float)
    c = np.asarray(servers, dtype=float)
    e, over_a = erlang_b_real(a, c)
    de = c * over_a - e + e * e
    rho = a / c
    den = 1.0 - rho * (1.0 - e)
    dden = -(1.0 - e) / c + rho * de
    return e / den, (de * den - e * dden) / den**2


# -- the law ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineTiers:
    """Per-tier constants of the engine law: the prefill share ``π_s = ū_s/w̄_s``, the memory's scale
    ``r_s = R_s/w̄_s`` (the residence of a request in a full batch over its work), the mean alone prefill
    ``ū_s`` in seconds (``None``: 0, no step in progress to wait for) and the mean joined-chunk stretch ``J_s`` in
    seconds (:func:`join_stretch`; ``None``: 0) and the mean alone time ``T_s = Σ_q p_q T_{s,q}`` of a prefill's earlier
    chunks (all but its last; 0 for one chunk) in seconds (``None``: 0, no shifted mixture, (17.26))."""

    prefill_share: FloatArray
    memory_scale: FloatArray
    mean_prefill: FloatArray | None = None
    join_stretch: FloatArray | None = None
    earlier_chunks: FloatArray | None = None

    def take(self, rows: Any) -> EngineTiers:
        def pick(x: FloatArray | None) -> FloatArray | None:
            return None if x is None else np.asarray(x, dtype=float)[rows]

        return EngineTiers(
            np.asarray(self.prefill_share, dtype=float)[rows],
            np.asarray(self.memory_scale, dtype=float)[rows],
            pick(self.mean_prefill),
            pick(self.join_stretch),
            pick(self.earlier_chunks),
        )

    def shift(self, k: EngineLawConstants | None = None) -> FloatArray:
        """``J_s`` where the shifted mixture is on (``θ_9 > 0`` and ``T_s > 0``), else 0 (docs/model.md (17.26))."""
        k = shipped_constants() if k is None else k
        zero = np.zeros_like(np.asarray(self.prefill_share, dtype=float))
        if k.theta_9 <= 0 or self.join_stretch is None or self.earlier_chunks is None:
            return zero
        return np.where(np.asarray(self.earlier_chunks, dtype=float) > 0, np.asarray(self.join_stretch, dtype=float), 0.0) + zero

    def shift_weight(
        self, load: npt.ArrayLike, service: npt.ArrayLike, k: EngineLawConstants | None = None
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``ω_s = 1 − e^{−θ_9 λ_s T_s}`` with ``λ_s = a_s/m_s`` (docs/model.md (17.26)), ``∂ω/∂a`` and ``∂ω/∂m``."""
        k = shipped_constants() if k is None else k
        a, m = np.broadcast_arrays(np.asarray(load, dtype=float), np.asarray(service, dtype=float))
        t = np.zeros_like(a) if self.earlier_chunks is None else np.asarray(self.earlier_chunks, dtype=float) + np.zeros_like(a)
        rate = k.theta_9 * t / np.where(m > 0, m, 1.0)  # ∂(θ_9 λ T)/∂a
        x = rate * a
        omega = -np.expm1(-x)
        da = rate * np.exp(-x)
        return omega, da, -da * a / np.where(m > 0, m, 1.0)

    def delay(self, k: EngineLawConstants | None = None) -> FloatArray:
        """``δ_s = θ_7 ū_s + θ_8 J_s`` (docs/model.md (17.25)): the least wait of a request that waits."""
        k = shipped_constants() if k is None else k
        out = np.zeros_like(np.asarray(self.prefill_share, dtype=float))
        if self.mean_prefill is not None:
            out = out + k.theta_7 * np.asarray(self.mean_prefill, dtype=float)
        if self.join_stretch is not None and k.theta_8 > 0:
            out = out + k.theta_8 * np.asarray(self.join_stretch, dtype=float)
        return out

    def arrays(self, like: FloatArray) -> tuple[FloatArray, FloatArray]:
        return (
            np.asarray(self.prefill_share, dtype=float) + np.zeros_like(like),
            np.asarray(self.memory_scale, dtype=float) + np.zeros_like(like),
        )


def _component(
    a: FloatArray, c: FloatArray, scale: FloatArray, amp: float | FloatArray, pole: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """One equivalent ``M/M/c`` at ``a_e = s a φ(a)``, ``φ = amp/(1 − p a)``, service ``m s φ``: ``f = W̄/m``,
    ``f'``, ``P^W`` and ``dP^W/da`` (``a`` below its edge)."""
    den = 1.0 - pole * a
    phi = amp / den
    dphi = phi * pole / den
    ae = scale * a * phi
    dae = scale * (phi + a * dphi)
    pw, dpw_de = erlang_c_real(ae, c)
    gap = c - ae
    f = scale * phi * pw / gap
    df = scale * dphi * pw / gap + scale * phi * (dpw_de * dae / gap + pw * dae / gap**2)
    return f, df, pw, dpw_de * dae


def _edge(c: FloatArray, scale: FloatArray, amp: float | FloatArray, pole: FloatArray, rho: float) -> FloatArray:
    """``a`` at which ``a_e = ρ c``: ``ρc/(s amp + ρ c p)`` (``inf`` for a component that never loads)."""
    den = scale * amp + rho * c * pole
    return np.divide(rho * c, den, out=np.full(np.shape(den), np.inf), where=den > 0)


_Part = tuple[FloatArray, FloatArray, Any, FloatArray]  # (c, s, amp, p) of one component


def _compute_share(pi: FloatArray, k: EngineLawConstants) -> FloatArray:
    """``s_c = π + θ_6 (1 − π)``: the share of the GPU's work a prefill queues behind (its own kind, and the
    decodes that share its steps); ``π`` at ``θ_6 = 0``."""
    return pi + k.theta_6 * (1.0 - pi)


def _parts(c: FloatArray, tiers: EngineTiers, k: EngineLawConstants, like: FloatArray) -> tuple[_Part, _Part]:
    """The compute's and the memory's component parameters ``(c, s, amp, p)``."""
    pi, r = tiers.arrays(like)
    compute = (np.full_like(like, k.compute_servers), _compute_share(pi, k), k.theta_1, np.full_like(like, k.theta_2))
    memory = (c, r, k.theta_4, k.theta_3 * pi)
    return compute, memory


def stability_edge(servers: npt.ArrayLike, tiers: EngineTiers, k: EngineLawConstants, rho: float = 1.0) -> FloatArray:
    """The load ``a*`` at which the first of the two components reaches ``a_e = ρ c``."""
    c = np.asarray(servers, dtype=float)
    compute, memory = _parts(c, tiers, k, c)
    return np.minimum(_edge(*compute, rho), _edge(*memory, rho))


def _both(
    a: FloatArray, c: FloatArray, tiers: EngineTiers, k: EngineLawConstants, rho_clip: float | None
) -> tuple[tuple[FloatArray, ...], tuple[FloatArray, ...]]:
    """``(f, f', P^W, dP^W/da)`` of each component at ``a`` (linear in ``a`` above its ``ρ_clip`` edge if given)."""
    out = []
    for scale, part in zip((k.theta_5, 1.0), _parts(c, tiers, k, a)):
        if rho_clip is None:
            f, df, pw, dpw = _component(a, *part)
            out.append((scale * f, scale * df, pw, dpw))
            continue
        abar = np.minimum(a, _edge(*part, rho_clip))
        f, df, pw, dpw = _component(abar, *part)
        out.append((scale * (f + df * (a - abar)), scale * df, pw, dpw))
    return out[0], out[1]


def engine_advertised(
    load: npt.ArrayLike,
    servers: npt.ArrayLike,
    service: npt.ArrayLike,
    tiers: EngineTiers,
    rho_clip: float,
    k: EngineLawConstants | None = None,
) -> tuple[FloatArray, FloatArray]:
    """The advertised delay ``Ŵ = m (f_c + f_m)``, each component continued linearly above its ``ρ_clip`` edge
    (as (7.1)), and ``∂Ŵ/∂a``; ``∂Ŵ/∂m = Ŵ/m``.  ``+inf`` where ``c < 1``."""
    k = shipped_constants() if k is None else k
    a, c, m = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (load, servers, service)))
    ok = c >= 1
    cs = np.where(ok, c, 1.0)
    comp, mem = _both(a, cs, tiers, k, rho_clip)
    wait = m * (comp[0] + mem[0])
    return np.where(ok, wait, np.inf), np.where(ok, m * (comp[1] + mem[1]), 0.0)


class EngineWaitLaw(TypedDict):
    """What :func:`engine_wait_law` returns, per profile."""

    stable: BoolArray
    weight: FloatArray
    decay: FloatArray
    d_weight_da: FloatArray
    d_decay_da: FloatArray
    d_decay_dm: FloatArray
    mean: FloatArray
    delay: FloatArray
    shift: FloatArray
    shift_weight: FloatArray
    d_shift_weight_da: FloatArray
    d_shift_weight_dm: FloatArray


def engine_wait_law(
    load: npt.ArrayLike, servers: npt.ArrayLike, service: npt.ArrayLike, tiers: EngineTiers, k: EngineLawConstants | None = None
) -> EngineWaitLaw:
    """``P^W = 1 − (1 − P_c)(1 − P_m)``, ``W̄ = m (f_c + f_m)``, the decay ``θ = P^W/W̄`` and their slopes in ``a``
    and ``m`` (0 where unstable); the step in progress ``δ``, the shifted mixture's ``J`` and ``ω`` with its slopes, and the
    mean wait ``W̄ + P^W δ + ω J`` (docs/model.md (17.25), (17.26))."""
    k = shipped_constants() if k is None else k
    a, c, m = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (load, servers, service)))
    cs = np.where(c >= 1, c, 1.0)
    stable = (c >= 1) & (a < stability_edge(cs, tiers, k))
    a_s = np.where(stable, a, 0.0)
    (fc, dfc, pc, dpc), (fm, dfm, pm, dpm) = _both(a_s, cs, tiers, k, None)
    pw = pc + pm - pc * pm  # 1 − (1 − P_c)(1 − P_m), without cancelling a small P_m
    dpw = dpc * (1.0 - pm) + dpm * (1.0 - pc)
    f, df = fc + fm, dfc + dfm
    pi, r = tiers.arrays(a_s)
    # θ m at a = 0, where W̄ = P^W = 0: the faster of the two components' decays
    idle = np.minimum(
        np.divide(k.compute_servers, _compute_share(pi, k) * k.theta_1, out=np.full_like(pi, np.inf), where=_compute_share(pi, k) > 0),
        np.divide(cs, r * k.theta_4, out=np.full_like(r, np.inf), where=r > 0),
    )
    busy = f > 0
    fs = np.where(busy, f, 1.0)
    decay_m = np.where(busy, pw / fs, idle)  # θ m
    d_decay_m = np.where(busy, (dpw - decay_m * df) / fs, 0.0)  # not over f²: it underflows where f ≈ 10⁻²⁰⁰
    decay = decay_m / m
    delay = tiers.delay(k) + np.zeros_like(a_s)
    shift = tiers.shift(k) + np.zeros_like(a_s)
    omega, d_omega_da, d_omega_dm = tiers.shift_weight(a_s, m, k)
    on = shift > 0
    omega, d_omega_da, d_omega_dm = (np.where(on, x, 0.0) for x in (omega, d_omega_da, d_omega_dm))

    def keep(x: FloatArray) -> FloatArray:
        return np.where(stable, x, 0.0)

    return {
        "stable": stable,
        "weight": keep(pw),
        "decay": keep(decay),
        "d_weight_da": keep(dpw),
        "d_decay_da": keep(d_decay_m / m),
        "d_decay_dm": keep(-decay / m),
        "mean": np.where(stable, m * f + pw * delay + omega * shift, np.inf),
        "delay": keep(delay),
        "shift": keep(shift),
        "shift_weight": keep(omega),
        "d_shift_weight_da": keep(d_omega_da),
        "d_shift_weight_dm": keep(d_omega_dm),
    }


# -- the engine's units, per profile and type ---------------------------------------------------------------


@dataclass(frozen=True)
class EngineUnits:
    """Per ``(s, q)``: alone prefill ``u``, work ``w``; per ``s``: the KV places ``c_kv`` (the servers), the
    full-batch residence ``R`` and the law's tier constants."""

    prefill: FloatArray
    work: FloatArray
    kv_servers: FloatArray
    residence: FloatArray
    tiers: EngineTiers

    @property
    def servers(self) -> FloatArray:
        return self.kv_servers


def alone_prefill(step: Any, uncached: FloatArray, cached: FloatArray, budget: int) -> FloatArray:
    """Seconds of a prefill of ``n`` uncached tokens after ``h`` cached ones alone on the node: ``⌈n/B⌉``
    chunk steps, ``Σ_j [t_0 + t_P c_j + t_A c_j (k_j + c_j)]`` (``k_j`` the context before chunk ``j``)."""
    n = np.maximum(np.asarray(uncached, dtype=float), 1.0)  # an engine prefills at least one token
    h = np.asarray(cached, dtype=float)
    full = np.floor(n / budget)
    last = n - full * budget
    chunks = full + (last > 0)
    # Σ over the full chunks of c(k + c) with c = B, k = h + jB (j = 0..full−1), plus the last chunk
    attention = budget * (full * h + budget * full * (full - 1) / 2.0 + full * budget) + last * (h + full * budget + last)
    return chunks * step.base + step.per_prefill_token * n + step.per_attention * attention


def join_stretch(step: Any, uncached: FloatArray, budget: int, joiner: FloatArray, joiner_cached: FloatArray) -> FloatArray:
    """Seconds by which a prefill of ``⌈n/B⌉ ≥ 2`` chunks is stretched when a request arriving during its earlier
    chunks joins its last chunk ``c = n − (⌈n/B⌉ − 1) B``, filling the budget with ``m = min(B − c, n̄)`` of its own
    tokens (``n̄`` the joiner's uncached tokens, ``h̄`` its cached ones): the step's extra ``t_P m + t_A m (h̄ + m)``
    and the prefill-batching term of two chunks, ``t_S (c + m) log₂ 2``.  0 for a prefill of one chunk (nothing joins
    a step already planned).  Per type; the law's ``J_s = Σ_q p_q j_{s,q}`` (docs/model.md §17.10.3)."""
    n = np.maximum(np.asarray(uncached, dtype=float), 1.0)
    chunks = np.ceil(n / budget)
    last = n - (chunks - 1.0) * budget
    m = np.where(chunks >= 2, np.minimum(budget - last, np.asarray(joiner, dtype=float)), 0.0)
    stretch = step.per_prefill_token * m + step.per_attention * m * (np.asarray(joiner_cached, dtype=float) + m)
    stretch = stretch + step.prefill_batching * (last + m)
    return np.where(m > 0, stretch, 0.0)


def engine_units(instance: Any, step: Any, k: EngineLawConstants | None = None) -> EngineUnits:
    """The engine law's inputs for every profile of ``instance`` (see the module docstring)."""
    k = shipped_constants() if k is None else k
    eng = instance.engine
    p = np.asarray(instance.probabilities, dtype=float)
    L = np.asarray(instance.lengths, dtype=float)
    h = np.minimum(np.asarray(instance.hit_depth, dtype=float), L[None, :])
    d = step.decode_run(1, 1, 0.0)
    out = np.maximum(np.round(np.asarray(instance.decodes, dtype=float) / d), 1.0)
    u = alone_prefill(step, L[None, :] - h, h, eng.token_budget)
    per_token = step.per_sequence + step.per_context_token * (L + out / 2.0)  # δ_q: a decoding request's share of a step
    w = u + (out * per_token)[None, :]
    free = np.maximum(instance.gpu.memory - np.asarray(instance.memory, dtype=float), 0.0) / instance.gpu.kv_per_token
    own = np.maximum(L[None, :] - h, 1.0) + out[None, :]  # k_{s,q}: KV tokens a request holds at its end
    tokens = own @ p
    kv = np.maximum(np.minimum(float(eng.max_running), (1.0 - eng.watermark) * free / tokens), 1.0)
    residence = u + out[None, :] * (step.base + kv * float(per_token @ p))[:, None]  # R_{s,q}: o steps of a full batch
    held = (own * residence) @ p / tokens  # E[k R]/E[k]: the memory a request holds, weighted by how long
    w_bar = w @ p
    n = np.maximum(L[None, :] - h, 1.0)
    join = join_stretch(step, n, eng.token_budget, (n @ p)[:, None], (h @ p)[:, None]) @ p
    count = np.ceil(n / eng.token_budget)
    earlier = np.where(count >= 2, alone_prefill(step, np.maximum(count - 1.0, 1.0) * eng.token_budget, h, eng.token_budget), 0.0) @ p
    return EngineUnits(u, w, kv, held, EngineTiers((u @ p) / w_bar, held / w_bar, u @ p, join, earlier))


def default_step_time(instance: Any) -> Any:
    """The step time of the instance's ``[engine]`` (the shipped Splitwise table unless it names one)."""
    return _step_time(instance.engine)


@lru_cache(maxsize=16)
def _step_time(section: Any) -> Any:
    from edgeprefix.placement.simulation.engine.step_time import step_time_from_section

    table = resources.files("edgeprefix.benchmarks.data").joinpath("splitwise_perf_model.csv")
    with resources.as_file(table) as path:
        return step_time_from_section(section, path)


_VIEWS: dict[int, tuple[Any, Any]] = {}


def engine_view(instance: Any, k: EngineLawConstants | None = None, step: Any = None) -> Any:
    """The instance in the engine's units: ``first_token_time = u``, ``service_time = w`` (and ``w²``),
    ``concurrency = c_kv`` (real), with ``engine_units`` and ``engine_tiers`` attached.  Everything else
    (association, coverage) is unchanged.  Views of the shipped constants are cached per instance."""
    check_queue_law("engine", instance)
    key = id(instance)
    if k is None and step is None and key in _VIEWS and _VIEWS[key][0] is instance:
        return _VIEWS[key][1]
    units = engine_units(instance, default_step_time(instance) if step is None else step, k)
    view = dataclasses.replace(instance)
    for name, value in (
        ("first_token_time", units.prefill),
        ("service_time", units.work),
        ("service_second_moment", units.work**2),
        ("concurrency", units.servers),
    ):
        arr = np.array(value, dtype=float)
        arr.setflags(write=False)
        object.__setattr__(view, name, arr)
    object.__setattr__(view, "engine_units", units)
    object.__setattr__(view, "engine_tiers", units.tiers)
    if k is None and step is None:
        if len(_VIEWS) > 32:
            _VIEWS.clear()
        _VIEWS[key] = (instance, view)
    return view


def view_tiers(view: Any) -> EngineTiers:
    """The :class:`EngineTiers` that :func:`engine_view` attached to ``view``."""
    tiers = getattr(view, "engine_tiers", None)
    if not isinstance(tiers, EngineTiers):
        raise ValueError("engine law: not an engine_view(instance): it has no engine_tiers")
    return tiers
