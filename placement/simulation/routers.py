"""Routers of the network simulator: the online router of docs/model.md §11 and baselines.

Every router sees a :class:`CandidateView` (the nearest ``k`` eligible nodes per profile,
after candidate filtering, with their telemetry) and returns the index of the chosen
candidate, or ``REJECT``.  :class:`OnlineRouter` implements the paper's control loop
(cost ``ξ r^α + g(L − h) + Ŵ + T_fetch + ψ``, ``ψ = z_δ σ̂``, admission with hysteresis,
fallback); with tier-level delays and no hysteresis it *is* one of the three analytical
policies (``nearest``, ``prefix``, ``load_aware``) and the simulator then routes in one
vectorised step.

The production baselines keep their published default knobs and, like the systems they
model, do not see radio distance; they choose among the same candidate set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain

FloatArray = npt.NDArray[np.float64]
REJECT = -1
POLICIES = ("nearest", "prefix", "load_aware")
DELAY_SOURCES = ("tier", "telemetry")


class CandidateView:
    """The candidates of one request (arrays of equal length ``K``).

    Attributes
    ----------
    q : request type index; ``length`` its ``L_q`` tokens; ``now`` the arrival time;
        ``target`` the TTFT target ``τ`` (for SLO-aware baselines).
    node, profile : node index and profile ``s`` of each candidate.
    distance, radio : ``r_x`` and ``ξ r_x^α``.
    hit, prefill : advertised ``h_{x,q}`` and ``g(L_q − h_{x,q})``.
    in_system, servers : telemetry ``n_x`` (running + queued) and ``c_x``.
    wait, sigma : advertised delay ``Ŵ_x`` and its spread ``σ̂_x``.
    kv_use : KV memory utilisation ``(B_s + min(n_x, c_x) m_run) / M``.
    open : admission state (hysteresis) per candidate.
    fetch : ``T^fetch_{x,q}`` (0 for a local state).
    """

    __slots__ = (
        "q",
        "length",
        "now",
        "target",
        "node",
        "profile",
        "distance",
        "radio",
        "hit",
        "prefill",
        "in_system",
        "servers",
        "open",
        "fetch",
        "_per_server",
        "_age",
        "_memory",
        "_m_run",
        "_gpu_memory",
        "_staleness",
    )

    def __init__(
        self,
        *,
        q,
        length,
        now,
        target,
        node,
        profile,
        distance,
        radio,
        hit,
        prefill,
        in_system,
        servers,
        open,
        fetch,
        per_server,
        age,
        memory,
        runtime_per_sequence,
        gpu_memory,
        staleness,
    ):
        self.q, self.length, self.now, self.target = q, length, now, target
        self.node, self.profile, self.distance, self.radio = node, profile, distance, radio
        self.hit, self.prefill, self.in_system, self.servers = hit, prefill, in_system, servers
        self.open, self.fetch = open, fetch
        self._per_server, self._age, self._memory = per_server, age, memory
        self._m_run, self._gpu_memory, self._staleness = runtime_per_sequence, gpu_memory, staleness

    @property
    def ahead(self) -> FloatArray:
        """Customers ahead of a new arrival, ``max(0, n_x − c_x + 1)``."""
        return np.maximum(self.in_system - self.servers + 1.0, 0.0)

    @property
    def wait(self) -> FloatArray:
        """Advertised delay ``Ŵ_x = max(0, n_x − c_x + 1) m̄_x / c_x`` (M/M/c memoryless estimate)."""
        return self.ahead * self._per_server

    @property
    def sigma(self) -> FloatArray:
        """Delay spread ``σ̂_x = sqrt(k) m̄_x / c_x + staleness_weight · age``."""
        return np.sqrt(self.ahead) * self._per_server + self._staleness * self._age

    @property
    def kv_use(self) -> FloatArray:
        """KV memory utilisation ``(B_s + min(n_x, c_x) m_run) / M``."""
        return np.minimum((self._memory + np.minimum(self.in_system, self.servers) * self._m_run) / self._gpu_memory, 1.0)


class Router(Protocol):
    """What the simulator needs from a router."""

    @property
    def name(self) -> str: ...

    @property
    def candidates_per_profile(self) -> int: ...

    def choose(self, view: CandidateView, rng: np.random.Generator) -> int: ...


def hysteresis_step(closed: npt.ArrayLike, load: npt.ArrayLike, high: float, low: float) -> npt.NDArray[np.bool_]:
    """Admission state after observing ``load`` (docs/model.md §11).

    An open node/tier closes when ``load >= ρ_high``; a closed one reopens when
    ``load <= ρ_low`` (``ρ_low < ρ_high``); in between it keeps its state.
    """
    closed = np.asarray(closed, dtype=bool)
    load = np.asarray(load, dtype=float)
    return np.where(closed, load > low, load >= high)


@dataclass(frozen=True)
class OnlineRouter:
    """The online router of docs/model.md §11.

    Parameters
    ----------
    policy : ``"nearest"`` (cost ``ξ r^α``), ``"prefix"`` (``+ g(L − h)``) or ``"load_aware"``
        (``+ Ŵ + T_fetch + ψ``).
    delay : ``"tier"``: ``Ŵ_x = W̄_{s(x)}`` from ``tier_wait`` (the analytical advertised
        delay); ``"telemetry"``: the node's own advertised delay (refreshed every ``Δt``).
    tier_wait : ``W̄_s`` per profile (needed for ``delay="tier"`` with ``load_aware``).
    candidates_per_profile : k nearest eligible nodes kept per profile.
    margin : ``z_δ`` of the robust margin ``ψ = z_δ σ̂``.
    rho_high, rho_low : hysteresis thresholds on the node load ``n_x / c_x``
        (``inf`` disables admission control).
    fallback : profile whose candidates take the request when every candidate is closed.
    fetch : optional ``T^fetch_{s,q}`` per (profile, type), seconds.
    """

    policy: str = "load_aware"
    delay: str = "telemetry"
    tier_wait: tuple[float, ...] | None = None
    candidates_per_profile: int = 1
    margin: float = 0.0
    rho_high: float = float("inf")
    rho_low: float = float("inf")
    fallback: int = 0
    fetch: tuple[tuple[float, ...], ...] | None = None
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy: unknown {self.policy!r} (valid: {list(POLICIES)})")
        if self.delay not in DELAY_SOURCES:
            raise ValueError(f"delay: unknown {self.delay!r} (valid: {list(DELAY_SOURCES)})")
        if self.delay == "tier" and self.policy == "load_aware" and self.tier_wait is None:
            raise ValueError("tier_wait: load_aware with delay='tier' needs the advertised W̄_s per profile")
        if self.candidates_per_profile < 1:
            raise ValueError(f"candidates_per_profile: k must be >= 1, got {plain(self.candidates_per_profile)}")
        if self.margin < 0:
            raise ValueError(f"margin: z_δ must be >= 0, got {plain(self.margin)}")
        if not self.rho_low <= self.rho_high:
            raise ValueError(f"rho_low <= rho_high must hold, but got rho_low={plain(self.rho_low)}, rho_high={plain(self.rho_high)}")
        if not self.name:
            object.__setattr__(self, "name", self.policy if self.delay == "tier" else f"{self.policy}_online")

    @cached_property
    def _admission(self) -> bool:
        return bool(np.isfinite(self.rho_high))

    @cached_property
    def _tier_wait(self) -> FloatArray:
        return np.asarray(self.tier_wait, dtype=float)  # read only under delay = "tier", where it is given

    @property
    def admission_control(self) -> bool:
        return bool(np.isfinite(self.rho_high))

    def static_bias(self, residual_prefill: npt.ArrayLike) -> FloatArray | None:
        """``β_{s,q}`` when routing reduces to Theorem 1's tier rule, else ``None``.

        True for tier-level delays without admission control or margin: the cost within a
        tier then grows with distance, so the nearest node per tier decides.
        """
        if self.delay != "tier" or self.admission_control or self.margin > 0:
            return None
        g = np.asarray(residual_prefill, dtype=float)
        if self.policy == "nearest":
            bias = np.zeros_like(g)
        elif self.policy == "prefix":
            bias = g.copy()
        else:
            bias = g + np.asarray(self.tier_wait, dtype=float)[:, None]
        if self.fetch is not None and self.policy == "load_aware":
            bias = bias + np.asarray(self.fetch, dtype=float)
        return bias

    def node_bias(self, first_token: npt.ArrayLike, profile: npt.ArrayLike) -> FloatArray | None:
        """Per-node ``β_{x,q}`` from each node's advertised first-token time ``(N, Q)`` and the profile the
        catalogue shows for it ``(N,)`` (docs/model.md §19.7), or ``None`` when routing is not Theorem 1's
        rule (as :meth:`static_bias`).  Equal rows within a profile give :meth:`static_bias`'s rows."""
        if self.delay != "tier" or self.admission_control or self.margin > 0:
            return None
        g = np.asarray(first_token, dtype=float)
        s = np.asarray(profile, dtype=np.int64)
        if self.policy == "nearest":
            return np.zeros_like(g)
        if self.policy == "prefix":
            return g.copy()
        bias = g + np.asarray(self.tier_wait, dtype=float)[s][:, None]
        if self.fetch is not None:
            bias = bias + np.asarray(self.fetch, dtype=float)[s]
        return bias

    def cost(self, view: CandidateView) -> FloatArray:
        """``Ĉ_{x,q}`` per candidate (docs/model.md §11)."""
        cost = view.radio.copy()
        if self.policy == "nearest":
            return cost
        cost += view.prefill
        if self.policy == "prefix":
            return cost
        wait = self._tier_wait[view.profile] if self.delay == "tier" else view.wait
        cost += wait + view.fetch
        return cost + self.margin * view.sigma if self.margin > 0 else cost

    def choose(self, view: CandidateView, rng: np.random.Generator) -> int:
        cost = self.cost(view)
        if self._admission:
            if view.open.any():
                cost = np.where(view.open, cost, np.inf)
            else:  # every tier closed: fall back to the uncached tier, else the best overall
                fallback = view.profile == self.fallback
                if fallback.any():
                    cost = np.where(fallback, cost, np.inf)
        return int(np.argmin(cost))


