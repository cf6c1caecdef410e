"""The comparison's scipy baselines, loads and the gradient method's rows (benchmarks/compare*.py)."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.benchmarks.optimisers.compare import CompareConfig, render_table, run_comparison
from edgeprefix.benchmarks.optimisers.compare_baselines import BASELINES, DifferentialEvolutionBaseline, ScipySlsqpBaseline
from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.solvers import Status
from edgeprefix.solvers.api import run_solver

BUDGETS = (10, 20)


@pytest.fixture(scope="module")
def comparison():
    config = CompareConfig(
        instances=("paper_baseline",), methods=("gradient", "slsqp-fd", "de"), budgets=BUDGETS, seeds=2, grid_limit=1, loads=(0.5, 1.0)
    )
    return run_comparison(config)


def test_every_load_has_its_own_reference(comparison):
    assert set(comparison.references) == {"paper_baseline×0.5", "paper_baseline"}
    light, default = comparison.references["paper_baseline×0.5"], comparison.references["paper_baseline"]
    assert light.coverage > default.coverage  # half the requests meet the target more often
    assert "paper_baseline×0.5: P* =" in render_table(comparison)


def test_gradient_rows_count_gradient_solves_and_reach_the_optimum(comparison):
    for label in comparison.references:
        s = comparison.summary(label, "gradient", 20)
        assert s.success_fine == 1.0 and s.gap <= 1e-4
        assert np.isfinite(s.cpu_ms) and s.cpu_ms > 0
    runs = [r for r in comparison.runs if r.method == "gradient"]
    assert runs and all(r.njev >= 1 for r in runs)
    assert all(r.njev == 0 for r in comparison.runs if r.method in BASELINES)


def test_slsqp_with_finite_differences_ends_on_its_own(comparison):
    for label in comparison.references:
        s = comparison.summary(label, "slsqp-fd", 20)
        assert s.evaluations <= 20 and s.feasible == 1.0


def test_baselines_keep_every_scored_point_in_the_polytope():
    problem = placement_problem(load_benchmark("paper_baseline"))
    slsqp = run_solver(problem, ScipySlsqpBaseline(), budget=200)
    assert slsqp.status is Status.COMPLETED and slsqp.nfev < 200 and slsqp.success
    de = run_solver(problem, DifferentialEvolutionBaseline(), budget=30, seed=1)
    assert de.nfev == 30 and all(problem.constraints.violation(p) <= 1e-8 for p in de.points)
    other = run_solver(problem, DifferentialEvolutionBaseline(), budget=30, seed=2)
    assert not np.array_equal(de.points, other.points)


def test_bad_loads_and_methods_are_refused():
    with pytest.raises(ValueError, match="loads: distinct positive multipliers"):
        CompareConfig(loads=(1.0, -2.0))
    with pytest.raises(ValueError, match=r"methods: each must be one of \[.*'slsqp-fd', 'de'\]"):
        CompareConfig(methods=("nelder",))


def test_an_optuna_method_may_name_its_search_space():
    config = CompareConfig(instances=("paper_baseline",), methods=("cmaes:box", "cmaes"), budgets=(8,), seeds=1, grid_limit=1)
    comparison = run_comparison(config)
    assert {r.method for r in comparison.runs} == {"cmaes:box", "cmaes"}
    box = next(r for r in comparison.runs if r.method == "cmaes:box")
    soft = next(r for r in comparison.runs if r.method == "cmaes")
    assert not np.array_equal(box.curve, soft.curve)  # the same seed proposes different points
    with pytest.raises(ValueError, match="must be an Optuna method"):
        CompareConfig(methods=("spsa:box",))


def test_the_readme_tables_are_written_with_the_outputs(comparison, tmp_path):
    from edgeprefix.benchmarks.optimisers.compare import write_outputs

    written = {p.name for p in write_outputs(comparison, tmp_path)}
    assert "summary.md" in written
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "| method | paper_baseline×0.5 | paper_baseline |" in text
    assert all(f"| {m} |" in text for m in ("gradient", "slsqp-fd", "de"))
    assert text.count("**Budget") == len(BUDGETS) + 1
