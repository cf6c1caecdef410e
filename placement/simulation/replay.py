"""Trace-driven network replay (docs/model.md §17).

The requests of a real trace (:class:`~edgeprefix.placement.pipeline.trace_workload.TraceWorkload`)
are replayed on a sampled network of the instance (:mod:`~edgeprefix.placement.simulation.layout`,
a torus with exactly ``round(π_s N)`` nodes of each profile):

- request ``i`` arrives at its own timestamp, rescaled so the mean rate is ``Λ`` per unit area
  (:func:`rescale_times`: the gaps keep their ratios), at a uniform location;
- it is routed by Theorem 1's tier rule with the instance's biases ``β_{s,q(i)}`` at the
  analytical operating point (``router="tier"``), or by the online router of docs/model.md §11
  with per-node telemetry and the request's own hit depths (``router="online"``);
- its hit depth is the longest prefix of its own block sequence held by the chosen node,
  ``h_{s,i}``; its prefill ``g(L_i − h_{s,i})`` from its real input length; its occupancy
  ``g(L_i − h_{s,i}) + d · output_i`` with ``d`` the decode seconds per output token;
- every node is a FCFS queue with ``c_s`` slots; ``TTFT = ξ r^α + W + g(L_i − h_{s,i})``.

Queues start empty: the first ``warmup`` share of the requests is routed and queued but not
measured.  The ablation switches (:class:`ReplaySpec`) replace one feature of the trace at a
time by the model's assumption: Poisson arrivals, per-type hit depths ``h_{s,q(i)}``, per-type
lengths ``L_q`` and ``D_q``, exponential occupancy.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.cell import QUEUE_MODELS
from edgeprefix.placement.model.evaluation import Evaluation, evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.policies import check_policy
from edgeprefix.placement.model.ranges import check_simulated_slots
from edgeprefix.placement.model.router import PREDICTION_ROUTERS
from edgeprefix.placement.model.router_predictions import REFERENCE_SERVICE_TIMES
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.placement.pipeline.trace_workload import TraceWorkload
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.engine.names import CACHES, ENGINES, PRODUCTION_ROUTERS, in_engine_room
from edgeprefix.placement.simulation.layout import Layout, LayoutSpec, exact_counts, sample_layout
from edgeprefix.placement.simulation.mmc import fcfs_waits
from edgeprefix.placement.simulation.network import nearest_candidates, route_static
from edgeprefix.placement.simulation.routers import REJECT, CandidateView, OnlineRouter

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
# the routers a replay simulates: the two with a prediction (edgeprefix.placement.model.router) and the
# production routers, which run in the engine room (docs/model.md §17)
ROUTERS = (*PREDICTION_ROUTERS, *PRODUCTION_ROUTERS)
ARRIVALS = ("trace", "poisson")
SOURCES = ("request", "type")
SERVICE_LAWS = ("deterministic", "exponential")
DEFAULT_NODES = 50.0
DEFAULT_WARMUP = 0.1
WARM_STARTS = ("none", "train", "resample")
STATIONARITY_WINDOWS = 10  # windows of the measured requests for the trend test on waits
STATIONARITY_LEVEL = 0.05  # two-sided level of the Kendall trend test
SHORT_SPAN = REFERENCE_SERVICE_TIMES  # mean service times a measured span should cover (docs/model.md (17.17), (14.18))
_CHUNK = 8192  # requests whose candidate tables are built at once (online router)


def _choice(name: str, value: str, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ValueError(f"{name}: unknown {value!r} (valid: {list(valid)})")


@dataclass(frozen=True)
class ReplaySpec:
    """How a trace is replayed.

    Parameters
    ----------
    decode_per_token : ``d``, decode seconds per output token (occupancy ``d · output_i``).
    router : ``"tier"`` (Theorem 1's rule, instance biases) or ``"online"`` (docs/model.md §11).
    policy : routing policy of the biases / the online cost (``load_aware``, ``prefix``, ``nearest``).
    nodes : ``N``, nodes of the sampled torus (its side is ``√(N / λ_b)``).
    warmup : share of the replayed requests that only fill the queues (not measured).
    candidates : nearest nodes per profile the online router compares.
    target : ``τ`` of the coverage (default: the instance's ``placement.target``).
    arrivals : ``"trace"`` (rescaled timestamps) or ``"poisson"`` (same count and mean rate).
    hits : ``"request"`` (block-level ``h_{s,i}``) or ``"type"`` (the instance's ``h_{s,q(i)}``).
    lengths : ``"request"`` (``L_i``, ``d · output_i``) or ``"type"`` (``L_q``, ``D_q``).
    service : ``"deterministic"`` occupancy or ``"exponential"`` with the same mean.
    queue_model : queue model of the analytical prediction; ``None`` takes the router's own —
        ``cell`` for the tier rule, ``meanfield`` for the online router (docs/model.md §14).
    warm_start : ``"none"`` (queues start empty; the first ``warmup`` share is not measured),
        ``"train"`` (the training part is replayed first, at the same rate, and every replayed
        request is measured) or ``"resample"`` (a bootstrap of the replayed part is replayed first);
        docs/model.md §17.7.
    """

    decode_per_token: float
    router: str = "tier"
    policy: str = "load_aware"
    nodes: float = DEFAULT_NODES
    warmup: float = DEFAULT_WARMUP
    candidates: int = 2
    target: float | None = None
    arrivals: str = "trace"
    hits: str = "request"
    lengths: str = "request"
    service: str = "deterministic"
    queue_model: str | None = None
    engine: str = "slots"
    cache: str = "planned"
    telemetry: Telemetry = Telemetry()
    warm_start: str = "none"

    @property
    def prediction_model(self) -> str:
        """The queue model of the prediction (the router's own unless given)."""
        if self.queue_model is not None:
            return self.queue_model
        return "cell" if self.router in ("tier", *PRODUCTION_ROUTERS) else "meanfield"

    def __post_init__(self) -> None:
        if not (np.isfinite(self.decode_per_token) and self.decode_per_token >= 0):
            raise ValueError(f"--decode-per-token must be >= 0 seconds, got {self.decode_per_token!r}")
        _choice("--router", self.router, ROUTERS)
        check_policy(self.policy)
        if not (np.isfinite(self.nodes) and self.nodes >= 1):
            raise ValueError(f"--nodes must be >= 1, got {self.nodes!r}")
        if not 0.0 <= self.warmup < 1.0:
            raise ValueError(f"--warmup must lie in [0, 1), got {self.warmup!r}")
        if isinstance(self.candidates, bool) or not isinstance(self.candidates, int) or self.candidates < 1:
            raise ValueError(f"--candidates must be a positive integer, got {self.candidates!r}")
        if self.target is not None and not (np.isfinite(self.target) and self.target > 0):
            raise ValueError(f"--target must be > 0 seconds, got {self.target!r}")
        _choice("arrivals", self.arrivals, ARRIVALS)
        _choice("hits", self.hits, SOURCES)
        _choice("lengths", self.lengths, SOURCES)
        _choice("service", self.service, SERVICE_LAWS)
        if self.queue_model is not None:
            _choice("--queue-model", self.queue_model, QUEUE_MODELS)
        _choice("--engine", self.engine, ENGINES)
        _choice("--cache", self.cache, CACHES)
        if not isinstance(self.telemetry, Telemetry):
            raise ValueError(f"telemetry: must be a Telemetry, got {type(self.telemetry).__name__}")
        _choice("--warm-start", self.warm_start, WARM_STARTS)


def rescale_times(times: npt.ArrayLike, rate: float) -> tuple[FloatArray, float]:
    """Shift to 0 and scale the arrival times so their mean rate is ``rate`` (arrivals per second).

    The mean rate of ``n`` arrivals over their span is ``(n − 1) / span``; the factor
    ``scale = (n − 1) / (span · rate)`` keeps every gap's share of the span (the arrival
    pattern).  Returns ``(scaled times, scale)``.
    """
    t = np.asarray(times, dtype=float)
    if t.size < 2:
        raise ValueError(f"the replayed part of the trace needs at least 2 requests, got {t.size}")
    if np.any(np.diff(t) < 0):
        raise ValueError("trace timestamps must be nondecreasing (the trace must be in time order)")
    span = float(t[-1] - t[0])
    if not span > 0:
        raise ValueError("the replayed requests all share one timestamp: cannot rescale time (use arrivals='poisson')")
    if not (np.isfinite(rate) and rate > 0):
        raise ValueError(f"arrival rate must be > 0, got {rate!r}")
    scale = (t.size - 1) / (span * rate)
    return (t - t[0]) * scale, scale


def poisson_times(n: int, rate: float, rng: np.random.Generator) -> FloatArray:
    """``n`` Poisson arrivals of rate ``rate`` starting at 0 (``n − 1`` exponential gaps)."""
    gaps = rng.exponential(1.0 / rate, size=max(n - 1, 0))
    return np.concatenate(([0.0], np.cumsum(gaps)))


def index_of_dispersion(times: npt.ArrayLike, window: float) -> float:
    """``Var(N_w) / E[N_w]`` of the counts in consecutive windows of length ``window`` (1 for Poisson).

    Only whole windows from the first arrival on are counted; ``nan`` with fewer than 2.
    """
    t = np.asarray(times, dtype=float)
    if not window > 0:
        raise ValueError(f"window must be > 0 seconds, got {window!r}")
    if t.size == 0:
        return float("nan")
    m = int(np.floor((t[-1] - t[0]) / window))
    if m < 2:
        return float("nan")
    counts = np.bincount(np.floor((t - t[0]) / window).astype(np.int64), minlength=m)[:m].astype(float)
    mean = counts.mean()
    return float(counts.var(ddof=1) / mean) if mean > 0 else float("nan")


@dataclass(frozen=True)
class MixSchedule:
    """Piecewise-constant mixes on the trace's clock (epochs, docs/model.md §10.5).

    Epoch ``e`` holds from ``starts[e]`` (trace seconds) until the next start; requests before
    ``starts[1]`` belong to epoch 0.  ``instances[e]`` carries the epoch's workload (``p^e``,
    ``Λ^e``): it sets the tier router's biases and the prediction.  At an epoch start the
    fewest nodes change profile to reach ``round(π^e_s N)`` nodes per profile; their queues
    carry over (a node losing slots starts nothing new until enough requests finish).
    """

    starts: tuple[float, ...]
    instances: tuple[Instance, ...]
    mixes: tuple[Any, ...]
    names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.starts or len(self.starts) != len(self.instances) or len(self.starts) != len(self.mixes):
            raise ValueError("schedule: starts, instances and mixes need one entry per epoch (at least one)")
        if any(b <= a for a, b in zip(self.starts, self.starts[1:])):
            raise ValueError(f"schedule: epoch starts must increase, got {list(self.starts)}")
        if not self.names:
            object.__setattr__(self, "names", tuple(f"epoch{e + 1}" for e in range(len(self.starts))))

    @property
    def epochs(self) -> int:
        return len(self.starts)

    def epoch_of(self, times: npt.ArrayLike) -> IntArray:
        """Epoch index of every trace time."""
        return np.maximum(np.searchsorted(np.asarray(self.starts), np.asarray(times, dtype=float), side="right") - 1, 0)


@dataclass(frozen=True)
class ReplayResult:
    """The measured requests of one replay and the analytical prediction for the same mixes.

    Per-request arrays (measured requests, arrival order): ``time`` (replay seconds), ``epoch``,
    ``kind`` ``q(i)``, ``node`` (−1 rejected), ``profile``, ``distance`` ``r``, ``hit`` ``h``,
    ``length`` ``L_i``, ``prefill`` ``g(L_i − h)``, ``full_prefill`` ``g(L_i)``, ``wait`` ``W``,
    ``service`` occupancy, ``ttft`` (``inf`` if rejected).  ``predictions[e]`` evaluates epoch
    ``e``'s instance and mix; ``changed[e]`` counts the nodes that changed profile at its start.
    """

    spec: ReplaySpec
    intensity: float  # reference Λ of the time rescaling
    target: float  # τ
    time_scale: float  # replay seconds per trace second (0 for Poisson arrivals)
    names: tuple[str, ...]
    layouts: tuple[Layout, ...] = field(repr=False)
    predictions: tuple[Evaluation, ...] = field(repr=False)
    changed: tuple[int, ...]
    scheduled: bool
    time: FloatArray = field(repr=False)
    epoch: IntArray = field(repr=False)
    kind: IntArray = field(repr=False)
    node: IntArray = field(repr=False)
    profile: IntArray = field(repr=False)
    distance: FloatArray = field(repr=False)
    hit: FloatArray = field(repr=False)
    length: FloatArray = field(repr=False)
    prefill: FloatArray = field(repr=False)
    full_prefill: FloatArray = field(repr=False)
    wait: FloatArray = field(repr=False)
    service: FloatArray = field(repr=False)
    ttft: FloatArray = field(repr=False)
    extras: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # engine room counters
    warm_requests: int = 0  # requests replayed before the measured part (warm start)
    _cache: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def requests(self) -> int:
        return int(self.ttft.size)

    @property
    def prediction(self) -> Evaluation:
        """The (first epoch's) analytical evaluation."""
        return self.predictions[0]

    @property
    def layout(self) -> Layout:
        return self.layouts[0]

    def epoch_weights(self) -> FloatArray:
        """Share of the measured requests in each epoch (weights of the predicted metrics)."""
        return np.bincount(self.epoch, minlength=len(self.predictions)) / max(self.requests, 1)

    def _predicted(self, metric: str) -> float:
        values = np.array(
            [float(getattr(ev, metric)) if metric != "coverage" else float(ev.coverage(self.target)) for ev in self.predictions]
        )
        w = self.epoch_weights()
        return float(np.sum(w[w > 0] * values[w > 0]))

    def coverage(self, tau: float | None = None) -> float:
        """Replayed ``P(T ≤ τ)`` (rejected requests count as misses)."""
        return float(np.mean(self.ttft <= (self.target if tau is None else tau))) if self.requests else float("nan")

    def coverage_standard_error(self, tau: float | None = None, batches: int = 20) -> float:
        """Batch-means standard error of :meth:`coverage` (batches in arrival order)."""
        hits = (self.ttft <= (self.target if tau is None else tau)).astype(float)
        if hits.size < 2 * batches:
            return float("nan")
        means = np.array([b.mean() for b in np.array_split(hits, batches)])
        return float(means.std(ddof=1) / np.sqrt(batches))

    @property
    def mean_ttft(self) -> float:
        finite = np.isfinite(self.ttft)
        return float(self.ttft[finite].mean()) if finite.any() else float("nan")

    @property
    def hit_depth(self) -> float:
        """Mean hit depth of the served requests, tokens (the replayed ``H̄``)."""
        served = self.node >= 0
        return float(self.hit[served].mean()) if served.any() else 0.0

    @property
    def offload_ratio(self) -> float:
        """``Σ_i [g(L_i) − g(L_i − h_i)] / Σ_i g(L_i)`` (the replayed ``η_off``)."""
        served = self.node >= 0
        total = float(self.full_prefill[served].sum())
        return float((self.full_prefill[served] - self.prefill[served]).sum() / total) if total > 0 else 0.0

    def tier_utilization(self) -> FloatArray:
        """Replayed ``ρ_s`` of the first epoch's network: busy slot-seconds / (span · Σ c_x) per tier."""
        s_count = len(self.prediction.instance.profiles)
        span = float(self.time[-1] - self.time[0]) if self.time.size > 1 else 0.0
        served = self.node >= 0
        busy = np.bincount(self.profile[served], weights=self.service[served], minlength=s_count)
        slots = np.bincount(self.layout.profile, weights=self.layout.servers, minlength=s_count) * span
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(slots > 0, busy / slots, np.nan)

    def tier_share(self) -> FloatArray:
        """Share of the measured requests served by each tier (the replayed ``Σ_q p_q A_{s,q}``)."""
        served = self.node >= 0
        return np.bincount(self.profile[served], minlength=len(self.prediction.instance.profiles)) / max(self.requests, 1)

    def epoch_rows(self) -> list[dict[str, Any]]:
        """Per epoch: measured requests, replayed and predicted coverage and mean TTFT, nodes changed."""
        rows = []
        for e, (name, ev) in enumerate(zip(self.names, self.predictions)):
            mask = self.epoch == e
            ttft = self.ttft[mask]
            finite = np.isfinite(ttft)
            rows.append(
                {
                    "name": name,
                    "requests": int(mask.sum()),
                    "coverage_replayed": float(np.mean(ttft <= self.target)) if mask.any() else float("nan"),
                    "coverage_predicted": float(ev.coverage(self.target)),
                    "mean_ttft_replayed": float(ttft[finite].mean()) if finite.any() else float("nan"),
                    "mean_ttft_predicted": float(ev.mean_ttft),
                    "nodes_changed": int(self.changed[e]),
                }
            )
        return rows

    def engine_summary(self) -> dict[str, Any]:
        """The engine room's keys (docs/model.md §17): ``engine``, ``cache``, ``hit_rate_blocks`` (share of
        the served requests' prompt blocks found cached; prompt tokens in hit blocks over prompt tokens
        when block ids are not tracked), ``ttft_p50/p90/p99`` (rejected requests count as infinite),
        ``preemptions``, ``node_load_cv`` (coefficient of variation of the requests served per node) and
        ``radio_mean`` (mean ``ξ r^α`` of the served requests, seconds)."""
        served = self.node >= 0
        if "blocks_total" in self.extras and self.extras["blocks_total"][served].sum() > 0:
            hit_rate = float(self.extras["blocks_hit"][served].sum() / self.extras["blocks_total"][served].sum())
        else:
            total = float(self.length[served].sum())
            hit_rate = float(self.hit[served].sum() / total) if total > 0 else 0.0
        counts = np.bincount(self.node[served], minlength=self.layout.nodes).astype(float)
        cv = float(counts.std() / counts.mean()) if counts.mean() > 0 else float("nan")
        q = np.percentile(self.ttft, [50, 90, 99]) if self.requests else np.full(3, np.nan)
        net = self.prediction.instance.network
        radio = float(np.mean(net.radio_scale * self.distance[served] ** net.radio_exponent)) if served.any() else float("nan")
        return {
            "engine": self.spec.engine,
            "cache": self.spec.cache,
            "hit_rate_blocks": hit_rate,
            "ttft_p50": float(q[0]),
            "ttft_p90": float(q[1]),
            "ttft_p99": float(q[2]),
            "preemptions": int(self.extras.get("preemptions", 0)),
            "node_load_cv": cv,
            "radio_mean": radio,
            "telemetry_delay": self.spec.telemetry.delay,
        }

    def summary(self) -> dict[str, Any]:
        """The replay's JSON (the ``edgeprefix replay --json`` contract keys and the details)."""
        out: dict[str, Any] = {
            "requests": self.requests,
            "coverage_replayed": self.coverage(),
            "coverage_predicted": self._predicted("coverage"),
            "coverage_se": self.coverage_standard_error(),
            "mean_ttft_replayed": self.mean_ttft,
            "mean_ttft_predicted": self._predicted("mean_ttft"),
            "hit_depth_replayed": self.hit_depth,
            "hit_depth_predicted": self._predicted("mean_prefix_depth"),
            "offload_ratio_replayed": self.offload_ratio,
            "offload_ratio_predicted": self._predicted("offload_ratio"),
            "mean_wait_replayed": float(self.wait[self.node >= 0].mean()) if self.requests else float("nan"),
            "rejected": float(np.mean(self.node < 0)) if self.requests else 0.0,
            "router": self.spec.router,
            "queue_model": self.spec.prediction_model,
            "policy": self.spec.policy,
            "intensity": self.intensity,
            "target": self.target,
            "nodes": self.layout.nodes,
            "time_scale": self.time_scale,
            "decode_per_token": self.spec.decode_per_token,
            "assumptions": {
                "arrivals": self.spec.arrivals,
                "hits": self.spec.hits,
                "lengths": self.spec.lengths,
                "service": self.spec.service,
            },
            "stable_predicted": all(bool(ev.stable_on_nodes) for ev in self.predictions),  # tiers and, under the cell model, nodes
        }
        out.update(self.engine_summary())
        out |= self.steady_state()
        if self.scheduled:
            out["epochs"] = self.epoch_rows()
        if len(self.predictions) > 1:
            return out
        ev, inst = self.prediction, self.prediction.instance
        predicted_share = inst.probabilities @ ev.association.T
        util, share = self.tier_utilization(), self.tier_share()
        out["tiers"] = {
            sid: {
                "nodes": int(np.count_nonzero(self.layout.profile == s)),
                "share_replayed": float(share[s]),
                "share_predicted": float(predicted_share[s]),
                "utilization_replayed": float(util[s]),
                "utilization_predicted": float(ev.utilization[s]),
            }
            for s, sid in enumerate(inst.profile_ids)
        }
        return out

    # -- what a steady-state prediction can be compared with (docs/model.md §17.7) ------------
    def measured_span(self) -> float:
        return float(self.time[-1] - self.time[0]) if self.time.size > 1 else 0.0

    def measured_service_times(self) -> float:
        """The measured span in mean service times of the served requests (``nan`` without any)."""
        served = self.node >= 0
        mean = float(self.service[served].mean()) if served.any() else float("nan")
        return self.measured_span() / mean if mean > 0 else float("nan")

    def node_loads(self) -> FloatArray:
        """Replayed offered load of every node of the first epoch's network: its measured busy
        slot-seconds over the measured span, per slot."""
        served = self.node >= 0
        layout = self.layout
        busy = np.bincount(self.node[served], weights=self.service[served], minlength=layout.nodes)
        span = self.measured_span()
        return busy / (span * layout.servers) if span > 0 else np.full(layout.nodes, np.nan)

    def window_waits(self, windows: int = STATIONARITY_WINDOWS) -> tuple[FloatArray, FloatArray]:
        """Mean wait of the served requests and coverage in ``windows`` equal runs of measured requests."""
        served = self.node >= 0
        parts = np.array_split(np.arange(self.requests), windows)
        waits = np.array([float(self.wait[idx][served[idx]].mean()) if served[idx].any() else np.nan for idx in parts])
        cover = np.array([float(np.mean(self.ttft[idx] <= self.target)) if idx.size else np.nan for idx in parts])
        return waits, cover

    def stationarity(self, windows: int = STATIONARITY_WINDOWS) -> dict[str, Any]:
        """Kendall's trend test of the per-window mean waits against time (two-sided, level
        :data:`STATIONARITY_LEVEL`): ``stationary`` unless the waits trend; a replay with fewer than
        ``2 windows`` requests is not judged (``stationary`` false)."""
        from scipy.stats import kendalltau

        if self.requests < 2 * windows:
            return {
                "stationary": False,
                "windows": windows,
                "kendall_tau": None,
                "p_value": None,
                "window_mean_wait": [],
                "window_coverage": [],
            }
        waits, cover = self.window_waits(windows)
        finite = np.isfinite(waits)
        if finite.sum() < 3 or np.ptp(waits[finite]) == 0:
            tau, p = 0.0, 1.0  # constant waits (an empty network): no trend
        else:
            res = kendalltau(np.flatnonzero(finite), waits[finite])
            tau, p = float(res.statistic), float(res.pvalue)
        return {
            "stationary": bool(p >= STATIONARITY_LEVEL),
            "windows": windows,
            "kendall_tau": tau,
            "p_value": p,
            "window_mean_wait": waits.tolist(),
            "window_coverage": cover.tolist(),
        }

    def steady_state(self) -> dict[str, Any]:
        """The keys that say whether the replay measured a steady state the prediction describes:
        ``warm_start``, ``stationary`` (and the trend test), ``measured_service_times``, the overloaded node
        shares replayed and predicted, the prediction with the replayed part's type mix (its lengths, via the
        length sub-types) and the warnings (docs/model.md §17.7)."""
        trend = self.stationarity()
        loads = self.node_loads()
        ev = self.prediction
        span_services = self.measured_service_times()
        warnings = []
        if not np.isfinite(span_services) or span_services < SHORT_SPAN:
            warnings.append(
                f"the measured span is {span_services:.1f} mean service times (< {SHORT_SPAN:g}): the replay is "
                "mostly transient, not the steady state the prediction describes; replay a longer part"
                + (" or warm-start it (--warm-start)" if self.spec.warm_start == "none" else "")
            )
        served = self.node >= 0
        waited = float(np.mean(self.wait[served] > 0)) if served.any() else 0.0
        act = ev.active
        predicted_wait = float(np.nansum((ev.instance.probabilities @ ev.association[act].T) * ev.wait_probability[act]))
        if predicted_wait > 0.01 and waited < 0.1 * predicted_wait:
            warnings.append(
                f"queues never filled: {100 * waited:.1f} % of the replayed requests waited against "
                f"{100 * predicted_wait:.1f} % predicted; replay more requests"
                + (" or warm-start it (--warm-start)" if self.spec.warm_start == "none" else "")
            )
        if not trend["stationary"] and trend["kendall_tau"] is not None:
            warnings.append(
                f"waits trend over the replay ({'growing' if trend['kendall_tau'] > 0 else 'falling'}, Kendall test): not a steady state"
            )
        from_empty = self.spec.warm_start == "none"
        return {
            "warm_start": (
                "none: queues start empty and the first share is discarded; the prediction is the steady state, "
                "no finite-horizon prediction is given"
                if from_empty
                else self.spec.warm_start
            ),
            "warm_requests": self.warm_requests,
            "stationary": trend["stationary"],
            "stationarity": trend,
            "measured_service_times": span_services if np.isfinite(span_services) else None,
            "overloaded_node_share_replayed": float(np.mean(loads >= 1.0)) if np.all(np.isfinite(loads)) else None,
            "overloaded_node_share_predicted": ev.overloaded_shares[0],
            **self.horizon_prediction(),
            # with epochs every window has its own prediction (epoch rows): no single replayed-statistics one
            "coverage_predicted_replayed_stats": None if self.scheduled else self.replayed_stats_prediction()["coverage"],
            "prediction_replayed_stats": None if self.scheduled else self.replayed_stats_prediction(),
            "warnings": warnings,
        }

    def horizon_prediction(self) -> dict[str, float | None]:
        """The mean TTFT over this replay's own horizon (docs/model.md (14.17)): the steady state plus the growth of
        the overloaded nodes' queues, ``T̄ + κ t̄``, ``t̄`` the measured requests' mean time since the replay began
        (the warm part's first arrival, when its queues were empty).  ``κ`` is the cell law's, so only for the
        tier rule (the cell model's prediction); the online router balances the nodes (``κ = 0``).  Not given for
        the from-empty replay (its steady-state part is itself a transient) or with epochs."""
        ev = self.prediction
        if self.spec.warm_start == "none" or self.scheduled or not self.requests or not np.isfinite(ev.mean_ttft):
            return {"mean_wait_growth_predicted": None, "mean_ttft_predicted_horizon": None}
        kappa = ev.overload_wait_growth if ev.queue_model == "cell" else 0.0
        return {
            "mean_wait_growth_predicted": kappa,
            "mean_ttft_predicted_horizon": float(ev.mean_ttft + kappa * float(np.mean(self.time))),
        }

    def replayed_stats_prediction(self) -> dict[str, float | None]:
        """The first epoch's prediction re-evaluated with the measured requests' own type mix (with length
        sub-types, their length distribution too) at the replay's ``Λ``: what the model says of the replayed
        part, so that the rest of the gap is the model's, not drift's."""
        if "replayed_stats" not in self._cache:
            ev = self.prediction
            inst = ev.instance
            mix_of_types = np.bincount(self.kind, minlength=len(inst.requests)) / max(self.requests, 1)
            drifted = evaluate(
                inst.with_probabilities(dict(zip(inst.request_ids, mix_of_types.tolist()))),
                ev.mix,
                ev.policy,
                target=self.target,
                queue_model=ev.queue_model,
            )
            self._cache["replayed_stats"] = {
                "coverage": float(drifted.coverage(self.target)),
                "mean_ttft": float(drifted.mean_ttft) if np.isfinite(drifted.mean_ttft) else None,
                "hit_depth": float(drifted.mean_prefix_depth),
                "offload_ratio": float(drifted.offload_ratio),
                "stable": bool(drifted.stable_on_nodes),
                "overloaded_node_share": drifted.overloaded_shares[0],
            }
        return self._cache["replayed_stats"]


def _arrivals(workload: TraceWorkload, spec: ReplaySpec, rate: float, rng: np.random.Generator) -> tuple[FloatArray, float]:
    if spec.arrivals == "poisson":
        return poisson_times(workload.requests, rate, rng), 0.0
    return rescale_times(workload.time, rate)


def _demand(instance: Instance, workload: TraceWorkload, spec: ReplaySpec) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Hit table ``(S, n)``, input lengths and decode occupancy per request, after the ablation switches."""
    kind = workload.kind
    if spec.lengths == "type":
        length = np.asarray(instance.lengths, dtype=float)[kind]
        decode = np.asarray(instance.decodes, dtype=float)[kind]
    else:
        length = workload.length
        decode = spec.decode_per_token * workload.output
    hits = np.asarray(instance.hit_depth, dtype=float)[:, kind] if spec.hits == "type" else workload.hit
    return np.minimum(hits, length[None, :]), length, decode


def reassign_profiles(profile: IntArray, counts: IntArray, rng: np.random.Generator) -> IntArray:
    """The fewest profile changes that give ``counts[s]`` nodes of each profile ``s``.

    Nodes of a profile with a surplus are picked at random and handed to the profiles with a
    deficit; the number of changed nodes is ``Σ_s max(0, n_s − counts_s)``.
    """
    out = profile.copy()
    have = np.bincount(profile, minlength=counts.size)
    freed = [
        rng.choice(np.flatnonzero(profile == s), size=int(have[s] - counts[s]), replace=False)
        for s in range(counts.size)
        if have[s] > counts[s]
    ]
    pool = rng.permutation(np.concatenate(freed)) if freed else np.zeros(0, dtype=np.int64)
    need = np.repeat(np.arange(counts.size), np.maximum(counts - have, 0))
    out[pool] = need
    return out


def _layouts(schedule: MixSchedule, spec: ReplaySpec, rng: np.random.Generator) -> tuple[tuple[Layout, ...], tuple[int, ...]]:
    """The network of every epoch: one draw, then the fewest profile changes per epoch start."""
    base = sample_layout(schedule.instances[0], schedule.mixes[0], LayoutSpec(mean_nodes=spec.nodes, counts="exact"), seed=rng)
    layouts, changed = [base], [0]
    for inst, mix in zip(schedule.instances[1:], schedule.mixes[1:]):
        prev = layouts[-1]
        profile = reassign_profiles(prev.profile, exact_counts(inst.mix_vector(mix), prev.nodes), rng)
        changed.append(int(np.count_nonzero(profile != prev.profile)))
        servers = np.asarray(inst.concurrency, dtype=np.int64)[profile]
        check_simulated_slots(servers)
        layouts.append(replace(prev, profile=profile, servers=servers))
    return tuple(layouts), tuple(changed)


def replay(
    instance: Instance,
    workload: TraceWorkload,
    mix: Any = None,
    spec: ReplaySpec | None = None,
    *,
    intensity: float | None = None,
    schedule: MixSchedule | None = None,
    seed: int | np.random.Generator | None = None,
    warm: TraceWorkload | None = None,
) -> ReplayResult:
    """Replay ``workload`` on a sampled network of ``instance`` with mix ``π`` (docs/model.md §17).

    Parameters
    ----------
    instance : the instance whose profiles, prefill ``g``, radio ``ξ r^α`` and ``c_s`` are used.
    workload : the requests to replay (their types index ``instance.requests``).
    mix : ``π`` (mapping, array or ``None`` for the instance default); ignored with ``schedule``.
    spec : router, network size, warm-up and ablation switches (``decode_per_token`` is required).
    intensity : ``Λ`` per unit area the whole replay's mean rate is rescaled to (default: the
        instance's; with a schedule: ``n / Σ_e (n_e / Λ^e)``, so epoch ``e`` arrives at ``Λ^e``).
    schedule : epochs with their own mixes and workloads (default: one epoch, ``instance``, ``mix``).
    seed : seed or generator; the network, the locations, Poisson arrivals, exponential occupancy and
        the router draw from separate child streams, so two replays with one seed that differ
        in an ablation switch or a mix share everything else (common random numbers).
    warm : the requests replayed before ``workload`` with ``spec.warm_start = "train"`` (the training
        part); their gaps are scaled to ``workload``'s mean gap, so both arrive at ``Λ``.
    """
    if spec is None:
        raise ValueError("spec: a ReplaySpec with the decode rate is required")
    if in_engine_room(spec.engine, spec.cache, spec.router, spec.telemetry.fresh):
        raise ValueError(
            f"--engine {spec.engine} --cache {spec.cache} --router {spec.router}: replayed in the engine room "
            "(edgeprefix.placement.simulation.engine.cluster.engine_replay, or replay_replicated)"
        )
    if getattr(instance, "extended", False):
        raise ValueError(
            f"instance {instance.name!r} uses serving extensions (memory tiers, KV pool, compression or "
            "disaggregation), which trace replay does not model: replay an instance without them"
        )
    layout_rng, place_rng, arrival_rng, service_rng, router_rng, warm_rng = np.random.default_rng(seed).spawn(6)
    n_warm = 0
    if spec.warm_start != "none":
        if schedule is not None:
            raise ValueError("--warm-start applies to a replay without epochs (the epochs' windows start the replay)")
        prefix = warm_part(workload, spec.warm_start, warm, warm_rng)
        n_warm = prefix.requests
        workload = prepend(prefix, workload)
    n = workload.requests
    scheduled = schedule is not None
    if schedule is None:
        lam = float(instance.network.request_intensity if intensity is None else intensity)
        if not (np.isfinite(lam) and lam > 0):
            raise ValueError(f"--intensity Λ must be > 0, got {intensity!r}")
        schedule = MixSchedule((-np.inf,), (instance.with_network(request_intensity=lam),), (mix,))
        epoch = np.zeros(n, dtype=np.int64)
    else:
        epoch = schedule.epoch_of(workload.time)
        per = np.bincount(epoch, minlength=schedule.epochs)
        lam_e = np.array([inst.network.request_intensity for inst in schedule.instances])
        lam = float(intensity) if intensity is not None else float(n / np.sum(per / lam_e))
    inst0 = schedule.instances[0]
    tau = float(inst0.placement.target if spec.target is None else spec.target)
    evs = tuple(
        evaluate(inst, m, spec.policy, target=tau, queue_model=spec.prediction_model) for inst, m in zip(schedule.instances, schedule.mixes)
    )
    layouts, changed = _layouts(schedule, spec, layout_rng)
    times, scale = _arrivals(workload, spec, lam * layouts[0].area, arrival_rng)
    positions = place_rng.random((n, 2)) * layouts[0].side
    hits, length, decode = _demand(inst0, workload, spec)
    unit = service_rng.exponential(1.0, n) if spec.service == "exponential" else np.ones(n)
    g = inst0.prefill
    net = inst0.network
    if spec.router == "tier":
        chosen, distance = _route_tier(layouts, evs, positions, workload.kind, epoch, net)
        served = chosen >= 0
        profile = _profiles(layouts, chosen, epoch)
        hit = np.where(served, hits[np.maximum(profile, 0), np.arange(n)], 0.0)
        service = np.where(served, unit * (np.asarray(g(length - hit), dtype=float) + decode), 0.0)
        wait = _fcfs(chosen, times, service, epoch, layouts)
    else:
        router = OnlineRouter(policy=spec.policy, delay="telemetry", candidates_per_profile=spec.candidates)
        chosen, distance, hit, service, wait = _route_online(
            inst0, layouts, router, times, positions, epoch, workload.kind, hits, length, decode, unit, tau, spec.candidates, router_rng
        )
        served = chosen >= 0
        profile = _profiles(layouts, chosen, epoch)
    prefill = np.asarray(g(length - hit), dtype=float)
    radio = net.radio_scale * np.where(served, distance, 0.0) ** net.radio_exponent
    ttft = np.where(served, radio + prefill + wait, np.inf)
    keep = np.arange(n) >= (n_warm if n_warm else int(np.ceil(spec.warmup * n)))
    return ReplayResult(
        spec=spec,
        intensity=lam,
        target=tau,
        time_scale=scale,
        names=schedule.names,
        layouts=layouts,
        predictions=evs,
        changed=changed,
        scheduled=scheduled,
        time=times[keep],
        epoch=epoch[keep],
        kind=workload.kind[keep],
        node=chosen[keep],
        profile=profile[keep],
        distance=distance[keep],
        hit=hit[keep],
        length=length[keep],
        prefill=prefill[keep],
        full_prefill=np.asarray(g(length[keep]), dtype=float),
        wait=wait[keep],
        service=service[keep],
        ttft=ttft[keep],
        warm_requests=n_warm,
    )


def warm_part(workload: TraceWorkload, how: str, warm: TraceWorkload | None, rng: np.random.Generator) -> TraceWorkload:
    """The requests that fill the queues before ``workload`` is measured (docs/model.md §17.7):
    ``"train"`` — ``warm`` (the training part); ``"resample"`` — ``n`` requests drawn with replacement from
    ``workload``, with gaps drawn with replacement from its gaps."""
    if np.any(np.diff(workload.time) < 0):  # the same refusal as an unwarmed replay's (rescale_times)
        raise ValueError("trace timestamps must be nondecreasing (the trace must be in time order)")
    if how == "train":
        if warm is None or warm.requests < 2:
            raise ValueError("--warm-start train replays the training part first: give --split F > 0 (or use --warm-start resample)")
        return warm
    n = workload.requests
    if n < 2:
        raise ValueError(f"the replayed part of the trace needs at least 2 requests, got {n}")
    pick = rng.integers(0, n, size=n)
    gaps = rng.choice(np.diff(workload.time), size=n - 1)
    times = workload.time[0] + np.concatenate(([0.0], np.cumsum(gaps)))
    return TraceWorkload(
        times, workload.length[pick], workload.output[pick], workload.hit[:, pick], workload.kind[pick], workload.matched[pick]
    )


def prepend(prefix: TraceWorkload, workload: TraceWorkload) -> TraceWorkload:
    """``prefix`` then ``workload`` on one clock: ``prefix``'s gaps scaled to ``workload``'s mean gap, ending one
    mean gap before ``workload`` starts (so a rescaling to ``Λ`` gives both parts the rate ``Λ``)."""
    t, tp = workload.time, prefix.time
    if t.size < 2 or not t[-1] > t[0]:
        raise ValueError("the replayed requests all share one timestamp: cannot warm-start them")
    gap = (t[-1] - t[0]) / (t.size - 1)
    span = tp[-1] - tp[0]
    scaled = (tp - tp[0]) * (gap * (tp.size - 1) / span if span > 0 else 0.0)
    times = t[0] - gap - (scaled[-1] - scaled)
    return TraceWorkload(
        np.concatenate((times, t)),
        np.concatenate((prefix.length, workload.length)),
        np.concatenate((prefix.output, workload.output)),
        np.concatenate((prefix.hit, workload.hit), axis=1),
        np.concatenate((prefix.kind, workload.kind)),
        np.concatenate((prefix.matched, workload.matched)),
    )


def _profiles(layouts: tuple[Layout, ...], chosen: IntArray, epoch: IntArray) -> IntArray:
    """Profile of the chosen node in the request's epoch (−1 when rejected)."""
    table = np.stack([layout.profile for layout in layouts])
    return np.where(chosen >= 0, table[epoch, np.maximum(chosen, 0)], -1)


def _route_tier(layouts, evs, positions, kind, epoch, net) -> tuple[IntArray, FloatArray]:
    """Theorem 1's rule per epoch: ``argmin_s ξ R_s^α + β_{s,q}`` over the nearest node of each tier."""
    n = kind.size
    chosen = np.full(n, REJECT, dtype=np.int64)
    distance = np.full(n, np.nan)
    for e, (layout, ev) in enumerate(zip(layouts, evs)):
        idx = np.flatnonzero(epoch == e)
        if idx.size == 0:
            continue
        s_count = ev.bias.shape[0]
        cand, dist = nearest_candidates(layout, positions[idx], 1, s_count)
        bias = np.where(np.isfinite(ev.bias), ev.bias, np.inf)
        pick = route_static(cand, dist, kind[idx], bias, net.radio_scale, net.radio_exponent, 1, s_count)
        chosen[idx] = pick
        col = np.argmax(cand == pick[:, None], axis=1)
        distance[idx] = np.where(pick >= 0, dist[np.arange(idx.size), col], np.nan)
    return chosen, distance


def _resize(heap: list[float], slots: int, now: float) -> list[float]:
    """A node's slot free times after its concurrency changes to ``slots`` at time ``now``.

    Added slots are free from ``now``; with fewer slots a new request starts only when enough
    running ones finish, i.e. the free times are the ``slots`` latest ones.
    """
    if slots > len(heap):
        heap = heap + [now] * (slots - len(heap))
    elif slots < len(heap):
        heap = heapq.nlargest(slots, heap)
    heapq.heapify(heap)
    return heap


def _fcfs(chosen: IntArray, times: FloatArray, service: FloatArray, epoch: IntArray, layouts: tuple[Layout, ...]) -> FloatArray:
    """FCFS waits at every node's ``c``-slot queue for a fixed routing, slots resized at epoch starts."""
    if len(layouts) == 1:
        return _fcfs_by_node(chosen, times, service, layouts[0].servers)
    free = [[0.0] * int(c) for c in layouts[0].servers]
    waits = [0.0] * chosen.size
    replace_top = heapq.heapreplace
    current = 0
    for i, (x, t, svc, e) in enumerate(zip(chosen.tolist(), times.tolist(), service.tolist(), epoch.tolist())):
        if e != current:
            servers = layouts[e].servers
            free = [_resize(heap, int(servers[y]), t) for y, heap in enumerate(free)]
            current = e
        if x < 0:
            continue
        heap = free[x]
        f = heap[0]
        if f > t:
            waits[i] = f - t
            replace_top(heap, f + svc)
        else:
            replace_top(heap, t + svc)
    return np.asarray(waits)


def _fcfs_by_node(chosen: IntArray, times: FloatArray, service: FloatArray, servers: IntArray) -> FloatArray:
    """FCFS waits at every node's ``c``-slot queue for a fixed routing (arrival order kept per node)."""
    wait = np.zeros(chosen.size)
    order = np.argsort(chosen, kind="stable")
    bounds = np.searchsorted(chosen[order], np.arange(-1, servers.size + 1))
    for x in range(servers.size):
        idx = order[bounds[x + 1] : bounds[x + 2]]
        if idx.size:
            wait[idx] = fcfs_waits(times[idx], service[idx], int(servers[x]))
    return wait


def _chunks(epoch: IntArray, size: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` runs of at most ``size`` requests that never straddle an epoch change."""
    cuts = np.flatnonzero(np.diff(epoch)) + 1
    bounds = np.concatenate(([0], cuts, [epoch.size]))
    return [(lo, min(lo + size, hi)) for a, hi in zip(bounds[:-1], bounds[1:]) for lo in range(int(a), int(hi), size)]


def _route_online(inst, layouts, router, times, positions, epoch, kind, hits, length, decode, unit, tau, k, rng):
    """Per-request routing on live telemetry (docs/model.md §11), booking each node's FCFS slots.

    Telemetry-free candidate data (radio, the request's own hit and prefill per candidate) is
    built per chunk of requests; the loop reads ``n_x``, asks the router and books the slot.
    """
    n = times.size
    s_count = len(inst.profiles)
    xi, alpha = inst.network.radio_scale, inst.network.radio_exponent
    mean_service = np.asarray(inst.service_time, dtype=float) @ np.asarray(inst.probabilities, dtype=float)  # m̄_s
    memory = np.asarray(inst.memory, dtype=float)
    m_run, gpu_memory = inst.gpu.runtime_per_sequence, inst.gpu.memory
    g = inst.prefill
    free = [[0.0] * int(c) for c in layouts[0].servers]
    departures: list[list[float]] = [[] for _ in range(layouts[0].nodes)]
    chosen = np.full(n, REJECT, dtype=np.int64)
    distance = np.full(n, np.nan)
    hit = np.zeros(n)
    service = np.zeros(n)
    wait = np.zeros(n)
    heappush, heappop, replace_top = heapq.heappush, heapq.heappop, heapq.heapreplace
    zeros_k = np.zeros(s_count * k)
    time_list = times.tolist()
    current = 0
    with progress_bar(total=n, desc="replay (online router)", unit="req") as bar:
        for lo, hi in _chunks(epoch, _CHUNK):
            e = int(epoch[lo])
            layout = layouts[e]
            if e != current:
                free = [_resize(heap, int(layout.servers[y]), time_list[lo]) for y, heap in enumerate(free)]
                current = e
            servers = layout.servers.astype(float)
            per_server = mean_service[layout.profile] / servers  # m̄_s / c_x
            cand, dist = nearest_candidates(layout, positions[lo:hi], k, s_count)
            valid = cand >= 0
            safe = np.where(valid, cand, 0)
            prof = layout.profile[safe]
            h_all = hits[prof, np.arange(lo, hi)[:, None]]
            pre_all = np.asarray(g(length[lo:hi, None] - h_all), dtype=float)
            svc_all = unit[lo:hi, None] * (pre_all + decode[lo:hi, None])
            radio_all = xi * np.where(valid, dist, 0.0) ** alpha
            c_all = servers[safe]
            m_all = per_server[safe]
            mem_all = memory[prof]
            full = bool(valid.all())
            for r in range(hi - lo):
                i = lo + r
                t = time_list[i]
                sel = slice(None) if full else valid[r]
                nodes = cand[r] if full else cand[r][sel]
                node_list = nodes.tolist()
                if not node_list:
                    continue
                in_system = np.empty(len(node_list))
                for j, x in enumerate(node_list):
                    dep = departures[x]
                    while dep and dep[0] <= t:
                        heappop(dep)
                    in_system[j] = len(dep)
                view = CandidateView(
                    q=int(kind[i]),
                    length=float(length[i]),
                    now=t,
                    target=tau,
                    node=nodes,
                    profile=prof[r][sel],
                    distance=dist[r][sel],
                    radio=radio_all[r][sel],
                    hit=h_all[r][sel],
                    prefill=pre_all[r][sel],
                    in_system=in_system,
                    servers=c_all[r][sel],
                    open=np.ones(len(node_list), dtype=bool),
                    fetch=zeros_k[: len(node_list)],
                    per_server=m_all[r][sel],
                    age=zeros_k[: len(node_list)],
                    memory=mem_all[r][sel],
                    runtime_per_sequence=m_run,
                    gpu_memory=gpu_memory,
                    staleness=0.0,
                )
                j = router.choose(view, rng)
                if j == REJECT:
                    continue
                x = node_list[j]
                col = j if full else int(np.flatnonzero(valid[r])[j])
                svc = float(svc_all[r, col])
                heap = free[x]
                f = heap[0]
                start = f if f > t else t
                replace_top(heap, start + svc)
                heappush(departures[x], start + svc)
                chosen[i] = x
                distance[i] = dist[r, col]
                hit[i] = h_all[r, col]
                service[i] = svc
                wait[i] = start - t
            bar.update(hi - lo)
    return chosen, distance, hit, service, wait
