"""Planned placement vs what operators run: LRU caches with production routers, on batching engines.

Run: ``python -m edgeprefix.benchmarks.engine_comparison [--requests N] [--replications R] [--nodes N]``
(defaults: the reduced size of benchmarks/README.md; ``--requests 12031 --replications 5`` for the full trace).

Data: the shipped Mooncake conversation trace, replayed on ``examples/mooncake_engine.toml``
(the trace-built instance with a Llama-2-70B A100 TP4 engine, step time fitted to the shipped
Splitwise timings).  Every row runs on the batching engine with the same networks, locations
and arrivals (common random numbers); rows differ in cache and router only.  Loads are the
request intensity Λ per unit area; means ± standard errors over replications.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE, SPLITWISE_TIMINGS
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.pipeline.trace_workload import decode_per_token, load_trace_workload
from edgeprefix.placement.simulation.engine.blocks import read_block_trace
from edgeprefix.placement.simulation.engine.step_time import step_time_from_section
from edgeprefix.placement.simulation.replay import ReplaySpec
from edgeprefix.placement.simulation.replay_analysis import replay_replicated

INSTANCE = Path(__file__).resolve().parents[1] / "examples" / "mooncake_engine.toml"
ROWS = (
    ("planned + online", "planned", "online"),
    ("planned+lru + online", "planned+lru", "online"),
    ("lru + online", "lru", "online"),
    ("lru + sglang", "lru", "sglang"),
    ("lru + dynamo", "lru", "dynamo"),
    ("lru + llm-d", "lru", "llm-d"),
    ("lru + vllm-prefix", "lru", "vllm-prefix"),
    ("lru + vllm-kv", "lru", "vllm-kv"),
)
LOADS = (0.05, 0.1, 0.2)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--replications", type=int, default=3)
    ap.add_argument("--nodes", type=float, default=12)
    args = ap.parse_args(argv)
    inst, wl = load_trace_workload(MOONCAKE_TRACE, load_instance(INSTANCE))
    blocks = read_block_trace(MOONCAKE_TRACE, inst)
    n = min(args.requests, wl.requests)
    wl, blocks = wl.part(slice(0, n)), blocks.part(0, n)
    step = step_time_from_section(inst.engine, SPLITWISE_TIMINGS)
    d = decode_per_token(inst, float(wl.output.mean()))
    print(f"Mooncake trace, first {n} requests, {args.nodes:g} nodes, {args.replications} replications, batching engine")
    header = f"{'row':<24}{'Λ':>6}{'coverage':>16}{'TTFT p50':>10}{'TTFT p99':>10}{'hit blocks':>11}{'load CV':>9}{'preempt':>8}{'vs planned':>11}"
    print(header)
    results = {}
    t0 = time.perf_counter()
    for lam in LOADS:
        base = None
        for name, cache, router in ROWS:
            spec = ReplaySpec(decode_per_token=d, nodes=args.nodes, router=router, engine="batching", cache=cache)
            rep = replay_replicated(inst, wl, None, spec, intensity=lam, replications=args.replications, seed=7,
                                    engine={"blocks": blocks, "step": step})
            rows = [r.summary() for r in rep.results]
            cov = np.array([r["coverage_replayed"] for r in rows])
            mean = {k: float(np.mean([r[k] for r in rows])) for k in ("ttft_p50", "ttft_p99", "hit_rate_blocks",
                                                                         "node_load_cv", "preemptions")}
            se = cov.std(ddof=1) / np.sqrt(cov.size) if cov.size > 1 else float("nan")
            base = cov.mean() if base is None else base
            ratio = cov.mean() / base if base > 0 else float("nan")
            results[(lam, name)] = (cov.mean(), se, mean)
            print(f"{name:<24}{lam:>6.2f}{cov.mean():>9.3f} ± {se:.3f}{mean['ttft_p50']:>10.2f}{mean['ttft_p99']:>10.1f}"
                  f"{mean['hit_rate_blocks']:>11.3f}{mean['node_load_cv']:>9.3f}{mean['preemptions']:>8.0f}{ratio:>11.2f}")
    print(f"wall time {time.perf_counter() - t0:.0f} s")
    _plot(results, Path(__file__).resolve().parent / "figures" / "engine_comparison.png")


def _plot(results, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from edgeprefix.placement.atomic import atomic_write_bytes

    fig, ax = plt.subplots(figsize=(7, 3.6))
    for name, _, _ in ROWS:
        xs = [lam for lam in LOADS]
        ys = [results[(lam, name)][0] for lam in LOADS]
        es = [results[(lam, name)][1] for lam in LOADS]
        ax.errorbar(xs, ys, yerr=es, marker="o", capsize=3, label=name)
    ax.set_xlabel("request intensity Λ")
    ax.set_ylabel("TTFT coverage P(T ≤ τ)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    atomic_write_bytes(path, buffer.getvalue())


if __name__ == "__main__":
    main()
