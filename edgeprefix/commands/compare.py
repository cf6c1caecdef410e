"""``edgeprefix compare``: optimisers side by side on the benchmark instances.

Prints one table per instance (median / IQR of the best-so-far feasible ``P_cov(τ_0)``, gap to
``P*``, success rate, wall time) or, with ``--json``, one JSON object; a progress bar goes to
stderr; ``--out DIR`` receives CSVs, JSON and PNG figures.  ``--seeds`` names the seed values
(``0-9``, ``0,3,7``), as on every command.  ``--suite classical --seed S`` adds the known-optimum
instances of docs/model.md §18.5 (drawn with ``S``), scored against their exact ``P*``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from edgeprefix.commands._common import add_queue_model_argument, at_least, plain_text, print_json, queue_model_from_args

if TYPE_CHECKING:
    from edgeprefix.benchmarks.optimisers.compare import CompareConfig


def _csv_list(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _budgets(text: str) -> tuple[int, ...]:
    out = []
    for part in _csv_list(text):
        try:
            out.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"budgets must be integers separated by commas, got {part!r}") from None
    return tuple(out)


def _seeds(text: str) -> tuple[int, ...]:
    """``--seeds``: seed values as everywhere (0-9, 0,3,7); a lone number was a count here before, so it is refused."""
    from edgeprefix.benchmarks.sweeps.seeds import seeds_argument

    if text.strip().isdigit() and int(text) > 1:
        n = int(text)
        raise argparse.ArgumentTypeError(
            f"seed values are expected, not a count: write --seeds 0-{n - 1} for {n} seeds (the one seed {n}: --seeds {n}-{n})"
        )
    return seeds_argument(text)


def _loads(text: str) -> tuple[float, ...]:
    out = []
    for part in _csv_list(text):
        try:
            out.append(float(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"loads must be numbers separated by commas, got {part!r}") from None
    return tuple(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from edgeprefix.benchmarks.optimisers.compare import (
        DEFAULT_BUDGETS,
        DEFAULT_INSTANCES,
        DEFAULT_METHODS,
    )

    parser.add_argument(
        "--instances",
        type=_csv_list,
        default=None,
        metavar="A,B",
        help=f"benchmark names or instance files (default: {','.join(DEFAULT_INSTANCES)})",
    )
    parser.add_argument(
        "--methods",
        type=_csv_list,
        default=None,
        metavar="M,N",
        help=f"solvers, scipy baselines slsqp-fd, de, or an Optuna method in another search space, e.g. cmaes:box "
        f"(default: {','.join(DEFAULT_METHODS)})",
    )
    parser.add_argument(
        "--budgets",
        type=_budgets,
        default=None,
        metavar="B1,B2",
        help=f"evaluation budgets (default: {','.join(map(str, DEFAULT_BUDGETS))})",
    )
    parser.add_argument(
        "--seeds",
        type=_seeds,
        default=None,
        metavar="SEEDS",
        help="seed values of every stochastic method: a list (0,3,7), an inclusive range (0-9) or both (default: 0-9; --quick: 0-1)",
    )
    parser.add_argument(
        "--loads",
        type=_loads,
        default=None,
        metavar="X1,X2",
        help="multiples of each instance's request intensity Λ to compare at (default: 1)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="worker processes (default: 1)")
    add_queue_model_argument(parser)
    parser.add_argument(
        "--grid-limit",
        type=int,
        default=None,
        help="largest feasible 1/20 lattice searched exhaustively for the reference P* (default: 5000; --quick: 500)",
    )
    parser.add_argument(
        "--suite",
        choices=("classical",),
        default=None,
        help="add the known-optimum suite (classical geographic caching, 6 to 300 profiles) to --instances; "
        "success is then measured against the exact P* (defaults: methods gradient,slsqp-fd,de,cmaes,spsa,random, "
        "budgets 30,100,300)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="seed drawing the suite's Zipf exponents and reaches (default: 0)")
    parser.add_argument(
        "--profiles",
        type=_budgets,
        default=None,
        metavar="N1,N2",
        help="only the suite members with these numbers of profiles (of 6,15,45,120,300)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: paper_baseline + medium_forest, budgets 10,20, 2 seeds, grid limit 500"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--out", type=Path, default=None, help="folder for runs.csv, summary.csv/json and PNG figures")


def config_from_args(args: argparse.Namespace, suite: tuple[str, ...] = ()) -> CompareConfig:
    """The :class:`edgeprefix.benchmarks.optimisers.compare.CompareConfig` of the parsed arguments (``--quick`` sets smaller defaults);
    ``suite`` are the files of ``--suite``, compared before ``--instances``."""
    from edgeprefix.benchmarks.optimisers.compare import (
        DEFAULT_BUDGETS,
        DEFAULT_INSTANCES,
        DEFAULT_METHODS,
        QUICK_BUDGETS,
        QUICK_INSTANCES,
        CompareConfig,
    )
    from edgeprefix.benchmarks.optimisers.compare_classical import SUITE_BUDGETS, SUITE_METHODS

    if getattr(args, "queue_law", None) == "engine":
        raise ValueError(
            "--queue-law engine: compare runs its benchmark instances on the slot law; use --queue-law slots "
            "(or evaluate/solve an instance with an [engine] section)"
        )
    quick = bool(args.quick)
    methods: tuple[str, ...]
    budgets: tuple[int, ...]
    if suite:
        instances, methods, budgets = (*suite, *(args.instances or ())), SUITE_METHODS, SUITE_BUDGETS
    else:
        instances = args.instances or (QUICK_INSTANCES if quick else DEFAULT_INSTANCES)
        methods, budgets = DEFAULT_METHODS, (QUICK_BUDGETS if quick else DEFAULT_BUDGETS)
    return CompareConfig(
        instances=instances,
        methods=args.methods or methods,
        budgets=args.budgets or budgets,
        seeds=len(args.seeds) if args.seeds is not None else (2 if quick else 10),
        seed_values=args.seeds or (),
        grid_limit=args.grid_limit if args.grid_limit is not None else (500 if quick else 5000),
        jobs=args.jobs,
        queue_model=queue_model_from_args(args),
        loads=args.loads or (1.0,),
    )


def handle(args: argparse.Namespace) -> int:
    from edgeprefix.benchmarks.optimisers.compare import render_table, run_comparison, to_payload, write_outputs

    at_least(args, 1, "--jobs", "--grid-limit")
    if args.suite is None and args.profiles is not None:
        raise ValueError("--profiles: selects members of a suite; add --suite classical")
    if args.seed < 0:
        raise ValueError(f"--seed: must be an integer >= 0, got {args.seed}")
    with contextlib.ExitStack() as stack:
        suite: tuple[str, ...] = ()
        if args.suite is not None:
            from edgeprefix.benchmarks.optimisers.compare_classical import write_suite

            # the instance files sit beside the outputs, or in a folder that lives as long as the run
            folder = args.out / "instances" if args.out is not None else Path(stack.enter_context(tempfile.TemporaryDirectory()))
            suite = write_suite(args.seed, folder, args.profiles)
        config = config_from_args(args, suite)
        comparison = run_comparison(config)
    written = write_outputs(comparison, args.out) if args.out is not None else []
    if args.json:
        payload = to_payload(comparison)
        payload["written"] = [str(p) for p in written]
        print_json(payload)
    else:
        print(header(config) + (f"  suite {args.suite} seed {args.seed}" if args.suite else ""))
        print(render_table(comparison))
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    return 0


def header(config: CompareConfig) -> str:
    """The settings of the run, on the first line of the text output."""
    from edgeprefix.benchmarks.optimisers.compare_runs import instance_label

    return (
        f"compare  instances {','.join(instance_label(name) for name in config.instances)}  methods {','.join(config.methods)}  "
        f"budgets {','.join(map(str, config.budgets))}  seeds {_seed_text(config.seed_list)}  "
        f"reference grid limit {config.grid_limit}  workers {config.jobs}"
        + ("" if config.loads == (1.0,) else f"  loads ×{','.join(f'{x:g}' for x in config.loads)}")
    )


def _seed_text(seeds: tuple[int, ...]) -> str:
    if len(seeds) > 2 and seeds == tuple(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare", help="compare the optimisers on the benchmark instances", description=plain_text(__doc__.splitlines()[0])
    )
    add_arguments(parser)
    parser.set_defaults(handler=handle)