def _least_loaded(view: CandidateView, rng: np.random.Generator) -> int:
    load = view.in_system
    best = np.flatnonzero(load == load.min())
    return int(best[rng.integers(best.size)]) if best.size > 1 else int(best[0])


@dataclass(frozen=True)
class SGLangCacheAware:
    """SGLang's cache-aware router (sgl-router), distance-blind.

    If the loads are imbalanced (``L_max − L_min > balance_abs`` and
    ``L_max > balance_rel · L_min``) route to the least-loaded worker; else route to the
    longest prefix match when its match ratio ``h / L`` exceeds ``cache_threshold``, else to
    the least-loaded worker.  Defaults: ``cache_threshold = 0.3``, ``balance_abs = 64``,
    ``balance_rel = 1.5``.
    """

    cache_threshold: float = 0.3
    balance_abs: float = 64.0
    balance_rel: float = 1.5
    candidates_per_profile: int = 4
    name: str = "sglang"

    def choose(self, view: CandidateView, rng: np.random.Generator) -> int:
        load = view.in_system
        high, low = float(load.max()), float(load.min())
        if high - low > self.balance_abs and high > self.balance_rel * low:
            return _least_loaded(view, rng)
        ratio = view.hit / view.length
        best = int(np.argmax(ratio))
        if ratio[best] > self.cache_threshold:
            ties = np.flatnonzero(ratio == ratio[best])
            return int(ties[rng.integers(ties.size)])
        return _least_loaded(view, rng)


