"""What a KKT certificate (docs/model.md §18.6) costs, and what ``--certify`` buys from a poor start.

Run ``python -m edgeprefix.benchmarks.optimisers.certify_cost [--quick] [--repeats 3] [--out DIR]``.  For the
benchmark instances and the classical family's dimension ladder (6 to 300 profiles, known ``P*``):

* ``score`` / ``certificate`` — median process CPU milliseconds of one ``problem.score(π)`` and of
  the certificate every result carries (``certify_point``: the exact gradient reusing the point's
  fixed point, then the multiplier fit) at the certified optimum, and their ratio;
* a poor start — ``solve(method="random", budget=5, seed=0)`` — its residual and gap to ``P*``;
* ``certify`` from it (tolerance 1e-6): evaluations, gradient solves, SLSQP descents, the residual
  and gap reached, and the CPU seconds;
* the reference a user would run instead: the gradient method from the instance's own initial point
  with the same total number of evaluations (``solve(method="gradient")``, restarts included).

The gap is to the known ``P*`` on the classical family and to the best of both runs elsewhere.
``--out`` writes ``certify_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from edgeprefix.benchmarks.optimisers.classical import classical_instance, suite
from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.solvers import certify, solve
from edgeprefix.solvers.certificate import certify_point

INSTANCES = ("paper_baseline", "medium_forest", "mooncake_large")
TOLERANCE = 1e-6


@dataclass(frozen=True)
class Row:
    instance: str
    profiles: int
    score_ms: float
    certificate_ms: float
    start_residual: float
    start_gap: float
    evaluations: int
    gradient_solves: int
    descents: int
    residual: float | None
    certified: bool
    gap: float
    seconds: float
    reference_residual: float | None
    reference_gap: float


def _cpu_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(1e3 * (time.process_time() - start))
    return float(np.median(times))


def measure(name: str, instance, repeats: int) -> Row:
    problem = placement_problem(instance)
    poor = solve(problem, "random", budget=5, seed=0)
    start = time.process_time()
    good = certify(problem, poor, tol=TOLERANCE)
    seconds = time.process_time() - start
    reference = solve(problem, "gradient", budget=good.nfev, seed=0)
    known = instance.metadata.get("known_optimum")
    best = float(known) if known is not None else max(good.coverage, reference.coverage)
    score = problem.score(good.x)
    score_ms = _cpu_ms(lambda: problem.score(good.x), repeats)
    certificate_ms = _cpu_ms(lambda: certify_point(problem, score), repeats)
    residual = lambda r: None if r.certificate is None else r.certificate.residual  # noqa: E731
    assert poor.certificate is not None and good.polish is not None  # solve() certifies its result, certify() polishes it
    return Row(
        name,
        problem.dimension,
        score_ms,
        certificate_ms,
        poor.certificate.residual,
        best - poor.coverage,
        good.polish["evaluations"],
        good.polish["gradient_solves"],
        good.polish["rounds"],
        residual(good),
        bool(good.certified),
        best - good.coverage,
        seconds,
        residual(reference),
        best - reference.coverage,
    )


def table(rows: list[Row]) -> str:
    def sci(value: float | None) -> str:
        return "—" if value is None else f"{value:.1e}"

    lines = [
        "| instance | \\|S\\| | score ms | certificate ms | ÷ score | start residual | start gap | certify evals | "
        "gradients | descents | residual | certified | gap | CPU s | reference residual | reference gap |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.instance} | {r.profiles} | {r.score_ms:.2f} | {r.certificate_ms:.2f} | {r.certificate_ms / r.score_ms:.1f} | "
            f"{sci(r.start_residual)} | {sci(r.start_gap)} | {r.evaluations} | {r.gradient_solves} | {r.descents} | "
            f"{sci(r.residual)} | {r.certified} | {sci(r.gap)} | {r.seconds:.2f} | {sci(r.reference_residual)} | {sci(r.reference_gap)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip mooncake_large and the 120- and 300-profile classical instances")
    parser.add_argument("--repeats", type=int, default=3, help="timing repetitions (median; default 3)")
    parser.add_argument("--out", default=None, metavar="DIR", help="write certify_cost.json here")
    args = parser.parse_args(argv)
    cases = [(name, load_benchmark(name)) for name in INSTANCES if not (args.quick and name == "mooncake_large")]
    for spec in suite(0):
        inst = classical_instance(spec)
        if args.quick and len(inst.profiles) > 50:
            continue
        cases.append((f"classical J{spec.files} K{spec.cache}", inst))
    rows = []
    for name, inst in cases:
        rows.append(measure(name, inst, args.repeats))
        print(f"{name}: done", flush=True)
    print(table(rows))
    if args.out is not None:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(folder / "certify_cost.json", json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
