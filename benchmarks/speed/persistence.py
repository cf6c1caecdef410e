"""What keeping results costs, and what parallel modes cost on a small machine.

Wall time of whole ``edgeprefix`` commands (fresh processes, start-up included), repeats
interleaved so that a change of machine load hits every variant alike:

* persistence: ``solve --method tpe`` with nothing written, with ``--out DIR`` (batched journal
  study + output set, the PNG drawn in the solving process), and with ``--storage FILE.db``
  (Optuna's SQLite storage written trial by trial, what a plain Optuna user would pick); ratios
  to the run that writes nothing, of the medians and of the fastest runs, and the CPU seconds of
  each command: on a machine whose cores are all busy, wall time follows CPU time;
* parallel modes: ``solve --method grid --workers 2`` and a default ``sweep`` (both now pick the
  serial path on two cores or for short work) against ``--serial``/no workers, and the forced
  cluster (``--dask`` a LocalCluster started beforehand is not included: cluster start-up is
  what the automatic choice saves).

    python -m edgeprefix.benchmarks.speed.persistence [--budget 100] [--repeats 3] [--tables persistence,parallel] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from edgeprefix.placement.atomic import atomic_write_text

# the SQLite study as it was opened before solvers/storage.py chose the write-ahead log: SQLite's default
# rollback journal, synced at every commit (the reference of the per-trial cost, benchmarks/README.md)
ROLLBACK_JOURNAL = (
    "import sys; import edgeprefix.solvers.storage as s; s.sqlite_engine = lambda url: {}; "
    "from edgeprefix.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _run(argv: Sequence[str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, with the command's own child processes) of one command;
    ``argv`` starting with ``-c`` is a Python program, else arguments of ``edgeprefix``."""
    command = [sys.executable, *argv] if argv[0] == "-c" else [sys.executable, "-m", "edgeprefix.cli", *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()[:300]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(variants: dict[str, list[str]], repeats: int, cpu: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Wall seconds of every variant, ``repeats`` rounds interleaved (each run in a new temporary
    folder); the CPU seconds go to ``cpu`` when given."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        for name, argv in variants.items():
            with tempfile.TemporaryDirectory() as folder:
                wall, used = _run(argv, folder)
            times[name].append(wall)
            if cpu is not None:
                cpu.setdefault(name, []).append(used)
    return times


def table(title: str, times: dict[str, list[float]], reference: str, cpu: dict[str, list[float]] | None = None) -> str:
    ref, ref_min = statistics.median(times[reference]), min(times[reference])
    head = "| variant | median s | min s | ratio (median) | ratio (min) |" + (" CPU median s | CPU ratio |" if cpu else "")
    lines = [f"## {title}", "", head, "|" + "---|" * (head.count("|") - 1)]
    for name, values in times.items():
        med = statistics.median(values)
        row = f"| {name} | {med:.2f} | {min(values):.2f} | {med / ref:.2f} | {min(values) / ref_min:.2f} |"
        if cpu:
            used = statistics.median(cpu[name])
            row += f" {used:.2f} | {used / statistics.median(cpu[reference]):.2f} |"
        lines.append(row)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.persistence", description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=100, help="TPE evaluations (default: 100)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default: 3)")
    parser.add_argument("--tables", default="persistence,parallel", help="which tables to measure (default: both)")
    parser.add_argument("--out", default=None, metavar="DIR", help="write persistence.json here")
    args = parser.parse_args(argv)
    tables = {t.strip() for t in args.tables.split(",") if t.strip()}
    if not tables or tables - {"persistence", "parallel"}:
        parser.error(f"--tables: name persistence, parallel or both, got {args.tables!r}")
    budget = str(args.budget)
    tpe = ["solve", "--method", "tpe", "--budget", budget, "--json"]
    start_load = os.getloadavg()[0]
    cpu: dict[str, list[float]] = {}
    persistence = (
        {}
        if "persistence" not in tables
        else measure(
            {
                "nothing written (reference)": tpe,
                "--out DIR (batched journal + output set)": [*tpe, "--out", "run"],
                "--storage study.db (SQLite, trial by trial)": [*tpe, "--storage", "study.db"],
                "--storage study.db, rollback journal (before: every commit synced)": [
                    "-c",
                    ROLLBACK_JOURNAL,
                    *tpe,
                    "--storage",
                    "study.db",
                ],
            },
            args.repeats,
            cpu,
        )
    )
    grid = ["solve", "--method", "grid", "--json"]
    sweep = ["sweep", "paper_baseline", "--loads", "1,2,3", "--densities", "0.5,1", "--resolution", "10"]
    parallel = (
        {}
        if "parallel" not in tables
        else measure(
            {
                "grid, no workers (reference)": grid,
                "grid --workers 2 (automatic)": [*grid, "--workers", "2"],
                "sweep --serial": [*sweep, "--serial"],
                "sweep default (automatic)": sweep,
                "sweep --workers 2 (automatic)": [*sweep, "--workers", "2"],
            },
            args.repeats,
        )
    )
    load = os.getloadavg()[0]
    print(f"load average (1 min) at the start: {start_load:.2f}, at the end: {load:.2f}; cores: {os.cpu_count()}\n")
    if persistence:
        print(table(f"solve --method tpe --budget {budget}", persistence, "nothing written (reference)", cpu), end="\n\n")
    if parallel:
        print(table("parallel modes", parallel, "grid, no workers (reference)"))
    if args.out is not None:
        payload = {
            "persistence": persistence,
            "persistence_cpu": cpu,
            "parallel": parallel,
            "load_average": load,
            "load_average_start": start_load,
            "budget": args.budget,
        }
        atomic_write_text(Path(args.out) / "persistence.json", json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
