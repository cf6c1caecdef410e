"""The command line of the joint calibration (``python -m edgeprefix.benchmarks.paper.calibration``).

``--seed S --budget N [--restarts R] [--log FILE] [--write]``: search (progress on stderr) and
print every target of the best point; ``--check``: the same report for the shipped
``paper_section6``; ``--pareto LOG [--plot PNG]``: the non-dominated trade-offs of a search log.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import tomli_w

from edgeprefix.benchmarks.paper.calibration.assess import CAPS, WEIGHTS, Assessment, assess
from edgeprefix.benchmarks.paper.calibration.search import pareto_front, read_log, search
from edgeprefix.benchmarks.paper.calibration.section6 import (
    NAME,
    START,
    build_instance,
    instance_mapping,
    shipped_parameters,
    write_settings,
)
from edgeprefix.placement.atomic import atomic_write_text

TOML_PATH = Path(__file__).resolve().parents[3] / "placement" / "data" / f"{NAME}.toml"
HEADER = """\
# {name}: the paper's Sec. VI on one instance (Figs 3, 4, 6-12).
#
# Produced by `{command}`:
# a CMA-ES search over the 16 free coordinates of edgeprefix.benchmarks.paper.calibration.section6.Parameters
# (benchmarks/paper/calibration/README.md).
# Units are normalised: λ_b = 1 is one node per unit area, memory in units where one active
# sequence needs m_run = 1.  c = {slots} for (none, shallow, deep).  The figure loads the paper
# does not state are in benchmarks/paper/calibration/calibrated.json; `placement.mix` is Fig. 8's mix;
# the budget, the fallback minimum and the deep cap define Fig. 10's candidates.
"""


def report(a: Assessment) -> str:
    """Every target of one assessment: shortfall (0 = met with the search margin), loads, misses."""
    lines = [
        "parameters: " + ", ".join(f"{k}={v:.6g}" for k, v in a.params.as_dict().items()),
        "instance: " + ", ".join(f"{k}={_fmt(v)}" for k, v in a.params.natural().items()),
        f"stage reached: {a.stage or 'invalid'} ({a.evaluations} model evaluations)",
    ]
    if "invalid" in a.details:
        lines.append(f"invalid: {a.details['invalid']}")
    lines.append(f"{'target':<10}{'weight':>8}{'shortfall':>12}")
    for key in WEIGHTS:
        value = a.shortfalls.get(key)
        lines.append(f"{key:<10}{WEIGHTS[key]:>8g}{'not reached' if value is None else f'{value:.5f}':>12}")
    lines.append(f"penalty = {a.penalty():.5f} (0: every target met with margin)")
    lines.append("figure loads: " + ", ".join(f"{k}={v}" for k, v in a.figure_loads().as_dict().items()))
    for name, miss in a.details.get("misses", {}).items():
        lines.append(f"  {name:<28}{miss:+.4f}")
    for key in ("fig7", "fig9", "fig10"):
        if key in a.details:
            lines.append(f"  {key}: {a.details[key]}")
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v:.4g}" for k, v in value.items()) + "}"
    return f"{value:.6g}"


def write(a: Assessment, command: str, search_meta: dict[str, Any], path: Path = TOML_PATH) -> None:
    """Write the instance TOML and record its parameters and figure loads (both atomically)."""
    data = instance_mapping(a.params)
    slots = build_instance(a.params).concurrency
    header = HEADER.format(name=NAME, command=command, slots=tuple(int(c) for c in slots))
    atomic_write_text(path, header + tomli_w.dumps(data))
    write_settings(NAME, a.params, a.figure_loads(), search_meta)


def pareto_table(records: list[dict[str, Any]]) -> str:
    keys = tuple(WEIGHTS)
    front = pareto_front(records, keys)
    lines = [
        f"{len(front)} non-dominated of {sum(r['stage'] == 'fig10' for r in records)} complete assessments "
        f"({len(records)} logged); objectives = capped shortfalls {dict(CAPS)}",
        "  ".join(f"{k:>9}" for k in ("trial", *keys)),
    ]
    for r in sorted(front, key=lambda r: r["penalty"]):
        lines.append("  ".join([f"{r['trial']:>9}"] + [f"{r['objectives'][k]:>9.4f}" for k in keys]))
    return "\n".join(lines)


def plot_pareto(records: list[dict[str, Any]], path: Path) -> None:
    """Pairwise scatter of the non-dominated shortfalls (which targets trade against which)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from edgeprefix.placement.atomic import atomic_savefig

    keys = [k for k in WEIGHTS if k != "shape"]
    complete = [r for r in records if r["stage"] == "fig10"]
    front = pareto_front(records)
    n = len(keys)
    fig, axes = plt.subplots(n, n, figsize=(2.2 * n, 2.2 * n))
    for i, ky in enumerate(keys):
        for j, kx in enumerate(keys):
            ax = axes[i, j]
            if i == j:
                ax.hist([r["objectives"][kx] for r in front], bins=12, color="tab:blue")
            else:
                ax.scatter([r["objectives"][kx] for r in complete], [r["objectives"][ky] for r in complete], s=3, c="0.8")
                ax.scatter([r["objectives"][kx] for r in front], [r["objectives"][ky] for r in front], s=8, c="tab:red")
            if i == n - 1:
                ax.set_xlabel(f"{kx} shortfall", fontsize=8)
            if j == 0:
                ax.set_ylabel(f"{ky} shortfall", fontsize=8)
            ax.tick_params(labelsize=6)
    fig.suptitle(f"Joint calibration: shortfall trade-offs (red: non-dominated, {len(front)} of {len(complete)})", fontsize=10)
    fig.tight_layout()
    try:
        atomic_savefig(fig, path, dpi=110)
    finally:
        plt.close(fig)


