"""Sweeps over loads × densities × instances × seeds, one search per cell, on Dask distributed.

Run ``python -m edgeprefix.benchmarks.sweeps.sweep INSTANCE... --loads 1,2 --densities 0.5,1 --seeds 0-1
[--method grid] [--dask ADDRESS | --workers N | --serial] [--json] --out sweep.csv``
(``edgeprefix sweep`` is the same; ``--seeds`` names seed values, as on every command).  Every
cell is one task: build the instance with ``Λ = load`` and ``λ_b = density``, solve its
placement problem with the given method and seed, and return one CSV row.  A row is a pure
function of its cell (no timings in it), and rows are gathered in cell order, so the CSV is
byte-for-byte the one the serial run (``--serial``) writes.
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from edgeprefix.benchmarks.sweeps.seeds import SEEDS_HELP, seeds_argument
from edgeprefix.formulations.objective import POLICIES, QUEUE_MODELS
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.instance import atomic_write_text, load_instance
from edgeprefix.placement.progress import progress_bar
from edgeprefix.solvers import SOLVERS, solve
from edgeprefix.solvers.distributed import dask_client, local_cluster_pays, map_ordered

COLUMNS = (
    "instance",
    "load",
    "density",
    "seed",
    "method",
    "policy",
    "objective",
    "coverage",
    "feasible",
    "status",
    "evaluations",
    "mix",
)


@dataclass(frozen=True)
class Cell:
    """One point of the sweep: instance (file or embedded name), ``Λ``, ``λ_b`` and seed."""

    instance: str
    load: float
    density: float
    seed: int


@dataclass(frozen=True)
class Sweep:
    """The grid of cells and the search run in each.

    Parameters
    ----------
    instances : instance files or embedded names.
    loads : request intensities ``Λ`` (``network.request_intensity``), each > 0.
    densities : edge densities ``λ_b`` (``network.edge_density``), each > 0.
    seeds : seeds of the search (a deterministic method gives the same row for every seed).
    method, budget, options : passed to :func:`edgeprefix.solvers.solve`.
    policy, target : routing policy and ``τ_0`` (default: the instance's).
    """

    instances: tuple[str, ...]
    loads: tuple[float, ...]
    densities: tuple[float, ...]
    seeds: tuple[int, ...] = (0,)
    method: str = "grid"
    budget: int | None = None
    options: tuple[tuple[str, Any], ...] = field(default=())
    policy: str = "load_aware"
    target: float | None = None
    queue_model: str = "meanfield"  # docs/model.md §14

    def __post_init__(self) -> None:
        for key in ("instances", "loads", "densities", "seeds"):
            if not getattr(self, key):
                raise ValueError(f"sweep field {key} needs at least one value, got {getattr(self, key)!r}")
        for key in ("loads", "densities"):
            bad = [v for v in getattr(self, key) if not v > 0]
            if bad:
                raise ValueError(f"sweep field {key} must hold positive numbers, got {plain(bad[0])}")
        if self.method not in SOLVERS:
            raise ValueError(f"unknown method {self.method!r} (valid: {list(SOLVERS)})")
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {list(POLICIES)}, got {self.policy!r}")

    def cells(self) -> list[Cell]:
        """Every cell, instances outermost, seeds innermost."""
        return [Cell(*values) for values in itertools.product(self.instances, self.loads, self.densities, self.seeds)]


def run_cell(sweep: Sweep, cell: Cell) -> dict[str, Any]:
    """Solve one cell and return its CSV row (floats as ``repr``, the mix as ``id=share;...``)."""
    instance = load_instance(cell.instance).with_network(request_intensity=cell.load, edge_density=cell.density)
    problem = placement_problem(instance, target=sweep.target, policy=sweep.policy, queue_model=sweep.queue_model)
    result = solve(problem, sweep.method, budget=sweep.budget, seed=cell.seed, **dict(sweep.options))
    return {
        "instance": instance.name,
        "load": repr(cell.load),
        "density": repr(cell.density),
        "seed": cell.seed,
        "method": sweep.method,
        "policy": sweep.policy,
        "objective": repr(result.fun),
        "coverage": repr(result.coverage),
        "feasible": int(result.success),
        "status": result.status.value,
        "evaluations": result.nfev,
        "mix": ";".join(f"{k}={plain(v)}" for k, v in result.mix.items()),
    }


def run_sweep(sweep: Sweep, client: Any = None) -> list[dict[str, Any]]:
    """Rows of every cell in :meth:`Sweep.cells` order; one Dask task per cell when ``client`` is given.

    A progress bar counts the finished cells on stderr (on a terminal).
    """
    cells = sweep.cells()
    with progress_bar(total=len(cells), desc="sweep", unit="cell") as bar:
        return map_ordered(partial(run_cell, sweep), cells, client, on_done=lambda: bar.update(1))


def typed_row(row: dict[str, Any]) -> dict[str, Any]:
    """A CSV row with numbers as numbers and the mix as ``{profile: share}`` (the ``--json`` form)."""
    out = dict(row)
    for key in ("load", "density", "objective", "coverage"):
        value = float(row[key])
        out[key] = value if math.isfinite(value) else None
    out["feasible"] = bool(row["feasible"])
    out["mix"] = {k: float(v) for k, _, v in (part.partition("=") for part in row["mix"].split(";") if part)}
    return out


def sweep_csv(rows: Sequence[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(",") if v.strip())


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sweep's command-line arguments (shared with ``edgeprefix sweep``)."""
    parser.add_argument("instances", nargs="*", default=["paper_baseline"], metavar="INSTANCE", help="instance files or embedded names")
    parser.add_argument("--loads", type=_floats, required=True, metavar="Λ,...", help="request intensities, comma-separated")
    parser.add_argument("--densities", type=_floats, required=True, metavar="λ_b,...", help="edge densities, comma-separated")
    parser.add_argument("--seeds", type=seeds_argument, default=(0,), metavar="SEEDS", help=f"{SEEDS_HELP} (default: 0)")
    parser.add_argument("--method", choices=list(SOLVERS), default="grid", help="search method per cell (default: grid)")
    parser.add_argument("--budget", type=int, default=None, metavar="N", help="evaluations per cell (grid: every point)")
    parser.add_argument("--resolution", type=int, default=None, metavar="K", help="grid step 1/K (only with --method grid)")
    parser.add_argument("--policy", choices=POLICIES, default="load_aware", help="routing policy of every cell (default: load_aware)")
    parser.add_argument(
        "--queue-model",
        default="meanfield",
        metavar="{" + ",".join(QUEUE_MODELS) + "}",
        help="queue model of the coverage: meanfield (eq. (39)) or cell (docs/model.md §14); default: meanfield",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--dask", default=None, metavar="ADDRESS", help="Dask scheduler address (default: a LocalCluster)")
    where.add_argument("--serial", action="store_true", help="run the cells one after the other in this process")
    parser.add_argument("--workers", type=int, default=None, metavar="N", help="LocalCluster worker processes (default: one per CPU)")
    parser.add_argument("--out", default=None, metavar="FILE", help="write the CSV here (default: stdout)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (settings and typed rows) instead of the CSV")


def sweep_from_args(args: argparse.Namespace) -> Sweep:
    options: tuple[tuple[str, Any], ...] = ()
    if args.resolution is not None:
        if args.method != "grid":
            raise ValueError(f"--resolution applies to --method grid only, got --method {args.method}")
        options = (("resolution", args.resolution),)
    budget = args.budget
    if budget is None and SOLVERS[args.method].NEEDS_BUDGET:
        raise ValueError(f"--method {args.method} needs --budget N (evaluations per cell)")
    return Sweep(
        tuple(args.instances),
        args.loads,
        args.densities,
        args.seeds,
        args.method,
        budget,
        options,
        args.policy,
        queue_model=_queue_model(args),
    )


def _queue_model(args: argparse.Namespace) -> str:
    value = getattr(args, "queue_model", "meanfield")
    if value not in QUEUE_MODELS:
        raise ValueError(f"--queue-model: unknown {value!r} (valid: {', '.join(QUEUE_MODELS)})")
    return value


def _local(sweep: Sweep, workers: int | None) -> list[dict[str, Any]]:
    """The first cell here (timed), the rest on a LocalCluster only when it pays (else serially, saying why)."""
    cells = sweep.cells()
    start = time.perf_counter()
    first = run_cell(sweep, cells[0])
    reason = local_cluster_pays(workers, len(cells) - 1, time.perf_counter() - start) if len(cells) > 1 else "one cell"
    if reason is not None:
        print(f"sweep: running the cells serially: {reason}", file=sys.stderr)
        return [first, *(run_cell(sweep, cell) for cell in cells[1:])]
    with dask_client(None, workers) as client:
        return [first, *map_ordered(partial(run_cell, sweep), cells[1:], client)]


def run_from_args(args: argparse.Namespace) -> int:
    """Run the sweep the arguments describe and write its CSV."""
    sweep = sweep_from_args(args)
    if args.serial:
        if args.workers is not None:
            raise ValueError(f"--workers applies to the Dask local cluster, not to --serial (got --workers {args.workers})")
        rows = run_sweep(sweep)
    elif args.dask is not None:
        with dask_client(args.dask, args.workers) as client:
            rows = run_sweep(sweep, client)
    else:
        rows = _local(sweep, args.workers)
    text = sweep_csv(rows)
    if args.out is not None:
        atomic_write_text(args.out, text)
    if getattr(args, "json", False):
        payload = {"sweep": sweep_settings(sweep), "columns": list(COLUMNS), "rows": [typed_row(r) for r in rows], "written": args.out}
        sys.stdout.write(json.dumps(payload, indent=2, allow_nan=False) + "\n")
    elif args.out is None:
        sys.stdout.write(text)
    if args.out is not None:
        print(f"wrote {args.out} ({len(rows)} cells)", file=sys.stderr)
    return 0


def sweep_settings(sweep: Sweep) -> dict[str, Any]:
    """The sweep's settings as JSON-ready values."""
    return {
        "instances": list(sweep.instances),
        "loads": list(sweep.loads),
        "densities": list(sweep.densities),
        "seeds": list(sweep.seeds),
        "method": sweep.method,
        "budget": sweep.budget,
        "options": dict(sweep.options),
        "policy": sweep.policy,
        "target": sweep.target,
        "queue_model": sweep.queue_model,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.sweeps.sweep", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_from_args(args)
    except ValueError as exc:
        print(f"sweep: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
