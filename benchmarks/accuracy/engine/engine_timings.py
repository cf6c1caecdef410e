"""The step-time fit's held-out error on the shipped Splitwise timings (docs/model.md §17.9).

Run: ``python -m edgeprefix.benchmarks.accuracy.engine.engine_timings``

For every model, hardware and tensor-parallel degree of ``benchmarks/data/splitwise_perf_model.csv``:
each consistent configuration is left out of the fit in turn and its measured ``e2e_time``
predicted by the batching engine itself (a static batch through :class:`~edgeprefix.placement.
simulation.engine.scheduler.BatchingNode`, no chunking).  Interior configurations are
interpolations, the ends of the sweeps (largest batch, prompt or output) extrapolations;
inconsistent rows (generation stopped early) are counted and left out.  Each fold's ``e2e_time``
weight is chosen by an inner leave-one-out on that fold's rows (nested; the left-out configuration
never takes part).  The last line repeats the check with the earlier protocol (repetitions averaged,
weight 1) in the same run, for comparison.
"""

from __future__ import annotations

import csv

import numpy as np

from edgeprefix.benchmarks.datasets import SPLITWISE_TIMINGS
from edgeprefix.placement.simulation.engine.kv_cache import PrefixCache
from edgeprefix.placement.simulation.engine.scheduler import BatchingNode, Requests
from edgeprefix.placement.simulation.engine.step_time import StepTime, TimingRow, held_out_errors, read_timings


def engine_e2e(model: StepTime, row: TimingRow) -> float:
    """End-to-end seconds of a static batch of ``row`` on one batching engine node."""
    b = row.batch
    reqs = Requests([row.prompt] * b, [row.tokens] * b, [()] * b, [0] * b, 512, [[0.0] * b])
    node = BatchingNode(
        0,
        0,
        PrefixCache(10**9, 32, dynamic=False),
        reqs,
        lambda *a: None,
        model,
        token_budget=10**8,
        max_running=10**4,
        block_size=16,
        watermark=0.0,
        chunked=False,
    )
    node.arrive_many(list(range(b)), 0.0)
    node.advance(float("inf"))
    return max(reqs.finish)


def main() -> None:
    with open(SPLITWISE_TIMINGS, encoding="utf-8") as handle:
        groups = sorted({(r["model"], r["hardware"], int(r["tensor_parallel"])) for r in csv.DictReader(handle)})
    print(
        "| model | hardware | TP | configurations (excluded) | interior: median / worst | worst at (b, p, t) | "
        "extrapolated: worst | e2e weights chosen |"
    )
    print("|---|---|---|---|---|---|---|---|")
    worst, interior, every, earlier = 0.0, [], [], []
    for g in groups:
        held = held_out_errors(read_timings(SPLITWISE_TIMINGS, *g), engine_e2e)
        e = held.errors[~held.boundary]
        interior.extend(e.tolist())
        every.extend(held.errors.tolist())
        worst = max(worst, held.worst)
        w = held.worst_row
        counts = ", ".join(f"{k:g}: {held.weights.count(k)}" for k in sorted(set(held.weights)))
        print(
            f"| {g[0]} | {g[1]} | {g[2]} | {len(held.rows)} ({len(held.excluded)}) | {np.median(e):.1%} / {held.worst:.1%} | "
            f"({w.batch}, {w.prompt}, {w.tokens}) | {held.worst_extrapolated:.1%} | {counts} |"
        )
        before = held_out_errors(read_timings(SPLITWISE_TIMINGS, *g, statistic="mean"), weights=(1.0,))
        earlier.extend(before.errors.tolist())
    print(f"\nall interior configurations: median {np.median(interior):.1%}, worst {worst:.1%} ({len(interior)} left out in turn)")
    print(f"every left-out configuration (interior and extrapolated): median {np.median(every):.1%}, worst {max(every):.1%} ({len(every)})")
    print(
        f"earlier protocol (repetition means, e2e weight 1; closed-form static batch): median {np.median(earlier):.1%}, "
        f"worst {max(earlier):.1%} ({len(earlier)})"
    )


if __name__ == "__main__":
    main()
