"""Scaling study of one evaluation (fixed point + coverage) and grid-search throughput.

Run ``python -m edgeprefix.benchmarks.speed.speed [--quick] [--no-reference] [--out DIR]``.  Three sweeps on seeded
synthetic instances (:func:`edgeprefix.benchmarks.workloads.synthetic.synthetic_instance`, ``α = 2.5`` so the
quadrature path runs): request types ``|Q|``, profiles ``|S|`` and Gauss–Legendre nodes per
segment ``N``.  Each row gives the median wall time of ``evaluate(...).coverage(τ_0)``, the
fixed-point map evaluations it needed, the time per map evaluation, and — where one
``scipy.integrate.quad`` evaluation takes a few seconds at most — the reference kernel's time on
the same fixed point warm-started at the fast equilibrium (a lower bound on its cost) and the
ratio.  The growth exponents are least-squares slopes of ``log(time per map evaluation)`` against
``log |Q|``, ``log |S|`` and ``log N``, next to the exponents (1, 2, 1) of the docs/model.md bound
``O(|Q| |S|² N_r)`` for Theorem 1 written with its competitor sum.  Grid throughput is the
``1/K`` lattice of ``paper_baseline`` and ``medium_forest`` scored by ``solve(method="grid")``.
Every ratio is measured in the same run; the load average is printed with the tables.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from edgeprefix.benchmarks.accuracy.quadrature.reference_kernel import QuadReferenceKernel
from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance, atomic_write_text
from edgeprefix.placement.model.spatial import AnalyticKernel
from edgeprefix.placement.progress import progress_bar

ALPHA = 2.5
BOUND_EXPONENTS = {"types": 1.0, "profiles": 2.0, "nodes": 1.0}  # O(|Q| |S|² N_r)
REFERENCE_LIMIT = 300  # |Q|·|S|² up to which the quad reference is run


@dataclass(frozen=True)
class SpeedRow:
    """One measured point of a sweep.

    Attributes
    ----------
    sweep : ``types``, ``profiles`` or ``nodes`` (the varied size).
    types, profiles, nodes : ``|Q|``, ``|S|``, Gauss–Legendre nodes per segment ``N``.
    ms : median wall ms of one evaluation (fixed point + ``P_cov(τ_0)``).
    map_evaluations : fixed-point evaluations of ``T(W)``; ``ms_per_map`` = ``ms`` / that.
    reference_ms, ratio : the quad reference on the same point (``nan`` when skipped).
    coverage_diff : ``|P_cov^fast − P_cov^ref|``.
    """

    sweep: str
    types: int
    profiles: int
    nodes: int
    ms: float
    map_evaluations: int
    ms_per_map: float
    reference_ms: float
    ratio: float
    coverage_diff: float


@dataclass(frozen=True)
class GrowthFit:
    """``log t = c + e log x`` fitted on one sweep; ``bound`` is the exponent of ``O(|Q||S|²N_r)``."""

    sweep: str
    exponent: float
    bound: float
    points: int


@dataclass(frozen=True)
class GridThroughput:
    """Lattice points scored per second by the exhaustive ``1/K`` grid."""

    instance: str
    resolution: int
    points: int
    seconds: float

    @property
    def points_per_second(self) -> float:
        return self.points / self.seconds


def median_ms(fn: Callable[[], object], *, reps: int, max_seconds: float = 3.0) -> float:
    """Median wall ms of ``fn`` over at most ``reps`` calls (fewer once ``max_seconds`` is spent)."""
    times: list[float] = []
    spent = 0.0
    while len(times) < reps and (spent < max_seconds or len(times) < 2):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
        spent += times[-1]
    return 1e3 * statistics.median(times)


def measure(sweep: str, inst: Instance, nodes: int, *, reps: int, reference: bool) -> SpeedRow:
    """Time one evaluation of ``inst`` with ``nodes`` quadrature nodes (and the reference)."""
    kernel = AnalyticKernel(nodes=nodes)
    tau = inst.placement.target
    ev = evaluate(inst, kernel=kernel)
    cov = float(ev.coverage(tau))
    ms = median_ms(lambda: evaluate(inst, kernel=kernel).coverage(tau), reps=reps)
    n_map = ev.fixed_point.evaluations if ev.fixed_point else 1
    ref_ms, diff = float("nan"), float("nan")
    if reference:
        holder: dict[str, float] = {}

        def ref() -> None:
            r = evaluate(inst, kernel=QuadReferenceKernel(), warm_start=ev.advertised_wait, tol=1e-7)
            holder["cov"] = float(r.coverage(tau))

        ref_ms = median_ms(ref, reps=1)
        diff = abs(holder["cov"] - cov)
    return SpeedRow(sweep, len(inst.requests), len(inst.profiles), nodes, ms, n_map, ms / max(n_map, 1), ref_ms, ref_ms / ms, diff)


MODES = {  # sizes of each sweep and repetitions per point
    "smoke": ((4, 8), (2, 3), (8, 16), 2),
    "quick": ((4, 8, 16, 32), (2, 4, 8), (8, 16, 32), 5),
    "full": ((4, 8, 16, 32, 64, 128), (2, 3, 4, 6, 8, 12, 16), (8, 12, 16, 24, 32, 48, 64), 15),
}


def sweep_plan(mode: str) -> list[tuple[str, int, int, int]]:
    """``(sweep, |Q|, |S|, N)`` points of ``mode`` (see :data:`MODES`): vary one size, hold the others."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    types, profiles, nodes, _ = MODES[mode]
    plan = [("types", q, 6, 20) for q in types]
    plan += [("profiles", 16, s, 20) for s in profiles]
    plan += [("nodes", 16, 6, n) for n in nodes]
    return plan


