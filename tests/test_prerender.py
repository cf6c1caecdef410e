"""The plot helper of ``solve --out``: it draws what this process would draw, leaves no process
behind, and importing matplotlib neither pulls in pyplot through Pyomo's hook nor leaves the
heap frozen.  Each check runs in a fresh interpreter, where matplotlib is not yet imported and
no thread runs (the conditions under which the helper is forked)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _run(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


def test_helper_draws_the_png_this_process_would_draw(tmp_path):
    script = """
import gc, sys
from edgeprefix.commands.solve import render_plot, start_plot_helper
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.solvers import solve

problem = placement_problem(load_instance("paper_baseline"))
helper = start_plot_helper()
assert helper.started
result = solve(problem, "random", budget=6, seed=0)
png = helper(render_plot, result, problem.target)
assert not helper.started  # answered and reaped
assert "matplotlib" not in sys.modules, "the helper drew it: this process never imported matplotlib"
assert png == render_plot(result, problem.target)  # drawn here now: the same bytes
assert png.startswith(bytes([0x89]) + b"PNG")
assert "matplotlib.pyplot" not in sys.modules, "Pyomo's import hook pulled in pyplot"
assert sys.modules["pyomo.common.dependencies"].DeferredImportCallbackFinder._callbacks["matplotlib"], "hook not restored"
assert gc.get_freeze_count() == 0 and gc.isenabled()
print("ok")
"""
    assert _run(script, tmp_path).stdout.strip() == "ok"


def test_solve_out_draws_its_png_in_the_helper(tmp_path):
    """Through the command line: the set is written, and the solving process never imported matplotlib."""
    script = """
import json, sys
from edgeprefix.cli import main
code = main(["solve", "--method", "tpe", "--budget", "5", "--out", "run", "--json"])
print(json.dumps({"code": code, "matplotlib": sorted(m for m in sys.modules if m.startswith("matplotlib"))}))
"""
    done = _run(script, tmp_path)
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe == {"code": 0, "matplotlib": []}
    assert (tmp_path / "run" / "best_so_far.png").read_bytes().startswith(bytes([0x89]) + b"PNG")
    assert "wrote run/best_so_far.png" in done.stderr


def test_a_failure_in_the_helper_is_raised_here_and_an_unused_helper_ends(tmp_path):
    script = """
import os, signal
from edgeprefix.commands._prerender import Prerenderer

def fails(x):
    raise ValueError(f"bad {x}")

def pid_bytes(x):
    return f"{x}:{os.getpid()}".encode()

signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal (a test runner may ignore it)
helper = Prerenderer(("tabnanny",))
child = helper.pid
assert helper.started and child != os.getpid()
assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored here
os.kill(child, signal.SIGINT)  # Ctrl-C reaches the whole process group: the helper ignores it
assert helper(pid_bytes, 7) == f"7:{child}".encode()  # computed by the helper
helper = Prerenderer(("tabnanny",))
try:
    helper(fails, 3)
except ValueError as exc:
    assert str(exc) == "bad 3"
else:
    raise AssertionError("the helper's failure was swallowed")
helper = Prerenderer(("tabnanny",))
process = helper._process
helper.close()
assert not process.is_alive() and process.exitcode == 0
print("ok")
"""
    assert _run(script, tmp_path).stdout.strip() == "ok"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # an exited orphan not yet reaped by its new parent
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_helper_exits_when_its_parent_is_killed(tmp_path):
    script = """
import sys, time
from edgeprefix.commands._prerender import Prerenderer

helper = Prerenderer(("tabnanny",))
print(helper.pid, flush=True)
time.sleep(60)
"""
    with subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, text=True) as proc:
        child = int(proc.stdout.readline())
        assert not _gone(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child), "the helper outlived its killed parent"
