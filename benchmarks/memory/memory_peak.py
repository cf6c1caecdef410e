"""Peak memory of an evaluation report against the instance size (docs/model.md §16).

Run ``python -m edgeprefix.benchmarks.memory.memory_peak [--quick | --smoke] [--out DIR]``.  Each row runs,
in a fresh child process, what ``edgeprefix evaluate INSTANCE --json`` does — load the instance,
evaluate its default mix, build the JSON report (``Evaluation.to_dict``: coverage, queue-free
bound, mean TTFT, mean distance per pair …) and serialise it — on a seeded
:func:`edgeprefix.benchmarks.workloads.synthetic.synthetic_instance` with ``|S|`` profiles and ``|Q|`` types,
and reads the child's peak resident set size (``ru_maxrss`` from ``os.wait4``) and wall time.
Each size runs with the spatial kernel in blocks of types (the package's default) and, where
the estimate fits ``--one-block-limit``, as one block (the memory use before blocks existed).
A child that only imports the package and loads the instance gives the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from edgeprefix.placement.atomic import atomic_write_text

CHILD = """
import json, sys
from edgeprefix.placement.model import spatial
from edgeprefix.placement.model.instance import load_instance
path, block, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
spatial.BLOCK_ELEMENTS = block
instance = load_instance(path)
if work == "report":
    from edgeprefix.placement.model.evaluation import evaluate
    sys.stdout.write(json.dumps(evaluate(instance).to_dict())[:0])
"""
GOAL_BYTES = 1 << 30  # 1 GB at 200 profiles × 300 types


@dataclass(frozen=True)
class MemoryRow:
    profiles: int
    types: int
    alpha: float
    mode: str  # "blocks", "one block" or "import + load"
    peak_mb: float
    seconds: float


def run_child(path: Path, block: int, work: str) -> tuple[float, float]:
    """Peak RSS (MB) and wall seconds of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(block), work], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"the child evaluating {path} exited with {proc.returncode}")
    return usage.ru_maxrss / 1024.0, time.perf_counter() - start  # ru_maxrss is in KiB on Linux


def one_block_estimate(profiles: int, types: int, alpha: float) -> float:
    """Bytes of one (S, Q, S·N) work array of the moments without blocks (N nodes per segment)."""
    nodes = 20 if alpha <= 2.5 else 32
    return 8.0 * profiles * types * profiles * nodes


def measure(sizes: list[tuple[int, int, float]], one_block_limit: float) -> list[MemoryRow]:
    from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
    from edgeprefix.placement.model.instance import write_instance
    from edgeprefix.placement.model.spatial import BLOCK_ELEMENTS

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for profiles, types, alpha in sizes:
            path = Path(folder) / f"synthetic_{profiles}x{types}_{alpha}.toml"
            write_instance(synthetic_instance(types, profiles, alpha=alpha, seed=0), path)
            floor, seconds = run_child(path, BLOCK_ELEMENTS, "load")
            rows.append(MemoryRow(profiles, types, alpha, "import + load", floor, seconds))
            peak, seconds = run_child(path, BLOCK_ELEMENTS, "report")
            rows.append(MemoryRow(profiles, types, alpha, "blocks", peak, seconds))
            if one_block_estimate(profiles, types, alpha) <= one_block_limit:
                peak, seconds = run_child(path, 1 << 62, "report")
                rows.append(MemoryRow(profiles, types, alpha, "one block", peak, seconds))
    return rows


def render(rows: list[MemoryRow]) -> str:
    lines = [
        f"load average {[round(v, 2) for v in os.getloadavg()]}",
        f"{'|S|':>5}{'|Q|':>5}{'α':>5}  {'mode':<15}{'peak MB':>9}{'seconds':>9}",
    ]
    for r in rows:
        lines.append(f"{r.profiles:>5}{r.types:>5}{r.alpha:>5.1f}  {r.mode:<15}{r.peak_mb:>9.0f}{r.seconds:>9.1f}")
    lines.append(f"goal: ≤ {GOAL_BYTES / 2**20:.0f} MB at 200 × 300")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.memory.memory_peak", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 100 × 150")
    parser.add_argument("--smoke", action="store_true", help="one tiny size (for the tests)")
    parser.add_argument(
        "--one-block-limit",
        type=float,
        default=5e8,
        metavar="BYTES",
        help="run the one-block comparison while one work array is at most this big (default 5e8: up to 100 × 150)",
    )
    parser.add_argument("--out", default=None, help="folder for memory_peak.json")
    args = parser.parse_args(argv)
    if args.smoke:
        sizes = [(6, 8, 2.0)]
    elif args.quick:
        sizes = [(50, 75, 2.0), (100, 150, 2.0)]
    else:
        sizes = [(50, 75, 2.0), (100, 150, 2.0), (200, 300, 2.0), (100, 150, 2.5)]
    rows = measure(sizes, args.one_block_limit)
    print(render(rows))
    if args.out is not None:
        atomic_write_text(os.path.join(args.out, "memory_peak.json"), json.dumps([asdict(r) for r in rows], indent=2) + "\n")
        print(f"wrote {os.path.join(args.out, 'memory_peak.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
