"""Network discrete-event simulator with the online router (docs/model.md §1–§5, §8, §11).

A PPP of edge nodes on a torus (:mod:`edgeprefix.placement.simulation.layout`), each with its
profile, ``c_s`` servers and a FCFS queue; requests arrive as a space-time Poisson process
of intensity ``Λ`` with types drawn from ``p_q``; the router picks among the nearest ``k``
eligible nodes per profile, seeing telemetry refreshed every ``Δt``.  Service occupancy
of a request at node ``x`` is exponential with mean ``g(L_q − h^ver_{x,q}) + D_q`` (the
per-type mean of docs/model.md §5; ``h^ver`` after verification) and its TTFT is
``ξ r^α + g(L_q − h^ver) + W``.  With the serving extensions (docs/model.md §19) the prefill
term and the occupancy mean are the instance's ``T^ft_{s,q}`` and ``1/μ_{s,q}``
(:func:`node_times`).

FCFS with known service requirements lets each node keep only a heap of its ``c`` server
free times: a request's wait is fixed on arrival, so the event list reduces to the
arrival stream.  Telemetry (``n_x``, running + queued) comes from a per-node heap of
departure epochs.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

import edgeprefix.placement.simulation.delayed_fast as delayed_fast
import edgeprefix.placement.simulation.online_fast as online_fast
from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.ranges import check_simulated_events
from edgeprefix.placement.simulation.fcfs_nodes import fcfs_node_waits
from edgeprefix.placement.simulation.layout import Layout, LayoutSpec, sample_layout
from edgeprefix.placement.simulation.nearest import nearest_per_profile
from edgeprefix.placement.simulation.nearest import query as query_nearest
from edgeprefix.placement.simulation.routers import REJECT, CandidateView, Router

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
SERVICE_LAWS = ("exponential", "deterministic", "instance")


@dataclass(frozen=True)
class SimulationSpec:
    """Run-length and telemetry settings of :func:`simulate_network`.

    Parameters
    ----------
    horizon : measured seconds (after the warm-up).
    warmup : seconds discarded at the start (queues start empty).
    refresh_period : telemetry period ``Δt`` (0: every read is fresh).
    telemetry_delay : continuous telemetry delay ``D`` [s]: every read (or board refresh at ``t``) shows
        each node's ``n_x`` as it was at ``t − D`` (docs/model.md §11); 0: current.
    staleness_weight : seconds of delay spread added per second of telemetry age in
        ``σ̂_x`` (choice: ``σ̂_x = sqrt(k) m̄_s / c_x + staleness_weight · age``, with
        ``k = max(0, n_x − c_x + 1)`` customers ahead).
    service : ``"exponential"`` (M/M/c-like, default) or ``"deterministic"`` occupancy, or
        ``"instance"``: the instance's serving law (docs/model.md §19.6), a deterministic
        first-token time plus a decode of mean ``D_q`` and SCV ``serving.decode_scv`` (Gamma law;
        deterministic at 0).
    local_accounting : the router adds each request it sends to its copy of ``n_x`` until
        the next telemetry refresh (as production routers track their own in-flight
        requests); without it, stale telemetry makes every router herd onto the node that
        looked idle at the last refresh.
    layout : how nodes are drawn when no layout is given.
    """

    horizon: float = 200.0
    warmup: float = 50.0
    refresh_period: float = 0.0
    telemetry_delay: float = 0.0
    staleness_weight: float = 1.0
    service: str = "exponential"
    local_accounting: bool = False
    layout: LayoutSpec = LayoutSpec()

    def __post_init__(self) -> None:
        if not self.horizon > 0:
            raise ValueError(f"horizon: must be > 0 seconds, got {plain(self.horizon)}")
        if not self.warmup >= 0:
            raise ValueError(f"warmup: must be >= 0 seconds, got {plain(self.warmup)}")
        if not self.refresh_period >= 0:
            raise ValueError(f"refresh_period: Δt must be >= 0, got {plain(self.refresh_period)}")
        if not (self.telemetry_delay >= 0 and np.isfinite(self.telemetry_delay)):
            raise ValueError(f"telemetry_delay: D must be a finite number of seconds >= 0, got {plain(self.telemetry_delay)}")
        if self.service not in SERVICE_LAWS:
            raise ValueError(f"service: unknown {self.service!r} (valid: {list(SERVICE_LAWS)})")


@dataclass(frozen=True)
class NetworkResult:
    """Measured requests of one simulation run (arrivals in ``[warmup, warmup + horizon)``).

    Per-request arrays (shape ``(n,)``): ``request_type`` q, ``node`` x (−1 if rejected),
    ``profile`` s (−1 if rejected), ``distance`` r, ``prefill`` realised ``g(L − h^ver)``,
    ``hit`` verified hit depth, ``wait`` W, ``service`` occupancy, ``ttft`` (``inf`` if
    rejected).
    """

    router: str
    profile_ids: tuple[str, ...]
    request_ids: tuple[str, ...]
    horizon: float
    layout: Layout = field(repr=False)
    request_type: IntArray = field(repr=False)
    node: IntArray = field(repr=False)
    profile: IntArray = field(repr=False)
    distance: FloatArray = field(repr=False)
    prefill: FloatArray = field(repr=False)
    hit: FloatArray = field(repr=False)
    wait: FloatArray = field(repr=False)
    service: FloatArray = field(repr=False)
    ttft: FloatArray = field(repr=False)

    @property
    def requests(self) -> int:
        return int(self.ttft.size)

    @property
    def rejected(self) -> float:
        return float(np.mean(self.node < 0)) if self.requests else 0.0

    def coverage(self, tau: float) -> float:
        """Empirical ``P(T ≤ τ)`` (rejected requests count as misses)."""
        return float(np.mean(self.ttft <= tau))

    def coverage_standard_error(self, tau: float, batches: int = 20) -> float:
        """Batch-means standard error of :meth:`coverage` (batches in arrival order)."""
        hits = (self.ttft <= tau).astype(float)
        means = np.array([b.mean() for b in np.array_split(hits, batches)])
        return float(means.std(ddof=1) / np.sqrt(batches))

    def quantiles(self, levels=(0.5, 0.95, 0.99)) -> FloatArray:
        """TTFT quantiles (``inf`` when rejections exceed ``1 − level``)."""
        return np.quantile(self.ttft, levels, method="inverted_cdf")

    def ttft_by_type(self) -> dict[str, FloatArray]:
        """TTFT samples per request type."""
        return {qid: self.ttft[self.request_type == q] for q, qid in enumerate(self.request_ids)}

    def association(self) -> FloatArray:
        """Empirical ``A_{s,q}``: share of type-q requests served by profile s, ``(S, Q)``."""
        s_count, q_count = len(self.profile_ids), len(self.request_ids)
        out = np.zeros((s_count, q_count))
        for q in range(q_count):
            mask = self.request_type == q
            if mask.any():
                served = self.profile[mask]
                out[:, q] = np.bincount(served[served >= 0], minlength=s_count) / mask.sum()
        return out

    def tier_nodes(self) -> IntArray:
        return np.bincount(self.layout.profile, minlength=len(self.profile_ids))

    def tier_utilization(self) -> FloatArray:
        """Measured ``ρ_s``: busy server-seconds of arrivals in the window / (horizon · Σ c_x)."""
        s_count = len(self.profile_ids)
        ok = self.node >= 0
        busy = np.bincount(self.profile[ok], weights=self.service[ok], minlength=s_count)
        capacity = np.bincount(self.layout.profile, weights=self.layout.servers, minlength=s_count) * self.horizon
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(capacity > 0, busy / capacity, np.nan)

    def tier_arrival_rate(self) -> FloatArray:
        """Measured ``λq_s`` per node of each tier."""
        s_count = len(self.profile_ids)
        ok = self.node >= 0
        counts = np.bincount(self.profile[ok], minlength=s_count)
        nodes = self.tier_nodes()
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(nodes > 0, counts / (nodes * self.horizon), np.nan)

    def tier_wait_probability(self) -> FloatArray:
        """Measured ``P(W > 0)`` per tier."""
        return self._tier_mean((self.wait > 0).astype(float))

    def tier_mean_wait(self) -> FloatArray:
        """Measured ``W̄_s``."""
        return self._tier_mean(self.wait)

    def _tier_mean(self, values: FloatArray) -> FloatArray:
        s_count = len(self.profile_ids)
        ok = self.node >= 0
        sums = np.bincount(self.profile[ok], weights=values[ok], minlength=s_count)
        counts = np.bincount(self.profile[ok], minlength=s_count)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(counts > 0, sums / counts, np.nan)

    def node_arrivals(self) -> IntArray:
        """Arrivals per node in the measured window, ``(N,)``."""
        ok = self.node >= 0
        return np.bincount(self.node[ok], minlength=self.layout.nodes)

    def load_shape(self) -> FloatArray:
        """Gamma shape of the per-node load of each tier, fitted by moments.

        With ``N_x`` Poisson given the node's rate, ``Var(rate)·T² = Var(N) − E[N]``; the
        shape is ``E[N]² / (Var(N) − E[N])`` (``inf`` when no excess variance is seen).
        """
        counts = self.node_arrivals()
        out = np.full(len(self.profile_ids), np.nan)
        for s in range(out.size):
            n = counts[self.layout.profile == s].astype(float)
            if n.size < 3 or n.mean() <= 0:
                continue
            excess = n.var(ddof=1) - n.mean()
            out[s] = n.mean() ** 2 / excess if excess > 0 else np.inf
        return out

    def summary(self, tau: float) -> dict:
        """Metrics of the evaluation: coverage at τ, p50/p95/p99, per-tier figures."""
        p50, p95, p99 = (float(v) for v in self.quantiles())
        return {
            "router": self.router,
            "requests": self.requests,
            "coverage": self.coverage(tau),
            "coverage_se": self.coverage_standard_error(tau),
            "p50": p50,
            "p95": p95,
            "p99": p99,
            "rejected": self.rejected,
            "mean_ttft": float(np.mean(self.ttft[np.isfinite(self.ttft)])) if self.requests else float("nan"),
            "tiers": {
                sid: {
                    "nodes": int(self.tier_nodes()[s]),
                    "utilization": float(self.tier_utilization()[s]),
                    "arrival_rate": float(self.tier_arrival_rate()[s]),
                    "wait_probability": float(self.tier_wait_probability()[s]),
                    "mean_wait": float(self.tier_mean_wait()[s]),
                    "load_shape": float(self.load_shape()[s]),
                }
                for s, sid in enumerate(self.profile_ids)
            },
            "association": {
                sid: {qid: float(a) for qid, a in zip(self.request_ids, row)} for sid, row in zip(self.profile_ids, self.association())
            },
        }


@dataclass(frozen=True)
class _Requests:
    time: FloatArray
    position: FloatArray
    kind: IntArray
    unit_service: FloatArray
    extra_service: FloatArray | float = 0.0  # D_q (X − 1) of the "instance" law, added to the occupancy


def _sample_requests(instance, layout: Layout, duration: float, spec: SimulationSpec, rng) -> _Requests:
    """Space-time Poisson arrivals of intensity ``Λ`` on the torus, types by ``p_q``."""
    rate = instance.network.request_intensity * layout.area
    check_simulated_events(
        rate * duration, "network.edge_density", "requests (Λ × area × seconds)", "raise λ_b or lower Λ, the nodes or the simulated seconds"
    )
    n = int(rng.poisson(rate * duration))
    time = np.sort(rng.random(n) * duration)
    position = rng.random((n, 2)) * layout.side
    p = np.asarray(instance.probabilities, dtype=float)
    kind = rng.choice(p.size, size=n, p=p / p.sum()).astype(np.int64)
    unit = rng.exponential(1.0, n) if spec.service == "exponential" else np.ones(n)
    if spec.service != "instance":
        return _Requests(time, position, kind, unit)
    serving = instance.serving
    scv = 0.0 if serving is None else serving.decode_scv
    colocated = serving is None or not serving.disaggregated
    factor = rng.gamma(1.0 / scv, scv, n) if scv > 0 else np.ones(n)  # X: E X = 1, Var X = c_D²
    decode = np.asarray(instance.decodes, dtype=float)[kind] if colocated else np.zeros(n)
    return _Requests(time, position, kind, unit, decode * (factor - 1.0))


REMEMBER_DRAWS = True  # off: every run draws its network and requests (benchmarks/speed/validate_speed.py measures both)
MAX_DRAWS = 2  # draws remembered (validate: its two replications, met again by every policy and the online router)
_draws: list[tuple[object, np.ndarray | None, SimulationSpec, Mapping[str, Any], Mapping[str, Any], Layout, _Requests]] = []


def _drawn(instance, mix, spec: SimulationSpec, rng: np.random.Generator) -> tuple[Layout, _Requests]:
    """The network and the requests that ``rng`` draws (:func:`~edgeprefix.placement.simulation.layout.sample_layout`,
    :func:`_sample_requests`), the same objects again for a run of an equal instance (its declared fields, from
    which every derived array follows), mix and spec from the same generator state: the policies of ``validate``
    and its online router run on common random numbers, so they draw the same network and requests.  The
    generator is left in the state the draw leaves it in; the arrays are read-only.
    """
    duration = spec.warmup + spec.horizon
    if not REMEMBER_DRAWS:
        layout = sample_layout(instance, mix, spec.layout, seed=rng)
        return layout, _sample_requests(instance, layout, duration, spec, rng)
    state = rng.bit_generator.state
    pi = None if mix is None else np.array(instance.mix_vector(mix), dtype=float)
    for i, (inst, kept_pi, kept_spec, before, after, layout, req) in enumerate(_draws):
        same_mix = (pi is None and kept_pi is None) or (pi is not None and kept_pi is not None and np.array_equal(pi, kept_pi))
        if (inst is instance or inst == instance) and same_mix and kept_spec == spec and before == state:
            rng.bit_generator.state = after
            _draws.append(_draws.pop(i))
            return layout, req
    layout = sample_layout(instance, mix, spec.layout, seed=rng)
    req = _sample_requests(instance, layout, duration, spec, rng)
    for value in (req.time, req.position, req.kind, req.unit_service, req.extra_service):
        if isinstance(value, np.ndarray):
            value.setflags(write=False)
    _draws.append((instance, pi, spec, state, rng.bit_generator.state, layout, req))
    del _draws[:-MAX_DRAWS]
    return layout, req


def forget_draws() -> None:
    """Drop every remembered draw."""
    _draws.clear()


def nearest_candidates(
    layout: Layout, positions: FloatArray, k: int, profiles: int, shown: IntArray | None = None
) -> tuple[IntArray, FloatArray]:
    """Nearest ``k`` eligible nodes per profile: node ids and distances, ``(n, S·k)`` (−1 / inf pad).

    ``shown``: the profile the catalogue shows for each node (default: the layout's).
    """
    return query_nearest(layout, np.asarray(positions, dtype=float), k, profiles, shown)


def simulate_network(
    instance,
    mix,
    router: Router,
    spec: SimulationSpec = SimulationSpec(),
    *,
    layout: Layout | None = None,
    seed: int | np.random.Generator | None = None,
) -> NetworkResult:
    """Simulate the network under ``router`` and return the measured requests.

    Parameters
    ----------
    instance : the :class:`edgeprefix.placement.model.instance.Instance` (``Λ``, ``λ_b``, ``ξ``, ``α``, ``g``, types).
    mix : profile mix ``π`` (mapping, array or ``None`` for the instance default).
    router : an :class:`~edgeprefix.placement.simulation.routers.OnlineRouter` or a baseline.
    spec : run length and telemetry settings.
    layout : a given network (else drawn with ``spec.layout`` from ``seed``).
    seed : seed or generator (the only randomness).
    """
    rng = np.random.default_rng(seed)
    s_count = len(instance.profiles)
    k = int(router.candidates_per_profile)
    duration = spec.warmup + spec.horizon
    if layout is None:
        layout, req = _drawn(instance, mix, spec, rng)
    else:
        req = _sample_requests(instance, layout, duration, spec, rng)
    net = instance.network
    if instance.catalogue is not None:  # Bloom catalogue, refresh and churn (docs/model.md §19.7)
        out = _simulate_catalogue(instance, instance.mix_vector(mix), layout, req, router, spec, rng)
        keep = req.time >= spec.warmup
        chosen, distance, prefill, wait, hit, profile, service = (v[keep] for v in out)
        served = chosen >= 0
        radio = net.radio_scale * np.where(served, distance, 0.0) ** net.radio_exponent
        return NetworkResult(
            router=getattr(router, "name", type(router).__name__),
            profile_ids=instance.profile_ids,
            request_ids=instance.request_ids,
            horizon=spec.horizon,
            layout=layout,
            request_type=req.kind[keep],
            node=chosen,
            profile=np.where(served, profile, -1),
            distance=distance,
            prefill=prefill,
            hit=hit,
            wait=wait,
            service=service,
            ttft=np.where(served, radio + prefill + wait, np.inf),
        )
    cand, dist = nearest_per_profile(layout, req.position, k, s_count)  # remembered: reruns on one network reuse it

    static = getattr(router, "static_bias", None)
    bias = static(instance.first_token_time) if static is not None else None
    first_token, occupancy = node_times(instance, layout)
    if bias is not None:
        chosen = route_static(cand, dist, req.kind, bias, net.radio_scale, net.radio_exponent, k, s_count)
        waits, services, hits = _serve_static(layout, req, chosen, occupancy)
    else:
        chosen, waits, services, hits = _route_online(instance, layout, req, cand, dist, router, spec, rng, occupancy)

    keep = req.time >= spec.warmup
    chosen = chosen[keep]
    served = chosen >= 0
    rows = np.arange(chosen.size)
    col = np.full(chosen.size, 0)
    cand_k, dist_k = cand[keep], dist[keep]
    col[served] = np.argmax(cand_k[served] == chosen[served, None], axis=1)
    distance = np.where(served, dist_k[rows, col], np.nan)
    kind = req.kind[keep]
    hit = hits[keep]
    prefill = np.where(served, first_token[np.maximum(chosen, 0), kind], np.nan)
    wait = waits[keep]
    radio = net.radio_scale * np.where(served, distance, 0.0) ** net.radio_exponent
    ttft = np.where(served, radio + prefill + wait, np.inf)
    return NetworkResult(
        router=getattr(router, "name", type(router).__name__),
        profile_ids=instance.profile_ids,
        request_ids=instance.request_ids,
        horizon=spec.horizon,
        layout=layout,
        request_type=kind,
        node=chosen,
        profile=np.where(served, layout.profile[np.maximum(chosen, 0)], -1),
        distance=distance,
        prefill=prefill,
        hit=hit,
        wait=wait,
        service=services[keep],
        ttft=ttft,
    )


def route_static(cand, dist, kind, bias, xi, alpha, k, s_count) -> IntArray:
    """Theorem 1's rule: ``argmin_s ξ R_s^α + β_{s,q}`` over the nearest node of each tier."""
    first = np.arange(s_count) * k
    nearest_node = cand[:, first]  # (n, S)
    nearest = dist[:, first]
    cost = xi * nearest**alpha + bias.T[kind]  # (n, S)
    cost = np.where(nearest_node >= 0, cost, np.inf)
    return nearest_node[np.arange(kind.size), np.argmin(cost, axis=1)]


def node_times(instance, layout: Layout) -> tuple[FloatArray, FloatArray]:
    """First-token time (without queue and radio) and mean occupancy at every node, ``(N, Q)``.

    From the verified hit ``h^ver``: ``g(L_q − h^ver)`` and ``g(L_q − h^ver) + D_q``.  With the serving
    extensions (docs/model.md §19) a node whose verified hit equals its profile's ``h_{s,q}`` gets the
    instance's ``T^ft_{s,q}`` and ``1/μ_{s,q}``; a verification fallback is a plain prefill.
    """
    lengths = np.asarray(instance.lengths, dtype=float)
    verified = layout.verified_hit
    g = instance.prefill if instance.serving is None else instance.serving.first_token_prefill(instance.prefill)
    first = np.asarray(g(lengths[None, :] - verified), dtype=float)  # chunked when [serving] chunks (§19.6)
    occupancy = first + np.asarray(instance.decodes, dtype=float)[None, :]
    if instance.extended:
        exact = verified == layout.advertised_hit
        first = np.where(exact, instance.first_token_time[layout.profile], first)
        occupancy = np.where(exact, instance.service_time[layout.profile], occupancy)
    return first, occupancy


def _serve_static(layout, req, chosen, occupancy):
    """FCFS waits at every node for a fixed routing (one pass over the arrival stream)."""
    routed = chosen >= 0  # False only when no eligible node exists at all
    hits = np.where(routed, layout.verified_hit[np.maximum(chosen, 0), req.kind], 0.0)
    means = occupancy[np.maximum(chosen, 0), req.kind]
    services = np.where(routed, req.unit_service * means + req.extra_service, 0.0)
    return fcfs_node_waits(chosen, req.time, services, layout.servers), services, hits


def _route_online(instance, layout, req, cand, dist, router, spec, rng, real_service, shown=None, churn=None):
    """Per-request routing with telemetry, admission and verification (docs/model.md §11).

    Everything that does not depend on telemetry (radio cost, advertised hits and
    prefill, servers, memory) is gathered for all requests at once; the loop only reads
    the telemetry of the candidates, asks the router and books the chosen server.
    With fresh telemetry and a plain online router the same choices come from one pass over
    precomputed arrays (:mod:`edgeprefix.placement.simulation.online_fast`).
    """
    if online_fast.applies(router, spec, shown, churn):
        fast = online_fast.route_fresh(instance, layout, req, cand, dist, router, real_service)
        if fast is not None:
            return fast
    if delayed_fast.applies(router, spec, shown, churn):  # delayed or periodic telemetry, routed in blocks
        blocked = delayed_fast.route_delayed(instance, layout, req, cand, dist, router, spec, real_service)
        if blocked is not None:
            return blocked
    n_nodes = layout.nodes
    prof = layout.profile
    g_adv = np.asarray(instance.first_token_time, dtype=float)  # g(L_q − h_{s,q}) in the paper's model
    lengths = np.asarray(instance.lengths, dtype=float)
    p = np.asarray(instance.probabilities, dtype=float)
    gpu = instance.gpu
    fetch_table = getattr(router, "fetch", None)
    fetch = np.zeros_like(g_adv) if fetch_table is None else np.asarray(fetch_table, dtype=float)
    rho_high = float(getattr(router, "rho_high", np.inf))
    rho_low = float(getattr(router, "rho_low", np.inf))
    hysteresis = bool(np.isfinite(rho_high))
    tau = float(instance.placement.target)
    xi, alpha = instance.network.radio_scale, instance.network.radio_exponent
    verified = layout.verified_hit

    # telemetry-free candidate data, (n, K); padded slots (node −1) are dropped per request
    valid_all = cand >= 0
    safe = np.where(valid_all, cand, 0)
    kind = req.kind
    if shown is None:
        c_all = layout.servers.astype(float)[safe]
        s_all = prof[safe]
        hit_all = layout.advertised_hit[safe, kind[:, None]]
        prefill_all = g_adv[s_all, kind[:, None]]
    else:  # the catalogue's view (docs/model.md §19.7): shown profile, advertised hit and first-token time
        s_all, hit_all, prefill_all = shown
        c_all = np.asarray(instance.concurrency, dtype=float)[s_all]
    radio_all = xi * np.where(valid_all, dist, 0.0) ** alpha
    fetch_all = fetch[s_all, kind[:, None]]
    m_all = (
        ((np.asarray(instance.service_time, dtype=float) @ p)[prof])[safe] / c_all
        if shown is None
        else ((np.asarray(instance.service_time, dtype=float) @ p)[s_all] / c_all)
    )  # m̄_s / c_x
    mem_all = np.asarray(instance.memory, dtype=float)[s_all]
    full_rows = bool(valid_all.all())

    free = [[0.0] * int(c) for c in layout.servers]
    departures: list[list[float]] = [[] for _ in range(n_nodes)]
    n_snap = np.zeros(n_nodes)
    snap_time = np.zeros(n_nodes)
    closed = np.zeros(n_nodes, dtype=bool)
    servers = layout.servers.astype(float)
    period = spec.refresh_period
    next_refresh = period
    n_req = req.time.size
    chosen = np.full(n_req, REJECT, dtype=np.int64)
    waits = np.zeros(n_req)
    services = np.zeros(n_req)
    hits = np.zeros(n_req)
    heappush, heappop, replace = heapq.heappush, heapq.heappop, heapq.heapreplace
    times = req.time.tolist()
    kinds = kind.tolist()
    units = req.unit_service.tolist()
    extras = np.broadcast_to(np.asarray(req.extra_service, dtype=float), req.time.shape).tolist()
    lengths_list = lengths.tolist()
    staleness = spec.staleness_weight
    lag = spec.telemetry_delay
    accounting = spec.local_accounting and (period > 0.0 or lag > 0.0)
    lagged = None if lag == 0.0 else _LaggedQueues(n_nodes)
    m_run, memory_total = gpu.runtime_per_sequence, gpu.memory

    def refresh(nodes, now):
        if lagged is not None:  # the board shows n_x(now − D), plus the router's own sends since then
            for x in nodes:
                n_snap[x] = lagged.read(x, now - lag, accounting)
                snap_time[x] = now - lag
        else:
            for x in nodes:
                dep = departures[x]
                while dep and dep[0] <= now:
                    heappop(dep)
                n_snap[x] = len(dep)
                snap_time[x] = now
        if hysteresis:
            for x in nodes:
                load = n_snap[x] / servers[x]
                closed[x] = load > rho_low if closed[x] else load >= rho_high

    all_nodes = list(range(n_nodes))
    state = None if churn is None else _ChurnState(instance, layout, free, real_service, churn)
    for i in range(n_req):
        t = times[i]
        q = kinds[i]
        if state is not None:
            state.advance(t)
        if full_rows:
            nodes = cand[i]
            sel = slice(None)
        else:
            sel = valid_all[i]
            nodes = cand[i][sel]
        node_list = nodes.tolist()
        if not node_list:
            continue  # no eligible candidate: the request cannot be served
        if period == 0.0:
            refresh(node_list, t)
        else:
            while t >= next_refresh:
                refresh(all_nodes, next_refresh)
                next_refresh += period
        view = CandidateView(
            q=q,
            length=lengths_list[q],
            now=t,
            target=tau,
            node=nodes,
            profile=s_all[i][sel],
            distance=dist[i][sel],
            radio=radio_all[i][sel],
            hit=hit_all[i][sel],
            prefill=prefill_all[i][sel],
            in_system=n_snap[nodes],
            servers=c_all[i][sel],
            open=~closed[nodes],
            fetch=fetch_all[i][sel],
            per_server=m_all[i][sel],
            age=t - snap_time[nodes],
            memory=mem_all[i][sel],
            runtime_per_sequence=m_run,
            gpu_memory=memory_total,
            staleness=staleness,
        )
        j = router.choose(view, rng)
        if j == REJECT:
            continue
        x = node_list[j]
        svc = units[i] * real_service[x, q] + extras[i]
        heap = free[x]
        f = heap[0]
        start = f if f > t else t
        replace(heap, start + svc)
        if lagged is None:
            heappush(departures[x], start + svc)
        else:
            lagged.add(x, t, start + svc)
        if accounting:
            n_snap[x] += 1.0
        chosen[i] = x
        waits[i] = start - t
        services[i] = svc
        hits[i] = verified[x, q] if state is None else state.hit[x, q]
        if state is not None:
            state.record(i, x, q)
    if state is not None:
        return (chosen, waits, services, hits, *state.finish(n_req))
    return chosen, waits, services, hits


class _LaggedQueues:
    """Each node's ``n_x`` as it was ``D`` seconds ago: its arrival and departure epochs, read at ``t − D``.

    Reads come in non-decreasing time, so each node keeps a pointer into its arrivals (in arrival order)
    and a heap of the departures of the arrivals counted so far: ``n_x(u) = A_x(u) − Dep_x(u)``.
    """

    def __init__(self, nodes: int) -> None:
        self.arrival: list[list[float]] = [[] for _ in range(nodes)]
        self.departure: list[list[float]] = [[] for _ in range(nodes)]
        self.counted = [0] * nodes
        self.busy: list[list[float]] = [[] for _ in range(nodes)]

    def add(self, x: int, arrival: float, departure: float) -> None:
        self.arrival[x].append(arrival)
        self.departure[x].append(departure)

    def read(self, x: int, at: float, own: bool = False) -> float:
        """``n_x(at)``; ``own`` adds the arrivals after ``at`` (the router's sends it has not seen reported)."""
        arr, dep, busy, i = self.arrival[x], self.departure[x], self.busy[x], self.counted[x]
        while i < len(arr) and arr[i] <= at:
            heapq.heappush(busy, dep[i])
            i += 1
        self.counted[x] = i
        while busy and busy[0] <= at:
            heapq.heappop(busy)
        return float(len(busy) + (len(arr) - i if own else 0))


class _ChurnState:
    """The nodes' true states while they change (docs/model.md §19.7): profile, slots (the heap of
    server free times), first-token time, occupancy and hit; ``advance(t)`` applies the changes up to ``t``.

    A node whose slots shrink keeps its ``c'`` latest free times, so a new request starts once fewer than
    ``c'`` requests are in service; a node whose slots grow gets new slots free at the change.
    """

    def __init__(self, instance, layout, free, occupancy, churn) -> None:
        self.instance = instance
        self.free = free
        self.occupancy = occupancy  # updated in place, shared with the caller
        self.first = node_times(instance, layout)[0]
        self.hit = np.array(layout.verified_hit, dtype=float)
        self.profile = np.array(layout.profile, dtype=np.int64)
        self.churn = churn
        self.next = 0
        self._prefill: dict[int, float] = {}
        self._profile: dict[int, int] = {}

    def advance(self, t: float) -> None:
        ch, inst = self.churn, self.instance
        while self.next < ch.size and ch.time[self.next] <= t:
            x, s, when = int(ch.node[self.next]), int(ch.profile[self.next]), float(ch.time[self.next])
            self.next += 1
            c_new = int(inst.concurrency[s])
            heap = self.free[x]
            if c_new > len(heap):
                heap.extend([when] * (c_new - len(heap)))
            elif c_new < len(heap):
                heap[:] = sorted(heap)[len(heap) - c_new :]
            heapq.heapify(heap)
            self.profile[x] = s
            self.first[x] = inst.first_token_time[s]
            self.occupancy[x] = inst.service_time[s]
            self.hit[x] = inst.hit_depth[s]

    def record(self, i: int, x: int, q: int) -> None:
        self._prefill[i] = float(self.first[x, q])
        self._profile[i] = int(self.profile[x])

    def finish(self, n: int) -> tuple[FloatArray, IntArray]:
        prefill = np.full(n, np.nan)
        profile = np.full(n, -1, dtype=np.int64)
        if self._prefill:
            idx = np.fromiter(self._prefill, dtype=np.int64)
            prefill[idx] = np.fromiter(self._prefill.values(), dtype=float)
            profile[idx] = np.fromiter(self._profile.values(), dtype=np.int64)
        return prefill, profile


def _serve_churn(instance, layout, req, chosen, occupancy, churn):
    """FCFS waits for a fixed routing while the nodes' states change (one pass over the arrivals)."""
    free = [[0.0] * int(c) for c in layout.servers]
    occupancy = np.array(occupancy, dtype=float)
    state = _ChurnState(instance, layout, free, occupancy, churn)
    n = chosen.size
    waits, services, hits = np.zeros(n), np.zeros(n), np.zeros(n)
    units = req.unit_service.tolist()
    extras = np.broadcast_to(np.asarray(req.extra_service, dtype=float), req.time.shape).tolist()
    replace = heapq.heapreplace
    for i, (x, t, q) in enumerate(zip(chosen.tolist(), req.time.tolist(), req.kind.tolist())):
        state.advance(t)
        if x < 0:
            continue
        svc = units[i] * occupancy[x, q] + extras[i]
        heap = free[x]
        f = heap[0]
        start = f if f > t else t
        replace(heap, start + svc)
        waits[i], services[i], hits[i] = start - t, svc, state.hit[x, q]
        state.record(i, x, q)
    prefill, profile = state.finish(n)
    return waits, services, hits, prefill, profile


def _simulate_catalogue(instance, mix, layout, req, router, spec, rng):
    """Route and serve with the Bloom catalogue, its refresh epochs and the state churn (docs/model.md §19.7).

    Theorem 1's routers (tier delays, no admission, no margin) scan every eligible node with per-node
    biases (a false positive makes a far node attractive); online routers see the nearest ``k`` nodes
    per *shown* profile with the advertised hits.  Returns per-request ``chosen, distance, prefill,
    wait, hit, profile, service`` (all requests, warm-up included).
    """
    from edgeprefix.placement.simulation.catalogue import (
        catalogue_epochs,
        churn_events,
        full_scan_route,
        node_catalogue,
    )

    cat = instance.catalogue
    duration = spec.warmup + spec.horizon
    xi, alpha = instance.network.radio_scale, instance.network.radio_exponent
    s_count, k = len(instance.profiles), int(router.candidates_per_profile)
    nodecat = node_catalogue(instance, layout.nodes, cat, rng)
    churn = churn_events(layout.nodes, mix, cat.churn, duration, rng)
    starts, snaps = catalogue_epochs(layout.profile, churn, cat.refresh, duration)
    epoch = np.searchsorted(starts, req.time, side="right") - 1
    rows = np.arange(layout.nodes)
    first0, occupancy = node_times(instance, layout)
    node_bias = getattr(router, "node_bias", None)
    n = req.time.size
    static = node_bias is not None and node_bias(nodecat.first_token[rows, snaps[0]], snaps[0]) is not None
    if static:
        assert node_bias is not None  # static: the router biases by node
        chosen = np.full(n, -1, dtype=np.int64)
        for e in np.unique(epoch).tolist():
            sel = np.flatnonzero(epoch == e)
            bias = node_bias(nodecat.first_token[rows, snaps[e]], snaps[e])
            chosen[sel] = full_scan_route(req.position[sel], req.kind[sel], layout.positions, layout.side, layout.eligible, bias, xi, alpha)
        waits, services, hits, prefill, profile = _serve_churn(instance, layout, req, chosen, occupancy, churn)
    else:
        cand = np.full((n, s_count * k), -1, dtype=np.int64)
        dist = np.full((n, s_count * k), np.inf)
        for e in np.unique(epoch).tolist():
            sel = np.flatnonzero(epoch == e)
            cand[sel], dist[sel] = nearest_candidates(layout, req.position[sel], k, s_count, shown=snaps[e])
        safe = np.maximum(cand, 0)
        shown_s = snaps[epoch[:, None], safe]
        kind = req.kind[:, None]
        view = (shown_s, nodecat.depth[safe, shown_s, kind], nodecat.first_token[safe, shown_s, kind])
        chosen, waits, services, hits, state_prefill, state_profile = _route_online(
            instance, layout, req, cand, dist, router, spec, rng, np.array(occupancy), shown=view, churn=churn
        )
        prefill, profile = state_prefill, state_profile
    served = chosen >= 0
    gap = np.abs(req.position - layout.positions[np.maximum(chosen, 0)])
    gap = np.minimum(gap, layout.side - gap)
    distance = np.where(served, np.sqrt((gap**2).sum(axis=1)), np.nan)
    return chosen, distance, prefill, waits, hits, profile, services
