"""The command line's start-up: what ``--help`` and ``evaluate --json`` import, ``--version``, ``python -m``.

Each check runs a fresh interpreter in a temporary folder (never the repository root, whose
folders would shadow the installed package) and reads ``sys.modules`` after the command ran.
No timing is asserted here; ``python -m edgeprefix.benchmarks.speed.perf`` measures it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from edgeprefix import __version__
from edgeprefix.cli import COMMANDS, build_parser

# Runs the CLI in-process via runpy, then prints one JSON line: exit code, stdout, loaded modules.
PROBE = r"""
import contextlib, io, json, runpy, sys
sys.argv = ["edgeprefix", *json.loads(sys.argv[1])]
out = io.StringIO()
code = 0
with contextlib.redirect_stdout(out):
    try:
        runpy.run_module("edgeprefix", run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
print(json.dumps({"code": code, "stdout": out.getvalue(), "modules": sorted(sys.modules)}))
"""


def _probe(args: list[str], cwd: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def _loaded(modules: list[str], names: set[str]) -> set[str]:
    return {m for m in modules if m in names or any(m.startswith(n + ".") for n in names)}


def test_help_imports_no_numpy_and_no_command_module(tmp_path: Path) -> None:
    result = _probe(["--help"], tmp_path)
    assert result["code"] == 0
    for name in COMMANDS:
        assert name in result["stdout"]
    assert not _loaded(result["modules"], {"numpy", "scipy"}), "edgeprefix --help must not import numpy"
    assert not [m for m in result["modules"] if m.startswith("edgeprefix.commands.")]


def test_evaluate_json_imports_no_heavy_library(tmp_path: Path) -> None:
    result = _probe(["evaluate", "--json"], tmp_path)
    assert result["code"] == 0
    payload = json.loads(result["stdout"])
    assert 0.0 < payload["coverage"] < 1.0
    heavy = {"pyomo", "cvxpy", "optuna", "dask", "distributed", "matplotlib", "scipy.stats", "scipy.optimize", "tqdm"}
    assert not _loaded(result["modules"], heavy)
    assert "edgeprefix.commands.solve" not in result["modules"]


@pytest.mark.parametrize(
    "argv",
    [
        ["solve", "--budget", "3", "--json"],
        ["solve", "--method", "gradient", "--budget", "3", "--json"],
        ["plan-density", "--reliability", "0.9", "--json"],
    ],
    ids=" ".join,
)
def test_solve_and_plan_density_import_neither_cvxpy_nor_optuna(tmp_path: Path, argv: list[str]) -> None:
    result = _probe(argv, tmp_path)
    assert result["code"] == 0 and json.loads(result["stdout"])
    # the placement polytope is read without building the Pyomo model (formulations/placement.py), so neither
    # Pyomo nor scipy.stats (which Pyomo's deferred-import hook loads next to scipy) is imported
    assert not _loaded(result["modules"], {"cvxpy", "optuna", "dask", "distributed", "matplotlib", "pyomo", "scipy.stats"})


def test_registry_help_lines_equal_the_commands_own() -> None:
    parser = build_parser()  # every command's full parser
    sub = next(a for a in parser._actions if a.dest == "command")
    own = {action.dest: action.help for action in sub._choices_actions}
    assert own == {name: help_line for name, (_, help_line) in COMMANDS.items()}


def test_version_flag_and_python_m(tmp_path: Path) -> None:
    for argv in (["--version"],):
        result = _probe(argv, tmp_path)
        assert result["code"] == 0
        assert result["stdout"].strip() == f"edgeprefix {__version__}"
    done = subprocess.run([sys.executable, "-m", "edgeprefix", "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"edgeprefix {__version__}"


def test_unknown_command_fails_with_the_list(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "edgeprefix", "evaluat"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "invalid choice: 'evaluat'" in done.stderr and "evaluate" in done.stderr
