"""On paper_baseline, SPSA, TPE and CMA-ES with budget 300 reach the 1/20 grid optimum (± 0.01)."""

from __future__ import annotations

import pytest
from solver_stubs import baseline

from edgeprefix.formulations.placement import placement_problem
from edgeprefix.solvers import solve


@pytest.fixture(scope="module")
def problem():
    return placement_problem(baseline())


@pytest.fixture(scope="module")
def grid_optimum(problem):
    result = solve(problem, "grid", budget=None, resolution=20)
    assert result.success
    return result.coverage


@pytest.mark.parametrize("method", ["spsa", "tpe", "cmaes"])
def test_reaches_grid_optimum_within_budget_300(problem, grid_optimum, method):
    result = solve(problem, method, budget=300, seed=2026)
    assert result.success and result.nfev == 300
    assert result.coverage >= grid_optimum - 0.01
    assert problem.constraints.violation(result.x) <= 1e-8
