"""What keeping results costs, and what parallel modes cost on a small machine.

Wall time of whole ``edgeprefix`` commands (fresh processes, start-up included), repeats
interleaved so that a change of machine load hits every variant alike:

* persistence: ``solve --method tpe`` with nothing written, with ``--out DIR`` (batched journal
  study + output set) and with ``--storage FILE.db`` (Optuna's SQLite storage written trial by
  trial, what a plain Optuna user would pick); ratio to the run that writes nothing;
* parallel modes: ``solve --method grid --workers 2`` and a default ``sweep`` (both now pick the
  serial path on two cores or for short work) against ``--serial``/no workers, and the forced
  cluster (``--dask`` a LocalCluster started beforehand is not included: cluster start-up is
  what the automatic choice saves).

    python -m edgeprefix.benchmarks.persistence [--budget 100] [--repeats 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from edgeprefix.placement.atomic import atomic_write_text


def _wall(argv: Sequence[str], cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "edgeprefix.cli", *argv], cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()[:300]}")
    return time.perf_counter() - start


def measure(variants: dict[str, list[str]], repeats: int, fresh: bool = True) -> dict[str, list[float]]:
    """Wall seconds of every variant, ``repeats`` rounds interleaved (each run in a new temporary folder)."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, argv in variants.items():
            with tempfile.TemporaryDirectory() as folder:
                times[name].append(_wall(argv, folder))
    return times


def table(title: str, times: dict[str, list[float]], reference: str) -> str:
    ref = statistics.median(times[reference])
    lines = [f"## {title}", "", "| variant | median s | min s | ratio to reference |", "|---|---|---|---|"]
    for name, values in times.items():
        med = statistics.median(values)
        lines.append(f"| {name} | {med:.2f} | {min(values):.2f} | {med / ref:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.persistence", description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=100, help="TPE evaluations (default: 100)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default: 3)")
    parser.add_argument("--out", default=None, metavar="DIR", help="write persistence.json here")
    args = parser.parse_args(argv)
    budget = str(args.budget)
    tpe = ["solve", "--method", "tpe", "--budget", budget, "--json"]
    persistence = measure({
        "nothing written (reference)": tpe,
        "--out DIR (batched journal + output set)": [*tpe, "--out", "run"],
        "--storage study.db (SQLite, trial by trial)": [*tpe, "--storage", "study.db"],
    }, args.repeats)
    grid = ["solve", "--method", "grid", "--json"]
    sweep = ["sweep", "paper_baseline", "--loads", "1,2,3", "--densities", "0.5,1", "--resolution", "10"]
    parallel = measure({
        "grid, no workers (reference)": grid,
        "grid --workers 2 (automatic)": [*grid, "--workers", "2"],
        "sweep --serial": [*sweep, "--serial"],
        "sweep default (automatic)": sweep,
        "sweep --workers 2 (automatic)": [*sweep, "--workers", "2"],
    }, args.repeats)
    load = os.getloadavg()[0]
    print(f"load average (1 min) at the end: {load:.2f}; cores: {os.cpu_count()}\n")
    print(table(f"solve --method tpe --budget {budget}", persistence, "nothing written (reference)"))
    print()
    print(table("parallel modes", parallel, "grid, no workers (reference)"))
    if args.out is not None:
        payload = {"persistence": persistence, "parallel": parallel, "load_average": load, "budget": args.budget}
        atomic_write_text(Path(args.out) / "persistence.json", json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
