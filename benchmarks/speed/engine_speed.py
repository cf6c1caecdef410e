"""How fast the engine room replays: 10⁵ requests on 50 batching-engine nodes.

Run: ``python -m edgeprefix.benchmarks.speed.engine_speed [--requests 100000] [--nodes 50] [--intensities 0.02,0.04,0.08]``

Data: the shipped Mooncake conversation trace tiled to ``--requests`` requests (copy ``c`` is
shifted by ``c`` trace spans in time and its block ids by ``c · 10⁹``, so copies share no
prefix: the same traffic, longer), replayed on ``benchmarks/instances/mooncake_engine.toml`` with the
batching engine, at each of ``--intensities`` (default: the three loads of the engine comparison).
Reports CPU seconds of this process (``time.process_time``: what the replay costs, whatever else
the machine runs) per row beside the FCFS-slot replay of the same requests at the same load,
measured in the same run (the reference), and the wall-clock seconds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE, SPLITWISE_TIMINGS
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.pipeline.trace_workload import TraceWorkload, decode_per_token, load_trace_workload
from edgeprefix.placement.simulation.engine.blocks import BlockTrace, read_block_trace
from edgeprefix.placement.simulation.engine.step_time import step_time_from_section
from edgeprefix.placement.simulation.replay import ReplaySpec
from edgeprefix.placement.simulation.replay_analysis import replay_replicated

INSTANCE = Path(__file__).resolve().parents[1] / "instances" / "mooncake_engine.toml"
OFFSET = 10**9


def tiled(workload: TraceWorkload, blocks: BlockTrace, n: int) -> tuple[TraceWorkload, BlockTrace]:
    """``n`` requests: copies of the trace one span apart, block ids disjoint between copies."""
    copies = -(-n // workload.requests)
    idx = np.tile(np.arange(workload.requests), copies)[:n]
    copy = np.repeat(np.arange(copies), workload.requests)[:n]
    wl = workload.repeated(copies).part(slice(0, n))
    seq = tuple(tuple(b + c * OFFSET for b in blocks.seq[i]) if c else blocks.seq[i] for i, c in zip(idx.tolist(), copy.tolist()))
    return wl, BlockTrace(seq, blocks.block_size, blocks.pinned)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--nodes", type=float, default=50)
    ap.add_argument("--intensities", default="0.02,0.04,0.08", help="request intensities Λ, comma-separated")
    args = ap.parse_args(argv)
    try:
        loads = [float(x) for x in args.intensities.split(",")]
    except ValueError:
        raise SystemExit(f"--intensities: comma-separated numbers, got {args.intensities!r}") from None
    inst, wl = load_trace_workload(MOONCAKE_TRACE, load_instance(INSTANCE))
    blocks = read_block_trace(MOONCAKE_TRACE, inst)
    wl, blocks = tiled(wl, blocks, args.requests)
    step = step_time_from_section(inst.engine, SPLITWISE_TIMINGS)
    d = decode_per_token(inst, float(wl.output.mean()))
    rows = (
        ("FCFS slots, planned, tier (reference)", "slots", "planned", "tier"),
        ("batching, planned, tier", "batching", "planned", "tier"),
        ("batching, planned, online", "batching", "planned", "online"),
        ("batching, lru, dynamo", "batching", "lru", "dynamo"),
        ("batching, planned+lru, sglang", "batching", "planned+lru", "sglang"),
    )
    print(f"{wl.requests} requests (Mooncake tiled), {args.nodes:g} nodes; CPU seconds (process time), ratio to the reference")
    print(f"{'Λ':>6}  {'row':<40}{'CPU s':>8}{'ratio':>7}{'wall s':>8}{'coverage':>10}{'preempt':>9}")
    for lam in loads:
        ref = None
        for name, engine, cache, router in rows:
            spec = ReplaySpec(decode_per_token=d, nodes=args.nodes, router=router, engine=engine, cache=cache)
            t0, w0 = time.process_time(), time.perf_counter()
            rep = replay_replicated(
                inst,
                wl,
                None,
                spec,
                intensity=lam,
                seed=3,
                engine={"blocks": blocks, "step": step} if engine == "batching" or cache != "planned" else None,
            )
            seconds, wall = time.process_time() - t0, time.perf_counter() - w0
            ref = seconds if ref is None else ref
            s = rep.summary()
            print(
                f"{lam:>6g}  {name:<40}{seconds:>8.1f}{seconds / ref:>7.1f}{wall:>8.1f}{s['coverage_replayed']:>10.3f}"
                f"{s['preemptions']:>9.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
