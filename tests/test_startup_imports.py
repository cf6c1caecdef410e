"""Start-up: the default commands import neither scipy.stats, cvxpy nor Optuna, and the placement polytope
they read without Pyomo equals the Pyomo model's read-back (formulations/placement.py)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.formulations.linear import read_linear_constraints
from edgeprefix.formulations.placement import build_placement_model, placement_polytope, placement_problem
from edgeprefix.placement.model.instance import load_instance

ABSENT = ("scipy.stats", "cvxpy", "optuna", "pyomo")
PROBE = """
import contextlib, io, json, sys
from edgeprefix.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": [m for m in ABSENT if m in sys.modules]}))
""".replace("ABSENT", repr(ABSENT))


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["solve"], ["evaluate", "--json"], ["plan-density", "--reliability", "0.9"]], ids=lambda argv: argv[0])
def test_default_commands_do_not_import_what_they_do_not_use(argv, tmp_path):
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], cwd=tmp_path, capture_output=True, text=True, check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    assert report["loaded"] == []


def test_the_probe_sees_a_loaded_module(tmp_path):
    """The check itself: a command that builds the Pyomo model is seen importing Pyomo and scipy.stats."""
    code = PROBE.replace(
        "code = main(sys.argv[1:])",
        "code = main(sys.argv[1:]); from edgeprefix.formulations.placement import build_placement_model; "
        "from edgeprefix.placement.model.instance import default_instance; build_placement_model(default_instance())",
    )
    done = subprocess.run([sys.executable, "-c", code, "evaluate", "--json"], cwd=tmp_path, capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout.strip().splitlines()[-1])["loaded"]
    assert "pyomo" in loaded and "scipy.stats" in loaded


def _shipped():
    root = Path(__file__).resolve().parents[1]
    paths = sorted((root / "benchmarks" / "instances").glob("*.toml")) + sorted((root / "placement" / "data").glob("*.toml"))
    return [load_instance(p) for p in paths]


def _variants(instance):
    plc = instance.placement
    yield instance
    yield dataclasses.replace(instance, placement=dataclasses.replace(plc, memory_budget=float(np.max(instance.memory))))
    ids = instance.profile_ids
    yield dataclasses.replace(instance, placement=dataclasses.replace(plc, fallback=ids[0], fallback_min=0.05))


def _same(a, b):
    for name in ("A_eq", "b_eq", "A_ub", "b_ub", "lower", "upper"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.names, a.n_decision, a.eq_names, a.ub_names) == (b.names, b.n_decision, b.eq_names, b.ub_names)


@pytest.mark.parametrize("instance", _shipped(), ids=lambda inst: inst.name)
def test_polytope_arrays_equal_the_pyomo_read_back(instance):
    rows = set()
    for variant in _variants(instance):
        arrays = placement_polytope(variant)
        model = build_placement_model(variant)
        _same(arrays, read_linear_constraints(model, model.pi))
        rows.update(arrays.ub_names)
    assert {"memory_budget", "fallback"} <= rows  # the budget and the fallback rows were compared


class _Proxy:
    """An instance with some attributes replaced (what the polytope reads), the rest delegated."""

    def __init__(self, instance, **override):
        self._instance, self._override = instance, override

    def __getattr__(self, name):
        return self._override[name] if name in self._override else getattr(self._instance, name)


def test_idle_profiles_and_quoted_ids():
    instance = _shipped()[0]
    concurrency = np.array(instance.concurrency)
    concurrency[1] = 0
    idle = _Proxy(instance, concurrency=concurrency)
    arrays = placement_polytope(idle)
    model = build_placement_model(idle)
    _same(arrays, read_linear_constraints(model, model.pi))
    assert f"no_capacity[{instance.profile_ids[1]}]" in arrays.eq_names
    for odd in ("a.b", "1", "inf", "x,y"):
        assert placement_polytope(_Proxy(instance, profile_ids=(odd, *instance.profile_ids[1:]))) is None


def test_the_model_is_built_on_first_access_only():
    problem = placement_problem(_shipped()[0])
    assert "model" not in problem.__dict__
    model = problem.model
    assert problem.model is model
    _same(problem.constraints, read_linear_constraints(model, model.pi))
