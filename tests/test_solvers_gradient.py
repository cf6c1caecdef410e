"""``solve(method="gradient")``: SLSQP on the exact gradient ends at KKT points, restarts where it pays,
counts fixed points and gradient solves apart, and refuses problems without gradients."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import linprog

from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
from edgeprefix.cli import main
from edgeprefix.formulations.migration import Epoch, MigrationProblem
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.solvers import solve


def frank_wolfe_gap(problem, x):
    """``max_{y ∈ polytope} ∇P_cov(x)·(y − x)``: 0 exactly at a KKT point of the linear constraints."""
    grad = problem.score(x, gradient=True).gradient
    cons = problem.constraints
    lp = linprog(
        -grad,
        A_ub=cons.A_ub if len(cons.b_ub) else None,
        b_ub=cons.b_ub if len(cons.b_ub) else None,
        A_eq=cons.A_eq,
        b_eq=cons.b_eq,
        bounds=list(zip(cons.lower, cons.upper)),
        method="highs",
    )
    return float(-lp.fun - grad @ x)


@pytest.mark.parametrize("name", ["paper_baseline", "medium_forest"])
def test_ends_at_a_kkt_point_within_forty_fixed_points(name):
    problem = placement_problem(load_benchmark(name))
    result = solve(problem, "gradient", budget=40, starts=1)
    assert result.success and result.nfev <= 40
    assert frank_wolfe_gap(problem, result.x) <= 1e-6
    assert problem.constraints.violation(result.x) <= 1e-9
    assert 1 <= result.njev <= result.nfev  # a gradient only at points SLSQP accepts
    random = solve(problem, "random", budget=200, seed=0)
    assert result.coverage >= random.coverage - 1e-9


def test_restarts_from_the_corners_find_the_better_of_two_local_maxima():
    # paper_calibrated at twice its load: the default mix is a vertex and a local maximum 0.012 below the optimum
    instance = load_instance("paper_calibrated").with_network(request_intensity=6.0)
    problem = placement_problem(instance)
    single = solve(problem, "gradient", budget=40, starts=1)
    assert single.nfev < 40 and frank_wolfe_gap(problem, single.x) <= 1e-9  # stopped at a KKT point
    multi = solve(problem, "gradient", budget=40, seed=0, certify_tol=None)  # restarts until the budget is spent
    assert multi.nfev == 40 and multi.extras["descents"] > 2
    assert multi.coverage > single.coverage + 0.005
    assert frank_wolfe_gap(problem, multi.x) <= 1e-6


def test_a_problem_without_gradients_is_refused():
    instance = load_instance("paper_baseline")
    epoch = MigrationProblem(instance, (Epoch("a"),), instance.mix_vector(None), change_budget=0.1).epoch_problem(
        0, instance.mix_vector(None)
    )
    with pytest.raises(ValueError, match="method 'gradient' needs exact gradients, but EpochProblem does not provide them"):
        solve(epoch, "gradient", budget=10)
    with pytest.raises(ValueError, match="gradient option starts must be an integer >= 1"):
        solve(placement_problem(instance), "gradient", budget=10, starts=0)


def test_cli_reports_fixed_points_and_gradient_solves(capsys):
    assert main(["solve", "--method", "gradient", "--budget", "12", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "gradient" and out["nfev"] == out["evaluations"] == 12
    # a gradient at points SLSQP accepts, and at most one per descent for the certificate that ends the restarts
    assert 1 <= out["njev"] <= out["nfev"] + out["extras"]["descents"] and out["extras"]["descents"] >= 2
    assert main(["solve", "--method", "spsa", "--budget", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["njev"] == 0


def test_the_gradient_method_with_the_cell_model_at_alpha_2_5():
    """The cell model's exact gradient at α ≠ 2 (docs/model.md §14.6): SLSQP ends at a KKT point within the budget."""
    problem = placement_problem(load_instance("paper_baseline").with_network(radio_exponent=2.5), queue_model="cell")
    result = solve(problem, "gradient", budget=20, seed=0)
    assert result.njev >= 1 and result.certificate is not None and result.certificate.residual <= 1e-9
    assert result.coverage >= solve(problem, "random", budget=20, seed=0).coverage


@pytest.mark.parametrize("name", ["paper_baseline", "medium_forest"])
def test_restarts_stop_once_the_best_point_is_certified(name):
    problem = placement_problem(load_benchmark(name))
    spent = solve(problem, "gradient", budget=300, seed=0, certify_tol=None)
    stopped = solve(problem, "gradient", budget=300, seed=0)  # certify_tol: the default of --certify-tol
    free = int(np.count_nonzero(problem.constraints.upper[: problem.dimension] > 0))
    assert stopped.extras["stopped"] == "certified" and stopped.extras["descents"] == free + 1  # the corners, no random start
    assert stopped.nfev < spent.nfev and stopped.nfev == len(stopped.values)  # nfev: what was used
    assert stopped.certificate.residual <= 1e-6 and stopped.extras["best_kkt_residual"] <= 1e-6
    assert stopped.coverage >= spent.coverage - 1e-9


def test_cli_certify_tol_sets_where_the_gradient_method_stops(capsys):
    import json

    assert main(["solve", "--method", "gradient", "--budget", "300", "--certify-tol", "1e-300", "--json"]) == 0
    never = json.loads(capsys.readouterr().out)
    assert main(["solve", "--method", "gradient", "--budget", "300", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["extras"]["stopped"] == "certified" and "stopped" not in never["extras"]
    assert default["nfev"] < never["nfev"]