def search_command(args: argparse.Namespace) -> str:
    """The command that reproduces a search (the options that change its result; no file paths)."""
    parts = ["python -m edgeprefix.benchmarks.paper.calibration", f"--seed {args.seed}"]
    for option, default in (("budget", 1500), ("restarts", 2), ("sigma", 0.02), ("start", "design")):
        value = getattr(args, option)
        if value != default:
            parts.append(f"--{option} {value}")
    return " ".join([*parts, "--write"])


def section6_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgeprefix.benchmarks.paper.calibration",
        description="joint calibration of paper_section6 (CMA-ES over 16 free parameters); --legacy for paper_calibrated",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the search (default 0)")
    parser.add_argument("--budget", type=int, default=1500, help="assessed candidates, rounded up to whole generations (default 1500)")
    parser.add_argument("--restarts", type=int, default=2, help="CMA-ES rounds (IPOP: the population doubles each round; default 2)")
    parser.add_argument("--sigma", type=float, default=0.02, help="initial CMA-ES step in the unit cube (default 0.02)")
    parser.add_argument(
        "--start",
        choices=("design", "shipped"),
        default="design",
        help="search from the documented design point (default) or from the shipped parameters",
    )
    parser.add_argument("--log", type=Path, default=None, help="append one JSON line per assessed candidate")
    parser.add_argument("--write", action="store_true", help=f"write {TOML_PATH.name} and the figure loads")
    parser.add_argument("--check", action="store_true", help="report the shipped paper_section6 without searching")
    parser.add_argument("--pareto", type=Path, default=None, metavar="LOG", help="non-dominated trade-offs of a search log")
    parser.add_argument("--plot", type=Path, default=None, metavar="PNG", help="with --pareto: draw them")
    args = parser.parse_args(argv)
    if args.pareto is not None:
        if not args.pareto.is_file():
            raise SystemExit(f"--pareto: no such log file {args.pareto}")
        records = read_log(args.pareto)
        print(pareto_table(records))
        if args.plot is not None:
            plot_pareto(records, args.plot)
            print(f"wrote {args.plot}")
        return 0
    if args.check:
        a = assess(shipped_parameters())
        print(report(a))
        return 0 if a.penalty() == 0.0 else 1
    start = START if args.start == "design" else shipped_parameters()
    result = search(start, seed=args.seed, budget=args.budget, restarts=args.restarts, log=args.log, sigma0=args.sigma)
    best = result.best
    rounded = assess(best.params.rounded())
    if rounded.complete and rounded.penalty() <= best.penalty():
        best = rounded
    print(report(best))
    print(f"search: {result.trials} candidates in {result.seconds:.0f} s")
    if args.write:
        command = search_command(args)
        write(
            best,
            command,
            {
                "command": command,
                "seed": args.seed,
                "budget": args.budget,
                "restarts": args.restarts,
                "sigma": args.sigma,
                "start": args.start,
                "candidates": result.trials,
                "penalty": best.penalty(),
            },
        )
        print(f"wrote {TOML_PATH} and the figure loads")
    return 0 if best.penalty() == 0.0 else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(section6_main(sys.argv[1:]))
