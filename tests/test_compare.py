"""Smoke run of the optimiser comparison (benchmarks/optimisers/compare.py, ``edgeprefix compare``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.benchmarks.optimisers.compare import (
    CompareConfig,
    render_table,
    run_comparison,
    write_outputs,
)
from edgeprefix.benchmarks.optimisers.compare_runs import (
    feasible_best_so_far,
    grid_resolution_for,
    lattice_size,
    load_benchmark,
)
from edgeprefix.cli import main as cli_main
from edgeprefix.formulations.placement import placement_problem

BUDGETS = (8, 16)
METHODS = ("spsa", "tpe", "cmaes", "qmc", "random", "grid")


@pytest.fixture(scope="module")
def comparison():
    config = CompareConfig(instances=("paper_baseline", "medium_forest"), methods=METHODS, budgets=BUDGETS, seeds=2, grid_limit=500)
    return run_comparison(config)


def test_every_instance_method_budget_is_summarised(comparison):
    for name in ("paper_baseline", "medium_forest"):
        for method in METHODS:
            for b in BUDGETS:
                s = comparison.summary(name, method, b)
                assert s.runs == (1 if method == "grid" else 2)
                assert 0.0 <= s.success_strict <= s.success <= 1.0 and 0.0 <= s.feasible <= 1.0
                assert s.q25 <= s.median <= s.q75
    assert "paper_baseline: P* =" in render_table(comparison)


def test_reference_bounds_every_run_and_the_grid_is_close(comparison):
    for name, ref in comparison.references.items():
        assert all(r.best <= ref.coverage for r in comparison.runs if r.instance == name)
        assert all(s.gap >= 0.0 for s in comparison.summaries if s.instance == name)
    ref = comparison.references["paper_baseline"]
    assert ref.grid_resolution == 20 and ref.grid_coverage is not None
    # the 1/20 lattice is within one lattice step of the best mix found (coverage ≈ 0.82)
    assert 0.0 <= ref.coverage - ref.grid_coverage < 0.01
    medium = comparison.references["medium_forest"]  # its 1/20 lattice (2997 points) exceeds grid_limit here
    assert medium.source == "best found" and medium.grid_resolution == 0


def test_anytime_medians_never_drop_with_budget(comparison):
    for name in comparison.references:
        for method in ("tpe", "cmaes", "qmc", "random"):  # SPSA and grid run once per budget
            small, large = (comparison.summary(name, method, b) for b in BUDGETS)
            assert large.median >= small.median


def test_spsa_runs_once_per_budget(comparison):
    spsa = [r for r in comparison.runs if r.method == "spsa" and r.instance == "paper_baseline"]
    assert sorted(r.budget for r in spsa) == sorted(b for b in BUDGETS for _ in range(2))
    assert all(r.nfev == r.budget for r in spsa)


def test_ecdf_is_a_monotone_share(comparison):
    n = np.arange(1, max(BUDGETS) + 1)
    for method in ("spsa", "tpe", "cmaes", "qmc", "random"):
        values = comparison.ecdf(method, n)
        assert np.all(np.diff(values) >= 0) and 0.0 <= values[0] and values[-1] <= 1.0


def test_outputs_are_written(comparison, tmp_path: Path):
    written = write_outputs(comparison, tmp_path)
    names = {p.name for p in written}
    assert {"runs.csv", "summary.csv", "summary.json", "ecdf.png", "curves_paper_baseline.png", "curves_medium_forest.png"} <= names
    for p in written:
        assert p.stat().st_size > 0
    rows = list(csv.DictReader((tmp_path / "runs.csv").read_text().splitlines()))
    stochastic = [r for r in rows if r["method"] != "grid"]
    assert len(stochastic) == 2 * 5 * 2 * len(BUDGETS)
    assert not list(tmp_path.glob(".*.tmp"))  # atomic writes leave no temporaries
    assert json.loads((tmp_path / "summary.json").read_text())["references"]["paper_baseline"]["coverage"] > 0.8


def test_grid_resolution_fits_the_budget():
    problem = placement_problem(load_benchmark("paper_baseline"))
    for budget in (5, 30, 100):
        k = grid_resolution_for(problem, budget)
        assert k >= 1 and 1 <= lattice_size(problem, k) <= budget


def test_best_so_far_ignores_infeasible_points():
    curve = feasible_best_so_far(np.array([False, True, False, True]), np.array([0.9, 0.5, 0.99, 0.4]))
    assert curve[0] == -np.inf and curve.tolist()[1:] == [0.5, 0.5, 0.5]


def test_cli_json_and_bad_method(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code = cli_main(
        [
            "compare",
            "--instances",
            "paper_baseline",
            "--methods",
            "random,grid",
            "--budgets",
            "4,8",
            "--seeds",
            "0,1",
            "--grid-limit",
            "50",
            "--json",
            "--out",
            str(tmp_path),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    payload = json.loads(captured.out)
    assert {s["method"] for s in payload["summaries"]} == {"random", "grid"}
    assert payload["config"]["seeds"] == 2 and payload["config"]["seed_values"] == [0, 1]
    import csv

    with (tmp_path / "runs.csv").open() as handle:
        assert {row["seed"] for row in csv.DictReader(handle) if row["method"] == "random"} == {"0", "1"}
    assert f"wrote {tmp_path / 'ecdf.png'}" in captured.err
    assert (tmp_path / "ecdf.png").is_file()
    code = cli_main(["compare", "--methods", "simplex", "--quick"])
    assert code == 2 and "methods" in capsys.readouterr().err


def test_cli_seeds_are_values_and_the_old_count_form_fails_with_the_new_one(capsys: pytest.CaptureFixture[str]):
    from edgeprefix.cli import build_parser
    from edgeprefix.commands.compare import config_from_args

    args = build_parser(["compare"]).parse_args(["compare", "--seeds", "3,5-6"])
    config = config_from_args(args)
    assert config.seed_list == (3, 5, 6) and config.seeds == 3
    assert config_from_args(build_parser(["compare"]).parse_args(["compare"])).seed_list == tuple(range(10))
    with pytest.raises(SystemExit) as exc:
        build_parser(["compare"]).parse_args(["compare", "--seeds", "10"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "not a count" in err and "--seeds 0-9" in err
