"""Search spaces of the Optuna methods: box, simplex (uniform on the shares) and softmax coordinates."""

from __future__ import annotations

import numpy as np
import pytest
from solver_stubs import StubModel, baseline, unconstrained, with_placement

from edgeprefix.formulations.placement import placement_problem
from edgeprefix.solvers import Projection, solve
from edgeprefix.solvers.optuna_common import SNAP, SOFTMAX_RANGE, SPACES, SearchSpace


class FixedTrial:
    """A trial whose ``suggest_float`` returns given values in the order asked (and records the names)."""

    def __init__(self, values):
        self.values = list(values)
        self.names = []

    def suggest_float(self, name, low, high):
        self.names.append((name, low, high))
        return float(self.values.pop(0))


@pytest.fixture(scope="module")
def problem():
    return placement_problem(unconstrained(), evaluator=StubModel())


def space(kind, problem):
    return SearchSpace.of(kind, problem, Projection(problem.constraints))


def test_simplex_space_is_uniform_on_the_shares(problem):
    rng = np.random.default_rng(0)
    n = 4000
    sim = space("simplex", problem)
    points = np.array([sim.suggest(FixedTrial(rng.uniform(size=3))) for _ in range(n)])
    np.testing.assert_allclose(points.sum(axis=1), 1.0, atol=1e-12)
    # Dirichlet(1, 1, 1): each share is Beta(1, 2) (mean 1/3, sd 0.236); P(share < 0.1) = 1 − 0.9² = 0.19
    tol = 4 * 0.236 / np.sqrt(n)
    np.testing.assert_allclose(points.mean(axis=0), 1 / 3, atol=tol)
    np.testing.assert_allclose((points < 0.1).mean(axis=0), 0.19, atol=4 * np.sqrt(0.19 * 0.81 / n))


def test_softmax_space_centre_is_uniform_and_small_shares_snap_to_zero(problem):
    soft = space("softmax", problem)
    trial = FixedTrial([0.0, 0.0, 0.0])
    np.testing.assert_allclose(soft.suggest(trial), 1 / 3, atol=1e-15)
    assert [name for name, *_ in trial.names] == ["v_none", "v_shallow", "v_deep"]
    assert all((low, high) == (-SOFTMAX_RANGE, SOFTMAX_RANGE) for _, low, high in trial.names)
    point = soft.suggest(FixedTrial([SOFTMAX_RANGE, SOFTMAX_RANGE, -SOFTMAX_RANGE]))
    assert point[2] == 0.0 and point[0] == point[1] == 0.5  # e^{−14}/2 < SNAP/3: exactly 0
    kept = soft.suggest(FixedTrial([0.0, 0.0, np.log(SNAP)]))  # share ≈ SNAP/2 > SNAP/3 stays
    assert 0 < kept[2] < SNAP


def test_box_space_is_the_raw_box_point(problem):
    trial = FixedTrial([0.2, 0.9, 0.4])
    np.testing.assert_allclose(space("box", problem).suggest(trial), [0.2, 0.9, 0.4])
    assert [name for name, *_ in trial.names] == ["z_none", "z_shallow", "z_deep"]


def test_capped_profiles_stay_at_zero_in_every_space():
    problem = placement_problem(with_placement(max_share=(("deep", 0.0),), memory_budget=None), evaluator=StubModel())
    rng = np.random.default_rng(1)
    for kind in ("simplex", "softmax"):
        sp = space(kind, problem)
        for _ in range(20):
            assert sp.suggest(FixedTrial(rng.uniform(-1, 1, size=3)))[2] == 0.0


@pytest.mark.parametrize("method", ["tpe", "cmaes", "qmc"])
@pytest.mark.parametrize("kind", SPACES)
def test_every_method_runs_in_every_space_within_the_polytope(kind, method):
    stub = StubModel(optimum=np.array([0.3, 0.3, 0.4]))
    problem = placement_problem(baseline(), evaluator=stub)
    result = solve(problem, method, budget=12, seed=0, space=kind)
    assert result.extras["space"] == kind
    assert all(problem.constraints.violation(p) <= 1e-8 for p in result.points)


def test_unknown_space_names_the_valid_ones():
    problem = placement_problem(baseline(), evaluator=StubModel())
    with pytest.raises(ValueError, match=r"space must be one of \['box', 'simplex', 'softmax'\], got 'sphere'"):
        solve(problem, "cmaes", budget=5, space="sphere")
    with pytest.raises(ValueError, match="unknown search space"):
        SearchSpace.of("sphere", problem, Projection(problem.constraints))


def test_a_concentrated_optimum_is_reached_in_softmax_coordinates():
    # the optimum puts 0.9 on one profile: uniform proposals on the shares rarely come close
    stub = StubModel(optimum=np.array([0.9, 0.05, 0.05]))
    problem = placement_problem(unconstrained(), evaluator=stub)
    result = solve(problem, "cmaes", budget=80, seed=0, space="softmax")
    assert result.fun >= 0.9 - 1e-3