@dataclass(frozen=True)
class PowerOfTwo:
    """Power-of-two choices: sample two candidates uniformly, keep the less loaded."""

    candidates_per_profile: int = 4
    name: str = "power_of_two"

    def choose(self, view: CandidateView, rng: np.random.Generator) -> int:
        k = view.node.size
        if k == 1:
            return 0
        a, b = rng.choice(k, size=2, replace=False)
        return int(a if view.in_system[a] <= view.in_system[b] else b)


@dataclass(frozen=True)
class DynamoKV:
    """NVIDIA Dynamo's KV router: lowest ``overlap_weight · prefill_blocks + decode_blocks``.

    ``prefill_blocks = (L − h) / block_size`` (new blocks to compute) and
    ``decode_blocks`` the potential active blocks, approximated as ``(n_x + 1) L / block_size``.
    Defaults: ``overlap_weight = 1.0`` (kv-overlap-score-weight), ``temperature = 0``
    (deterministic; ``> 0`` samples a softmax of ``−cost / temperature`` over normalised
    costs), ``block_size = 16`` tokens (vLLM's default; Dynamo uses the backend's).
    """

    overlap_weight: float = 1.0
    temperature: float = 0.0
    block_size: int = 16
    candidates_per_profile: int = 4
    name: str = "dynamo"

    def choose(self, view: CandidateView, rng: np.random.Generator) -> int:
        prefill_blocks = (view.length - view.hit) / self.block_size
        decode_blocks = (view.in_system + 1.0) * view.length / self.block_size
        cost = self.overlap_weight * prefill_blocks + decode_blocks
        if self.temperature <= 0:
            return int(np.argmin(cost))
        span = float(cost.max() - cost.min()) or 1.0
        logits = -(cost - cost.min()) / span / self.temperature
        weights = np.exp(logits - logits.max())
        return int(rng.choice(cost.size, p=weights / weights.sum()))


