"""Peak memory and time of ``edgeprefix profiles`` on a generated Mooncake-style trace (docs/model.md §9.1).

Run ``python -m edgeprefix.benchmarks.memory.profiles_memory [--requests N,N,...] [--out DIR]``.  Each size
writes a trace of :func:`edgeprefix.placement.pipeline.traces.synthetic_records` (seed 1: a shared
system prompt, 50 Zipf families, 1–12 private tail blocks per request) to a temporary file, then
runs ``edgeprefix profiles TRACE --json`` in a fresh child process and reads its peak resident set
size (``ru_maxrss`` from ``os.wait4``) and wall time.  The reference row, measured in the same run,
is ``edgeprefix profiles`` on the embedded sample trace (import + a tiny trace); the ratio column
divides by it.  The goal for 1.5 M requests is 500 MB.  ``--builders`` adds, per size, the peak of
building the forest alone with the reference ``ForestBuilder`` (the builder ``profiles`` used before)
and with the compact builder of :mod:`edgeprefix.placement.pipeline.forest_stream`, in the same run.
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

GOAL_MB = 500.0  # at 1.5 M requests


@dataclass(frozen=True)
class Row:
    requests: int
    trace_mb: float
    unique_blocks: int
    peak_mb: float
    seconds: float


def write_trace(path: Path, requests: int) -> None:
    from edgeprefix.placement.pipeline.traces import record_to_mooncake_json, synthetic_records

    with open(path, "w", encoding="utf-8") as handle:
        for record in synthetic_records(requests, seed=1):
            handle.write(record_to_mooncake_json(record) + "\n")


def run_profiles(trace: Path | None) -> tuple[float, float, dict]:
    """Peak RSS (MB), wall seconds and the JSON report of one ``edgeprefix profiles`` child."""
    argv = [sys.executable, "-m", "edgeprefix", "profiles", "--json"] + ([str(trace)] if trace is not None else [])
    return run_child(argv)


FOREST_ONLY = (
    "import json, sys\n"
    "from edgeprefix.placement.pipeline.forest import ForestBuilder\n"
    "from edgeprefix.placement.pipeline.forest_stream import StreamForestBuilder\n"
    "from edgeprefix.placement.pipeline.traces import read_trace\n"
    "builder = (ForestBuilder if sys.argv[2] == 'reference' else StreamForestBuilder)(512)\n"
    "builder.extend(read_trace(sys.argv[1]))\n"
    "forest = builder.build()\n"
    "print(json.dumps({'forest': {'requests': forest.n_requests, 'unique_blocks': forest.n_blocks}}))\n"
)


def run_child(argv: list[str]) -> tuple[float, float, dict]:
    """Peak RSS (MB), wall seconds and the JSON printed by one child process."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env={**os.environ, "EDGEPREFIX_PROGRESS": "0"})
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:4])} exited with {proc.returncode}")
        out.seek(0)
        report = json.loads(out.read())
    return usage.ru_maxrss / 1024.0, seconds, report


def measure(sizes: list[int], builders: bool = False) -> tuple[Row, list[Row], list[tuple[str, Row]]]:
    """The reference row, one ``profiles`` row per size and, with ``builders``, the forest alone built by the
    reference :class:`ForestBuilder` and by the compact builder (``build_forest``) on the same traces."""
    peak, seconds, report = run_profiles(None)
    reference = Row(report["forest"]["requests"], 0.0, report["forest"]["unique_blocks"], peak, seconds)
    rows, forest_rows = [], []
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            trace = Path(folder) / f"trace_{n}.jsonl"
            write_trace(trace, n)
            peak, seconds, report = run_profiles(trace)
            rows.append(Row(n, trace.stat().st_size / 1e6, report["forest"]["unique_blocks"], peak, seconds))
            for kind in ("reference", "compact") if builders else ():
                peak, seconds, report = run_child([sys.executable, "-c", FOREST_ONLY, str(trace), kind])
                forest_rows.append((kind, Row(n, trace.stat().st_size / 1e6, report["forest"]["unique_blocks"], peak, seconds)))
            trace.unlink()
    return reference, rows, forest_rows


def table(reference: Row, rows: list[Row]) -> str:
    lines = [
        "| requests | trace MB | unique blocks | peak MB | × reference | bytes per unique block above the reference | seconds |",
        "|---|---|---|---|---|---|---|",
        f"| {reference.requests} (embedded sample, reference) | – | {reference.unique_blocks} | {reference.peak_mb:.0f} | 1.00 | – "
        f"| {reference.seconds:.1f} |",
    ]
    for r in rows:
        per_block = (r.peak_mb - reference.peak_mb) * 2**20 / max(r.unique_blocks, 1)
        lines.append(
            f"| {r.requests:,} | {r.trace_mb:.0f} | {r.unique_blocks:,} | {r.peak_mb:.0f} | {r.peak_mb / reference.peak_mb:.2f} "
            f"| {per_block:.0f} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def forest_table(reference: Row, rows: list[tuple[str, Row]]) -> str:
    lines = ["| requests | forest builder | unique blocks | peak MB | × reference | seconds |", "|---|---|---|---|---|---|"]
    for kind, r in rows:
        lines.append(
            f"| {r.requests:,} | {kind} | {r.unique_blocks:,} | {r.peak_mb:.0f} | {r.peak_mb / reference.peak_mb:.2f} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", default="150000,1500000", help="trace sizes (requests), comma-separated")
    parser.add_argument("--out", type=Path, default=None, help="write profiles_memory.json here")
    parser.add_argument(
        "--builders",
        action="store_true",
        help="also measure the forest alone, built by the reference ForestBuilder and by the compact builder",
    )
    args = parser.parse_args(argv)
    sizes = [int(v) for v in args.requests.split(",") if v.strip()]
    reference, rows, forest_rows = measure(sizes, builders=args.builders)
    print(table(reference, rows))
    if forest_rows:
        print()
        print(forest_table(reference, forest_rows))
    if args.out is not None:
        atomic_write_text(
            args.out / "profiles_memory.json",
            json.dumps(
                {
                    "goal_mb": GOAL_MB,
                    "reference": asdict(reference),
                    "rows": [asdict(r) for r in rows],
                    "forest_rows": [{"builder": k, **asdict(r)} for k, r in forest_rows],
                },
                indent=2,
            ),
        )
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
