"""The ``edgeprefix`` command line: one module per subcommand under ``edgeprefix.commands``.

Each command module exposes ``register(subparsers)`` which adds its parser and sets
``handler`` (a function ``(args) -> int`` returning the exit code).  Bad input (an
:class:`ValueError`, which includes instance and mix errors) prints one line to stderr and
exits with code 2.

Start-up stays cheap: :data:`COMMANDS` names each command's module and one-line help, and
only the module of the command being run is imported (``edgeprefix --help`` imports none of
them, so no numpy).  A new command is one entry here plus its module.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterable, Sequence

from edgeprefix._version import __version__

# command → (module, one-line help shown by ``edgeprefix --help``); order is the order shown.
# The help must equal the module's own (tests/test_cli_startup.py checks it).
COMMANDS: dict[str, tuple[str, str]] = {
    "evaluate": ("edgeprefix.commands.evaluate", "evaluate a profile mix: association, queues, TTFT coverage"),
    "solve": ("edgeprefix.commands.solve", "find the coverage-maximising profile mix (exact-gradient SLSQP, SPSA, TPE, CMA-ES, QMC, grid)"),
    "plan-density": ("edgeprefix.commands.plan_density", "smallest edge density λ_b whose TTFT coverage reaches ζ"),
    "migrate": ("edgeprefix.commands.migrate", "decide per-epoch mixes under a node-change budget and plan the migrations"),
    "validate": ("edgeprefix.commands.validate", "check the analytical model against Monte Carlo and discrete-event simulation"),
    "profiles": ("edgeprefix.commands.profiles", "build cache profiles and an instance from a request trace"),
    "reproduce": ("edgeprefix.commands.reproduce", "reproduce one of the paper's figures, or all of them (table, CSV, PNG)"),
    "compare": ("edgeprefix.commands.compare", "compare the optimisers on the benchmark instances"),
    "sweep": ("edgeprefix.commands.sweep", "solve every (instance, load, density, seed) cell on Dask and write one CSV"),
    "instance": ("edgeprefix.commands.instance", "print an instance as TOML (a starting file) or the instance file's JSON Schema"),
    "benchmark-instance": ("edgeprefix.commands.benchmark_instance", "write a benchmark instance with a known optimum"),
    "replay": ("edgeprefix.commands.replay", "replay a trace on a sampled network: replayed vs predicted coverage"),
    "epochs": ("edgeprefix.commands.epochs", "cut a trace into epochs (intensity, type mix) for edgeprefix migrate"),
}

EXIT_BAD_INPUT = 2
# what each command's --out names: checked before any work (empty, a file for a folder, a folder for a file)
OUT_KINDS = {
    "solve": "folder",
    "validate": "folder",
    "replay": "folder",
    "reproduce": "folder",
    "compare": "folder",
    "profiles": "file",
    "epochs": "file",
    "benchmark-instance": "file",
}


def escape_controls(text: str) -> str:
    """``text`` with every control character written as in ``repr`` (``\\n``, ``\\x1b``, ``\\x07``): a
    message echoes names, ids and paths, and none of them may move the cursor, ring the bell or break the line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch == " " else repr(ch)[1:-1] for ch in text)


class _Parser(argparse.ArgumentParser):
    """argparse with the package's error format: one line ``edgeprefix COMMAND: error: …`` and exit code 2
    (no usage block; ``--help`` shows it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        line = escape_controls(message)
        prog = getattr(self, "command_prog", self.prog)  # the top-level parser reports unknown options of a command
        self.exit(EXIT_BAD_INPUT, f"{prog}: error: {line} (see {prog} --help)\n")


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``edgeprefix`` parser; the full sub-parsers of ``commands`` only (default: all).

    Every other command gets a placeholder sub-parser that carries its help line, so the
    top-level ``--help`` lists all commands without importing their modules.
    """
    wanted = set(COMMANDS if commands is None else commands)
    parser = _Parser(
        prog="edgeprefix",
        description="Spatial prefix caching for wireless edge LLM inference.",
        epilog="Run 'edgeprefix COMMAND --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"edgeprefix {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_line) in COMMANDS.items():
        if name in wanted:
            importlib.import_module(module).register(sub)
        else:
            sub.add_parser(name, help=help_line, add_help=False)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command named on the command line (the first word that is not an option)."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
MESSAGE_LIMIT = 300  # characters of an error line (lists inside messages are cut before this)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = escape_controls(text) if text else type(exc).__name__  # a raw newline in an id is shown escaped: one line
    return line if len(line) <= MESSAGE_LIMIT else line[: MESSAGE_LIMIT - 1] + "…"


def _os_message(exc: OSError) -> str:
    name = exc.filename if exc.filename is not None else ""
    reason = exc.strerror or _one_line(exc)
    return escape_controls(f"{name}: {reason}" if name else reason)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure is one line on stderr and an exit code (docs in ``--help``):
    2 bad input or an unusable file/folder/service, 3 a search that could not finish, 130 Ctrl-C."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command_of(argv)
    try:
        parser = build_parser([command] if command else [])
        if command:
            parser.command_prog = f"edgeprefix {command}"  # type: ignore[attr-defined]
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("edgeprefix: error: interrupted (Ctrl-C) while starting", file=sys.stderr)
        return EXIT_INTERRUPTED
    command = getattr(args, "command", None) or "edgeprefix"

    def fail(message: str, code: int = EXIT_BAD_INPUT) -> int:
        print(f"edgeprefix {command}: error: {message}", file=sys.stderr)
        return code

    try:
        out = getattr(args, "out", None)
        if out is not None and command in OUT_KINDS:  # before any work: an unusable --out fails now, not after it
            from edgeprefix.placement.atomic import check_output_path

            check_output_path(out, "--out", OUT_KINDS[command])
        return int(args.handler(args))
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as other Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return fail("interrupted (Ctrl-C); nothing was written after the interruption", EXIT_INTERRUPTED)
    except (ValueError, ArithmeticError) as exc:  # bad input, and NumericalError (an input beyond docs/model.md §20)
        return fail(_one_line(exc))
    except RecursionError:
        return fail("input nested too deeply to process")
    except MemoryError:
        return fail("out of memory: the problem is too large for this machine (fewer profiles, samples or types)")
    except OSError as exc:
        return fail(_os_message(exc))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
