"""``edgeprefix validate`` with the network simulator's fast paths against the per-request loop, in one run.

Run ``python -m edgeprefix.benchmarks.speed.validate_speed [--full]`` (``python -m edgeprefix.benchmarks.speed.perf``
prints the same table).  Both runs are the same command in this process (CPU seconds, ``time.process_time``:
the machine is shared): once with the online router's per-request ``choose`` loop, a fresh KD-tree query
per simulation and the per-request FCFS heap pass (what ``validate`` did before
:mod:`edgeprefix.placement.simulation.online_fast`, :mod:`edgeprefix.placement.simulation.nearest` and
:mod:`edgeprefix.placement.simulation.fcfs_nodes`), once with the fast paths, the grid candidate queries,
the remembered queries and the remembered draws of each network and its requests.  The
two JSON reports must be identical (timing fields aside).  Default: a reduced ``validate`` on
``paper_baseline`` (300 nodes, 40 + 30 s); ``--full``: the command's defaults (1000 nodes, 60 + 80 s, minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time

REDUCED = ("--nodes", "300", "--horizon", "40", "--warmup", "30", "--samples", "20000", "--customers", "20000")


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _run(argv: list[str], fast: bool) -> tuple[float, object]:
    from edgeprefix.cli import main
    from edgeprefix.placement.simulation import fcfs_nodes, nearest, network, online_fast

    online_fast.FAST_PATH, nearest.REMEMBER, nearest.GRID, fcfs_nodes.VECTORISED = fast, fast, fast, fast
    network.REMEMBER_DRAWS = fast
    nearest.forget()
    network.forget_draws()
    out, err = io.StringIO(), io.StringIO()
    start = time.process_time()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["validate", "--json", *argv])
    finally:
        online_fast.FAST_PATH, nearest.REMEMBER, nearest.GRID, fcfs_nodes.VECTORISED = True, True, True, True
        network.REMEMBER_DRAWS = True
        nearest.forget()
        network.forget_draws()
    seconds = time.process_time() - start
    if code != 0:
        raise RuntimeError(f"validate exited with {code}: {err.getvalue().strip()[-300:]}")
    return seconds, _strip(json.loads(out.getvalue()))


def measure(full: bool = False) -> dict[str, object]:
    argv = [] if full else list(REDUCED)
    loop_seconds, loop = _run(argv, fast=False)
    fast_seconds, fast = _run(argv, fast=True)
    return {
        "arguments": " ".join(argv) or "(defaults)",
        "loop_cpu": loop_seconds,
        "fast_cpu": fast_seconds,
        "ratio": loop_seconds / fast_seconds,
        "identical": loop == fast,
    }


def render(row: dict[str, object]) -> str:
    return (
        f"edgeprefix validate {row['arguments']}: per-request loop {row['loop_cpu']:.1f} s CPU, fast path "
        f"{row['fast_cpu']:.1f} s CPU, ratio {row['ratio']:.2f}×, reports identical: {row['identical']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.validate_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="the command's defaults (minutes) instead of the reduced run")
    args = parser.parse_args(argv)
    print(render(measure(args.full)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
