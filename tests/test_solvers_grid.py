"""The simplex lattice (docs/model.md §10.3): counts, feasibility, exhaustive search."""

from __future__ import annotations

import math

import numpy as np
import pytest
from solver_stubs import StubModel, baseline, unconstrained

from edgeprefix.formulations.placement import placement_problem
from edgeprefix.solvers import solve
from edgeprefix.solvers.grid import feasible_lattice, simplex_lattice


@pytest.mark.parametrize("n, k", [(1, 5), (2, 7), (3, 20), (5, 10), (8, 6)])
def test_lattice_count_is_binomial(n, k):
    points = simplex_lattice(n, k)
    assert len(points) == math.comb(k + n - 1, n - 1)
    np.testing.assert_allclose(points.sum(axis=1), 1.0)
    assert len(np.unique(np.round(points * k).astype(int), axis=0)) == len(points)
    assert points.min() >= 0


@pytest.mark.parametrize("k", [4, 10, 20])
def test_unconstrained_feasible_lattice_is_the_whole_lattice(k):
    cons = placement_problem(unconstrained(), evaluator=StubModel()).constraints
    assert len(feasible_lattice(cons, k)) == math.comb(k + 3 - 1, 3 - 1)


def test_constrained_lattice_meets_every_constraint():
    cons = placement_problem(baseline(), evaluator=StubModel()).constraints
    points = feasible_lattice(cons, 20)
    assert 0 < len(points) < math.comb(22, 2)
    assert max(cons.violation(p) for p in points) <= 1e-9
    assert points[:, 2].max() <= 0.5 and points[:, 0].min() >= 0.1


def test_grid_finds_the_lattice_optimum_of_a_known_objective():
    optimum = np.array([0.25, 0.35, 0.40])
    problem = placement_problem(unconstrained(), evaluator=StubModel(optimum=optimum))
    result = solve(problem, "grid", budget=None, resolution=20)
    np.testing.assert_allclose(result.x, optimum)
    assert result.nfev == math.comb(22, 2) and result.status.value == "completed"


def test_grid_larger_than_budget_is_refused_before_searching():
    stub = StubModel()
    problem = placement_problem(unconstrained(), evaluator=stub)
    with pytest.raises(ValueError, match="231 feasible points, more than the budget 100"):
        solve(problem, "grid", budget=100, resolution=20)
    assert stub.calls == 0
