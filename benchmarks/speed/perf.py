"""Speed of one evaluation (fixed point + coverage at one τ) against a scipy.quad reference.

Run ``python -m edgeprefix.benchmarks.speed.perf [--out DIR] [--quick]``.  For each case it reports the median
wall time of ``evaluate(...).coverage(τ_0)`` with the package's kernel and with
:class:`edgeprefix.benchmarks.accuracy.quadrature.reference_kernel.QuadReferenceKernel` plugged into the *same* robust
fixed-point method, the speed ratio, and the largest difference in coverage and association.
For the 64 × 16 instance one reference association takes tens of seconds, so the reference is
warm-started at the fast equilibrium with tolerance 1e-7 (it then needs one evaluation of the
map instead of the fast method's seven); that only flatters the reference, so the reported
ratio is a lower bound.

A second table times the command line's start-up against plain Python imports
(:mod:`edgeprefix.benchmarks.speed.startup`; ``--startup-repeats 0`` skips it).  A third times the
projection onto the placement polytope, exact algorithm against cvxpy/Clarabel on the same points
(:mod:`edgeprefix.benchmarks.speed.projection_speed`; ``--projection-points 0`` skips it).  The last three give the
``|S|`` exponent of an evaluation at α = 3.5, the exact gradient against its evaluation and batching
against a loop (:mod:`edgeprefix.benchmarks.speed.scale_speed`; ``--scale-profiles none`` skips them).  The
last line times ``edgeprefix validate`` with the network simulator's fast paths against the per-request
loop (:mod:`edgeprefix.benchmarks.speed.validate_speed`; ``--validate none`` skips it, ``full`` runs the defaults).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from edgeprefix.benchmarks.accuracy.quadrature.reference_kernel import QuadReferenceKernel
from edgeprefix.benchmarks.speed import projection_speed, scale_speed, startup
from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.placement.model.evaluation import Evaluation, evaluate
from edgeprefix.placement.model.instance import (
    Instance,
    atomic_write_text,
    default_instance,
    load_instance,
)
from edgeprefix.placement.progress import progress_bar


@dataclass(frozen=True)
class Case:
    name: str
    instance: Instance
    reps: int
    ref_reps: int
    target_ms: float
    target_ratio: float
    warm_reference: bool


def _median_ms(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def run_case(case: Case, *, with_reference: bool = True) -> dict[str, object]:
    inst = case.instance
    tau = inst.placement.target

    def fast() -> Evaluation:
        ev = evaluate(inst)
        ev.coverage(tau)
        return ev

    fast_ev = fast()
    fast_ms = _median_ms(fast, case.reps)
    row: dict[str, object] = {
        "case": case.name,
        "types": len(inst.requests),
        "profiles": len(inst.profiles),
        "alpha": inst.network.radio_exponent,
        "fast_ms": fast_ms,
        "target_ms": case.target_ms,
        "fixed_point_evaluations": fast_ev.fixed_point.evaluations if fast_ev.fixed_point else 0,
        "quadrature_error": fast_ev.quadrature_error,
        "coverage": fast_ev.coverage(tau),
    }
    if with_reference:
        warm = fast_ev.advertised_wait if case.warm_reference else None
        kernel = QuadReferenceKernel()
        holder: dict[str, Evaluation] = {}

        def reference() -> None:
            ev = evaluate(inst, kernel=kernel, warm_start=warm, tol=1e-7 if warm is not None else 1e-9)
            ev.coverage(tau)
            holder["ev"] = ev

        ref_ms = _median_ms(reference, case.ref_reps)
        ref_ev = holder["ev"]
        row.update(
            {
                "reference_ms": ref_ms,
                "ratio": ref_ms / fast_ms,
                "target_ratio": case.target_ratio,
                "reference_evaluations": ref_ev.fixed_point.evaluations if ref_ev.fixed_point else 0,
                "max_coverage_diff": abs(ref_ev.coverage(tau) - fast_ev.coverage(tau)),
                "max_association_diff": float(np.max(np.abs(ref_ev.association - fast_ev.association))),
            }
        )
    return row


def cases(quick: bool) -> list[Case]:
    return [
        Case("paper_baseline (α=2)", default_instance(), 400 if not quick else 100, 5 if not quick else 2, 2.0, 10.0, False),
        Case("synthetic 64×16 (α=2.5)", synthetic_instance(64, 16, alpha=2.5), 15 if not quick else 5, 1, 250.0, 50.0, True),
    ]


def render(rows: list[dict[str, object]]) -> str:
    head = f"{'case':<26}{'fast ms':>9}{'goal':>7}{'ref ms':>11}{'ratio':>8}{'goal':>6}{'|Δcov|':>10}{'|ΔA|':>10}{'FP evals':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['case']:<26}{r['fast_ms']:>9.2f}{r['target_ms']:>7.0f}"
            f"{r.get('reference_ms', float('nan')):>11.1f}{r.get('ratio', float('nan')):>8.1f}{r.get('target_ratio', float('nan')):>6.0f}"
            f"{r.get('max_coverage_diff', float('nan')):>10.1e}{r.get('max_association_diff', float('nan')):>10.1e}"
            f"{r['fixed_point_evaluations']:>9}"
        )
    return "\n".join(lines)


def queue_model_cases(quick: bool) -> list[tuple[str, Instance, Mapping[str, float] | npt.ArrayLike | None]]:
    """Every benchmark instance (with the mix its comparisons use) and the synthetic α = 2.5 case."""
    import json as _json

    folder = Path(__file__).resolve().parents[1] / "instances"
    medium = load_instance(folder / "medium_forest.toml")
    optimum = _json.loads((folder / "medium_forest.checks.json").read_text())["optimum"]["mix"]
    moon = load_instance(folder / "mooncake_large.toml")
    out = [
        ("paper_baseline", default_instance(), None),
        ("paper_calibrated", load_instance("paper_calibrated"), None),
        ("medium_forest", medium, optimum),
        ("mooncake_large", moon, np.full(len(moon.profiles), 1.0 / len(moon.profiles))),
    ]
    if not quick:
        out.append(("synthetic 64×16 (α=2.5)", synthetic_instance(64, 16, alpha=2.5), None))
    return out


def queue_model_rows(quick: bool) -> list[dict[str, object]]:
    """Median wall and CPU time of ``evaluate(...).coverage(τ_0)`` with each queue model (docs/model.md §14),
    the two interleaved so that both see the same machine load."""
    rows = []
    for name, inst, mix in queue_model_cases(quick):
        reps = 5 if "synthetic" in name else (20 if quick else 60)
        times: dict[str, list[tuple[float, float]]] = {"meanfield": [], "cell": []}
        for qm in times:  # warm-up
            evaluate(inst, mix, queue_model=qm).coverage()
        for _ in range(reps):
            for qm in times:
                wall, cpu = time.perf_counter(), time.process_time()
                evaluate(inst, mix, queue_model=qm).coverage()
                times[qm].append((time.perf_counter() - wall, time.process_time() - cpu))
        med = {qm: np.median(np.array(v), axis=0) * 1e3 for qm, v in times.items()}
        rows.append(
            {
                "case": name,
                "profiles": len(inst.profiles),
                "types": len(inst.requests),
                "meanfield_ms": float(med["meanfield"][0]),
                "cell_ms": float(med["cell"][0]),
                "meanfield_cpu_ms": float(med["meanfield"][1]),
                "cell_cpu_ms": float(med["cell"][1]),
                "ratio": float(med["cell"][0] / med["meanfield"][0]),
                "cpu_ratio": float(med["cell"][1] / med["meanfield"][1]),
            }
        )
    return rows


def render_queue_models(rows: list[dict[str, object]]) -> str:
    head = f"{'case':<26}{'S×Q':>8}{'meanfield ms':>13}{'cell ms':>9}{'ratio':>7}{'CPU ratio':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['case']:<26}{str(r['profiles']) + '×' + str(r['types']):>8}{r['meanfield_ms']:>13.2f}{r['cell_ms']:>9.2f}"
            f"{r['ratio']:>7.2f}{r['cpu_ratio']:>10.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.perf", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for perf.json and perf.csv")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--no-reference", action="store_true", help="skip the scipy.quad reference")
    parser.add_argument("--no-queue-models", action="store_true", help="skip the meanfield vs cell cost table")
    parser.add_argument(
        "--startup-repeats",
        type=int,
        default=None,
        metavar="N",
        help="timed runs per command of the start-up table (default: 15, --quick: 5; 0 skips it)",
    )
    parser.add_argument(
        "--projection-points",
        type=int,
        default=None,
        metavar="N",
        help="points projected per case in the projection table (default: 2000, --quick: 300; 0 skips it)",
    )
    parser.add_argument(
        "--scale-profiles",
        default=None,
        metavar="LIST",
        help="profile counts of the scaling tables (default 10,20,40,80,160, --quick: 10,20,40; 'none' skips them)",
    )
    parser.add_argument(
        "--validate",
        choices=("reduced", "full", "none"),
        default=None,
        help="edgeprefix validate, fast path against the per-request loop (default: reduced; --quick: none)",
    )
    parser.add_argument(
        "--target-size",
        default="300x10",
        metavar="PROFILESxTYPES",
        help="size of the scale-target row, evaluation and gradient in a fresh process (default 300x10; "
        "the targets are set at 300x1000; 'none' skips it)",
    )
    args = parser.parse_args(argv)
    repeats = args.startup_repeats if args.startup_repeats is not None else (5 if args.quick else 15)
    if repeats < 0:
        parser.error(f"--startup-repeats must be >= 0, got {repeats}")
    rows = []
    with progress_bar(cases(args.quick), desc="evaluation", unit="case") as bar:
        for case in bar:
            bar.set_postfix_str(case.name)
            rows.append(run_case(case, with_reference=not args.no_reference))
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, numpy {np.__version__}")
    print(render(rows))
    queue_rows = [] if args.no_queue_models else queue_model_rows(args.quick)
    if queue_rows:
        print()
        print("queue models: evaluate(...).coverage(τ_0), median of interleaved runs (docs/model.md §14)")
        print(render_queue_models(queue_rows))
    startup_rows = startup.measure(repeats) if repeats else []
    if startup_rows:
        print()
        print(f"start-up (median of {repeats} subprocess runs each, interleaved)")
        print(startup.render(startup_rows))
    count = args.projection_points if args.projection_points is not None else (300 if args.quick else 2000)
    projection_rows = projection_speed.projection_rows(count) if count > 0 else []
    if projection_rows:
        print()
        print(f"projection onto the placement polytope (median per call over {count} points, both paths on the same points)")
        print(projection_speed.render(projection_rows))
    scale_text = args.scale_profiles or ("10,20,40" if args.quick else "10,20,40,80,160")
    if scale_text != "none":
        try:
            sizes = [int(x) for x in scale_text.split(",")]
        except ValueError:
            parser.error(f"--scale-profiles takes integers separated by commas or 'none', got {scale_text!r}")
        if min(sizes) < 2:
            parser.error("--scale-profiles: every count must be >= 2")
        print()
        print(scale_speed.report(sizes, 10, (20, 10) if args.quick else (40, 20), 10 if args.quick else 40))
    validate_mode = args.validate or ("none" if args.quick else "reduced")
    if validate_mode != "none":
        from edgeprefix.benchmarks.speed import validate_speed

        print()
        print(
            "network simulator: validate with its fast paths (online router, grid and remembered candidates, FCFS "
            "across nodes) vs the per-request loop (CPU seconds, one run; the done-when ratio against the tree "
            "before them is in benchmarks/README.md)"
        )
        print(validate_speed.render(validate_speed.measure(full=validate_mode == "full")))
    if args.target_size != "none":
        try:
            t_profiles, t_types = (int(x) for x in args.target_size.lower().split("x"))
        except ValueError:
            parser.error(f"--target-size takes PROFILESxTYPES (e.g. 300x1000) or 'none', got {args.target_size!r}")
        if t_profiles < 2 or t_types < 1:
            parser.error("--target-size needs at least 2 profiles and 1 type")
        fit_sizes = [10, 30, 100, 300] if not args.quick else [10, 30, 100]
        fit_rows = scale_speed.size_rows(fit_sizes, 10)
        fit = scale_speed.exponent([float(r.profiles) for r in fit_rows], [r.cpu_seconds for r in fit_rows])
        print()
        print(
            f"scale targets (docs/model.md §16.5), CPU seconds, one run; |S| fit: {', '.join(f'{r.profiles}: {r.cpu_seconds:.2f} s' for r in fit_rows)}"
        )
        print(scale_speed.render_targets(scale_speed.target_row(t_profiles, t_types), (fit_rows, fit)))
    if args.out is not None:
        payload = {
            "machine": platform.platform(),
            "python": platform.python_version(),
            "rows": rows,
            "startup": startup_rows,
            "projection": [{**dataclasses.asdict(r), "ratio": r.ratio} for r in projection_rows],
            "queue_models": queue_rows,
        }
        atomic_write_text(args.out / "perf.json", json.dumps(payload, indent=2) + "\n")
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=sorted({k for r in rows for k in r}))
        writer.writeheader()
        writer.writerows(rows)
        atomic_write_text(args.out / "perf.csv", buffer.getvalue())
        for name in ("perf.json", "perf.csv"):
            print(f"wrote {args.out / name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
