"""Multi-epoch migration (docs/model.md §10.5): transport LP, bytes, budgets, epoch decisions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from solver_stubs import baseline

from edgeprefix.formulations.migration import (
    Epoch,
    MigrationProblem,
    load_migration,
    migration_plan,
    transfer_bytes,
)
from edgeprefix.placement.errors import InfeasibleConstraintsError
from edgeprefix.solvers.migration import solve_migration


@pytest.fixture(scope="module")
def instance():
    return baseline()


def test_transfer_bytes_are_the_memory_of_missing_states(instance):
    b = transfer_bytes(instance)
    kappa = instance.gpu.kv_per_token
    np.testing.assert_allclose(b, [[0, 800 * kappa, 2250 * kappa], [0, 0, 1450 * kappa], [0, 0, 0]])
    np.testing.assert_allclose(b[0], instance.memory)  # from the empty profile: everything


def test_uniform_costs_give_the_total_variation_minimum(instance):
    rng = np.random.default_rng(11)
    uniform = 1.0 - np.eye(3)
    for _ in range(10):
        a, b = rng.dirichlet(np.ones(3)), rng.dirichlet(np.ones(3))
        plan = migration_plan(instance, a, b, cost=uniform)
        assert plan.moved_share == pytest.approx(0.5 * np.abs(a - b).sum(), abs=1e-9)
        np.testing.assert_allclose(plan.flows.sum(axis=1), a, atol=1e-9)
        np.testing.assert_allclose(plan.flows.sum(axis=0), b, atol=1e-9)
        assert plan.flows.min() >= 0


def test_byte_plan_prefers_cheap_moves_and_respects_the_budget(instance):
    plan = migration_plan(instance, [0.18, 0.54, 0.28], [0.3, 0.2, 0.5])
    # shallow → none is free and shallow → deep cheaper than none → deep
    assert set(plan.table()) == {"shallow"}
    assert plan.moved_share == pytest.approx(0.34)
    assert plan.moved_bytes == pytest.approx(0.22 * 1450 * instance.gpu.kv_per_token)
    with pytest.raises(ValueError, match="not solvable"):
        migration_plan(instance, [0.18, 0.54, 0.28], [0.3, 0.2, 0.5], change_budget=0.2)


def test_epoch_model_reads_flows_as_auxiliary_columns(instance):
    problem = MigrationProblem(instance, (Epoch("a"),), instance.mix_vector(None), change_budget=0.1)
    sub = problem.epoch_problem(0, problem.current)
    cons = sub.constraints
    assert cons.n_decision == 3 and cons.n_variables == 3 + 9
    assert "change_budget" in cons.ub_names
    assert cons.completes([0.18, 0.54, 0.28]) and cons.completes([0.28, 0.44, 0.28])
    assert not cons.completes([0.38, 0.34, 0.28])  # TV 0.2 > m_max


def test_epochs_meet_the_budget_and_track_their_workload(instance):
    problem = MigrationProblem(
        instance,
        (Epoch("light", request_intensity=2.0), Epoch("heavy", (("short", 0.6), ("long", 0.4)), 3.5)),
        instance.mix_vector(None),
        change_budget=0.15,
    )
    solution = solve_migration(problem, method="grid")
    previous = problem.current
    for decision in solution.epochs:
        x = decision.result.x
        assert decision.feasible and decision.plan.moved_share <= 0.15 + 1e-9
        assert decision.plan.moved_share == pytest.approx(0.5 * np.abs(x - previous).sum(), abs=1e-6)
        previous = x
    assert solution.epochs[0].coverage > 0.75


def test_infeasible_budget_is_reported_before_any_search(instance):
    tight = instance.replace(placement=instance.placement.__class__(target=0.8, fallback="none", fallback_min=0.5))
    problem = MigrationProblem(tight, (Epoch("a"),), tight.mix_vector([0.1, 0.6, 0.3]), change_budget=0.1)
    with pytest.raises(InfeasibleConstraintsError, match="admit no point"):
        problem.epoch_problem(0, problem.current)


def test_epochs_file_round_trip(tmp_path):
    path = tmp_path / "epochs.json"
    path.write_text(
        json.dumps(
            {
                "current_mix": {"none": 0.2, "shallow": 0.5, "deep": 0.3},
                "change_budget": 0.2,
                "byte_weight": 0.5,
                "epochs": [{"name": "a", "request_intensity": 2.5}, {"probabilities": {"short": 0.5, "long": 0.5}}],
            }
        )
    )
    problem = load_migration(path)
    assert problem.change_budget == 0.2 and problem.byte_weight == 0.5
    assert problem.epochs[1].name == "epoch2"
    assert problem.epoch_instance(0).network.request_intensity == 2.5
    assert problem.epoch_instance(1).probabilities.tolist() == [0.5, 0.5]
    path.write_text(json.dumps({"epochs": [{"rate": 1}]}))
    with pytest.raises(ValueError, match=r"epochs\[0\].rate: unknown field"):
        load_migration(path)


def test_joint_search_stacks_the_epochs_and_meets_every_budget(instance):
    from edgeprefix.formulations.migration_joint import joint_migration_problem

    problem = MigrationProblem(
        instance,
        (Epoch("light", request_intensity=2.0), Epoch("heavy", (("short", 0.6), ("long", 0.4)), 3.5)),
        instance.mix_vector(None),
        change_budget=0.15,
    )
    joint = joint_migration_problem(problem)
    assert joint.dimension == 6 and joint.constraints.n_variables == 6 + 2 * 9
    assert joint.variable_names[:3] == ("light.none", "light.shallow", "light.deep")
    assert {"epoch[0].change_budget", "epoch[1].change_budget"} <= set(joint.constraints.ub_names)
    solution = solve_migration(problem, method="spsa", budget=120, seed=0, joint=True)
    greedy = solve_migration(problem, method="grid")
    previous = problem.current
    for decision in solution.epochs:
        x = np.array(list(decision.mix.values()))
        assert decision.feasible and decision.plan.moved_share <= 0.15 + 1e-6
        assert 0.5 * np.abs(x - previous).sum() <= 0.15 + 1e-6
        previous = x
    assert solution.evaluations == 120
    assert solution.objective >= greedy.objective - 1e-3
    with pytest.raises(ValueError, match="needs a sampling method"):
        solve_migration(problem, method="grid", joint=True)
