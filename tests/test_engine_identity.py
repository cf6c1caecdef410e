"""Guard for speed work on the engine room: replays stay bit-for-bit what they were (docs/model.md §17.9).

The reference digests below were produced by the engine-room code as merged on main at 32f7478
(before any speed work), by running exactly this replay and hashing its per-request TTFTs
rounded to 1e-9 s.  A speed-up (vectorised prefix matching, other cache bookkeeping) must
reproduce them: same seed, same routing decisions, same step times.  A change that is meant
to alter results must say so and regenerate them.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from edgeprefix.benchmarks import engine_speed
from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE, SPLITWISE_TIMINGS
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.pipeline.trace_workload import decode_per_token, load_trace_workload
from edgeprefix.placement.simulation.engine.blocks import read_block_trace
from edgeprefix.placement.simulation.engine.step_time import step_time_from_section
from edgeprefix.placement.simulation.replay import ReplaySpec
from edgeprefix.placement.simulation.replay_analysis import replay_replicated

REFERENCE = (  # (engine, cache, router, sha256 of the rounded per-request TTFTs) from the pre-change code
    ("batching", "planned", "online", "1730deaeaebb9e3f2ffc7429bc8eac841f3212dead96c5ca05de1beb0ae6b095"),
    ("batching", "lru", "dynamo", "b10a878dd752276d2f4175f01a3d14673b1fb20f571d6ffe11073cf2c7d5ce0b"),
    ("batching", "planned+lru", "sglang", "f2fb24e9b25bd1e88f16cadc5afc426692b062f4bffdb7c35b0131be60f973e6"),
    ("batching", "lru", "llm-d", "92eb8d16d8160ca8a079e983e034e6c1a3aa3687fe24ba7e8ebc98dd445b117b"),
    ("batching", "lru", "vllm-prefix", "b9bec9b9fd4455f10840994bf09838f4bc7c755cc4b07699e5c02a9395c70c12"),
    ("batching", "planned+lru", "vllm-kv", "6f4a8b5c5ab90fa26818a960d4bbddb21464fc60a9444914b452ba1b523b8c7e"),
    ("slots", "lru", "dynamo", "055ad29cdce8b157e0c2c378dd13b325b13c6a5a4f9b4b4966c86bc13022537b"),
)


@pytest.fixture(scope="module")
def trace():
    inst, wl = load_trace_workload(MOONCAKE_TRACE, load_instance(engine_speed.INSTANCE))
    blocks = read_block_trace(MOONCAKE_TRACE, inst)
    wl, blocks = engine_speed.tiled(wl, blocks, 1200)
    return inst, wl, blocks, step_time_from_section(inst.engine, SPLITWISE_TIMINGS), decode_per_token(inst, float(wl.output.mean()))


@pytest.mark.slow
@pytest.mark.parametrize(("engine", "cache", "router", "digest"), REFERENCE)
def test_replay_ttfts_match_the_pre_optimisation_code(trace, engine: str, cache: str, router: str, digest: str) -> None:
    inst, wl, blocks, step, d = trace
    spec = ReplaySpec(decode_per_token=d, nodes=8, router=router, engine=engine, cache=cache)
    r = replay_replicated(inst, wl, None, spec, intensity=0.05, seed=3, engine={"blocks": blocks, "step": step}).results[0]
    ttft = np.asarray(r.ttft)
    assert np.isfinite(ttft).sum() > 0.5 * ttft.size  # the replay served requests: the digest covers real values
    assert hashlib.sha256(np.round(ttft, 9).tobytes()).hexdigest() == digest
