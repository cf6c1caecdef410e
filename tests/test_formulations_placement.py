"""The placement formulation (docs/model.md §10.1): constraints read back from Pyomo, penalty, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyomo.environ as pyo
import pytest
from solver_stubs import StubModel, baseline, unconstrained, with_placement

from edgeprefix.formulations.linear import read_linear_constraints
from edgeprefix.formulations.objective import INFEASIBLE_BASE
from edgeprefix.formulations.placement import build_placement_model, placement_problem
from edgeprefix.placement.errors import InfeasibleConstraintsError


def test_constraints_are_read_from_the_pyomo_model():
    instance = baseline()
    problem = placement_problem(instance, evaluator=StubModel())
    cons = problem.constraints
    assert cons.names == ("pi[none]", "pi[shallow]", "pi[deep]")
    np.testing.assert_array_equal(cons.A_eq, [[1.0, 1.0, 1.0]])
    np.testing.assert_array_equal(cons.b_eq, [1.0])
    assert cons.ub_names == ("memory_budget", "fallback")
    np.testing.assert_allclose(cons.A_ub[0], instance.memory)  # Σ π_s B_s ≤ B̄
    assert cons.b_ub[0] == pytest.approx(0.6)
    np.testing.assert_array_equal(cons.A_ub[1], [-1.0, 0.0, 0.0])  # π_0 ≥ π_min, negated
    assert cons.b_ub[1] == pytest.approx(-0.1)
    np.testing.assert_array_equal(cons.lower, [0, 0, 0])
    np.testing.assert_array_equal(cons.upper, [1, 1, 0.5])  # deep cap
    assert isinstance(problem.model.coverage, pyo.Objective)
    assert problem.model.simplex.doc == "Σ_s π_s = 1"


def test_model_builder_is_pure():
    instance = baseline()
    a, b = build_placement_model(instance), build_placement_model(instance)
    assert a is not b
    ra, rb = read_linear_constraints(a, a.pi), read_linear_constraints(b, b.pi)
    np.testing.assert_array_equal(ra.A_ub, rb.A_ub)


def test_profile_without_concurrency_is_pinned_to_zero():
    instance = unconstrained()
    instance = instance.replace(gpu=dataclasses.replace(instance.gpu, kv_per_token=0.006))  # B_deep = 13.5 > M
    assert instance.concurrency.tolist()[2] == 0
    cons = placement_problem(instance, evaluator=StubModel()).constraints
    assert "no_capacity[deep]" in cons.eq_names
    row = cons.A_eq[cons.eq_names.index("no_capacity[deep]")]
    np.testing.assert_array_equal(row, [0, 0, 1])


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"max_share": (("none", 0.2), ("shallow", 0.2), ("deep", 0.2))}, "placement.max_share: the caps"),
        ({"memory_budget": 0.1, "max_share": (("none", 0.2),)}, "B̄ = 0.1 is below the least fleet memory 0.3072"),
        ({"memory_budget": 0.0, "fallback_min": 0.5, "max_share": (("none", 0.4),)}, "placement.fallback_min: π_min = 0.5"),
    ],
)
def test_infeasible_budget_or_caps_fail_before_any_evaluation(changes, words):
    stub = StubModel()
    with pytest.raises(InfeasibleConstraintsError) as info:
        placement_problem(with_placement(**changes), evaluator=stub)
    assert words in str(info.value)
    assert stub.calls == 0


def test_unstable_points_score_below_every_feasible_point_with_growing_penalty():
    problem = placement_problem(unconstrained(), evaluator=StubModel(load=0.8))
    feasible = problem.score([0.4, 0.3, 0.3])  # ρ ≤ 0.4 + 0.8·0.7 < 1
    mild = problem.score([0.1, 0.2, 0.7])  # ρ_none = 1.12
    harsh = problem.score([0.0, 0.1, 0.9])  # ρ_none = 1.2
    assert feasible.feasible and not mild.feasible and not harsh.feasible
    assert feasible.value == pytest.approx(feasible.coverage)
    assert max(mild.value, harsh.value) < 0 <= feasible.value
    assert harsh.overload > mild.overload and harsh.value < mild.value
    assert mild.value == pytest.approx(INFEASIBLE_BASE + 0.5 * mild.coverage - mild.overload)


def test_real_model_scores_the_default_mix():
    problem = placement_problem(baseline())
    score = problem.score(problem.initial_point())
    assert score.feasible
    assert score.value == pytest.approx(0.668, abs=0.01)  # paper_baseline.toml header
    assert problem.model.coverage.expr is not None
    np.testing.assert_allclose(pyo.value(problem.model.coverage_of(0.18, 0.54, 0.28)), score.value)
