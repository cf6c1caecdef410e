"""The engine room (docs/model.md §17): step-time fit, FCFS limit, KV cache eviction, production routers."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE, SPLITWISE_TIMINGS
from edgeprefix.placement.model.engine_section import EngineSection
from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, load_instance
from edgeprefix.placement.simulation.engine.kv_cache import PrefixCache
from edgeprefix.placement.simulation.engine.routers import make_router
from edgeprefix.placement.simulation.engine.routers.base import RouteRequest
from edgeprefix.placement.simulation.engine.scheduler import BatchingNode, Requests
from edgeprefix.placement.simulation.engine.step_time import (
    E2E_WEIGHTS,
    StepTime,
    TimingRow,
    fit_step_time,
    held_out_errors,
    read_timings,
    select_e2e_weight,
    static_batch_e2e,
)

with open(SPLITWISE_TIMINGS, encoding="utf-8") as _handle:
    GROUPS = sorted({(r["model"], r["hardware"], int(r["tensor_parallel"])) for r in csv.DictReader(_handle)})


def test_held_out_e2e_error_of_the_timing_fit() -> None:
    """Every configuration, left out of the fit (its e2e weight chosen by an inner leave-one-out on the
    others), is predicted within 10 %, the ends of the sweeps (extrapolations) included (worst measured
    9.1 %, BLOOM-176B H100 TP8 (1, 8192, 128)); the median error is far lower.  The earlier protocol
    (repetition means, weight 1) missed the goal at the ends of the sweeps (11.4 %)."""
    worst, errors, earlier = 0.0, [], 0.0
    for group in GROUPS:
        held = held_out_errors(read_timings(SPLITWISE_TIMINGS, *group))
        worst = max(worst, held.worst_all)
        errors.extend(held.errors.tolist())
        assert all(not r.consistent for r in held.excluded)
        assert set(held.weights) <= set(E2E_WEIGHTS) and len(held.weights) == len(held.rows)
        before = held_out_errors(read_timings(SPLITWISE_TIMINGS, *group, statistic="mean"), weights=(1.0,))
        earlier = max(earlier, before.worst_all)
    assert worst < 0.10
    assert np.median(errors) < 0.03
    assert earlier > 0.10  # the medians and the weight are what closes the goal


def test_repetition_median_ignores_a_truncated_repetition(tmp_path) -> None:
    """A configuration's repetitions are summarised by their median: one repetition whose generation
    stopped early (a third of the others' e2e_time) leaves the row consistent, where the mean flags it."""
    head = "model,hardware,prompt_size,batch_size,token_size,peak_power,average_power,prompt_time,token_time,e2e_time,tensor_parallel\n"
    reps = [(120.0, 40.0, 120.0 + 511 * 40.0 * f) for f in (1.0, 1.01, 0.99, 0.3)]
    path = tmp_path / "t.csv"
    path.write_text(head + "".join(f"m,h,512,1,512,1,1,{p},{t},{e},2\n" for p, t, e in reps), encoding="utf-8")
    (row,) = read_timings(path, "m", "h", 2)
    assert row.consistent and row.e2e_time == pytest.approx((120.0 + 511 * 40.0) / 1e3, rel=0.01)
    (mean_row,) = read_timings(path, "m", "h", 2, statistic="mean")
    assert not mean_row.consistent
    with pytest.raises(ValueError, match="statistic"):
        read_timings(path, "m", "h", 2, statistic="mode")


def test_e2e_weight_selection_uses_only_the_rows_it_is_given() -> None:
    """The weight is chosen by leave-one-out on the rows passed in; a bad weight is refused with its name."""
    rows = tuple(r for r in read_timings(SPLITWISE_TIMINGS, "llama2-70b", "a100-80gb", 4) if r.consistent)
    held = held_out_errors(rows)
    for i in (0, len(rows) // 2, len(rows) - 1):
        assert held.weights[i] == select_e2e_weight(rows[:i] + rows[i + 1 :])
    fixed = {w: held_out_errors(rows, weights=(w,)).errors for w in E2E_WEIGHTS}
    assert any(not np.allclose(fixed[E2E_WEIGHTS[0]], fixed[w]) for w in E2E_WEIGHTS[1:])  # the weight matters
    with pytest.raises(ValueError, match="e2e_weight"):
        fit_step_time(rows, e2e_weight=0.0)


def test_batch_efficiency_terms_halve_the_held_out_prefill_error() -> None:
    """The two log-batch terms (docs/model.md §17.9) against the five-term model (both forced to zero),
    each configuration left out in turn, e2e weight 1: the median held-out ``prompt_time`` error drops from
    about 15 % to about 6 %, and the worst interior ``e2e_time`` error over all groups from 10.5 % to 9.2 %."""

    def prefill_errors(fit: Callable[[tuple[TimingRow, ...]], StepTime]) -> tuple[list[float], list[float]]:
        pre, worst = [], []
        for group in GROUPS:
            rows = tuple(r for r in read_timings(SPLITWISE_TIMINGS, *group) if r.consistent)
            top = [max(getattr(r, k) for r in rows) for k in ("batch", "prompt", "tokens")]
            e2e = []
            for i, r in enumerate(rows):
                if any(getattr(r, k) == m for k, m in zip(("batch", "prompt", "tokens"), top)):
                    continue
                model = fit(rows[:i] + rows[i + 1 :])
                pre.append(abs(model(r.batch * r.prompt, r.batch * float(r.prompt) ** 2, 0, 0, r.batch) / r.prompt_time - 1))
                e2e.append(abs(static_batch_e2e(model, r.batch, r.prompt, r.tokens) / r.e2e_time - 1))
            worst.append(max(e2e))
        return pre, worst

    new_pre, new_worst = prefill_errors(fit_step_time)
    old_pre, old_worst = prefill_errors(lambda rows: fit_step_time(rows, batching=False))
    assert np.median(new_pre) < 0.6 * np.median(old_pre)
    assert np.median(old_pre) > 0.10 and np.median(new_pre) < 0.10
    assert max(new_worst) < max(old_worst) < 0.11


def test_the_engine_reproduces_its_static_batch_prediction() -> None:
    """b requests arriving together, no chunking: the scheduler's e2e equals the closed form (context
    counted from the first decode step) within 1 %, and the measured e2e within the held-out bound."""
    rows = [r for r in read_timings(SPLITWISE_TIMINGS, "llama2-70b", "h100-80gb", 8) if r.consistent]
    model = fit_step_time(rows)
    for r in rows:
        b = r.batch
        reqs = Requests([r.prompt] * b, [r.tokens] * b, [()] * b, [0] * b, 512, [[0.0] * b])
        node = BatchingNode(
            0,
            0,
            PrefixCache(10**8, 32, dynamic=False),
            reqs,
            lambda *a: None,
            model,
            token_budget=10**7,
            max_running=256,
            block_size=16,
            watermark=0.0,
            chunked=False,
        )
        node.arrive_many(list(range(b)), 0.0)
        node.advance(np.inf)
        e2e = max(reqs.finish)
        assert e2e == pytest.approx(static_batch_e2e(model, b, r.prompt, r.tokens), rel=0.01)
        assert abs(e2e - r.e2e_time) / r.e2e_time < 0.12


def test_lru_evicts_oldest_first_and_leaves_before_parents() -> None:
    events: list = []
    cache = PrefixCache(capacity=5, per_block=1, events=events)
    a = cache.store([1, 2, 3], 0.0)  # one prompt: root 1, leaf 3
    cache.release(a, 1.0)
    b = cache.store([4], 2.0)  # another branch
    cache.release(b, 3.0)
    assert list(cache.lru) == [3, 2, 1, 4]  # deepest first within one release, oldest release first
    held = cache.acquire([1, 2], cache.match([1, 2, 9]), 4.0)  # a hit touches 1 and 2
    cache.release(held, 5.0)
    assert list(cache.lru) == [3, 4, 2, 1]
    assert cache.make_room(2, 6.0)  # capacity 5, 4 cached: one eviction frees the room
    assert [e[2] for e in events if e[3] < 0] == [3]
    assert cache.make_room(4, 7.0)
    assert [e[2] for e in events if e[3] < 0] == [3, 4, 2]
    assert cache.match([1, 2]) == 1


def test_admission_never_evicts_the_requests_own_hit_blocks() -> None:
    """A request whose hit blocks are the oldest free blocks: making room for it evicts other free
    blocks, not its hit (which would leave a hit on blocks no longer cached and the cache's block
    count below what it holds)."""
    cache = PrefixCache(capacity=10, per_block=1)
    for blocks in ([1, 2], [7, 8]):
        cache.release(cache.store(blocks, 0.0), 0.0)  # LRU, oldest first: 2, 1, 8, 7
    reqs = Requests([160], [4], [(1, 2, 3, 4, 5, 6, 9, 10, 11, 12)], [10], 16, [[0.0]])
    node = BatchingNode(
        0,
        0,
        cache,
        reqs,
        lambda *a: None,
        StepTime(base=0.01),
        token_budget=1000,
        max_running=4,
        block_size=16,
        watermark=0.0,
        chunked=True,
    )
    node.arrive(0, 0.0)  # 8 own blocks, 6 free: two free blocks must go
    assert reqs.blocks_hit[0] == 2 and reqs.held[0] == [1, 2]
    assert set(cache.refs) == {1, 2} and not cache.lru and not cache.holds(7) and not cache.holds(8)
    assert cache.count == len(cache.refs) + len(cache.lru) and cache.free == 0


def test_referenced_blocks_are_never_evicted() -> None:
    cache = PrefixCache(capacity=2, per_block=1)
    held = cache.store([1, 2], 0.0)
    assert not cache.make_room(1, 1.0)
    cache.release(held, 2.0)
    assert cache.make_room(2, 3.0) and cache.cached == 0


@dataclass
class _Board:
    """A hand-built view: blocks held per node, waiting queues."""

    held: dict[int, set[int]]
    queue: dict[int, int] = field(default_factory=dict)
    length: int = 4 * 512

    def sync(self, now: float) -> None:
        pass

    def matched_blocks(self, x: int, seq) -> int:
        m = 0
        for b in seq:
            if b not in self.held.get(x, set()):
                break
            m += 1
        return m

    def hit_tokens(self, x: int, i: int) -> float:
        return float(min(self.matched_blocks(x, [1, 2, 3, 4]) * 512, self.length))

    def waiting(self, x: int, now: float) -> int:
        return self.queue.get(x, 0)


def _req(i: int = 0, blocks=(1, 2, 3, 4), now: float = 0.0) -> RouteRequest:
    return RouteRequest(i, now, 512 * len(blocks), blocks)


def test_sglang_cache_aware_rule() -> None:
    rng = np.random.default_rng(0)
    r = make_router("sglang")
    board = _Board({})
    for i in range(3):  # worker 0 receives (1, 2, 3, 4) in its approximate tree
        r.routed(_req(i), 0)
    assert r.choose(_req(9), [0, 1], board, rng) == 0  # balanced (3 vs 0 in flight), match 100 % > 0.3
    assert r.choose(_req(9, (7, 8, 9)), [0, 1], board, rng) == 1  # no match: the smaller tree
    for i in range(70):  # 73 vs 0 in flight: max − min > 64 and max > 1.5 min
        r.routed(_req(10 + i, (5,)), 0)
    assert r.choose(_req(99), [0, 1], board, rng) == 1  # imbalanced: shortest queue despite the match
    for i in range(73):
        r.finished(i, 0, 1.0)
    assert r.choose(_req(99), [0, 1], board, rng) == 0


def test_dynamo_cost_is_prefill_blocks_plus_active_blocks() -> None:
    rng = np.random.default_rng(0)
    r = make_router("dynamo")
    board = _Board({0: {1, 2, 3}, 1: set()})
    assert r.choose(_req(), [0, 1], board, rng) == 0  # costs 1 vs 4
    r.routed(_req(5, (9, 9, 9, 9)), 0)  # 4 active blocks on node 0: cost 5 vs 4
    assert r.choose(_req(), [0, 1], board, rng) == 1
    r.finished(5, 0, 1.0)
    assert r.choose(_req(), [0, 1], board, rng) == 0


def test_llmd_prefix_plus_load_scores() -> None:
    rng = np.random.default_rng(0)
    r = make_router("llm-d")
    # node 0: prefix 2/4 = 0.5, queue 64 → 0.25, total 0.75; node 1: prefix 0, empty queue 0.5
    assert r.choose(_req(), [0, 1], _Board({0: {1, 2}}, {0: 64}), rng) == 0
    # queue 128 or more: load score 0; 0.5 vs 0.5 + ... node 1 holds 1 block: 0.25 + 0.5
    assert r.choose(_req(), [0, 1], _Board({0: {1, 2}, 1: {1}}, {0: 200}), rng) == 1


def test_vllm_prefix_routes_to_its_own_longest_match() -> None:
    rng = np.random.default_rng(0)
    r = make_router("vllm-prefix")
    r.routed(_req(0, (1, 2)), 1)
    r.routed(_req(1, (1,)), 0)
    board = _Board({})
    assert all(r.choose(_req(), [0, 1], board, rng) == 1 for _ in range(10))  # no load signal at all


def test_vllm_kv_threshold() -> None:
    rng = np.random.default_rng(0)
    r = make_router("vllm-kv")
    board = _Board({0: {1}, 1: set()}, length=4 * 512)
    # 512 matched of 2,048: 1,536 left ≤ 2,000 → the holder
    assert r.choose(_req(), [0, 1], board, rng) == 0
    long = RouteRequest(0, 0.0, 10_000, (1, 2, 3, 4))
    board.length = 10_000
    r.routed(long, 0)  # node 0 has served one request in the window
    assert r.choose(long, [0, 1], board, rng) == 1  # 9,488 left > 2,000: fewest recent requests


def test_engine_section_round_trips_and_needs_timings() -> None:
    inst = load_instance("benchmarks/instances/mooncake_engine.toml")
    assert inst.engine == EngineSection(model="llama2-70b", hardware="a100-80gb", tensor_parallel=4)
    again = instance_from_mapping(instance_to_mapping(inst))
    assert again.engine == inst.engine
    data = instance_to_mapping(inst)
    del data["engine"]["timings"]
    with pytest.raises(ValueError, match="engine.timings"):
        instance_from_mapping(data)


@pytest.fixture(scope="module")
def small_trace():
    from edgeprefix.placement.pipeline.trace_workload import decode_per_token, load_trace_workload
    from edgeprefix.placement.simulation.engine.blocks import read_block_trace

    inst, wl = load_trace_workload(MOONCAKE_TRACE, load_instance("benchmarks/instances/mooncake_engine.toml"))
    blocks = read_block_trace(MOONCAKE_TRACE, inst)
    n = 1500
    return inst, wl.part(slice(0, n)), blocks.part(0, n), decode_per_token(inst, float(wl.output[:n].mean()))


@pytest.mark.parametrize("router", ["tier", "online"])
def test_slot_limit_reproduces_the_fcfs_slot_replay(small_trace, router: str) -> None:
    """SlotNode with the planned cache, through the engine loop: every TTFT equals the FCFS-slot replay's."""
    from edgeprefix.placement.simulation.engine.cluster import engine_replay
    from edgeprefix.placement.simulation.replay import ReplaySpec, replay

    inst, wl, blocks, d = small_trace
    spec = ReplaySpec(decode_per_token=d, nodes=12, router=router)
    a = replay(inst, wl, None, spec, seed=4)
    b = engine_replay(inst, wl, None, spec, blocks=blocks, seed=4)
    np.testing.assert_allclose(b.ttft, a.ttft, rtol=1e-9, atol=1e-9)
    assert abs(a.coverage() - b.coverage()) <= a.coverage_standard_error()


def test_slot_limit_reproduces_the_network_simulation_within_its_standard_errors() -> None:
    """The other half of the FCFS limit: the model workload on engine-loop slots (batch-independent
    service, no chunking, the planned cache, the tier rule) against the network simulator on the same
    instance and load (deterministic service, tier rule), 6 networks each: the coverages agree within
    3 combined standard errors (measured 0.739 ± 0.021 and 0.729 ± 0.013 at a third of
    ``paper_baseline``'s Λ, where the queues are stable)."""
    from edgeprefix.placement.model.evaluation import evaluate
    from edgeprefix.placement.model.telemetry import Telemetry
    from edgeprefix.placement.simulation.compare import analytical_router
    from edgeprefix.placement.simulation.engine.model_workload import engine_rows
    from edgeprefix.placement.simulation.layout import LayoutSpec
    from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network

    base = load_instance("benchmarks/instances/paper_baseline.toml")
    lam, tau, nodes, reps = base.network.request_intensity / 3, base.placement.target, 40.0, 6
    inst = base.with_network(request_intensity=lam)
    router = analytical_router(evaluate(inst))
    spec = SimulationSpec(horizon=200.0, warmup=60.0, service="deterministic", layout=LayoutSpec(mean_nodes=nodes, counts="exact"))
    net = np.array([np.mean(simulate_network(inst, None, router, spec, seed=r).ttft <= tau) for r in range(reps)])
    (row,) = engine_rows(
        inst,
        None,
        (lam,),
        step=None,
        engine="slots",
        cache="planned",
        router="tier",
        telemetry=Telemetry(),
        requests=8000,
        replications=reps,
        nodes=nodes,
        seed=11,
        tau=tau,
    )
    se = np.hypot(net.std(ddof=1) / np.sqrt(reps), row["coverage_engine_se"])
    assert 0 < se < 0.05  # both sides measured something, with a useful precision
    assert abs(row["coverage_engine"] - net.mean()) <= 3 * se


def test_batching_replay_with_lru_caches_hits_more_blocks_than_none(small_trace) -> None:
    """On the batching engine the dynamic cache finds blocks (conversation turns reuse their prefix),
    and a bad block size is refused with the field named."""
    from dataclasses import replace

    from edgeprefix.placement.simulation.engine.cluster import engine_replay
    from edgeprefix.placement.simulation.engine.step_time import step_time_from_section
    from edgeprefix.placement.simulation.replay import ReplaySpec

    inst, wl, blocks, d = small_trace
    step = step_time_from_section(inst.engine, SPLITWISE_TIMINGS)
    spec = ReplaySpec(decode_per_token=d, nodes=12, router="dynamo", engine="batching", cache="lru")
    res = engine_replay(inst, wl, None, spec, blocks=blocks, step=step, intensity=0.1, seed=1)
    s = res.summary()
    assert 0 < s["hit_rate_blocks"] < 1 and s["ttft_p50"] <= s["ttft_p90"] <= s["ttft_p99"]
    bad = inst.replace(engine=replace(inst.engine, block_size=48))
    with pytest.raises(ValueError, match="engine.block_size"):
        engine_replay(bad, wl, None, spec, blocks=blocks, step=step, seed=1)


def test_the_board_shows_loads_and_kv_events_as_old_as_the_telemetry() -> None:
    """A read at t sees the KV events and loads up to t − D (and, with a refresh period, at its last tick)."""
    from types import SimpleNamespace

    from edgeprefix.placement.model.telemetry import Telemetry
    from edgeprefix.placement.simulation.engine.board import Board

    node = SimpleNamespace(cache=PrefixCache(10, 1), profile=0, history_t=[0.0, 1.0, 2.0], history_n=[0, 3, 7], history_q=[0, 1, 4])
    events = [(1.0, 0, 5, 1), (2.0, 0, 6, 1), (3.0, 0, 5, -1)]
    board = Board([node], events, Telemetry(delay=1.0), [[0.0]], 512, [1024], [(5, 6)])
    board.sync(2.5)  # sees t = 1.5: block 5 stored, 6 not yet
    assert board.matched_blocks(0, (5, 6)) == 1 and board.in_system(0, 2.5) == 3 and board.waiting(0, 2.5) == 1
    board.sync(3.5)  # sees t = 2.5: both stored; the eviction at 3.0 is not seen yet (stale: routes to an evicted block)
    assert board.matched_blocks(0, (5, 6)) == 2 and board.in_system(0, 3.5) == 7
    board.sync(4.0)
    assert board.matched_blocks(0, (5, 6)) == 0
    ticks = Board([node], events, Telemetry(delay=0.0, refresh=2.0), [[0.0]], 512, [1024], [(5, 6)])
    assert ticks.in_system(0, 1.9) == 0 and ticks.in_system(0, 2.1) == 7


def _node(model, reqs, *, capacity=10**6, budget=512, chunked=True, max_running=256):
    return BatchingNode(
        0,
        0,
        PrefixCache(capacity, 32, dynamic=False),
        reqs,
        lambda *a: None,
        model,
        token_budget=budget,
        max_running=max_running,
        block_size=16,
        watermark=0.0,
        chunked=chunked,
    )


def test_chunked_prefill_keeps_decoding_while_a_long_prompt_is_split() -> None:
    from edgeprefix.placement.simulation.engine.step_time import StepTime

    model = StepTime(base=0.01, per_prefill_token=1e-4, per_sequence=1e-4)
    out = {}
    for chunked in (True, False):
        reqs = Requests([100, 4000], [200, 5], [(), ()], [0, 0], 512, [[0.0, 0.0]])
        node = _node(model, reqs, chunked=chunked)
        node.arrive(0, 0.0)
        node.advance(0.5)
        node.arrive(1, 0.5)
        node.advance(np.inf)
        out[chunked] = (reqs.finish[0], reqs.first_token[1])
        assert all(f < np.inf for f in reqs.finish)
    # the split prompt takes ⌈4000 / 511⌉ = 8 steps: its first token comes later, but the short request
    # is not stalled behind one 0.41 s step and its last token comes no later
    assert out[True][1] > out[False][1]
    assert out[True][0] <= out[False][0] + 1e-12


def test_a_full_cache_preempts_by_recompute_and_every_request_finishes() -> None:
    from edgeprefix.placement.simulation.engine.step_time import StepTime

    model = StepTime(base=0.01, per_prefill_token=1e-5, per_sequence=1e-4)
    n = 6
    reqs = Requests([160] * n, [400] * n, [()] * n, [0] * n, 512, [[0.0] * n])
    node = _node(model, reqs, capacity=110, budget=4096)  # 6 × 11 blocks fit, their growth to 35 each does not
    node.arrive_many(list(range(n)), 0.0)
    node.advance(np.inf)
    assert reqs.preemptions > 0
    assert all(f < np.inf for f in reqs.finish) and all(g == 400 for g in reqs.gen)
    assert node.cache.used == 0
