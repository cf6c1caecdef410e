"""Start-up time of the command line against plain Python imports, measured in one run.

Each command runs as a fresh subprocess (in a temporary folder, so nothing is imported from
a source tree), ``repeats`` times after one warm-up, with the commands interleaved so a change
of machine load hits all of them alike.  The table gives the median wall time and the ratio
to a reference measured in the same run:

- ``edgeprefix --help`` against ``python -c "import argparse"`` (goal ≤ 6×);
- ``edgeprefix evaluate --json`` against ``python -c "import numpy, scipy.special"`` (goal ≤ 2.5×);
- ``edgeprefix solve`` (defaults: SPSA, 300 evaluations of ``paper_baseline``) and ``edgeprefix plan-density
  --reliability 0.9`` against ``python -c "import numpy, scipy, pyomo.environ"`` (goal ≤ 1.5×).  Neither
  command imports cvxpy or Optuna (the registry imports a method's module when it is asked for, the
  projection imports cvxpy only for a polytope the exact algorithm does not cover), nor Pyomo and so
  not ``scipy.stats`` (Pyomo's deferred import of scipy loads it as soon as Pyomo and scipy are both
  imported, in either order; the reference pays it): the placement polytope is read without building
  the Pyomo model, which is built on first access (:mod:`edgeprefix.formulations.placement`).

Run ``python -m edgeprefix.benchmarks.speed.startup [--repeats N]`` (``python -m
edgeprefix.benchmarks.speed.perf`` prints the same table after its evaluation timings).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from edgeprefix.placement.progress import progress_bar


@dataclass(frozen=True)
class Probe:
    """One command timed as a subprocess; ``reference`` names the probe it is compared with."""

    name: str
    argv: tuple[str, ...]
    reference: str | None = None
    goal: float | None = None  # largest allowed ratio to the reference


def edgeprefix_command() -> tuple[str, ...]:
    """The installed ``edgeprefix`` script beside this interpreter, else ``python -m edgeprefix``."""
    script = Path(sys.executable).with_name("edgeprefix")
    return (str(script),) if script.is_file() else (sys.executable, "-m", "edgeprefix")


def probes() -> list[Probe]:
    cli = edgeprefix_command()
    return [
        Probe('python -c "import argparse"', (sys.executable, "-c", "import argparse")),
        Probe("edgeprefix --help", (*cli, "--help"), reference='python -c "import argparse"', goal=6.0),
        Probe('python -c "import numpy, scipy.special"', (sys.executable, "-c", "import numpy, scipy.special")),
        Probe("edgeprefix evaluate --json", (*cli, "evaluate", "--json"), reference='python -c "import numpy, scipy.special"', goal=2.5),
        Probe('python -c "import numpy, scipy, pyomo.environ"', (sys.executable, "-c", "import numpy, scipy, pyomo.environ")),
        Probe("edgeprefix solve", (*cli, "solve"), reference='python -c "import numpy, scipy, pyomo.environ"', goal=1.5),
        Probe(
            "edgeprefix plan-density --reliability 0.9",
            (*cli, "plan-density", "--reliability", "0.9"),
            reference='python -c "import numpy, scipy, pyomo.environ"',
            goal=1.5,
        ),
    ]


def _run_once(probe: Probe, cwd: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(probe.argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"{probe.name} exited with code {done.returncode}: {message[-1] if message else ''}")
    return elapsed


def measure(repeats: int = 15, selected: list[Probe] | None = None) -> list[dict[str, object]]:
    """Median wall time [ms] of every probe over ``repeats`` interleaved runs, with its ratio."""
    if repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {repeats}")
    chosen = selected if selected is not None else probes()
    times: dict[str, list[float]] = {p.name: [] for p in chosen}
    with tempfile.TemporaryDirectory(prefix="edgeprefix-startup-") as cwd:
        for probe in chosen:  # warm-up: file caches, .pyc files
            _run_once(probe, cwd)
        with progress_bar(total=repeats * len(chosen), desc="start-up", unit="run") as bar:
            for _ in range(repeats):
                for probe in chosen:
                    times[probe.name].append(_run_once(probe, cwd))
                    bar.update(1)
    medians = {name: 1e3 * statistics.median(values) for name, values in times.items()}
    rows: list[dict[str, object]] = []
    for probe in chosen:
        row: dict[str, object] = {"command": probe.name, "median_ms": medians[probe.name], "repeats": repeats}
        if probe.reference is not None:
            ratio = medians[probe.name] / medians[probe.reference]
            row.update(
                {"reference": probe.reference, "ratio": ratio, "goal": probe.goal, "meets_goal": probe.goal is None or ratio <= probe.goal}
            )
        rows.append(row)
    return rows


def render(rows: list[dict[str, object]]) -> str:
    width = max(len(str(r["command"])) for r in rows) + 2
    head = f"{'command':<{width}}{'median ms':>10}{'ratio':>8}{'goal':>7}  reference"
    lines = [head, "-" * len(head)]
    for r in rows:
        if "ratio" in r:
            verdict = "" if r["meets_goal"] else "  (misses the goal)"
            lines.append(f"{r['command']:<{width}}{r['median_ms']:>10.1f}{r['ratio']:>7.2f}×{r['goal']:>6.1f}×  {r['reference']}{verdict}")
        else:
            lines.append(f"{r['command']:<{width}}{r['median_ms']:>10.1f}{'':>8}{'':>7}  (reference)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.startup", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per command after one warm-up (default: 15)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    print(render(measure(args.repeats)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
