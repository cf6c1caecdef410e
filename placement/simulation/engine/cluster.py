"""Replay a trace on engine nodes with their own caches, routed live (docs/model.md §17).

The network, locations, arrival times and demand are those of
:func:`~edgeprefix.placement.simulation.replay.replay` with the same seed (common random
numbers); what changes is the node and its cache:

- ``spec.engine``: ``"slots"`` (:class:`~.scheduler.SlotNode`, the model's FCFS slots) or
  ``"batching"`` (:class:`~.scheduler.BatchingNode`, the instance's ``[engine]``);
- ``spec.cache``: ``"planned"`` (the profile's blocks pinned, nothing else kept), ``"lru"`` (no
  pinned blocks; the dynamic LRU radix gets the plan's reserve ``B_s`` and, on the batching
  engine, every KV block running requests leave free), ``"planned+lru"`` (the profile pinned in
  its reserve, the LRU radix over the free blocks); the memory of a node is ``M`` in every case;
- ``spec.router``: ``"tier"`` (Theorem 1's rule, static), ``"online"`` (the package's router of
  docs/model.md §11 on the nodes' loads and actual hit depths as telemetry shows them), or a
  production router of :mod:`.routers` (radio ignored); every dynamic router compares the same
  candidate set, the ``candidates`` nearest nodes of each profile.

One event loop: before each arrival every node completes the steps due by then (a heap of node
event times); the router reads the :class:`~.board.Board`; the chosen node queues the request.
TTFT ``= ξ r^α +`` (first token − arrival); ``wait`` is arrival to admission.

``route_law``: ``"slots"`` (default) routes on the model's slot node — the tier rule's biases and the online
router's prefill estimate are ``g(L − h)``; ``"engine"`` (batching engine only) routes on the engine law's —
the tier rule's biases are those of the engine-law evaluation (Theorem 1 with the engine's alone prefill
``u`` and the engine law's advertised wait) and the online router's prefill estimate is the engine's alone
prefill of the candidate's actual hit (its wait estimate stays the slots'), the routing a prediction with
``queue_law="engine"`` assumes (docs/model.md §17.10.1, "The queue-free gap").
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from edgeprefix.placement.model.engine_law import QUEUE_LAWS, alone_prefill
from edgeprefix.placement.model.engine_section import EngineSection
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.pipeline.trace_workload import TraceWorkload
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.engine.blocks import BlockTrace
from edgeprefix.placement.simulation.engine.board import Board
from edgeprefix.placement.simulation.engine.kv_cache import PrefixCache
from edgeprefix.placement.simulation.engine.names import PRODUCTION_ROUTERS, in_engine_room
from edgeprefix.placement.simulation.engine.routers import RouteRequest, make_router
from edgeprefix.placement.simulation.engine.scheduler import INF, BatchingNode, Requests, SlotNode
from edgeprefix.placement.simulation.engine.step_time import StepTime
from edgeprefix.placement.simulation.network import nearest_candidates
from edgeprefix.placement.simulation.replay import (
    MixSchedule,
    ReplayResult,
    ReplaySpec,
    _arrivals,
    _demand,
    _layouts,
    _route_tier,
)
from edgeprefix.placement.simulation.routers import REJECT, CandidateView, OnlineRouter

_CHUNK = 8192
READS_CACHE = ("online", "dynamo", "llm-d", "vllm-kv")  # routers that read the nodes' caches (KV events) through the board


def needs_engine(spec: ReplaySpec) -> bool:
    """Whether ``spec`` asks for the engine room (anything but slots, planned, tier/online, fresh)."""
    return in_engine_room(spec.engine, spec.cache, spec.router, spec.telemetry.fresh)


def _check(spec: ReplaySpec, engine: EngineSection | None, step: StepTime | None, blocks: BlockTrace | None) -> None:
    if spec.engine == "batching" and (engine is None or step is None):
        raise ValueError(
            "--engine batching: the instance has no [engine] section with timings "
            "(add [engine.timings] model, hardware, tensor_parallel; docs/instances.md)"
        )
    if blocks is None and (spec.cache != "planned" or spec.router in PRODUCTION_ROUTERS):
        raise ValueError(f"--cache {spec.cache} / --router {spec.router}: the requests' block ids are needed (replay a trace)")
    if blocks is not None and engine is not None and spec.engine == "batching":
        blocks.check_engine_block(engine.block_size)


def engine_replay(
    instance: Instance,
    workload: TraceWorkload,
    mix: Any = None,
    spec: ReplaySpec | None = None,
    *,
    blocks: BlockTrace | None = None,
    step: StepTime | None = None,
    intensity: float | None = None,
    seed: int | np.random.Generator | None = None,
    route_law: str = "slots",
) -> ReplayResult:
    """Replay ``workload`` on engine nodes (see the module docstring); same arguments as ``replay``
    plus the requests' ``blocks``, the engine's fitted ``step`` time and the law the routers route on
    (``route_law``, the module docstring)."""
    if spec is None:
        raise ValueError("spec: a ReplaySpec with the decode rate is required")
    if route_law not in QUEUE_LAWS:
        raise ValueError(f"route_law: one of {list(QUEUE_LAWS)}, got {route_law!r}")
    if route_law == "engine" and spec.engine != "batching":
        raise ValueError("route_law engine: routes on the engine law, which needs --engine batching")
    if getattr(instance, "extended", False):
        raise ValueError(
            f"instance {instance.name!r} uses serving extensions (memory tiers, KV pool, compression or "
            "disaggregation), which the engine room does not model: replay an instance without them"
        )
    engine = instance.engine
    _check(spec, engine, step, blocks)
    if blocks is not None and len(blocks.seq) != workload.requests:
        raise ValueError(f"blocks: {len(blocks.seq)} block sequences for {workload.requests} requests")
    layout_rng, place_rng, arrival_rng, service_rng, router_rng = np.random.default_rng(seed).spawn(5)
    n = workload.requests
    lam = float(instance.network.request_intensity if intensity is None else intensity)
    if not (np.isfinite(lam) and lam > 0):
        raise ValueError(f"--intensity Λ must be > 0, got {intensity!r}")
    inst = instance.with_network(request_intensity=lam)
    schedule = MixSchedule((-np.inf,), (inst,), (mix,))
    tau = float(inst.placement.target if spec.target is None else spec.target)
    ev = evaluate(
        inst, mix, spec.policy, target=tau, queue_model=spec.prediction_model, queue_law="engine" if route_law == "engine" else "slots"
    )
    layouts, changed = _layouts(schedule, spec, layout_rng)
    layout = layouts[0]
    times, scale = _arrivals(workload, spec, lam * layout.area, arrival_rng)
    positions = place_rng.random((n, 2)) * layout.side
    hits, length, decode = _demand(inst, workload, spec)
    unit = service_rng.exponential(1.0, n) if spec.service == "exponential" else np.ones(n)
    seq = blocks.seq if blocks is not None else tuple(() for _ in range(n))
    trace_block = blocks.block_size if blocks is not None else 512
    reqs = Requests(
        length=[int(round(x)) for x in length],
        output=[max(int(o), 1) for o in workload.output],
        seq=seq,
        full=[min(int(x) // trace_block, len(s)) for x, s in zip(length, seq)],
        trace_block=trace_block,
        pinned_hit=hits.tolist(),
    )
    events: list[tuple[float, int, int, int]] = []
    nodes, hooks = _nodes(inst, layout, spec, engine, step, blocks, reqs, events if spec.router in READS_CACHE else None, decode, unit)
    for node in nodes:
        node.keep_history = not spec.telemetry.fresh
    board = Board(nodes, events, spec.telemetry, reqs.pinned_hit, trace_block, reqs.length, seq)
    estimate = _prefill_estimate(inst, step, route_law)
    chosen, distance = _run(inst, layout, ev, spec, nodes, hooks, board, reqs, times, positions, workload.kind, tau, router_rng, estimate)
    served = chosen >= 0
    served &= ~np.asarray(reqs.rejected)
    first = np.asarray(reqs.first_token)
    start = np.asarray(reqs.start)
    finish = np.asarray(reqs.finish)
    hit = np.where(served, np.asarray(reqs.hit), 0.0)
    g = inst.prefill
    net = inst.network
    prefill = np.asarray(g(length - hit), dtype=float)
    radio = net.radio_scale * np.where(served, np.nan_to_num(distance), 0.0) ** net.radio_exponent
    ttft = np.where(served, radio + first - times, np.inf)
    wait = np.where(served, start - times, 0.0)
    service = np.where(served, finish - start, 0.0)
    chosen = np.where(served, chosen, REJECT)
    profile = np.where(chosen >= 0, layout.profile[np.maximum(chosen, 0)], -1)
    keep = np.arange(n) >= int(np.ceil(spec.warmup * n))
    blocks_total = np.array([len(s) for s in seq], dtype=float)
    extras = {
        "preemptions": reqs.preemptions,
        "blocks_hit": np.asarray(reqs.blocks_hit)[keep],
        "blocks_total": blocks_total[keep],
        "kv_events": len(events),
    }
    return ReplayResult(
        spec=spec,
        intensity=lam,
        target=tau,
        time_scale=scale,
        names=schedule.names,
        layouts=layouts,
        predictions=(ev,),
        changed=changed,
        scheduled=False,
        time=times[keep],
        epoch=np.zeros(int(keep.sum()), dtype=np.int64),
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
        extras=extras,
    )


def _nodes(inst, layout, spec, engine, step, blocks, reqs, events, decode, unit) -> tuple[list[Any], list[Any]]:
    """One node per layout node with the cache and memory of ``spec.cache`` (see the module docstring)."""
    kappa, total = inst.gpu.kv_per_token, inst.gpu.memory
    reserve = np.asarray(inst.memory, dtype=float)
    dynamic = spec.cache != "planned"
    pin = spec.cache != "lru"
    bs = engine.block_size if (spec.engine == "batching" and engine is not None) else 16
    per = max(reqs.trace_block // bs, 1)
    nodes: list[Any] = []
    hooks: list[Any] = []

    def finished(x: int, i: int, now: float) -> None:
        for hook in hooks:
            hook(x, i, now)

    for x in range(layout.nodes):
        s = int(layout.profile[x])
        pinned = blocks.pinned[s] if (pin and blocks is not None) else frozenset()
        if spec.engine == "batching":
            pool = (total - reserve[s]) / kappa
            tokens = pool + (0.0 if pin else reserve[s] / kappa)
            cache = PrefixCache(int(tokens // bs), per, pinned, dynamic, x, events)
            nodes.append(
                BatchingNode(
                    x,
                    s,
                    cache,
                    reqs,
                    finished,
                    step,
                    token_budget=engine.token_budget,
                    max_running=engine.max_running,
                    block_size=bs,
                    watermark=engine.watermark,
                    chunked=engine.chunked_prefill,
                )
            )
        else:
            tokens = 0.0 if pin else reserve[s] / kappa
            cache = PrefixCache(int(tokens // bs), per, pinned, dynamic and not pin, x, events)
            nodes.append(SlotNode(x, s, cache, reqs, finished, int(layout.servers[x]), inst.prefill, decode.tolist(), unit.tolist()))
    return nodes, hooks


def _prefill_estimate(inst: Instance, step: StepTime | None, route_law: str) -> Any:
    """The online router's prefill estimate ``f(length, hit)``: ``g(L − h)`` (slots) or the engine's alone prefill."""
    if route_law == "engine":
        assert inst.engine is not None, "route_law='engine' needs the instance's [engine] section (checked by engine_replay)"
        budget = inst.engine.token_budget
        return lambda length, hit: alone_prefill(step, np.maximum(length - hit, 0.0), hit, budget)
    g = inst.prefill
    return lambda length, hit: g(length - hit)


def _run(inst, layout, ev, spec, nodes, hooks, board, reqs, times, positions, kind, tau, rng, estimate) -> tuple[np.ndarray, np.ndarray]:
    """The event loop (see the module docstring)."""
    n = times.size
    s_count = len(inst.profiles)
    chosen = np.full(n, REJECT, dtype=np.int64)
    distance = np.full(n, np.nan)
    production = spec.router in PRODUCTION_ROUTERS
    router = make_router(spec.router) if production else None
    online = (
        OnlineRouter(policy=spec.policy, delay="telemetry", candidates_per_profile=spec.candidates) if spec.router == "online" else None
    )
    if router is not None:
        hooks.append(lambda x, i, now: router.finished(i, x, now))
    static = None
    if spec.router == "tier":
        static, static_dist = _route_tier((layout,), (ev,), positions, kind, np.zeros(n, dtype=np.int64), inst.network)
    heap: list[tuple[float, int, int]] = []
    push, pop = heapq.heappush, heapq.heappop

    def settle(until: float) -> None:
        while heap and heap[0][0] <= until:
            t, _, x = pop(heap)
            node = nodes[x]
            if t != node.next_time:
                continue
            node.advance(t)
            if node.next_time < INF:
                push(heap, (node.next_time, node.version, x))

    xi, alpha = inst.network.radio_scale, inst.network.radio_exponent
    mean_service = np.asarray(inst.service_time, dtype=float) @ np.asarray(inst.probabilities, dtype=float)
    per_server = mean_service[layout.profile] / layout.servers.astype(float)
    memory = np.asarray(inst.memory, dtype=float)
    time_list = times.tolist()
    with progress_bar(total=n, desc=f"replay ({spec.engine}, {spec.router})", unit="req") as bar:
        for lo in range(0, n, _CHUNK):
            hi = min(lo + _CHUNK, n)
            if static is None:
                cand, dist = nearest_candidates(layout, positions[lo:hi], spec.candidates, s_count)
            for r in range(hi - lo):
                i = lo + r
                t = time_list[i]
                settle(t)
                if static is not None:
                    x = int(static[i])
                    if x < 0:
                        continue
                    d = float(static_dist[i])
                else:
                    valid = cand[r] >= 0
                    nodes_r = cand[r][valid]
                    if nodes_r.size == 0:
                        continue
                    dists = dist[r][valid]
                    if router is not None:
                        request = RouteRequest(i, t, reqs.length[i], reqs.seq[i])
                        x = int(router.choose(request, nodes_r.tolist(), board, rng))
                        j = int(np.flatnonzero(nodes_r == x)[0])
                    else:
                        j = _online(
                            online, board, nodes_r, dists, i, t, kind, reqs, layout, estimate, xi, alpha, tau, per_server, memory, inst, rng
                        )
                        if j == REJECT:
                            continue
                        x = int(nodes_r[j])
                    d = float(dists[j])
                    if router is not None:
                        router.routed(request, x)
                chosen[i] = x
                distance[i] = d
                node = nodes[x]
                node.arrive(i, t)
                if node.next_time < INF:
                    push(heap, (node.next_time, node.version, x))
            bar.update(hi - lo)
        settle(INF)
    return chosen, distance


def _online(router, board, nodes_r, dists, i, t, kind, reqs, layout, estimate, xi, alpha, tau, per_server, memory, inst, rng) -> int:
    """The package's online router on the board's loads and hit depths."""
    board.sync(t)
    prof = layout.profile[nodes_r]
    hit = board.hits(nodes_r, i)
    length = float(reqs.length[i])
    prefill = np.asarray(estimate(length, np.asarray(hit, dtype=float)), dtype=float)
    in_system = board.loads(nodes_r, t)
    zeros = np.zeros(nodes_r.size)
    view = CandidateView(
        q=int(kind[i]),
        length=length,
        now=t,
        target=tau,
        node=nodes_r,
        profile=prof,
        distance=dists,
        radio=xi * dists**alpha,
        hit=hit,
        prefill=prefill,
        in_system=in_system,
        servers=layout.servers[nodes_r].astype(float),
        open=np.ones(nodes_r.size, dtype=bool),
        fetch=zeros,
        per_server=per_server[nodes_r],
        age=zeros,
        memory=memory[prof],
        runtime_per_sequence=inst.gpu.runtime_per_sequence,
        gpu_memory=inst.gpu.memory,
        staleness=board.telemetry.delay,
    )
    return int(router.choose(view, rng))


__all__ = ["engine_replay", "needs_engine"]
