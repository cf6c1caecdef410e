"""``edgeprefix sweep``: one search per (instance, load, density, seed) cell, on Dask distributed.

The same as ``python -m edgeprefix.benchmarks.sweeps.sweep``: a ``LocalCluster`` by default, ``--dask ADDRESS``
for a running scheduler, ``--serial`` for this process only; the CSV is the same either way.
"""

from __future__ import annotations

import argparse

from edgeprefix.benchmarks.sweeps.sweep import add_arguments, run_from_args


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "sweep",
        help="solve every (instance, load, density, seed) cell on Dask and write one CSV",
        description="Solve the placement problem of every cell of loads × densities × instances × seeds "
        "(one Dask task per cell) and write one CSV row per cell, in cell order. Exit code 2 on bad input.",
    )
    add_arguments(parser)
    parser.set_defaults(handler=run_from_args)
