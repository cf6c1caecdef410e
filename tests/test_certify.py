"""Every result carries its KKT certificate (docs/model.md §18.6) with the model's exact gradient, and
``certify`` / ``solve --certify`` polish a poor point to the known optimum of the classical family."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprefix.benchmarks.optimisers.classical import ClassicalSpec, classical_instance
from edgeprefix.cli import main
from edgeprefix.formulations.migration import Epoch, MigrationProblem
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.formulations.simulated import SimulationSettings
from edgeprefix.placement.model.instance import load_instance, write_instance
from edgeprefix.solvers import certify, solve
from edgeprefix.solvers.certificate import certify_point, kkt_certificate
from edgeprefix.solvers.distributed import grid_search

CLASSICAL = ClassicalSpec(6, 2, zipf=0.9, reach=2.0)


@pytest.mark.parametrize("spec", [CLASSICAL, ClassicalSpec(5, 2, zipf=1.1, reach=3.0, alpha=3.0, fallback_min=0.2)])
def test_model_gradient_certifies_the_closed_form_optimum_and_not_a_perturbed_mix(spec: ClassicalSpec) -> None:
    inst = classical_instance(spec)
    problem = placement_problem(inst)
    optimum = inst.mix_vector(inst.metadata["optimal_mix"])
    cert, note = certify_point(problem, problem.score(optimum))
    assert note is None and cert.residual <= 1e-6
    assert "simplex" in cert.active and any(name.endswith(">= 0") for name in cert.active)  # unused subsets sit on their bound
    # halfway to the uniform mix (the fallback kept at π_min): the other shares are positive, so only the
    # rows are active, and the best fit leaves max |g_s − mean g| over those shares (the fallback's own
    # entry is explained by its row, whose multiplier ν − g_0 is ≥ 0: an empty profile has g_0 = 0)
    free = np.arange(optimum.size) != (inst.fallback_index if inst.fallback_index is not None else -1)
    uniform = np.where(free, (1.0 - inst.placement.fallback_min) / free.sum(), inst.placement.fallback_min)
    x = 0.5 * optimum + 0.5 * uniform
    score = problem.score(x)
    off, _ = certify_point(problem, score)
    g = problem.gradient(score)
    expected = float(np.max(np.abs(g[free] - g[free].mean())))
    assert off.residual == pytest.approx(expected, rel=1e-9)
    assert expected >= 1e-3 and not any(name.endswith(">= 0") for name in off.active)


def test_every_solve_result_carries_the_certificate_of_its_mix() -> None:
    problem = placement_problem(load_instance("paper_baseline"))
    result = solve(problem, "random", budget=6, seed=1)
    expected = kkt_certificate(problem.constraints, result.x, problem.gradient(problem.score(result.x)))
    assert result.certificate.residual == pytest.approx(expected.residual, rel=1e-9, abs=1e-12)
    assert result.certificate.active == expected.active and result.certificate_note is None
    out = result.to_dict()
    assert out["kkt_residual"] == result.certificate.residual and out["kkt_note"] is None and out["certified"] is None
    skipped = solve(problem, "random", budget=6, seed=1, certificate=False)
    assert skipped.certificate is None and "not computed" in skipped.to_dict()["kkt_note"] and skipped.coverage == result.coverage
    # the grid scored on workers: the certificate is the real problem's, not the score table's
    grid = grid_search(problem, resolution=4)
    assert grid.certificate is not None and grid.certificate_note is None


def _without_gradient(kind: str):
    """A problem whose objective has no exact gradient, and the words of its reason."""
    if kind == "migration epoch":  # a problem that declares no gradient
        instance = load_instance("paper_baseline")
        mix = instance.mix_vector(None)
        return MigrationProblem(instance, (Epoch("a"),), mix, change_budget=0.1).epoch_problem(0, mix), "EpochProblem has no exact gradient"
    settings = SimulationSettings(seeds=(0,), nodes=40.0)
    return placement_problem(load_instance("paper_baseline"), simulation=settings), "SimulationObjective has no gradient"


@pytest.mark.parametrize("kind", ["migration epoch", "simulation"])
def test_an_objective_without_gradient_reports_null_and_why(kind: str) -> None:
    problem, why = _without_gradient(kind)
    result = solve(problem, "random", budget=2, seed=0)
    out = result.to_dict()
    assert out["kkt_residual"] is None and out["active_constraints"] == [] and out["multipliers"] == {}
    assert out["kkt_note"].startswith("no certificate: ") and why in out["kkt_note"]
    polished = certify(problem, result)
    assert polished.certified is False and polished.nfev == result.nfev and polished.coverage == result.coverage
    assert why in polished.polish["note"] and "cannot be polished" in polished.polish["note"]


@pytest.mark.parametrize("alpha", [2.0, 3.0])
def test_the_cell_model_is_certified_at_every_exponent(alpha: float) -> None:
    problem = placement_problem(load_instance("paper_baseline").with_network(radio_exponent=alpha), queue_model="cell")
    assert problem.differentiable and problem.gradient_missing == ""
    result = solve(problem, "random", budget=3, seed=0)
    expected = kkt_certificate(problem.constraints, result.x, problem.gradient(problem.score(result.x)))
    assert result.certificate is not None and result.certificate.residual == pytest.approx(expected.residual, rel=1e-9)
    assert result.certificate_note is None


def test_an_infeasible_best_mix_has_no_certificate() -> None:
    problem = placement_problem(load_instance("paper_baseline").with_network(request_intensity=400.0))
    result = solve(problem, "random", budget=2, seed=0)
    assert not result.success and result.certificate is None and "not feasible" in result.certificate_note


def test_certify_reaches_the_known_optimum_from_a_poor_start() -> None:
    inst = classical_instance(CLASSICAL)
    problem = placement_problem(inst)
    poor = solve(problem, "random", budget=5, seed=0)
    assert poor.certificate.residual > 1e-2 and inst.metadata["known_optimum"] - poor.coverage > 1e-2
    good = certify(problem, poor)
    assert good.certified and good.certificate.residual <= 1e-6
    assert abs(good.coverage - inst.metadata["known_optimum"]) <= 1e-6
    facts = good.polish
    assert facts["residual_before"] == poor.certificate.residual and facts["improved"] and facts["note"] is None
    assert good.nfev == poor.nfev + facts["evaluations"] and good.history.size == good.nfev == good.points.shape[0]
    assert np.all(np.diff(good.history) >= 0) and good.method == "random"
    unchecked = solve(problem, "gradient", budget=60, certificate=False)  # certificate not computed by the search
    checked = certify(problem, unchecked)
    computed = kkt_certificate(problem.constraints, unchecked.x, problem.gradient(problem.score(unchecked.x)))
    assert checked.polish["residual_before"] == pytest.approx(computed.residual, rel=1e-6, abs=1e-9)
    assert checked.certified and checked.certificate.residual <= 1e-6 and checked.fun >= unchecked.fun
    again = certify(problem, good)  # already certified: nothing to spend
    assert again.certified and again.nfev == good.nfev and again.polish["evaluations"] == 0


def test_certify_that_runs_out_says_so_and_never_lowers_the_objective() -> None:
    problem = placement_problem(classical_instance(CLASSICAL))
    poor = solve(problem, "random", budget=5, seed=0)
    short = certify(problem, poor, tol=1e-6, budget=2)
    assert short.certified is False and short.polish["evaluations"] <= 2
    assert short.fun >= poor.fun and f"KKT residual {short.certificate.residual:.3g} > 1e-06" in short.polish["note"]
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="certify tolerance must be a positive number"):
            certify(problem, poor, tol=bad)
    with pytest.raises(ValueError, match="certify budget must be an integer >= 1"):
        certify(problem, poor, budget=0)


def test_solve_json_has_the_certificate_keys(capsys) -> None:
    assert main(["solve", "--method", "gradient", "--budget", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out["kkt_residual"], float) and 0.0 <= out["kkt_residual"] <= 1e-6
    assert isinstance(out["active_constraints"], list) and "simplex" in out["active_constraints"]
    assert all(isinstance(name, str) for name in out["active_constraints"]) and set(out["multipliers"]) == set(out["active_constraints"])
    assert out["kkt_note"] is None and out["certified"] is None and out["certify"] is None
    assert main(["solve", "--method", "spsa", "--budget", "6"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("KKT residual")]
    assert len(lines) == 1 and "active constraints: simplex" in lines[0]


def test_solve_certify_from_random_search_reaches_the_optimum(tmp_path, capsys) -> None:
    inst = classical_instance(CLASSICAL)
    path = tmp_path / "classical.toml"
    write_instance(inst, path)
    assert main(["solve", str(path), "--method", "random", "--budget", "5", "--certify", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["certified"] is True and out["kkt_residual"] <= 1e-6
    assert abs(out["coverage"] - inst.metadata["known_optimum"]) <= 1e-6
    assert out["coverage"] >= out["certify"]["coverage_before"] and out["evaluations"] == 5 + out["certify"]["evaluations"]
    assert main(["solve", str(path), "--method", "random", "--budget", "5", "--certify", "--certify-tol", "1e-4"]) == 0
    text = capsys.readouterr().out
    assert "certified: KKT residual" in text and "<= 0.0001 after" in text


def test_solve_certify_without_gradient_exits_0_with_one_line(capsys) -> None:
    simulated = ["--objective", "simulation", "--sim-seeds", "0", "--sim-nodes", "40"]
    assert main(["solve", "--budget", "2", *simulated, "--certify", "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["kkt_residual"] is None and out["certified"] is False and "SimulationObjective has no gradient" in out["kkt_note"]
    assert captured.err.strip().splitlines()[-1].startswith("edgeprefix solve: not certified: the SimulationObjective has no gradient")
    assert main(["solve", "--budget", "2", *simulated]) == 0
    assert "KKT residual n/a: the SimulationObjective has no gradient" in capsys.readouterr().out


def test_solve_certifies_the_cell_model_at_alpha_3(tmp_path, capsys) -> None:
    path = tmp_path / "alpha3.toml"
    write_instance(classical_instance(ClassicalSpec(4, 2, alpha=3.0)), path)
    assert main(["solve", str(path), "--budget", "3", "--queue-model", "cell", "--certify", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["certified"] is True and out["kkt_residual"] <= 1e-6 and out["kkt_note"] is None
    assert out["coverage"] >= out["certify"]["coverage_before"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--certify-tol", "1e-3"], "--certify-tol applies with --certify or --method gradient"),
        (["--certify", "--certify-tol", "0"], "--certify-tol must be a positive number"),
    ],
)
def test_bad_certify_options_are_one_line_and_exit_2(argv, message, capsys) -> None:
    assert main(["solve", "--budget", "3", *argv]) == 2
    assert message in capsys.readouterr().err
