"""Does ``--workers 2`` pay on this machine, and does it step aside when it cannot?

Wall time of whole ``edgeprefix solve`` commands (fresh processes, start-up included; the
variants of one table interleaved in each round, so a change of machine load hits them alike):
the issue's cases, TPE with 40 evaluations and the default 1/20 grid, each serially and with
``--workers 2`` (which now probes the cost of warm evaluations and runs in this process when the
workers cannot win back their start-up and storage work).  TPE ``--workers`` needs a study
storage: its serial references are the run without one and the run on the same SQLite file.

    python -m edgeprefix.benchmarks.speed.workers_pay [--budget 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from edgeprefix.benchmarks.speed.persistence import measure, table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.workers_pay", description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=40, help="TPE evaluations (default: 40)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (default: 3)")
    args = parser.parse_args(argv)
    tpe = ["solve", "--method", "tpe", "--budget", str(args.budget), "--json"]
    grid = ["solve", "--method", "grid", "--json"]
    start = os.getloadavg()[0]
    study = measure(
        {
            "tpe, serial, no storage (reference)": tpe,
            "tpe --storage study.db, serial": [*tpe, "--storage", "study.db"],
            "tpe --workers 2 --storage study.db (automatic)": [*tpe, "--workers", "2", "--storage", "study.db"],
        },
        args.repeats,
    )
    lattice = measure(
        {
            "grid, serial (reference)": grid,
            "grid --workers 2 (automatic)": [*grid, "--workers", "2"],
        },
        args.repeats,
    )
    print(f"load average (1 min) at the start: {start:.2f}, at the end: {os.getloadavg()[0]:.2f}; cores: {os.cpu_count()}\n")
    print(table(f"solve --method tpe --budget {args.budget}", study, "tpe, serial, no storage (reference)"), end="\n\n")
    print(table("solve --method grid (1/20 lattice)", lattice, "grid, serial (reference)"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
