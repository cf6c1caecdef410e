"""Speed-up of the Dask grid over local workers (docs/distributed.md).

Run ``python -m benchmarks.sweep_speedup [--instance FILE] [--resolution K] [--workers 1,2,4]``.
It scores the 1/K lattice of the instance serially (the chunked reference) and then on a fresh
``LocalCluster`` per worker count, timing from the first task to the gathered ``Result``
(cluster start-up excluded, scattering the problem included).  Every Dask run must write the
serial ``history.csv`` byte for byte; the table reports wall time, speed-up over the serial run
(measured in the same run) and the 1-minute load average before and after, because the
machine is shared.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from edgeprefix.commands.solve import history_csv
from formulations.placement import placement_problem
from placement.instance import load_instance
from solvers.distributed import dask_client, grid_search

DEFAULT_INSTANCE = Path(__file__).parent / "instances" / "medium_forest.toml"


def _load() -> float:
    return os.getloadavg()[0]


def measure(instance: str, resolution: int, counts: Sequence[int], chunk: int) -> list[dict[str, float | int | str]]:
    """One row per run: ``workers`` (0: serial), ``seconds``, ``speedup``, ``load_before``, ``load_after``."""
    problem = placement_problem(load_instance(instance))
    names = problem.variable_names
    before = _load()
    start = time.perf_counter()
    serial = grid_search(problem, resolution=resolution, chunk=chunk)
    base = time.perf_counter() - start
    reference = history_csv(serial, names)
    rows: list[dict[str, float | int | str]] = [
        {"workers": 0, "points": serial.nfev, "seconds": base, "speedup": 1.0, "load_before": before, "load_after": _load()}
    ]
    for n in counts:
        with dask_client(workers=n) as client:
            client.run(lambda: None)  # every worker is up
            before = _load()
            start = time.perf_counter()
            result = grid_search(problem, resolution=resolution, chunk=chunk, client=client)
            seconds = time.perf_counter() - start
            after = _load()
        if history_csv(result, names) != reference:
            raise RuntimeError(f"the Dask run with {n} workers did not reproduce the serial history.csv")
        rows.append({"workers": n, "points": result.nfev, "seconds": seconds, "speedup": base / seconds,
                     "load_before": before, "load_after": after})
    return rows


def table(rows: Sequence[dict[str, float | int | str]]) -> str:
    lines = ["| workers | points | wall s | speed-up vs serial | load avg before → after |", "|---|---|---|---|---|"]
    for row in rows:
        label = "serial (chunked reference)" if row["workers"] == 0 else f"Dask LocalCluster × {row['workers']}"
        lines.append(f"| {label} | {row['points']} | {row['seconds']:.1f} | {row['speedup']:.2f} | "
                     f"{row['load_before']:.1f} → {row['load_after']:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sweep_speedup", description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default=str(DEFAULT_INSTANCE), help="instance file or embedded name (default: medium_forest)")
    parser.add_argument("--resolution", type=int, default=20, metavar="K", help="grid step 1/K (default: 20)")
    parser.add_argument("--chunk", type=int, default=64, metavar="N", help="lattice points per task (default: 64)")
    parser.add_argument("--workers", default="1,2,4", metavar="N,...", help="LocalCluster sizes (default: 1,2,4)")
    args = parser.parse_args(argv)
    counts = [int(v) for v in args.workers.split(",") if v.strip()]
    rows = measure(args.instance, args.resolution, counts, args.chunk)
    print(f"{os.cpu_count()} CPUs; instance {Path(args.instance).name}; 1/{args.resolution} lattice; chunks of {args.chunk}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
