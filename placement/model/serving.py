"""Serving-system extensions of a node (docs/model.md §19): memory tiers below HBM, a remote KV
pool, KV compression, prefill/decode disaggregation, chunked prefill and the M/G/c queue law.

Each extension only changes per-profile and per-pair quantities the model already has, so the
instance computes them once (:func:`serving_arrays`) and the association, the fixed point and the
metrics read them unchanged:

- ``hbm_memory`` ``B^H_s``: the part of the profile's states pinned in HBM, hence ``c_s``;
- ``first_token_time`` ``T^ft_{s,q}``: service start to first token (fetches, decompression,
  prefill, KV hand-off), the term ``g(L_q − h_{s,q})`` of the router's bias, the coverage cut-off
  and ``T̄``;
- ``service_time`` ``1/μ_{s,q}``: the slot's occupancy;
- ``reused_depth`` ``h̃_{s,q}``: tokens whose prefill is saved (local or pool hit).

Without any extension the arrays reduce to ``B_s``, ``g(L_q − h_{s,q})``, ``g(L_q − h_{s,q}) + D_q``
and ``h_{s,q}`` (eqs. (19.1)–(19.12)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.costs import PrefillModel
from edgeprefix.placement.model.evaluation_registry import SLOT_QUEUE_REGISTRY
from edgeprefix.placement.model.profiles import Profile
from edgeprefix.placement.model.workload import PrefixForest, RequestType, check_unique_ids

FloatArray = npt.NDArray[np.float64]
SERVING_MODES = ("colocated", "disaggregated")
QUEUE_LAWS = SLOT_QUEUE_REGISTRY.names()  # Erlang C (the paper's) or the M/G/c law of docs/model.md §19.6
# ShadowServe (arXiv:2509.16857) measured up to 1.38× lower TTFT than GPU-decompression baselines
# once fetch and decompression leave the GPU (≤ 20 Gbps links): the default slowdown of the
# node's prefill while it serves a pool fetch is that gap, ι = 0.38 (docs/model.md §19.2).
DEFAULT_INTERFERENCE = 0.38


def _check(field: str, value: float, *, low: float = 0.0, strict: bool = False, finite: bool = True) -> None:
    ok = not np.isnan(value) and (value > low if strict else value >= low) and (np.isfinite(value) or not finite)
    if not ok:
        bound = f"> {low:g}" if strict else f">= {low:g}"
        raise InstanceError(field, f"must be a {'finite ' if finite else ''}number {bound}, got {value!r}")


@dataclass(frozen=True)
class MemoryTier:
    """A memory tier below HBM on every node (``[[gpu.tiers]]``).

    ``capacity`` ``C_k`` memory units, ``bandwidth`` ``b_k`` memory units per second (``inf``
    allowed in Python), ``latency`` ``ℓ_k`` seconds per fetch, and ``pipelined``: whether its
    fetch overlaps the prefill layer by layer.
    """

    name: str
    capacity: float
    bandwidth: float
    latency: float = 0.0
    pipelined: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InstanceError("gpu.tiers[].name", f"must be a non-empty string, got {self.name!r}")
        _check(f"gpu.tiers.{self.name}.capacity", self.capacity)
        _check(f"gpu.tiers.{self.name}.bandwidth", self.bandwidth, strict=True, finite=False)
        _check(f"gpu.tiers.{self.name}.latency", self.latency)


@dataclass(frozen=True)
class RemotePool:
    """A remote KV pool holding the states of ``prefixes`` (``[remote]``).

    ``density`` ``λ_R`` pool sites per unit area, each sharing its ``bandwidth`` among the
    ``λ_b / λ_R`` nodes of its region; ``None`` means one link of ``bandwidth`` per node
    (``per_node = true``).  ``interference`` ``ι`` slows the node's prefill of a pool-assisted
    request by the factor ``1 + ι``.
    """

    prefixes: tuple[str, ...]
    bandwidth: float
    latency: float = 0.0
    density: float | None = None
    interference: float = DEFAULT_INTERFERENCE
    pipelined: bool = False

    def __post_init__(self) -> None:
        _check("remote.bandwidth", self.bandwidth, strict=True, finite=False)
        _check("remote.latency", self.latency)
        _check("remote.interference", self.interference)
        if self.density is not None:
            _check("remote.density", self.density, strict=True)

    def node_bandwidth(self, edge_density: float) -> float:
        """Bandwidth one node gets, ``b_R`` or ``b_R min(1, λ_R / λ_b)`` (eq. (19.6))."""
        return self.bandwidth if self.density is None else self.bandwidth * min(1.0, self.density / edge_density)


@dataclass(frozen=True)
class Compression:
    """Stored KV states compressed by ``ratio`` ``r ≥ 1`` (``κ → κ / r``); every reused token costs
    ``decompress_per_token`` ``d`` seconds; ``quality_loss`` is reported, not optimised."""

    ratio: float
    decompress_per_token: float = 0.0
    quality_loss: float = 0.0

    def __post_init__(self) -> None:
        _check("compression.ratio", self.ratio, low=1.0)
        _check("compression.decompress_per_token", self.decompress_per_token)
        if not (np.isfinite(self.quality_loss) and 0.0 <= self.quality_loss <= 1.0):
            raise InstanceError("compression.quality_loss", f"must lie in [0, 1], got {self.quality_loss!r}")


@dataclass(frozen=True)
class ChunkedPrefill:
    """Chunked prefill (docs/model.md §19.6): ``g_C(n) = g(n) + δ ⌈n / C⌉`` for ``n > 0``, ``g_C(0) = 0``.

    ``chunk_size`` ``C`` tokens per iteration, ``overhead`` ``δ`` seconds per chunk.
    """

    base: PrefillModel
    chunk_size: float
    overhead: float = 0.0

    def __call__(self, tokens: npt.ArrayLike) -> FloatArray:
        n = np.asarray(tokens, dtype=float)
        chunks = np.ceil(np.maximum(n, 0.0) / self.chunk_size)
        return np.where(n > 0, np.asarray(self.base(n), dtype=float) + self.overhead * chunks, 0.0)


@dataclass(frozen=True)
class Serving:
    """How a node serves (``[serving]``): colocated (the paper's) or disaggregated prefill/decode,
    chunked prefill, and the queue law.

    Disaggregated: the node's slots serve prefill only, the KV of the whole input (``κ L_q``) is
    handed to a decode pool of ``decode_slots`` slots per edge node over ``handoff_bandwidth``
    memory units per second after ``handoff_latency`` seconds.

    Chunked prefill: ``chunk_size`` ``C`` tokens per iteration, each chunk costing
    ``chunk_overhead`` ``δ`` seconds more (docs/model.md §19.6).  ``queue``: ``mmc`` (Erlang C, the
    paper's) or ``mgc`` (the M/G/c law with the service's SCV); ``decode_scv`` ``c_D²`` is the
    squared coefficient of variation of a type's decode occupancy (0: deterministic per type).
    """

    mode: str = "colocated"
    decode_slots: float | None = None
    handoff_bandwidth: float | None = None
    handoff_latency: float = 0.0
    queue: str = "mmc"
    chunk_size: float | None = None
    chunk_overhead: float = 0.0
    decode_scv: float = 0.0

    def __post_init__(self) -> None:
        if self.mode not in SERVING_MODES:
            raise InstanceError("serving.mode", f"must be one of {list(SERVING_MODES)}, got {self.mode!r}")
        _check("serving.handoff_latency", self.handoff_latency)
        if self.mode == "disaggregated":
            for name in ("decode_slots", "handoff_bandwidth"):
                value = getattr(self, name)
                if value is None:
                    raise InstanceError(f"serving.{name}", "required when mode = 'disaggregated'")
                _check(f"serving.{name}", value, strict=True, finite=name == "decode_slots")
        elif self.decode_slots is not None or self.handoff_bandwidth is not None:
            raise InstanceError("serving.mode", "decode_slots/handoff_bandwidth need mode = 'disaggregated'")
        if self.queue not in QUEUE_LAWS:
            raise InstanceError("serving.queue", f"must be one of {list(QUEUE_LAWS)}, got {self.queue!r}")
        if self.chunk_size is not None:
            _check("serving.chunk_size", self.chunk_size, strict=True)
        _check("serving.chunk_overhead", self.chunk_overhead)
        if self.chunk_overhead > 0 and self.chunk_size is None:
            raise InstanceError("serving.chunk_overhead", "needs serving.chunk_size (tokens per chunk)")
        _check("serving.decode_scv", self.decode_scv)

    @property
    def disaggregated(self) -> bool:
        return self.mode == "disaggregated"

    def first_token_prefill(self, prefill: PrefillModel) -> PrefillModel:
        """The prefill law of the first-token time: ``g_C`` when chunked, else ``g`` itself."""
        return prefill if self.chunk_size is None else ChunkedPrefill(prefill, self.chunk_size, self.chunk_overhead)


@dataclass(frozen=True)
class ServingArrays:
    """Derived arrays of :func:`serving_arrays` (``(S,)`` or ``(S, Q)``)."""

    memory: FloatArray  # B_s, all tiers, compressed
    hbm_memory: FloatArray  # B^H_s
    first_token_time: FloatArray  # T^ft_{s,q}
    service_time: FloatArray  # 1/μ_{s,q}
    reused_depth: FloatArray  # h̃_{s,q}
    recomputed_prefill: FloatArray  # g(L_q − h̃_{s,q})
    fetch_time: FloatArray  # tier + pool fetch seconds of the chosen option
    pool_hit: npt.NDArray[np.bool_]  # the node takes the pool option
    service_second_moment: FloatArray  # E[S_{s,q}²], eq. (19.17)


def validate_tiers(tiers: tuple[MemoryTier, ...]) -> None:
    check_unique_ids("gpu.tiers", (t.name for t in tiers))


def validate_pool(pool: RemotePool, forest: PrefixForest) -> None:
    """Known, distinct prefix ids, closed under parents."""
    by_id = forest.by_id
    members = set(pool.prefixes)
    if len(members) != len(pool.prefixes):
        raise InstanceError("remote.prefixes", "a prefix is listed twice")
    for vid in pool.prefixes:
        if vid not in by_id:
            raise InstanceError("remote.prefixes", f"unknown prefix {vid!r}")
        parent = by_id[vid].parent
        if parent is not None and parent not in members:
            raise InstanceError("remote.prefixes", f"not ancestor-closed: {vid!r} needs its parent {parent!r}")


def _segments(forest: PrefixForest, kappa: float, ratio: float) -> dict[str, float]:
    """Stored size of each vertex's own segment, ``σ_v = κ_v (ℓ_v − ℓ_{parent(v)}) / r`` (eq. (19.1))."""
    out = {}
    for p in forest.prefixes:
        k = kappa if p.kv_per_token is None else p.kv_per_token
        out[p.id] = k * (p.depth - forest.parent_depth(p.id)) / ratio
    return out


def tier_bytes(
    profile: Profile, forest: PrefixForest, sizes: dict[str, float], tiers: tuple[MemoryTier, ...]
) -> tuple[float, dict[str, FloatArray]]:
    """Deepest-first rule (eq. (19.2)): the profile's segments in order of depth, HBM holds the
    first ``B^H_s = max(0, B_s − Σ_k C_k)``, then each tier in turn up to its capacity.

    Returns ``B^H_s`` and, per vertex, its bytes in HBM and in each tier (``(1 + K,)``).
    """
    depth = {p.id: p.depth for p in forest.prefixes}
    order = sorted(range(len(profile.prefixes)), key=lambda i: (depth[profile.prefixes[i]], i))
    total = sum(sizes[v] for v in profile.prefixes)
    hbm = max(0.0, total - sum(t.capacity for t in tiers))
    edges = np.concatenate([[0.0, hbm], hbm + np.cumsum([t.capacity for t in tiers])])
    edges[-1] = np.inf  # rounding must not leave a sliver outside every tier
    split: dict[str, FloatArray] = {}
    start = 0.0
    for i in order:
        vid = profile.prefixes[i]
        end = start + sizes[vid]
        split[vid] = np.maximum(0.0, np.minimum(end, edges[1:]) - np.maximum(start, edges[:-1]))
        start = end
    return hbm, split


def _fetch(parts: FloatArray, tiers: tuple[MemoryTier, ...]) -> tuple[float, float]:
    """(serial, pipelined) seconds of fetching ``parts[k]`` units from tier ``k`` (eq. (19.3))."""
    serial = piped = 0.0
    for amount, tier in zip(parts, tiers):
        if amount > 0:
            t = tier.latency + amount / tier.bandwidth
            if tier.pipelined:
                piped += t
            else:
                serial += t
    return serial, piped


def serving_arrays(
    *,
    forest: PrefixForest,
    profiles: tuple[Profile, ...],
    requests: tuple[RequestType, ...],
    hits: FloatArray,
    prefill: PrefillModel,
    kappa: float,
    edge_density: float,
    tiers: tuple[MemoryTier, ...] = (),
    remote: RemotePool | None = None,
    compression: Compression | None = None,
    serving: Serving | None = None,
) -> ServingArrays:
    """The per-profile and per-pair arrays of an extended node (docs/model.md §19)."""
    g_first = prefill if serving is None else serving.first_token_prefill(prefill)  # g_C, eq. (19.16)
    ratio = 1.0 if compression is None else compression.ratio
    decompress = 0.0 if compression is None else compression.decompress_per_token
    sizes = _segments(forest, kappa, ratio)
    depth = {p.id: p.depth for p in forest.prefixes}
    lengths = np.array([q.length for q in requests], dtype=float)
    decodes = np.array([q.decode for q in requests], dtype=float)
    n_s, n_q = hits.shape
    memory = np.zeros(n_s)
    hbm = np.zeros(n_s)
    serial = np.zeros((n_s, n_q))
    piped = np.zeros((n_s, n_q))
    pool_serial = np.zeros((n_s, n_q))
    pool_piped = np.zeros((n_s, n_q))
    pool_depth = np.zeros((n_s, n_q))
    pool_set = set(() if remote is None else remote.prefixes)
    b_pool = np.inf if remote is None else remote.node_bandwidth(edge_density)
    for i, s in enumerate(profiles):
        memory[i] = sum(sizes[v] for v in s.prefixes)
        hbm[i], split = tier_bytes(s, forest, sizes, tiers)
        cached = set(s.prefixes)
        for j, q in enumerate(requests):
            parts = sum((split[v][1:] for v in q.path if v in cached), np.zeros(len(tiers)))
            serial[i, j], piped[i, j] = _fetch(parts, tiers)
            in_pool = [v for v in q.path if v in pool_set and depth[v] > hits[i, j]]
            if in_pool:
                pool_depth[i, j] = max(depth[v] for v in in_pool)
                t = remote.latency + sum(sizes[v] for v in in_pool) / b_pool  # type: ignore[union-attr]
                pool_serial[i, j], pool_piped[i, j] = (0.0, t) if remote.pipelined else (t, 0.0)  # type: ignore[union-attr]
    local_prefill = np.asarray(g_first(lengths[None, :] - hits), dtype=float)
    local = serial + np.maximum(piped, local_prefill) + decompress * hits  # eq. (19.4)
    fetch = serial + piped
    reused = hits.copy()
    pool_hit = np.zeros((n_s, n_q), dtype=bool)
    if remote is not None:
        has = pool_depth > hits
        pool_prefill = (1.0 + remote.interference) * np.asarray(g_first(lengths[None, :] - np.where(has, pool_depth, hits)), dtype=float)
        via_pool = (serial + pool_serial) + np.maximum(piped + pool_piped, pool_prefill) + decompress * pool_depth  # eq. (19.7)
        pool_hit = has & (via_pool < local)  # eq. (19.8): the node takes the faster option
        local = np.where(pool_hit, via_pool, local)
        reused = np.where(pool_hit, pool_depth, hits)
        fetch = np.where(pool_hit, fetch + pool_serial + pool_piped, fetch)
    first = local
    occupancy = first + decodes[None, :]  # eq. (19.10)
    decode_scv = 0.0 if serving is None else serving.decode_scv
    second = occupancy**2 + decode_scv * decodes[None, :] ** 2  # eq. (19.17)
    if serving is not None and serving.disaggregated and serving.handoff_bandwidth is not None:  # validated together
        handoff = serving.handoff_latency + kappa * lengths / serving.handoff_bandwidth  # eq. (19.11)
        first = first + handoff[None, :]
        occupancy = first  # eq. (19.12): decode leaves the node
        second = occupancy**2
    recomputed = np.asarray(prefill(lengths[None, :] - reused), dtype=float)  # compute saved: plain g
    return ServingArrays(memory, hbm, first, occupancy, reused, recomputed, fetch, pool_hit, second)


def serving_report(evaluation) -> dict:
    """The ``serving`` block of ``Evaluation.to_dict`` for an extended instance (docs/model.md §19.5).

    ``pool_share`` and ``reuse_share`` are request shares, ``Σ_q p_q Σ_s A_{s,q} 1{·}``;
    ``quality_loss`` is ``reuse_share`` times the stated per-request loss (reported, never part of
    the objective); ``decode_utilization`` is eq. (19.13).
    """
    inst = evaluation.instance
    weight = inst.probabilities[None, :] * evaluation.association  # p_q A_{s,q}

    def share(mask: npt.ArrayLike) -> float:
        return float((weight * np.asarray(mask, dtype=float)).sum())

    reuse = share(inst.reused_depth > 0)
    out: dict = {
        "hbm_memory": dict(zip(inst.profile_ids, map(float, inst.hbm_memory))),
        "mean_fetch_time": float((weight * inst.fetch_time).sum()),
        "pool_share": share(inst.pool_hit),
        "reuse_share": reuse,
        "quality_loss": None if inst.compression is None else reuse * inst.compression.quality_loss,
        "mode": "colocated" if inst.serving is None else inst.serving.mode,
        "decode_utilization": inst.decode_utilization,
    }
    if inst.serving is not None and (inst.serving.queue != "mmc" or inst.serving.chunk_size is not None):
        scv = evaluation.service_scv  # docs/model.md §19.6
        out |= {
            "queue": inst.serving.queue,
            "chunk_size": inst.serving.chunk_size,
            "service_scv": {sid: (float(v) if np.isfinite(v) else None) for sid, v in zip(inst.profile_ids, scv)},
        }
    return out
