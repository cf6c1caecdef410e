"""How evaluation, gradient and batching scale with the number of profiles (docs/model.md §16.4), in one run.

Run ``python -m edgeprefix.benchmarks.speed.scale_speed [--profiles 10,20,40,80,160] [--types 10]`` (``python -m
edgeprefix.benchmarks.speed.perf`` prints the same tables).  Instances: :func:`~edgeprefix.benchmarks.workloads.scale_instances.scale_instance`
(seed 0, uniform mix) at α = 3.5.  Times are CPU seconds (``time.process_time``: the machine is shared), one
evaluation ``evaluate(...).coverage(τ_0)`` per size; the ``|S|`` exponent is the least-squares slope of
``log time`` on ``log |S|``, for the whole evaluation and per map evaluation of its fixed point (the
number of Newton steps varies with the instance).  A second table gives, on one size, the exact
gradient (cell model) against its evaluation and the traced peak of both (``tracemalloc``: numpy's
arrays).  A third gives ``evaluate_batch`` against a loop of ``evaluate`` on ``mooncake_large`` at α = 2
and 3.5, same mixes, with the route the batch took (``--batch-repeats N``: N alternating runs, medians).  :func:`target_row` and :func:`render_targets` give the scale
targets of docs/model.md §16.5 (evaluation and gradient of one size in a fresh process, peak ``ru_maxrss``), printed
by ``python -m edgeprefix.benchmarks.speed.perf --target-size PROFILESxTYPES``.  ``--bound MIXES`` prints why batching
at α ≠ 2 cannot beat the loop while it agrees with ``evaluate`` within 1e-12 (docs/model.md §16.3): how far the
coverage moves when the quadrature rule changes, and the folded batch (one kernel call for all the mixes) against the loop.
"""

from __future__ import annotations

import argparse
import contextlib
import time
import tracemalloc
from dataclasses import dataclass
from typing import cast
from unittest import mock

import numpy as np

from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
from edgeprefix.benchmarks.workloads.scale_instances import scale_instance
from edgeprefix.placement.model import batch as batch_module
from edgeprefix.placement.model.association import default_nodes
from edgeprefix.placement.model.batch import evaluate_batch
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.sensitivity import sensitivity
from edgeprefix.placement.model.spatial import AnalyticKernel


@dataclass(frozen=True)
class SizeRow:
    profiles: int
    types: int
    alpha: float
    cpu_seconds: float
    map_evaluations: int

    @property
    def per_map(self) -> float:
        return self.cpu_seconds / max(1, self.map_evaluations)


def _cpu(fn):
    start = time.process_time()
    out = fn()
    return time.process_time() - start, out


def size_rows(profiles: list[int], types: int, alpha: float = 3.5) -> list[SizeRow]:
    rows = []
    for s in profiles:
        inst = scale_instance(types, s, alpha=alpha)
        seconds, ev = _cpu(lambda inst=inst: _evaluated(inst))
        rows.append(SizeRow(s, types, alpha, seconds, ev.fixed_point.evaluations if ev.fixed_point else 0))
    return rows


def _evaluated(inst, queue_model: str = "meanfield"):
    ev = evaluate(inst, queue_model=queue_model)
    ev.coverage()
    return ev


def exponent(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ``log y`` on ``log x``."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def render_sizes(rows: list[SizeRow]) -> str:
    head = f"{'S×Q':>10}{'α':>5}{'CPU s':>9}{'map evals':>11}{'CPU s / map':>13}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{f'{r.profiles}×{r.types}':>10}{r.alpha:>5.1f}{r.cpu_seconds:>9.3f}{r.map_evaluations:>11}{r.per_map:>13.4f}")
    if len(rows) >= 2:
        s = [float(r.profiles) for r in rows]
        lines.append(
            f"|S| exponent over {rows[0].profiles}–{rows[-1].profiles} profiles: evaluation "
            f"{exponent(s, [r.cpu_seconds for r in rows]):.2f}, per map evaluation {exponent(s, [r.per_map for r in rows]):.2f}"
        )
    return "\n".join(lines)


