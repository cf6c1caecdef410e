"""One suite for every registered solver: feasible, reproducible with a seed, different with another."""

from __future__ import annotations

import numpy as np
import pytest
from solver_stubs import StubModel, baseline

from edgeprefix.formulations.placement import placement_problem
from edgeprefix.solvers import SOLVERS, Status, solve

BUDGET = 24
OPTIONS = {"grid": {"resolution": 6}}


@pytest.fixture(scope="module")
def problem():
    stub = StubModel(optimum=np.array([0.3, 0.3, 0.4]))
    return placement_problem(baseline(), evaluator=stub, differentiator=stub.differentiate)


def run(problem, method, seed, **extra):
    return solve(problem, method, budget=BUDGET, seed=seed, **OPTIONS.get(method, {}), **extra)


@pytest.mark.parametrize("method", list(SOLVERS))
def test_returns_a_feasible_mix_within_budget(problem, method):
    result = run(problem, method, seed=0)
    assert problem.constraints.violation(result.x) <= 1e-8
    assert all(problem.constraints.violation(p) <= 1e-8 for p in result.points)
    assert result.x.sum() == pytest.approx(1.0, abs=1e-12)
    assert set(result.mix) == set(problem.variable_names)
    assert 1 <= result.nfev <= BUDGET and len(result.history) == result.nfev
    assert np.all(np.diff(result.history) >= 0)
    assert result.fun == pytest.approx(result.history[-1]) == pytest.approx(result.values.max())
    assert result.success and result.seconds > 0 and result.evaluation is not None


@pytest.mark.parametrize("method", list(SOLVERS))
def test_reproducible_with_the_same_seed(problem, method):
    a, b = run(problem, method, seed=7), run(problem, method, seed=7)
    np.testing.assert_array_equal(a.points, b.points)
    np.testing.assert_array_equal(a.history, b.history)


@pytest.mark.parametrize("method", [m for m, cls in SOLVERS.items() if cls.STOCHASTIC])
def test_differs_with_another_seed(problem, method):
    # the gradient method draws only its random restarts, which a certified best point ends: keep them
    extra = {"certify_tol": None} if method == "gradient" else {}
    a, b = run(problem, method, seed=7, **extra), run(problem, method, seed=8, **extra)
    assert not np.array_equal(a.points, b.points)


@pytest.mark.parametrize("method", list(SOLVERS))
def test_callback_sees_progress_and_can_stop(problem, method):
    seen = []

    def stop_at_five(progress):
        seen.append(progress.nfev)
        return progress.nfev >= 5

    result = run(problem, method, seed=1, callback=stop_at_five)
    assert result.status is Status.CALLBACK_STOP and result.nfev == 5
    assert seen == [1, 2, 3, 4, 5]


def test_unknown_method_and_option_list_the_valid_ones(problem):
    with pytest.raises(
        ValueError, match=r"unknown method 'nelder' \(valid: \['gradient', 'spsa', 'tpe', 'cmaes', 'qmc', 'grid', 'random'\]\)"
    ):
        solve(problem, "nelder", budget=10)
    with pytest.raises(ValueError, match=r"unknown option 'step' for method 'spsa' \(valid: \['a', 'A', 'c'"):
        solve(problem, "spsa", budget=10, step=0.1)
    with pytest.raises(ValueError, match="budget must be a positive whole number"):
        solve(problem, "spsa", budget=0)


def test_unstable_region_is_left_by_spsa():
    problem = placement_problem(baseline(), evaluator=StubModel(optimum=np.array([0.3, 0.3, 0.4]), load=0.7))
    result = solve(problem, "spsa", budget=60, seed=0, x0=(0.1, 0.85, 0.05))
    assert not result.feasible[0]  # ρ_none = 0.4 + 0.7·0.9 ≥ 1 at the start
    assert result.success and result.fun > 0


class RecordingStub(StubModel):
    def __init__(self):
        super().__init__(optimum=np.array([0.3, 0.3, 0.4]))
        self.warm_starts = []

    def __call__(self, instance, mix, policy="load_aware", *, target=None, warm_start=None, **kwargs):
        self.warm_starts.append(warm_start)
        return super().__call__(instance, mix, policy, target=target, warm_start=warm_start, **kwargs)


@pytest.mark.parametrize("method", ["spsa", "tpe", "grid"])
def test_fixed_points_are_warm_started_from_the_previous_evaluation(method):
    stub = RecordingStub()
    problem = placement_problem(baseline(), evaluator=stub)
    run(problem, method, seed=0)
    assert stub.warm_starts[0] is None
    assert all(w is not None and w.shape == (3,) for w in stub.warm_starts[1:])


def test_solve_never_mutates_the_problem(problem):
    before = {k: np.array(getattr(problem.constraints, k)) for k in ("A_eq", "b_eq", "A_ub", "b_ub", "lower", "upper")}
    run(problem, "spsa", seed=0)
    for key, value in before.items():
        np.testing.assert_array_equal(getattr(problem.constraints, key), value)
        assert not getattr(problem.constraints, key).flags.writeable
