"""Guard for speed work on the engine room: replays stay bit-for-bit what they were (docs/model.md §17.9).

The reference digests below were produced by the engine-room code as merged on main at 32f7478
(before any speed work), by running exactly this replay and hashing its per-request TTFTs
rounded to 1e-9 s.  A speed-up (vectorised prefix matching, other cache bookkeeping) must
reproduce them: same seed, same routing decisions, same step times.  A change that is meant
to alter results must say so and regenerate them.

The step time gained two log-batch terms after that (docs/model.md §17.9), which changes the
replays on purpose: ``REFERENCE`` is replayed with the five-term fit (``batching=False``, the
model of 32f7478, bit for bit), ``REFERENCE_BATCHING`` with the seven-term fit the engine uses
now (digests produced by the code that introduced it, before any later speed work).

Both were regenerated once more for a bug fix: admission made room by evicting free blocks
oldest first, which could evict the admitted request's own hit blocks (a hit on blocks no longer
cached, and the cache's block count below what it held).  It changed the three LRU rows whose
nodes filled up (lru + dynamo, planned+lru + sglang, lru + llm-d); the other digests are the
earlier ones (tests/test_engine.py::test_admission_never_evicts_the_requests_own_hit_blocks).

The engine's fit then moved to repetition medians and an ``e2e_time`` weight chosen by
leave-one-out (docs/model.md §17.9), which changes its step times once more.  This guard is about
the event loop, not the coefficients, so both step times here stay the earlier fits (repetition
means, weight 1: ``read_timings(..., statistic="mean")`` and ``fit_step_time``'s defaults) and the
digests stand.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE, SPLITWISE_TIMINGS
from edgeprefix.benchmarks.speed import engine_speed
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.pipeline.trace_workload import decode_per_token, load_trace_workload
from edgeprefix.placement.simulation.engine.blocks import read_block_trace
from edgeprefix.placement.simulation.engine.step_time import fit_step_time, read_timings
from edgeprefix.placement.simulation.replay import ReplaySpec
from edgeprefix.placement.simulation.replay_analysis import replay_replicated

REFERENCE = (  # (engine, cache, router, sha256 of the rounded per-request TTFTs) from the pre-change code
    ("batching", "planned", "online", "1730deaeaebb9e3f2ffc7429bc8eac841f3212dead96c5ca05de1beb0ae6b095"),
    ("batching", "lru", "dynamo", "d26348948592bc458f2007f435d2bfc03fdfbb1d936e04fa2604617f9be2cd2e"),
    ("batching", "planned+lru", "sglang", "2a1edf95b0b9c7ddd226ec23b2cdf4d1886dd352ee2d1412efb25b142f36796e"),
    ("batching", "lru", "llm-d", "5dc13709e99adc8673e9b573ebc284e43729ba8aabb9ad91d67479fffc8056ac"),
    ("batching", "lru", "vllm-prefix", "b9bec9b9fd4455f10840994bf09838f4bc7c755cc4b07699e5c02a9395c70c12"),
    ("batching", "planned+lru", "vllm-kv", "6f4a8b5c5ab90fa26818a960d4bbddb21464fc60a9444914b452ba1b523b8c7e"),
    ("slots", "lru", "dynamo", "055ad29cdce8b157e0c2c378dd13b325b13c6a5a4f9b4b4966c86bc13022537b"),
)

REFERENCE_BATCHING = (  # the same with the seven-term step time (the engine's fit since the log-batch terms)
    ("batching", "planned", "online", "c84603ecfd122130f6fc4d75ad3b164af34102826714b99d78a64df903f7d5a8"),
    ("batching", "lru", "dynamo", "e68e394bdcaf4103904f5e0f51a117b9f35889700bb7a22ca479df5c0ac38069"),
    ("batching", "planned+lru", "sglang", "8a24fe82ea76d38e16f55abcb8b3eec44ba6e464f448ffef800471425613cb9b"),
    ("batching", "lru", "llm-d", "c8ec90584920dff4c48a78ae953d7bb9884d024170b77362a2e4db4316bfdbd1"),
    ("batching", "lru", "vllm-prefix", "27e4424554d19f2ec95fbf09748679b044243278b306b638629eeab07e63ace2"),
    ("batching", "planned+lru", "vllm-kv", "2afcc9146aa18182a8c41ce409b0f81068583c6fd31913e0fbc90cacc6d37229"),
)


@pytest.fixture(scope="module")
def trace():
    inst, wl = load_trace_workload(MOONCAKE_TRACE, load_instance(engine_speed.INSTANCE))
    blocks = read_block_trace(MOONCAKE_TRACE, inst)
    wl, blocks = engine_speed.tiled(wl, blocks, 1200)
    e = inst.engine
    rows = [r for r in read_timings(SPLITWISE_TIMINGS, e.model, e.hardware, e.tensor_parallel, statistic="mean") if r.consistent]
    steps = {True: fit_step_time(rows), False: fit_step_time(rows, batching=False)}
    return inst, wl, blocks, steps, decode_per_token(inst, float(wl.output.mean()))


def _digest(trace, engine: str, cache: str, router: str, batching: bool) -> str:
    inst, wl, blocks, steps, d = trace
    spec = ReplaySpec(decode_per_token=d, nodes=8, router=router, engine=engine, cache=cache)
    r = replay_replicated(inst, wl, None, spec, intensity=0.05, seed=3, engine={"blocks": blocks, "step": steps[batching]}).results[0]
    ttft = np.asarray(r.ttft)
    assert np.isfinite(ttft).sum() > 0.5 * ttft.size  # the replay served requests: the digest covers real values
    return hashlib.sha256(np.round(ttft, 9).tobytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "cache", "router", "digest"), REFERENCE_BATCHING)
def test_replay_ttfts_match_the_seven_term_reference(trace, engine: str, cache: str, router: str, digest: str) -> None:
    assert _digest(trace, engine, cache, router, True) == digest


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "cache", "router", "digest"), REFERENCE)
def test_replay_ttfts_match_the_pre_optimisation_code(trace, engine: str, cache: str, router: str, digest: str) -> None:
    assert _digest(trace, engine, cache, router, False) == digest
