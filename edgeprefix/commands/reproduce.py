"""``edgeprefix reproduce``: one of the paper's figures, table + CSV + PNG.

``--json`` prints ``{"figure": N, "points": [{"series", "x", "ours", "paper"}], ...}`` (extra
keys allowed) instead of the table, so the numbers can be checked by a script.
"""

from __future__ import annotations

import argparse
import contextlib
import io

from edgeprefix.commands._common import print_json


def register(sub: argparse._SubParsersAction) -> None:
    from edgeprefix.benchmarks.figures import FIGURES

    parser = sub.add_parser(
        "reproduce",
        help="reproduce one of the paper's figures (table, CSV, PNG)",
        description="Run one figure of the paper's Sec. VI on the calibrated instance and print ours beside "
        "the paper's values.  Exit code 2 on bad input.",
    )
    parser.add_argument("--figure", type=int, required=True, choices=sorted(FIGURES), metavar="N",
                        help=f"figure number, one of {sorted(FIGURES)}")
    parser.add_argument("--quick", action="store_true", help="reduced smoke run (fewer samples and points)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--out", default=None, metavar="DIR", help="write figN.csv and figN.png into DIR")
    parser.add_argument("--instance", default=None, metavar="NAME_OR_FILE",
                        help="embedded instance name or instance file (default: paper_calibrated)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from edgeprefix.benchmarks.figures import run_figure

    if args.json:
        with contextlib.redirect_stdout(io.StringIO()):  # keep stdout to the one JSON object
            payload = run_figure(args.figure, args.quick, args.out, args.instance, echo=False)
        print_json(payload)
    else:
        run_figure(args.figure, args.quick, args.out, args.instance, echo=True)
    return 0
