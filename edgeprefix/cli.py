"""The ``edgeprefix`` command line: one module per subcommand under ``edgeprefix.commands``.

Each command module exposes ``register(subparsers)`` which adds its parser and sets
``handler`` (a function ``(args) -> int`` returning the exit code).  Bad input (an
:class:`ValueError`, which includes instance and mix errors) prints one line to stderr and
exits with code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

# Order is the order shown in --help.
COMMANDS = (
    "evaluate",
    "solve",
    "plan_density",
    "migrate",
    "validate",
    "profiles",
    "reproduce",
    "compare",
    "sweep",
    "instance",
    "benchmark_instance",
)

EXIT_BAD_INPUT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgeprefix",
        description="Spatial prefix caching for wireless edge LLM inference.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"edgeprefix.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"edgeprefix.commands.{name}":
                continue  # command not shipped yet
            raise
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as other Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ValueError as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"edgeprefix {args.command}: error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