def gradient_row(profiles: int, types: int, alpha: float = 3.5) -> dict[str, float]:
    """Evaluation and exact gradient (cell model) of one instance: CPU seconds and traced peaks."""
    inst = scale_instance(types, profiles, alpha=alpha)
    tracemalloc.start()
    eval_seconds, ev = _cpu(lambda: _evaluated(inst, "cell"))
    eval_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    grad_seconds, _ = _cpu(lambda: sensitivity(ev))
    grad_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "profiles": profiles,
        "types": types,
        "alpha": alpha,
        "evaluation_cpu": eval_seconds,
        "gradient_cpu": grad_seconds,
        "ratio": grad_seconds / eval_seconds,
        "evaluation_peak_mb": eval_peak / 2**20,
        "gradient_peak_mb": grad_peak / 2**20,
    }


def render_gradient(row: dict[str, float]) -> str:
    return (
        f"{row['profiles']}×{row['types']} α={row['alpha']:g} cell model: evaluation {row['evaluation_cpu']:.2f} s CPU "
        f"(peak {row['evaluation_peak_mb']:.0f} MB), gradient {row['gradient_cpu']:.2f} s CPU (peak {row['gradient_peak_mb']:.0f} MB), "
        f"gradient / evaluation {row['ratio']:.2f}"
    )


TARGETS = {"evaluation_cpu": 10.0, "ratio": 2.0, "peak_mb": 2048.0, "exponent": 2.0}  # the scale targets (docs/model.md §16.5)
_TARGET_CHILD = """
import json, resource, sys, time
from edgeprefix.benchmarks.workloads.scale_instances import scale_instance
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.sensitivity import sensitivity
inst = scale_instance(int(sys.argv[2]), int(sys.argv[1]), alpha=float(sys.argv[3]))
floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.process_time()
ev = evaluate(inst, queue_model="cell")
ev.coverage()
middle = time.process_time()
sensitivity(ev)
end = time.process_time()
print(json.dumps({"evaluation_cpu": middle - start, "gradient_cpu": end - middle, "floor_mb": floor / 1024,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def target_row(profiles: int, types: int, alpha: float = 3.5) -> dict[str, float]:
    """Evaluation (cell model) and its exact gradient in a fresh process: CPU seconds and peak resident memory
    (``ru_maxrss``, imports and instance included; ``floor_mb`` is the peak before the evaluation)."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _TARGET_CHILD, str(profiles), str(types), str(alpha)], capture_output=True, text=True, check=True
    )
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row.update(profiles=profiles, types=types, alpha=alpha, ratio=row["gradient_cpu"] / row["evaluation_cpu"])
    return row


def render_targets(row: dict[str, float], exponent_fit: tuple[list[SizeRow], float] | None) -> str:
    def verdict(value: float, limit: float) -> str:
        return f"{'met' if value <= limit else f'NOT met ({value / limit:.1f}x the limit)'}"

    size = f"{row['profiles']}×{row['types']} α={row['alpha']:g}, cell model"
    full = (row["profiles"], row["types"]) == (300, 1000)

    def absolute(value: float, limit: float) -> str:  # CPU and memory targets hold at 300 × 1,000 only
        return verdict(value, limit) if full else "reduced size, no verdict (the target is set at 300×1000: --target-size 300x1000)"

    lines = [
        f"evaluation CPU s ({size}): {row['evaluation_cpu']:.2f} (target ≤ {TARGETS['evaluation_cpu']:g} s "
        f"at 300×1000): {absolute(row['evaluation_cpu'], TARGETS['evaluation_cpu'])}",
        f"gradient / evaluation: {row['ratio']:.2f} (target ≤ {TARGETS['ratio']:g}): {verdict(row['ratio'], TARGETS['ratio'])}",
        f"peak resident MB (fresh process, imports {row['floor_mb']:.0f} MB): {row['peak_mb']:.0f} "
        f"(target ≤ {TARGETS['peak_mb']:g}): {absolute(row['peak_mb'], TARGETS['peak_mb'])}",
    ]
    if exponent_fit is not None:
        rows, value = exponent_fit
        lines.append(
            f"|S| exponent of the evaluation over {rows[0].profiles}–{rows[-1].profiles} profiles ({rows[0].types} types, "
            f"α = {rows[0].alpha:g}): {value:.2f} (target ≤ {TARGETS['exponent']:g}): {verdict(value, TARGETS['exponent'])}"
        )
    return "\n".join(lines)