@dataclass(frozen=True)
class LlmdWeighted:
    """llm-d's inference scheduler with weighted scorers, max-score pick.

    Scores in [0, 1]: queue ``1 − q_x / max q`` (queued requests), KV-cache utilisation
    ``1 − kv_use``, prefix ``h / L``; weights queue 2, kv-utilisation 2, prefix 3.
    """

    queue_weight: float = 2.0
    kv_weight: float = 2.0
    prefix_weight: float = 3.0
    candidates_per_profile: int = 4
    name: str = "llm-d"

    def choose(self, view: CandidateView, rng: np.random.Generator) -> int:
        queued = np.maximum(view.in_system - view.servers, 0.0)
        top = float(queued.max())
        queue_score = 1.0 - queued / top if top > 0 else np.ones_like(queued)
        score = self.queue_weight * queue_score + self.kv_weight * (1.0 - view.kv_use) + self.prefix_weight * view.hit / view.length
        return int(np.argmax(score))


@dataclass(frozen=True)
class PrebleE2:
    """Preble's E2 scheduling (exploit vs explore), distance-blind.

    Exploit the longest-match holder when its cached part exceeds the uncached part
    (``h > L − h``); otherwise explore: the candidate with the lowest load cost, here the
    expected work ahead ``n_x · m̄ / c_x`` plus this request's prefill ``g(L − h)``.
    """

    candidates_per_profile: int = 4
    name: str = "preble"

    def choose(self, view: CandidateView, rng: np.random.Generator) -> int:
        best = int(np.argmax(view.hit))
        if view.hit[best] > view.length - view.hit[best]:
            holders = np.flatnonzero(view.hit == view.hit[best])
            return int(holders[np.argmin(view.in_system[holders])])
        return int(np.argmin(view.wait + view.prefill))


@dataclass(frozen=True)
class MooncakeTTFT:
    """Mooncake's conductor: argmin predicted TTFT (queue + prefill), reject past the SLO.

    The prediction ignores radio distance; a request whose best prediction exceeds
    ``slo`` (default: the instance's target ``τ``) is rejected (early rejection).
    """

    slo: float | None = None
    candidates_per_profile: int = 4
    name: str = "mooncake"

    def choose(self, view: CandidateView, rng: np.random.Generator) -> int:
        predicted = view.wait + view.prefill
        best = int(np.argmin(predicted))
        slo = view.target if self.slo is None else self.slo
        return REJECT if predicted[best] > slo else best


BASELINES = {
    "sglang": SGLangCacheAware,
    "power_of_two": PowerOfTwo,
    "dynamo": DynamoKV,
    "llm-d": LlmdWeighted,
    "preble": PrebleE2,
    "mooncake": MooncakeTTFT,
}


@dataclass(frozen=True)
class SampledOnlineRouter:
    """Power of ``d`` over the online router (docs/model.md (11.16)): sample ``d`` of the candidates
    uniformly without replacement and send the request to the one of least cost ``Ĉ_{x,q}`` of
    :meth:`OnlineRouter.cost` (admission as :meth:`OnlineRouter.choose`, among the sampled ones).
    ``d`` at least the number of candidates is the online router itself."""

    router: OnlineRouter
    sample: int = 2
    name: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not (isinstance(self.sample, (int, np.integer)) and self.sample >= 1):
            raise ValueError(f"sample: d must be an integer >= 1, got {plain(self.sample)}")
        if not self.name:
            object.__setattr__(self, "name", f"{self.router.name}_d{self.sample}")

    @property
    def candidates_per_profile(self) -> int:
        return self.router.candidates_per_profile

    @property
    def rho_high(self) -> float:  # the simulator keeps the admission state of the wrapped router
        return self.router.rho_high

    @property
    def rho_low(self) -> float:
        return self.router.rho_low

    @property
    def fetch(self) -> tuple[tuple[float, ...], ...] | None:
        return self.router.fetch

    def choose(self, view: CandidateView, rng: np.random.Generator) -> int:
        k = view.node.size
        if self.sample >= k:
            return self.router.choose(view, rng)
        picked = rng.choice(k, size=self.sample, replace=False)
        cost = self.router.cost(view)[picked]
        if self.router.admission_control:
            open_ = view.open[picked]
            if open_.any():
                cost = np.where(open_, cost, np.inf)
        return int(picked[np.argmin(cost)])