def run_sweeps(mode: str, *, reference: bool, progress: Callable[[str], None] = lambda _: None) -> list[SpeedRow]:
    """Measure every point of :func:`sweep_plan` (the quad reference where ``|Q||S|² ≤ REFERENCE_LIMIT``)."""
    rows = []
    plan = sweep_plan(mode)
    with progress_bar(total=len(plan), desc="speed", unit="point") as bar:
        for sweep, q, s, n in plan:
            inst = synthetic_instance(q, s, alpha=ALPHA, seed=0)
            with_ref = reference and q * s * s <= REFERENCE_LIMIT
            line = f"speed: {sweep} |Q|={q} |S|={s} N={n}{' (+quad reference)' if with_ref else ''}"
            progress(line)
            bar.set_postfix_str(line.removeprefix("speed: "))
            rows.append(measure(sweep, inst, n, reps=MODES[mode][3], reference=with_ref))
            bar.update(1)
    return rows


def fit_growth(rows: Sequence[SpeedRow]) -> list[GrowthFit]:
    """Slope of ``log ms_per_map`` against the log of each sweep's varied size."""
    fits = []
    for sweep, key in (("types", "types"), ("profiles", "profiles"), ("nodes", "nodes")):
        chosen = [r for r in rows if r.sweep == sweep]
        if len(chosen) < 2:
            continue
        x = np.log([getattr(r, key) for r in chosen])
        y = np.log([r.ms_per_map for r in chosen])
        slope = float(np.polyfit(x, y, 1)[0])
        fits.append(GrowthFit(sweep, slope, BOUND_EXPONENTS[sweep], len(chosen)))
    return fits


def grid_throughput(quick: bool) -> list[GridThroughput]:
    """Points/s of the exhaustive grid on the benchmark instances."""
    from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
    from edgeprefix.formulations.placement import placement_problem
    from edgeprefix.solvers import solve

    out = []
    for name, k in (("paper_baseline", 10 if quick else 20), ("medium_forest", 3 if quick else 10)):
        problem = placement_problem(load_benchmark(name))
        result = solve(problem, "grid", budget=None, resolution=k)
        out.append(GridThroughput(name, k, result.nfev, result.seconds))
    return out


def machine() -> dict[str, object]:
    """CPU model (``/proc/cpuinfo``), cores, Python/numpy versions and the load average now."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), model)
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "load_average": [round(v, 2) for v in os.getloadavg()],
    }


def render(rows: Sequence[SpeedRow], fits: Sequence[GrowthFit], grids: Sequence[GridThroughput], info: dict[str, object]) -> str:
    machine_line = (
        f"machine: {info['cpu']} ({info['cores']} cores), Python {info['python']}, numpy {info['numpy']}, "
        f"load average {info['load_average']}"
    )
    lines = [machine_line]
    head = f"{'sweep':<9}{'|Q|':>5}{'|S|':>5}{'N':>4}{'ms':>9}{'maps':>6}{'ms/map':>9}{'quad ms':>10}{'ratio':>8}{'|Δcov|':>9}"
    lines += ["", head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.sweep:<9}{r.types:>5}{r.profiles:>5}{r.nodes:>4}{r.ms:>9.2f}{r.map_evaluations:>6}{r.ms_per_map:>9.3f}"
            f"{r.reference_ms:>10.0f}{r.ratio:>8.0f}{r.coverage_diff:>9.1e}"
        )
    lines += ["", f"{'growth of ms/map':<18}{'exponent':>9}{'bound':>7}{'points':>8}"]
    lines += [f"{f.sweep:<18}{f.exponent:>9.2f}{f.bound:>7.0f}{f.points:>8}" for f in fits]
    lines += ["", f"{'grid':<16}{'1/K':>5}{'points':>8}{'seconds':>9}{'points/s':>10}"]
    lines += [f"{g.instance:<16}{g.resolution:>5}{g.points:>8}{g.seconds:>9.2f}{g.points_per_second:>10.0f}" for g in grids]
    return "\n".join(lines)


def write(
    out: str | os.PathLike[str],
    rows: Sequence[SpeedRow],
    fits: Sequence[GrowthFit],
    grids: Sequence[GridThroughput],
    info: dict[str, object],
) -> None:
    """``speed.json`` (everything) and ``speed.csv`` (the sweep rows), atomically."""
    payload = {
        "machine": info,
        "rows": [asdict(r) for r in rows],
        "fits": [asdict(f) for f in fits],
        "grid": [{**asdict(g), "points_per_second": g.points_per_second} for g in grids],
    }
    clean = json.loads(json.dumps(payload).replace("NaN", "null"))
    atomic_write_text(os.path.join(out, "speed.json"), json.dumps(clean, indent=2) + "\n")
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(SpeedRow.__dataclass_fields__))
    writer.writeheader()
    writer.writerows(asdict(r) for r in rows)
    atomic_write_text(os.path.join(out, "speed.csv"), buffer.getvalue())
    for name in ("speed.json", "speed.csv"):
        print(f"wrote {os.path.join(out, name)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.speed", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, 2 repetitions (for the tests)")
    parser.add_argument("--no-reference", action="store_true", help="skip the scipy.quad reference")
    parser.add_argument("--no-grid", action="store_true", help="skip the grid throughput")
    parser.add_argument("--out", default=None, help="folder for speed.json and speed.csv")
    args = parser.parse_args(argv)
    info_before = machine()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    rows = run_sweeps(mode, reference=not args.no_reference)
    fits = fit_growth(rows)
    grids = [] if args.no_grid else grid_throughput(mode != "full")
    info = {**machine(), "load_average_at_start": info_before["load_average"]}
    print(render(rows, fits, grids, info))
    if args.out is not None:
        write(args.out, rows, fits, grids, info)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
