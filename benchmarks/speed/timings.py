"""Wall and CPU times that used to be asserted in unit tests (they belong in benchmarks).

Run ``python -m edgeprefix.benchmarks.speed.timings [--out DIR] [--repeats R]``.  Measures, each as the median over
``R`` repetitions (wall ``perf_counter`` and CPU ``process_time``):

- ``mooncake_ingest`` — trace → radix forest for the Mooncake conversation trace (the profiles
  command's "ingest" phase: :func:`edgeprefix.placement.pipeline.traces.read_trace` + :func:`edgeprefix.placement.pipeline.forest.build_forest`);
- ``association_mc`` — the 2·10⁵-sample nearest-distance Monte Carlo of ``paper_baseline``
  (docs/model.md §13, load-aware bias);
- ``projection_call`` — one Euclidean projection onto the ``paper_baseline`` polytope (docs/model.md
  §10.2), per call over 200 random points;
- ``mmc_1e6`` — the FCFS M/M/9 simulation at ``ρ = 0.82`` with 10⁶ customers.

The former test thresholds are printed beside them (``limit``) for reference; nothing fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE as MOONCAKE
from edgeprefix.placement.model.instance import atomic_write_text, default_instance
from edgeprefix.placement.progress import progress_bar


@dataclass(frozen=True)
class Timing:
    """Median wall and CPU seconds of one measurement (``per`` calls per repetition)."""

    name: str
    wall: float
    cpu: float
    per: int
    limit: float | None
    note: str


def _median_times(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def mooncake_ingest(repeats: int, trace: Path = MOONCAKE) -> Timing | None:
    """Read and build the forest of the Mooncake trace (``None`` when the trace is absent)."""
    if not trace.is_file():
        return None
    from edgeprefix.placement.pipeline.forest import build_forest
    from edgeprefix.placement.pipeline.traces import read_trace

    def run() -> None:
        build_forest(read_trace(trace, fmt="mooncake", block_size=512), block_size=512)

    wall, cpu = _median_times(run, repeats)
    return Timing("mooncake_ingest", wall, cpu, 1, 4.0, "12031 requests, 512-token blocks (was tests/test_profiles_cli.py)")


def association_mc(repeats: int) -> Timing:
    """2·10⁵ exact nearest-distance samples on ``paper_baseline`` at the load-aware bias."""
    from edgeprefix.placement.model.evaluation import evaluate
    from edgeprefix.placement.simulation.association_mc import (
        simulate_instance_association,
    )

    inst = default_instance()
    bias = np.asarray(evaluate(inst, None, "load_aware").bias)
    wall, cpu = _median_times(lambda: simulate_instance_association(inst, None, bias, samples=200_000, seed=2026), repeats)
    return Timing("association_mc", wall, cpu, 1, 1.0, "2e5 samples, CPU limit (was tests/test_simulation_association.py)")


def projection_call(repeats: int, calls: int = 200) -> Timing:
    """Per-call time of :class:`edgeprefix.solvers.projection.Projection` on the ``paper_baseline`` polytope."""
    from edgeprefix.formulations.placement import placement_problem
    from edgeprefix.solvers.projection import Projection

    projection = Projection(placement_problem(default_instance()).constraints)
    rng = np.random.default_rng(5)
    points = rng.normal(0.3, 1.0, size=(calls, 3)) * rng.choice([0.1, 1.0, 3.0], size=(calls, 1))
    projection(points[0])  # compile once

    def run() -> None:
        for z in points:
            projection(z)

    wall, cpu = _median_times(run, repeats)
    return Timing("projection_call", wall / calls, cpu / calls, calls, 0.05, "Clarabel QP re-solve (was tests/test_solvers_projection.py)")


def mmc_1e6(repeats: int) -> Timing:
    """FCFS M/M/9 at ``ρ = 0.82`` with 10⁶ customers."""
    from edgeprefix.placement.simulation.mmc import simulate_mmc

    wall, cpu = _median_times(lambda: simulate_mmc(9 * 0.82, 1.0, 9, 1_000_000, seed=11), repeats)
    return Timing("mmc_1e6", wall, cpu, 1, 5.0, "CPU limit in tests/test_simulation_mmc.py")


def run_all(repeats: int) -> list[Timing]:
    out = []
    steps = (mooncake_ingest, association_mc, projection_call, mmc_1e6)
    with progress_bar(steps, desc="timings", unit="measurement") as bar:
        for step in bar:
            bar.set_postfix_str(step.__name__)
            timing = step(repeats)
            if timing is not None:
                out.append(timing)
    return out


def render(timings: list[Timing], load: tuple[float, float, float]) -> str:
    head = f"{'measurement':<18}{'wall ms':>10}{'CPU ms':>10}{'old limit ms':>14}  note"
    lines = [f"load average {tuple(round(v, 2) for v in load)}", head, "-" * len(head)]
    for t in timings:
        limit = f"{1e3 * t.limit:.0f}" if t.limit is not None else "—"
        lines.append(f"{t.name:<18}{1e3 * t.wall:>10.2f}{1e3 * t.cpu:>10.2f}{limit:>14}  {t.note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.timings", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="folder for timings.json")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        raise SystemExit(f"--repeats must be >= 1, got {args.repeats}")
    load0 = os.getloadavg()
    timings = run_all(args.repeats)
    print(render(timings, os.getloadavg()))
    if args.out is not None:
        payload = {"load_average_at_start": load0, "load_average": os.getloadavg(), "timings": [asdict(t) for t in timings]}
        atomic_write_text(args.out / "timings.json", json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.out / 'timings.json'}", file=sys.stderr)
    print(f"(load average at start {tuple(round(v, 2) for v in load0)})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
