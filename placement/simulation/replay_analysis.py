"""What a trace replay says about the model: replications, generalisation, burstiness, ablation.

Built on :func:`edgeprefix.placement.simulation.replay.replay` (docs/model.md §17):

- :func:`replay_replicated` — independent network draws of one replay (common trace), averaged;
- :func:`burstiness` — index of dispersion of the arrival counts vs Poisson's 1;
- :func:`ablation` — the replay with one trace feature at a time replaced by the model's
  assumption (Poisson arrivals, per-type hit depths, per-type lengths), then all of them
  (the model's own workload), every row on the same networks and locations;
- :func:`generalisation` — the same instance replayed on its training part and on the later
  part, beside the prediction for the training type mix and for the later part's mix (drift).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.pipeline.trace_workload import TraceWorkload
from edgeprefix.placement.simulation.engine.cluster import engine_replay, needs_engine
from edgeprefix.placement.simulation.replay import (
    MixSchedule,
    ReplayResult,
    ReplaySpec,
    index_of_dispersion,
    replay,
)

FloatArray = npt.NDArray[np.float64]
BURST_WINDOWS = (10, 100, 1000)  # expected requests per window


class Switches(TypedDict, total=False):
    """The :class:`ReplaySpec` fields one ablation changes."""

    arrivals: str
    hits: str
    lengths: str
    service: str


ABLATIONS: tuple[tuple[str, Switches], ...] = (
    ("trace", {}),
    ("poisson arrivals", {"arrivals": "poisson"}),
    ("per-type hit depths", {"hits": "type"}),
    ("per-type lengths", {"lengths": "type"}),
    ("model workload", {"arrivals": "poisson", "hits": "type", "lengths": "type"}),
    ("model workload, exponential", {"arrivals": "poisson", "hits": "type", "lengths": "type", "service": "exponential"}),
)
_METRICS = (
    "coverage_replayed",
    "mean_ttft_replayed",
    "hit_depth_replayed",
    "offload_ratio_replayed",
    "mean_wait_replayed",
    "hit_rate_blocks",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "preemptions",
    "node_load_cv",
    "radio_mean",
)


@dataclass(frozen=True)
class ReplayReport:
    """Replications of one replay (each its own network and locations, the same requests)."""

    results: tuple[ReplayResult, ...]

    def summary(self) -> dict[str, Any]:
        """The first replication's summary with the replayed metrics averaged over replications;
        ``coverage_se`` is the spread across replications (batch means when there is one)."""
        rows = [r.summary() for r in self.results]
        out = dict(rows[0])
        for key in _METRICS:
            values = np.array([row[key] for row in rows], dtype=float)
            out[key] = float(values.mean())
        covs = np.array([row["coverage_replayed"] for row in rows])
        out["coverage_se"] = float(covs.std(ddof=1) / np.sqrt(covs.size)) if covs.size > 1 else rows[0]["coverage_se"]
        out["replications"] = len(rows)
        if "tiers" in out:
            out["tiers"] = {
                sid: {
                    **tier,
                    **{key: _mean([row["tiers"][sid][key] for row in rows]) for key in ("share_replayed", "utilization_replayed")},
                }
                for sid, tier in out["tiers"].items()
            }
        replayed = [row["overloaded_node_share_replayed"] for row in rows if row.get("overloaded_node_share_replayed") is not None]
        out["overloaded_node_share_replayed"] = float(np.mean(replayed)) if replayed else None
        spans = [row["measured_service_times"] for row in rows if row.get("measured_service_times") is not None]
        out["measured_service_times"] = float(np.mean(spans)) if spans else None
        out["stationary"] = all(bool(row.get("stationary")) for row in rows)
        out["stationary_replications"] = sum(bool(row.get("stationary")) for row in rows)
        kinds: dict[str, str] = {}  # one warning of each kind (the first replication's numbers): its text without numbers
        for w in (w for row in rows for w in row.get("warnings", [])):
            kinds.setdefault(re.sub(r"[0-9.]+", "#", w), w)
        out["warnings"] = list(kinds.values())
        if "epochs" in out:
            out["epochs"] = [
                {**epoch, **{key: _mean([row["epochs"][e][key] for row in rows]) for key in ("coverage_replayed", "mean_ttft_replayed")}}
                for e, epoch in enumerate(out["epochs"])
            ]
        return out


def _mean(values: list[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else float("nan")


def replay_replicated(
    instance: Instance,
    workload: TraceWorkload,
    mix: Any,
    spec: ReplaySpec,
    *,
    intensity: float | None = None,
    replications: int = 1,
    seed: int | None = 0,
    schedule: MixSchedule | None = None,
    engine: dict[str, Any] | None = None,
    warm: TraceWorkload | None = None,
) -> ReplayReport:
    """``replications`` replays, each with its own network draw (child seeds of ``seed``); ``warm`` is the
    training part a ``warm_start = "train"`` replay fills the queues with.

    A spec that needs the engine room (docs/model.md §17) replays there; ``engine`` then carries
    ``blocks`` (the requests' block ids) and ``step`` (the fitted step time)."""
    if isinstance(replications, bool) or not isinstance(replications, int) or replications < 1:
        raise ValueError(f"--replications must be a positive integer, got {replications!r}")
    seeds = np.random.SeedSequence(seed).spawn(replications)
    if needs_engine(spec):
        if schedule is not None:
            raise ValueError("--epochs: epoch schedules replay on FCFS slots with the planned cache only")
        return ReplayReport(
            tuple(
                engine_replay(instance, workload, mix, spec, intensity=intensity, seed=np.random.default_rng(s), **(engine or {}))
                for s in seeds
            )
        )
    return ReplayReport(
        tuple(
            replay(instance, workload, mix, spec, intensity=intensity, schedule=schedule, seed=np.random.default_rng(s), warm=warm)
            for s in seeds
        )
    )


def burstiness(times: npt.ArrayLike, windows: tuple[int, ...] = BURST_WINDOWS) -> list[dict[str, float]]:
    """Index of dispersion of the counts in windows of ``m`` expected requests, per ``m``.

    A Poisson stream gives 1 with a standard deviation ``√(2 / (k − 1))`` over ``k`` windows
    (``poisson_sd``); time rescaling leaves these numbers unchanged.
    """
    t = np.asarray(times, dtype=float)
    if t.size < 2 or not t[-1] > t[0]:
        return []
    rate = (t.size - 1) / (t[-1] - t[0])
    out = []
    for m in windows:
        window = m / rate
        k = int(np.floor((t[-1] - t[0]) / window))
        if k < 2:
            continue
        out.append(
            {
                "window_requests": float(m),
                "window_seconds": float(window),
                "index_of_dispersion": index_of_dispersion(t, window),
                "windows": float(k),
                "poisson_sd": float(np.sqrt(2.0 / (k - 1))),
            }
        )
    return out


def ablation(
    instance: Instance,
    workload: TraceWorkload,
    mix: Any,
    spec: ReplaySpec,
    *,
    intensity: float | None = None,
    replications: int = 1,
    seed: int | None = 0,
    warm: TraceWorkload | None = None,
) -> list[dict[str, Any]]:
    """One row per :data:`ABLATIONS` entry: replayed coverage, mean TTFT, wait and hit depth on
    the same network draws; the prediction is the same for every row."""
    rows = []
    for name, switches in ABLATIONS:
        report = replay_replicated(
            instance, workload, mix, replace(spec, **switches), intensity=intensity, replications=replications, seed=seed, warm=warm
        )
        s = report.summary()
        rows.append(
            {
                "name": name,
                **s["assumptions"],
                **{
                    k: s[k]
                    for k in (
                        "coverage_replayed",
                        "coverage_se",
                        "mean_ttft_replayed",
                        "mean_wait_replayed",
                        "hit_depth_replayed",
                        "offload_ratio_replayed",
                        "coverage_predicted",
                        "mean_ttft_predicted",
                        "hit_depth_predicted",
                    )
                },
            }
        )
    return rows


def total_variation(p: npt.ArrayLike, q: npt.ArrayLike) -> float:
    """``½ ||p − q||₁`` between two type distributions."""
    return 0.5 * float(np.abs(np.asarray(p, dtype=float) - np.asarray(q, dtype=float)).sum())


def generalisation(
    instance: Instance,
    train: TraceWorkload,
    test: TraceWorkload,
    mix: Any,
    spec: ReplaySpec,
    *,
    intensity: float | None = None,
    replications: int = 1,
    seed: int | None = 0,
) -> dict[str, Any]:
    """In-sample (training part) vs out-of-sample (later part) replay of one instance.

    ``prediction_test_mix`` re-evaluates the instance with the later part's type mix ``p̂_q``
    (same ``Λ``, the prediction's own queue model): the part of the gap that type-mix drift alone explains.
    """
    types = len(instance.requests)
    p_train, p_test = train.type_mix(types), test.type_mix(types)
    inside = replay_replicated(
        instance, train, mix, spec, intensity=intensity, replications=replications, seed=seed, warm=train
    ).summary()  # a "train" warm start replays the part itself first
    outside = replay_replicated(instance, test, mix, spec, intensity=intensity, replications=replications, seed=seed, warm=train).summary()
    lam = float(instance.network.request_intensity if intensity is None else intensity)
    tau = inside["target"]
    drifted = evaluate(
        instance.with_probabilities(dict(zip(instance.request_ids, p_test.tolist()))).with_network(request_intensity=lam),
        mix,
        spec.policy,
        target=tau,
        queue_model=spec.prediction_model,
    )
    return {
        "requests_train": train.requests,
        "requests_test": test.requests,
        "hit_depth_predicted": inside["hit_depth_predicted"],
        "hit_depth_train": inside["hit_depth_replayed"],
        "hit_depth_test": outside["hit_depth_replayed"],
        "coverage_predicted": inside["coverage_predicted"],
        "coverage_train": inside["coverage_replayed"],
        "coverage_test": outside["coverage_replayed"],
        "gap_hit_depth": outside["hit_depth_replayed"] - inside["hit_depth_replayed"],
        "gap_coverage": outside["coverage_replayed"] - inside["coverage_replayed"],
        "type_mix_drift": total_variation(p_train, p_test),
        "unmatched_test": float(np.mean(~test.matched)) if test.requests else 0.0,
        "prediction_test_mix": {
            "coverage": float(drifted.coverage(tau)),
            "hit_depth": float(drifted.mean_prefix_depth),
            "mean_ttft": float(drifted.mean_ttft),
        },
    }


def node_dispersion(result: ReplayResult, window_requests: float = 10.0) -> float:
    """Index of dispersion of the per-node arrival counts, pooled over the nodes.

    Windows have a common length ``w`` in which the average node receives ``window_requests``
    arrivals; with ``c_{x,k}`` the count of node ``x`` in window ``k`` and ``c̄_x`` its mean,
    ``Σ_x Σ_k (c_{x,k} − c̄_x)² / ((K − 1) Σ_x c̄_x)`` — 1 for Poisson streams.  It shows how much of
    the trace's burstiness a node still sees once routing splits the stream (thinning pulls it
    towards 1).  ``nan`` with fewer than 2 windows.
    """
    served = result.node >= 0
    t, node = result.time[served], result.node[served]
    if t.size < 2 or not t[-1] > t[0]:
        return float("nan")
    nodes = result.layout.nodes
    window = window_requests * nodes * (t[-1] - t[0]) / (t.size - 1)
    k = int(np.floor((t[-1] - t[0]) / window))
    if k < 2:
        return float("nan")
    slot = np.floor((t - t[0]) / window).astype(np.int64)
    inside = slot < k
    counts = np.bincount(node[inside] * k + slot[inside], minlength=nodes * k).reshape(nodes, k).astype(float)
    mean = counts.mean(axis=1)
    total = float(mean.sum())
    return float(((counts - mean[:, None]) ** 2).sum() / ((k - 1) * total)) if total > 0 else float("nan")
