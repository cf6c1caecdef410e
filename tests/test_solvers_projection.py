"""Projection onto the linear constraints (docs/model.md §10.2): feasibility, idempotence, KKT answer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import minimize
from solver_stubs import StubModel, baseline

from edgeprefix.formulations.linear import LinearConstraints
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.errors import InfeasibleConstraintsError
from edgeprefix.solvers.projection import Projection


@pytest.fixture(scope="module")
def constraints():
    return placement_problem(baseline(), evaluator=StubModel()).constraints


@pytest.fixture(scope="module")
def projection(constraints):
    return Projection(constraints)


def random_points(n, size, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(0.3, 1.0, size=(size, n)) * rng.choice([0.1, 1.0, 3.0], size=(size, 1))


def kkt_brute_force(cons: LinearConstraints, z):
    """Try every active set of the inequalities; keep the feasible KKT point (nonnegative multipliers)."""
    n = cons.n_variables
    eye = np.eye(n)
    rows = [(cons.A_ub[i], cons.b_ub[i]) for i in range(len(cons.b_ub))]
    rows += [(eye[i], cons.upper[i]) for i in range(n) if np.isfinite(cons.upper[i])]
    rows += [(-eye[i], -cons.lower[i]) for i in range(n) if np.isfinite(cons.lower[i])]
    best = None
    for k in range(len(rows) + 1):
        for active in itertools.combinations(range(len(rows)), k):
            e = np.vstack([cons.A_eq] + [rows[i][0][None] for i in active])
            f = np.concatenate([cons.b_eq, [rows[i][1] for i in active]])
            if np.linalg.matrix_rank(e) < len(f):
                continue
            lam = np.linalg.solve(e @ e.T, e @ z - f)
            x = z - e.T @ lam
            if np.all(lam[len(cons.b_eq) :] >= -1e-12) and cons.violation(x) <= 1e-12:
                if best is None or np.sum((x - z) ** 2) < np.sum((best - z) ** 2):
                    best = x
    return best


def test_output_feasible_to_1e8_and_idempotent(constraints, projection):
    for z in random_points(3, 200, seed=1):
        x = projection(z)
        assert constraints.violation(x) <= 1e-8
        np.testing.assert_allclose(projection(x), x, atol=1e-8)


def test_equals_brute_force_kkt_answer(constraints, projection):
    for z in random_points(3, 40, seed=2):
        np.testing.assert_allclose(projection(z), kkt_brute_force(constraints, z), atol=1e-8)


def test_equals_scipy_slsqp_on_a_random_five_profile_polytope():
    rng = np.random.default_rng(3)
    n = 5
    a_ub = rng.uniform(0, 1, size=(2, n))
    cons = LinearConstraints(
        A_eq=np.ones((1, n)),
        b_eq=np.ones(1),
        A_ub=a_ub,
        b_ub=a_ub.mean(axis=1) + 0.05,
        lower=np.zeros(n),
        upper=np.full(n, 0.6),
        names=tuple(f"pi[{i}]" for i in range(n)),
        n_decision=n,
    )
    projection = Projection(cons)
    for z in random_points(n, 15, seed=4):
        reference = minimize(
            lambda x: np.sum((x - z) ** 2),
            np.full(n, 1 / n),
            jac=lambda x: 2 * (x - z),
            method="SLSQP",
            bounds=list(zip(cons.lower, cons.upper)),
            constraints=[
                {"type": "eq", "fun": lambda x: cons.A_eq @ x - cons.b_eq},
                {"type": "ineq", "fun": lambda x: cons.b_ub - cons.A_ub @ x},
            ],
            options={"ftol": 1e-14, "maxiter": 500},
        )
        x = projection(z)
        assert cons.violation(x) <= 1e-8
        np.testing.assert_allclose(x, reference.x, atol=1e-6)
        assert np.sum((x - z) ** 2) <= np.sum((reference.x - z) ** 2) + 1e-10


def test_empty_polytope_raises_a_clear_error():
    cons = LinearConstraints(
        A_eq=np.ones((1, 3)),
        b_eq=np.ones(1),
        A_ub=np.zeros((0, 3)),
        b_ub=np.zeros(0),
        lower=np.zeros(3),
        upper=np.full(3, 0.2),
        names=("pi[a]", "pi[b]", "pi[c]"),
        n_decision=3,
    )
    with pytest.raises(InfeasibleConstraintsError, match="admit no point"):
        Projection(cons)


def test_per_call_time_is_measured(projection):
    before = projection.calls
    for z in random_points(3, 20, seed=5):
        projection(z)
    assert projection.calls == before + 20
    assert (
        projection.mean_seconds == pytest.approx(projection.seconds / projection.calls) and projection.mean_seconds > 0
    )  # per-call time: benchmarks/speed/timings.py


def test_rejects_points_of_the_wrong_shape(projection):
    with pytest.raises(ValueError, match="3 finite numbers"):
        projection([0.5, 0.5])