def _mooncake_mixes(mixes: int, alpha: float):
    """``mooncake_large`` at radio exponent ``alpha`` and ``mixes`` Dirichlet(1) mixes (seed 0), the batch tables' cases."""
    inst = load_benchmark("mooncake_large").with_network(radio_exponent=alpha)
    return inst, np.random.default_rng(0).dirichlet(np.ones(len(inst.profiles)), size=mixes)


def batch_rows(mixes: int, alphas: tuple[float, ...] = (2.0, 3.5), repeats: int = 1, folded: bool = False) -> list[dict[str, object]]:
    """``evaluate_batch`` against a loop of ``evaluate`` on the same mixes; with ``repeats`` > 1 the two alternate
    that many times in this process and the row gives the medians (and every ratio: the machine is shared).

    ``folded`` batches the mixes at α ≠ 2 too (``BATCH_QUADRATURE``: the kernel on the mixes' types side by side,
    the same quadrature rule as the loop), which ``evaluate_batch`` does not do by default (docs/model.md §16.3)."""
    rows: list[dict[str, object]] = []
    for alpha in alphas:
        inst, points = _mooncake_mixes(mixes, alpha)
        loops, batches = [], []
        for _ in range(max(1, repeats)):
            loop_seconds, loop = _cpu(lambda inst=inst, points=points: [evaluate(inst, m).coverage() for m in points])
            forced = mock.patch.object(batch_module, "BATCH_QUADRATURE", True) if folded else contextlib.nullcontext()
            with forced:
                batch_seconds, batch = _cpu(lambda inst=inst, points=points: evaluate_batch(inst, points))
            loops.append(loop_seconds)
            batches.append(batch_seconds)
        rows.append(
            {
                "alpha": alpha,
                "mixes": mixes,
                "loop_cpu": float(np.median(loops)),
                "batch_cpu": float(np.median(batches)),
                "ratio": float(np.median(np.array(loops) / np.array(batches))),
                "ratios": [a / b for a, b in zip(loops, batches)],
                "route": batch.route,
                "max_coverage_diff": float(np.max(np.abs(np.array(loop) - batch.coverage))),
            }
        )
    return rows


def render_batch(rows: list[dict[str, object]]) -> str:
    head = f"{'α':>5}{'mixes':>7}{'loop CPU s':>12}{'batch CPU s':>13}{'ratio':>7}{'|Δcov|':>10}  route"
    lines = [head, "-" * len(head)]
    for r in rows:
        ratios = cast("list[float]", r.get("ratios", []))
        spread = f" (ratios {min(ratios):.2f}–{max(ratios):.2f} over {len(ratios)} alternating runs)" if len(ratios) > 1 else ""
        lines.append(
            f"{r['alpha']:>5.1f}{r['mixes']:>7}{r['loop_cpu']:>12.2f}{r['batch_cpu']:>13.2f}{r['ratio']:>7.2f}"
            f"{r['max_coverage_diff']:>10.1e}  {r['route']}{spread}"
        )
    return "\n".join(lines)


