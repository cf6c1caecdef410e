"""Speed-up of the Dask grid over local workers (docs/distributed.md).

Run ``python -m edgeprefix.benchmarks.speed.sweep_speedup [--instance FILE] [--resolution K] [--workers 1,2,4]``.
It scores the 1/K lattice of the instance serially (the chunked reference) and on one
``LocalCluster`` per worker count, timing from the first task to the gathered ``Result``
(cluster start-up excluded, scattering the problem included).  The configurations are
interleaved ``--repeats`` times so that a burst of load from other jobs hits them alike; the
table reports the fastest and the median wall time, the speed-up of the fastest over the
fastest serial run, and the 1-minute load average over the whole measurement.  Every Dask run
must write the serial ``history.csv`` byte for byte.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.solvers.distributed import dask_client, grid_search
from edgeprefix.solvers.result import history_csv

DEFAULT_INSTANCE = Path(__file__).resolve().parents[1] / "instances" / "medium_forest.toml"


def _load() -> float:
    return os.getloadavg()[0]


def measure(instance: str, resolution: int, counts: Sequence[int], chunk: int, repeats: int) -> list[dict[str, float]]:
    """One row per configuration: ``workers`` (0: serial), ``points``, ``best``/``median`` seconds, ``speedup``, load."""
    problem = placement_problem(load_instance(instance))
    names = problem.variable_names
    times: dict[int, list[float]] = {n: [] for n in (0, *counts)}
    loads = [_load()]
    reference, points = None, 0
    with contextlib.ExitStack() as stack:
        clients = {n: stack.enter_context(dask_client(workers=n)) for n in counts}
        for client in clients.values():
            client.run(lambda: None)  # every worker is up
        for _ in range(repeats):
            for n, spent in times.items():
                start = time.perf_counter()
                result = grid_search(problem, resolution=resolution, chunk=chunk, client=clients.get(n))
                spent.append(time.perf_counter() - start)
                loads.append(_load())
                text = history_csv(result, names)
                reference, points = reference or text, result.nfev
                if text != reference:
                    raise RuntimeError(f"the run with {n} Dask workers did not reproduce the serial history.csv")
    base = min(times[0])
    return [
        {
            "workers": n,
            "points": points,
            "best": min(t),
            "median": statistics.median(t),
            "speedup": base / min(t),
            "load_min": min(loads),
            "load_max": max(loads),
        }
        for n, t in times.items()
    ]


def table(rows: Sequence[dict[str, float]]) -> str:
    lines = ["| workers | points | fastest s | median s | speed-up (fastest) | load avg during |", "|---|---|---|---|---|---|"]
    for row in rows:
        label = "serial (chunked reference)" if row["workers"] == 0 else f"Dask LocalCluster × {row['workers']:g}"
        lines.append(
            f"| {label} | {row['points']:g} | {row['best']:.1f} | {row['median']:.1f} | {row['speedup']:.2f} | "
            f"{row['load_min']:.1f}–{row['load_max']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.sweep_speedup", description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default=str(DEFAULT_INSTANCE), help="instance file or embedded name (default: medium_forest)")
    parser.add_argument("--resolution", type=int, default=20, metavar="K", help="grid step 1/K (default: 20)")
    parser.add_argument("--chunk", type=int, default=64, metavar="N", help="lattice points per task (default: 64)")
    parser.add_argument("--workers", default="1,2,4", metavar="N,...", help="LocalCluster sizes (default: 1,2,4)")
    parser.add_argument("--repeats", type=int, default=3, metavar="R", help="interleaved repetitions (default: 3)")
    args = parser.parse_args(argv)
    counts = [int(v) for v in args.workers.split(",") if v.strip()]
    rows = measure(args.instance, args.resolution, counts, args.chunk, args.repeats)
    print(
        f"{os.cpu_count()} CPUs; instance {Path(args.instance).name}; 1/{args.resolution} lattice; chunks of {args.chunk}; "
        f"{args.repeats} interleaved repeats"
    )
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
