"""CPU cost of one exact gradient (docs/model.md §15) against one evaluation, measured in the same run.

Run ``python -m edgeprefix.benchmarks.speed.gradient_cost [--repeats 30] [--out DIR]``.  For each benchmark
instance at two mixes — the projected uniform mix (every share positive) and the optimum the
gradient method finds (some shares at 0, whose one-sided derivatives need a test tier each) — it
times, interleaved so that the machine's load hits all alike (median CPU milliseconds):

* ``score cold`` — ``problem.score(π)``: the fixed point from ``W = 0`` and ``P_cov(τ_0)``;
* ``score warm`` — the same, warm-started from the point's own delays (what a search pays
  between nearby points: Newton's first evaluation already meets the tolerance);
* ``gradient`` — ``problem.gradient(score)``: the adjoint solve, the coverage integrals'
  vector–Jacobian products and the test tiers, reusing the point's fixed point.

It prints a table with the ratios gradient / score and writes ``gradient_cost.json`` / ``.csv``
with ``--out``.  ``--queue-model cell`` scores and differentiates the cell model (docs/model.md §14.6),
``--radio-exponent A`` sets ``α`` on every instance (its own otherwise).  ``--to-target`` adds a second table: at 0.5, 1 and 1.3 times each instance's
load, the evaluations and CPU milliseconds the gradient method, scipy's SLSQP with finite
differences (``slsqp-fd``) and CMA-ES (seeds 0–2, median) take to come within 1e-4 of the best
known optimum (the best of a 300-evaluation gradient run with restarts and the three methods' runs).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.instance import atomic_write_text
from edgeprefix.solvers import Projection, solve

INSTANCES = ("paper_baseline", "medium_forest", "mooncake_large", "paper_calibrated")


@dataclass(frozen=True)
class CostRow:
    instance: str
    mix: str
    profiles: int
    zero_shares: int
    score_cold_ms: float
    score_warm_ms: float
    gradient_ms: float

    @property
    def ratio_cold(self) -> float:
        return self.gradient_ms / self.score_cold_ms

    @property
    def ratio_warm(self) -> float:
        return self.gradient_ms / self.score_warm_ms


def _cpu_ms(fn) -> float:
    start = time.process_time()
    fn()
    return 1e3 * (time.process_time() - start)


def measure(name: str, repeats: int, queue_model: str = "meanfield", alpha: float | None = None) -> list[CostRow]:
    instance = load_benchmark(name)
    if alpha is not None:
        instance = instance.with_network(radio_exponent=alpha)
    problem = placement_problem(instance, queue_model=queue_model)
    n = problem.dimension
    optimum = solve(problem, "gradient", budget=60, starts=1).x
    rows = []
    for label, mix in (("uniform", Projection(problem.constraints)(np.full(n, 1.0 / n))), ("optimum", optimum)):
        score = problem.score(mix)
        warm = score.warm_start
        times: dict[str, list[float]] = {"cold": [], "warm": [], "gradient": []}
        for _ in range(repeats):
            times["cold"].append(_cpu_ms(lambda: problem.score(mix)))
            times["warm"].append(_cpu_ms(lambda: problem.score(mix, warm)))
            times["gradient"].append(_cpu_ms(lambda: problem.gradient(score)))
        med = {k: float(np.median(v)) for k, v in times.items()}
        rows.append(CostRow(name, label, n, int(np.sum(mix == 0)), med["cold"], med["warm"], med["gradient"]))
    return rows


TARGET_LOADS = (0.5, 1.0, 1.3)
TARGET_METHODS = (("gradient", 40, (0,)), ("slsqp-fd", 400, (0,)), ("cmaes", 300, (0, 1, 2)))
FINE = 1e-4


def to_target(name: str, load: float) -> dict[str, tuple[float, float] | None]:
    """Per method: median (evaluations, CPU ms) to reach ``P* − 1e-4``; ``None`` when a seed never does."""
    from edgeprefix.benchmarks.optimisers.compare_runs import run_method

    runs = {m: [run_method(name, m, seed, budget, load=load) for seed in seeds] for m, budget, seeds in TARGET_METHODS}
    best = max(r.best for rs in runs.values() for r in rs)
    best = max(best, run_method(name, "gradient", 0, 300, load=load).best)
    out: dict[str, tuple[float, float] | None] = {}
    for method, records in runs.items():
        hits = [np.flatnonzero(r.curve >= best - FINE) for r in records]
        if any(h.size == 0 for h in hits):
            out[method] = None
            continue
        first = [int(h[0]) for h in hits]
        out[method] = (
            float(np.median([k + 1 for k in first])),
            float(np.median([1e3 * float(r.cpu[k]) for r, k in zip(records, first) if r.cpu is not None])),
        )
    return out


def cell_text(cell: tuple[float, float] | None) -> str:
    return "never" if cell is None else f"{cell[0]:.0f} / {cell[1]:.0f}"


def render_targets(table: dict[str, dict[str, tuple[float, float] | None]]) -> str:
    methods = [m for m, _, _ in TARGET_METHODS]
    head = f"{'instance × load':<24}" + "".join(f"{m + ' evals / CPU ms':>28}" for m in methods)
    lines = [head, "-" * len(head)]
    for label, cells in table.items():
        text = [cell_text(cells[m]) for m in methods]
        lines.append(f"{label:<24}" + "".join(f"{t:>28}" for t in text))
    return "\n".join(lines)


def render(rows: list[CostRow]) -> str:
    head = f"{'instance':<18}{'mix':<9}{'|S|':>4}{'zeros':>6}{'score cold':>11}{'score warm':>11}{'gradient':>10}{'÷ cold':>8}{'÷ warm':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.instance:<18}{r.mix:<9}{r.profiles:>4}{r.zero_shares:>6}{r.score_cold_ms:>11.2f}{r.score_warm_ms:>11.2f}"
            f"{r.gradient_ms:>10.2f}{r.ratio_cold:>8.2f}{r.ratio_warm:>8.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.gradient_cost", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30, help="timed repetitions per measurement (default: 30)")
    parser.add_argument("--instances", default=",".join(INSTANCES), help=f"comma-separated (default: {','.join(INSTANCES)})")
    parser.add_argument("--out", type=Path, default=None, help="folder for gradient_cost.json and gradient_cost.csv")
    parser.add_argument("--to-target", action="store_true", help="also time every method to within 1e-4 of the best known optimum")
    parser.add_argument(
        "--queue-model",
        choices=("meanfield", "cell"),
        default="meanfield",
        help="queue model scored and differentiated (default: meanfield)",
    )
    parser.add_argument("--radio-exponent", type=float, default=None, metavar="A", help="set α on every instance (default: its own)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    names = [name.strip() for name in args.instances.split(",") if name.strip()]
    rows = [row for name in names for row in measure(name, args.repeats, args.queue_model, args.radio_exponent)]
    print(render(rows))
    targets: dict[str, dict[str, tuple[float, float] | None]] = {}
    if args.to_target:
        from edgeprefix.benchmarks.optimisers.compare_runs import instance_label

        targets = {instance_label(name, load): to_target(name, load) for name in names for load in TARGET_LOADS}
        print()
        print(render_targets(targets))
    if args.out is not None:
        payload = [{**asdict(r), "ratio_cold": r.ratio_cold, "ratio_warm": r.ratio_warm} for r in rows]
        atomic_write_text(args.out / "gradient_cost.json", json.dumps({"cost": payload, "to_target": targets}, indent=2) + "\n")
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(payload[0]))
        writer.writeheader()
        writer.writerows(payload)
        atomic_write_text(args.out / "gradient_cost.csv", buffer.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
