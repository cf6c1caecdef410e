"""Dual density planning (docs/model.md §10.4): the smallest λ_b meeting ζ."""

from __future__ import annotations

import pyomo.environ as pyo
import pytest
from solver_stubs import baseline

from edgeprefix.formulations.density import density_problem
from edgeprefix.solvers.density import plan_density


@pytest.fixture(scope="module")
def instance():
    return baseline()


@pytest.mark.parametrize("zeta", [0.6, 0.8, 0.9])
def test_fixed_mix_answer_is_the_smallest_density(instance, zeta):
    problem = density_problem(instance, zeta, mix=dict(instance.placement.mix))
    plan = plan_density(problem)
    assert plan.coverage >= zeta and problem.meets(problem.score(plan.edge_density))
    assert problem.score(0.98 * plan.edge_density).coverage < zeta
    assert plan.lower < plan.edge_density <= plan.lower * 1.001 + 1e-12
    assert plan.mix == dict(instance.placement.mix) and not plan.joint


def test_joint_answer_is_the_smallest_density_for_the_same_search(instance):
    problem = density_problem(instance, 0.8)
    plan = plan_density(problem, method="grid", resolution=5)
    assert plan.joint and plan.coverage >= 0.8
    assert problem.meets(problem.score(plan.edge_density, plan.x))
    from edgeprefix.solvers import solve

    below = solve(problem.placement(0.98 * plan.edge_density), "grid", budget=None, resolution=5)
    assert not (below.success and below.coverage >= 0.8)
    fixed = plan_density(density_problem(instance, 0.8, mix=dict(instance.placement.mix)))
    assert plan.edge_density <= fixed.edge_density  # choosing the mix never needs more nodes


def test_model_declares_density_objective_and_reliability_constraint(instance):
    problem = density_problem(instance, 0.8, mix=dict(instance.placement.mix))
    model = problem.model
    assert model.cost.sense == pyo.minimize
    assert model.reliability.lower == pytest.approx(0.8)
    assert pyo.value(model.coverage_of(1.0, 0.18, 0.54, 0.28)) == pytest.approx(problem.score(1.0).coverage)


def test_unreachable_reliability_and_bad_inputs_are_clear(instance):
    with pytest.raises(ValueError, match=r"reliability ζ must lie in \(0, 1\), got 1.5"):
        density_problem(instance, 1.5)
    with pytest.raises(ValueError, match="unknown profile 'huge'"):
        density_problem(instance, 0.8, mix={"huge": 1.0})
    problem = density_problem(instance, 0.5, mix=dict(instance.placement.mix), target=0.2)  # long requests need > 0.4 s of prefill
    with pytest.raises(ValueError, match="is not reached up to"):
        plan_density(problem)
