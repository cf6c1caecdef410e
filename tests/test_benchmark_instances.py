"""The shipped benchmark instances load, have the claimed sizes, and the medium one's constraints bind."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import (
    default_instance,
    instance_to_mapping,
    load_instance,
)
from edgeprefix.solvers import solve

FOLDER = Path(__file__).resolve().parents[1] / "benchmarks" / "instances"


def test_paper_baseline_is_the_embedded_instance():
    assert instance_to_mapping(load_instance(FOLDER / "paper_baseline.toml")) == instance_to_mapping(default_instance())


def test_sizes_are_as_documented():
    medium = load_instance(FOLDER / "medium_forest.toml")
    assert len(medium.profiles) == 7 and len(medium.requests) >= 8
    assert medium.placement.memory_budget is not None and medium.placement.fallback_min > 0
    large = load_instance(FOLDER / "mooncake_large.toml")
    assert 12 <= len(large.profiles) <= 16 and len(large.requests) >= 32


@pytest.fixture(scope="module")
def medium():
    inst = load_instance(FOLDER / "medium_forest.toml")
    checks = json.loads((FOLDER / "medium_forest.checks.json").read_text())
    return inst, checks


def _coverage(inst, mix):
    return float(evaluate(inst, np.asarray(mix, dtype=float)).coverage(inst.placement.target))


def test_medium_optimum_is_tight_on_both_constraints(medium):
    inst, checks = medium
    pi = np.array([checks["optimum"]["mix"][s] for s in inst.profile_ids])
    assert pi.sum() == pytest.approx(1.0)
    assert pi @ inst.memory == pytest.approx(inst.placement.memory_budget, abs=1e-6)  # Σ π_s B_s = B̄
    assert pi[inst.fallback_index] == pytest.approx(inst.placement.fallback_min, abs=1e-6)  # π_0 = π_min
    assert _coverage(inst, pi) == pytest.approx(checks["optimum"]["coverage"], abs=1e-6)


def test_dropping_either_constraint_raises_the_optimum(medium):
    inst, checks = medium
    spec = inst.placement
    optimum = checks["optimum"]["coverage"]
    for entry in checks["constraints"]:
        relaxed = np.array(entry["relaxed_mix"])
        memory, fallback = relaxed @ inst.memory, relaxed[inst.fallback_index]
        if entry["name"] == "memory_budget":
            assert memory > spec.memory_budget + 1e-3 and fallback >= spec.fallback_min - 1e-9
        else:
            assert fallback < spec.fallback_min - 1e-3 and memory <= spec.memory_budget + 1e-9
        assert _coverage(inst, relaxed) > optimum + 1e-3, entry["name"]


def test_a_fresh_search_does_not_beat_the_recorded_optimum(medium):
    inst, checks = medium
    result = solve(placement_problem(inst), "random", budget=40, seed=7)
    assert result.success and result.coverage <= checks["optimum"]["coverage"] + 1e-6
