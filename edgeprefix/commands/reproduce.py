"""``edgeprefix reproduce``: one of the paper's figures (or all of them), table + CSV + PNG.

``--json`` prints ``{"figure": N, "points": [{"series", "x", "ours", "paper"}], "targets": {...}, ...}``
(extra keys allowed) instead of the table, so the numbers can be checked by a script; a point
that checks a paper claim also carries ``tolerance``, ``relation`` and ``holds``.  ``--all``
runs every figure and reports how many targets hold (``--json``: ``{"figures": [...],
"targets": {"checked", "hold", "failing"}, "checks": [...]}``); ``--readme FILE`` rewrites the
table between the ``reproduce --all`` markers of a Markdown file.
"""

from __future__ import annotations

import argparse
import contextlib
import io

from edgeprefix.commands._common import print_json, wrote


def register(sub: argparse._SubParsersAction) -> None:
    from edgeprefix.benchmarks.paper.figures import FIGURES

    parser = sub.add_parser(
        "reproduce",
        help="reproduce one of the paper's figures, or all of them (table, CSV, PNG)",
        description="Run one figure (--figure N) or every figure (--all) of the paper's Sec. VI on the calibrated "
        "instance and print ours beside the paper's values.  Exit code 2 on bad input.",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--figure", type=int, choices=sorted(FIGURES), metavar="N", help=f"figure number, one of {sorted(FIGURES)}")
    which.add_argument("--all", action="store_true", help="every figure, then the table of paper targets and how many hold")
    parser.add_argument("--quick", action="store_true", help="reduced smoke run (fewer samples and points)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--out", default=None, metavar="DIR", help="write figN.csv and figN.png into DIR")
    parser.add_argument(
        "--instance", default=None, metavar="NAME_OR_FILE", help="embedded instance name or instance file (default: paper_section6)"
    )
    parser.add_argument(
        "--readme", default=None, metavar="FILE", help="with --all: rewrite the targets table between the 'reproduce --all' markers of FILE"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from edgeprefix.benchmarks.paper.figures import run_figure
    from edgeprefix.benchmarks.paper.figures.report import markdown_table, replace_section, run_all

    if args.readme is not None and not args.all:
        raise ValueError("--readme: only with --all (the table covers every figure)")
    if args.all:
        with contextlib.redirect_stdout(io.StringIO()):
            report = run_all(args.quick, args.out, args.instance)
        table = markdown_table(report)
        if args.readme is not None:
            replace_section(args.readme, table)
        if args.json:
            print_json(report)
        else:
            from edgeprefix.benchmarks.paper.figures._common import table as figure_table

            for payload in report["figures"]:
                print(figure_table(payload))
                print()
            print(table)
        for payload in report["figures"]:
            _announce(payload)
        if args.readme is not None:
            wrote(args.readme)
        return 0
    if args.json:
        with contextlib.redirect_stdout(io.StringIO()):  # keep stdout to the one JSON object
            payload = run_figure(args.figure, args.quick, args.out, args.instance, echo=False)
        print_json(payload)
    else:
        payload = run_figure(args.figure, args.quick, args.out, args.instance, echo=True)
    _announce(payload)
    return 0


def _announce(payload: dict) -> None:
    """The ``wrote PATH`` line of each file a figure wrote."""
    for path in payload.get("files", ()):
        wrote(path)
