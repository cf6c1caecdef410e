"""Exact projection onto the placement polytope (docs/model.md §16): cvxpy cross-check, KKT, recognition."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from solver_stubs import StubModel, baseline

from edgeprefix.formulations.linear import LinearConstraints
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.errors import InfeasibleConstraintsError
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.solvers.capped_simplex import CappedSimplex
from edgeprefix.solvers.projection import Projection, _polish

INSTANCES = Path(__file__).resolve().parents[1] / "benchmarks" / "instances"


def random_polytope(rng: np.random.Generator) -> LinearConstraints:
    """The row layout ``declare_mix`` produces: simplex, caps, fallback row, knapsack row, pinned zeros."""
    n = int(rng.integers(2, 13))
    upper = rng.choice([1.0, 0.5, 0.3, 0.0], size=n, p=[0.5, 0.25, 0.2, 0.05]) * rng.uniform(0.5, 1.0, size=n)
    upper[0] = 1.0
    a_eq, b_eq, a_ub, b_ub = [np.ones(n)], [1.0], [], []
    if rng.random() < 0.7:  # fallback π_0 ≥ π_min, stored negated
        row = np.zeros(n)
        row[0] = -1.0
        a_ub.append(row)
        b_ub.append(-rng.uniform(0.0, 0.5))
    if rng.random() < 0.8:  # memory budget Σ B_s π_s ≤ B̄
        knapsack = rng.uniform(0.0, 2.0, size=n)
        knapsack[0] = 0.0
        a_ub.append(knapsack)
        b_ub.append(rng.uniform(0.05, 1.5))
    for i in np.flatnonzero(upper == 0.0):  # no_capacity rows π_s = 0
        row = np.zeros(n)
        row[i] = 1.0
        a_eq.append(row)
        b_eq.append(0.0)
    return LinearConstraints(
        A_eq=np.array(a_eq),
        b_eq=np.array(b_eq),
        A_ub=np.array(a_ub).reshape(-1, n),
        b_ub=np.array(b_ub),
        lower=np.zeros(n),
        upper=upper,
        names=tuple(f"pi[{i}]" for i in range(n)),
        n_decision=n,
    )


def random_sets(count: int, seed: int):
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        cons = random_polytope(rng)
        try:
            cons.check_feasible()
        except InfeasibleConstraintsError:
            continue
        found.append(cons)
    return found, rng


def polished_reference(cons: LinearConstraints, z: np.ndarray, x: np.ndarray) -> np.ndarray | None:
    """cvxpy's interior-point answer made exact on its active set (``None`` when no tolerance gives a KKT point)."""
    for tol in (1e-7, 1e-6, 1e-5, 1e-4):
        exact = _polish(cons, z, x, active_tol=tol)
        if exact is not None:
            return exact
    return None


def test_equals_the_cvxpy_projection_on_random_polytopes():
    sets, rng = random_sets(40, seed=11)
    compared = 0
    for cons in sets:
        fast, reference = Projection(cons), Projection(cons, method="cvxpy")
        assert fast.method == "exact" and reference.method == "cvxpy"
        for z in rng.normal(0.2, 1.0, size=(10, cons.n_decision)) * rng.choice([0.1, 1.0, 5.0], size=(10, 1)):
            x, y = fast(z), reference(z)
            assert cons.violation(x) <= 1e-12
            # the same distance as the interior-point answer (which may violate a row by its 1e-11 tolerance) ...
            fx, fy = np.sum((x - z) ** 2), np.sum((y - z) ** 2)
            assert fx == pytest.approx(fy, rel=1e-9, abs=1e-9)
            exact_y = polished_reference(cons, z, y)
            if exact_y is not None:  # ... and equals it once cvxpy's active set is solved exactly
                np.testing.assert_allclose(x, exact_y, rtol=0, atol=1e-9)
                compared += 1
    assert compared >= 300  # 400 points; the polish fails on a few degenerate active sets


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_kkt_conditions_hold_to_rounding(seed):
    sets, rng = random_sets(40, seed=seed)
    for cons in sets:
        simplex = CappedSimplex.from_constraints(cons)
        assert simplex is not None
        a = simplex.knapsack
        for z in rng.normal(0.2, 1.0, size=(10, cons.n_decision)) * rng.choice([0.1, 1.0, 5.0], size=(10, 1)):
            x, nu, mu = simplex.project_with_multipliers(z)
            shift = nu + (0.0 if a is None else mu * a)
            np.testing.assert_allclose(x, np.clip(z - shift, simplex.lower, simplex.upper), rtol=0, atol=1e-12)  # stationarity
            assert abs(x.sum() - 1.0) <= 1e-12 and np.all(x >= simplex.lower) and np.all(x <= simplex.upper)
            assert mu >= 0.0
            if a is not None:
                slack = simplex.budget - float(a @ x)
                assert slack >= -1e-12
                assert mu * slack <= 1e-11 * max(1.0, mu)  # complementary slackness


def test_idempotent_and_identity_inside():
    sets, rng = random_sets(20, seed=5)
    for cons in sets:
        projection = Projection(cons)
        for z in rng.normal(0.2, 1.0, size=(10, cons.n_decision)):
            x = projection(z)
            np.testing.assert_allclose(projection(x), x, rtol=0, atol=1e-14)


@pytest.mark.parametrize("name", ["paper_baseline", "medium_forest", "mooncake_large"])
def test_the_placement_models_are_recognised(name):
    instance = load_instance(INSTANCES / f"{name}.toml")
    cons = placement_problem(instance, evaluator=StubModel()).constraints
    simplex = CappedSimplex.from_constraints(cons)
    assert simplex is not None and Projection(cons).method == "exact"
    plc = instance.placement
    assert (simplex.knapsack is not None) == (plc.memory_budget is not None)
    fallback = np.array(cons.names) == f"pi[{plc.fallback}]"
    assert simplex.lower[fallback][0] == pytest.approx(plc.fallback_min)


def test_other_structures_go_to_cvxpy_and_exact_refuses_them():
    n = 4
    rows = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    cons = LinearConstraints(
        A_eq=np.ones((1, n)),
        b_eq=np.ones(1),
        A_ub=rows,
        b_ub=np.array([0.8, 0.9]),
        lower=np.zeros(n),
        upper=np.ones(n),
        names=tuple(f"pi[{i}]" for i in range(n)),
        n_decision=n,
    )
    assert CappedSimplex.from_constraints(cons) is None  # two knapsack rows
    assert Projection(cons).method == "cvxpy"
    with pytest.raises(ValueError, match="use method='auto'"):
        Projection(cons, method="exact")
    with pytest.raises(ValueError, match="projection method must be one of"):
        Projection(cons, method="qp")


def test_knapsack_proportional_to_the_simplex_row_is_dropped():
    cons = placement_problem(baseline(), evaluator=StubModel()).constraints
    n = cons.n_decision
    flat = LinearConstraints(
        A_eq=cons.A_eq,
        b_eq=cons.b_eq,
        A_ub=np.full((1, n), 2.0),
        b_ub=np.array([3.0]),
        lower=cons.lower,
        upper=cons.upper,
        names=cons.names,
        n_decision=n,
    )
    simplex = CappedSimplex.from_constraints(flat)
    assert simplex is not None and simplex.knapsack is None