def rule_rows(mixes: int, nodes: tuple[int, ...] = (24, 40, 64), alpha: float = 3.5) -> list[dict[str, float]]:
    """How far ``P_cov(τ_0)`` moves when the quadrature rule changes: ``AnalyticKernel(nodes=n)`` against the
    default rule, per mix of ``mooncake_large`` at ``alpha`` (smallest and largest ``|ΔP_cov|`` over the mixes)."""
    inst, points = _mooncake_mixes(mixes, alpha)
    reference = [float(evaluate(inst, m).coverage()) for m in points]
    rows: list[dict[str, float]] = []
    for n in nodes:
        moved = [abs(float(evaluate(inst, m, kernel=AnalyticKernel(nodes=n)).coverage()) - ref) for m, ref in zip(points, reference)]
        rows.append({"nodes": n, "default": default_nodes(alpha), "alpha": alpha, "min": min(moved), "max": max(moved)})
    return rows


def render_rules(rows: list[dict[str, float]]) -> str:
    head = f"{'nodes per segment':>18}{'min |ΔP_cov|':>14}{'max |ΔP_cov|':>14}  against the default rule"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{int(r['nodes']):>18}{r['min']:>14.1e}{r['max']:>14.1e}  {int(r['default'])} nodes, α = {r['alpha']:g}")
    return "\n".join(lines)


def bound_report(mixes: int, repeats: int = 2) -> str:
    """The two tables behind docs/model.md §16.3's bound on batching at α ≠ 2 (``--bound MIXES``)."""
    return "\n".join(
        [
            f"coverage of mooncake_large at α = 3.5 under other quadrature rules ({mixes} Dirichlet(1) mixes); "
            "a batch within 1e-12 of evaluate must use the default rule",
            render_rules(rule_rows(mixes)),
            "",
            "the default rule batched (the mixes' types side by side, one kernel call) against the loop, CPU seconds",
            render_batch(batch_rows(mixes, alphas=(3.5,), repeats=repeats, folded=True)),
        ]
    )


def report(profiles: list[int], types: int, gradient_size: tuple[int, int], mixes: int, repeats: int = 1) -> str:
    parts = [f"evaluation vs |S| (scale_instance, α = 3.5, {types} types, CPU seconds)", render_sizes(size_rows(profiles, types))]
    parts += ["", "exact gradient against its evaluation", render_gradient(gradient_row(*gradient_size))]
    parts += [
        "",
        f"evaluate_batch against a loop of evaluate (mooncake_large, {mixes} Dirichlet(1) mixes, CPU seconds)",
        render_batch(batch_rows(mixes, repeats=repeats)),
    ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.scale_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="10,20,40,80,160", help="profile counts of the |S| fit (default 10,20,40,80,160)")
    parser.add_argument("--types", type=int, default=10, help="request types of the |S| fit (default 10)")
    parser.add_argument("--gradient-size", default="40x20", help="profiles x types of the gradient row (default 40x20)")
    parser.add_argument("--mixes", type=int, default=40, help="mixes of the batch table (default 40)")
    parser.add_argument(
        "--batch-repeats", type=int, default=1, help="alternating loop / batch runs of the batch table, medians shown (default 1)"
    )
    parser.add_argument(
        "--bound",
        type=int,
        default=0,
        metavar="MIXES",
        help="print only the bound on batching at α ≠ 2 (docs/model.md §16.3) on this many mixes",
    )
    args = parser.parse_args(argv)
    if args.bound < 0:
        parser.error("--bound takes a number of mixes >= 1 (0, the default, prints the scaling tables)")
    if args.bound:
        print(bound_report(args.bound, max(2, args.batch_repeats)))
        return 0
    try:
        profiles = [int(x) for x in args.profiles.split(",")]
        gs, gq = (int(x) for x in args.gradient_size.lower().split("x"))
    except ValueError:
        parser.error("--profiles takes integers separated by commas and --gradient-size PROFILESxTYPES")
    if min(profiles) < 2 or args.types < 1 or gs < 2 or gq < 1 or args.mixes < 1 or args.batch_repeats < 1:
        parser.error("--profiles needs counts >= 2, --types, --mixes, --batch-repeats and the gradient size positive")
    print(report(profiles, args.types, (gs, gq), args.mixes, args.batch_repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
