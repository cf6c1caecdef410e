"""The comparison on the known-optimum suite: success against the exact P* (docs/model.md §18.5)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from plot_checks import assert_readable

from edgeprefix.benchmarks.optimisers.classical import classical_instance, suite
from edgeprefix.benchmarks.optimisers.compare import CompareConfig, known_optimum, render_table, run_comparison
from edgeprefix.benchmarks.optimisers.compare_classical import profiles_of, suite_specs, write_suite
from edgeprefix.benchmarks.optimisers.compare_metrics import RELATIVE_TARGETS, ecdf, make_reference, summarise_targets
from edgeprefix.benchmarks.optimisers.compare_plots import target_ecdf_figure
from edgeprefix.benchmarks.optimisers.compare_runs import RunRecord, load_benchmark
from edgeprefix.cli import main as cli_main
from edgeprefix.formulations.placement import placement_problem


def test_every_member_is_written_with_its_exact_optimum_attained_at_the_water_filling_mix(tmp_path: Path) -> None:
    paths = write_suite(3, tmp_path)
    assert [len(load_benchmark(p).profiles) for p in paths] == [6, 15, 45, 120, 300]
    for path, spec in zip(paths, suite(3)):
        instance = load_benchmark(path)
        value, method = known_optimum(instance)
        assert method == "water-filling" and value == classical_instance(spec).metadata["known_optimum"]
        mix = np.array([instance.metadata["optimal_mix"].get(pid, 0.0) for pid in instance.profile_ids])
        score = placement_problem(instance).score(mix)
        # (18.2) evaluated by the model at the systematic-sampling mix: exact up to rounding
        assert score.feasible and abs(score.value - value) <= 1e-9
    # another seed draws other instances of the same dimensions
    assert known_optimum(load_benchmark(write_suite(4, tmp_path / "other", [6])[0]))[0] != known_optimum(load_benchmark(paths[0]))[0]


def _record(name: str, curve: list[float], method: str = "m", seed: int = 0) -> RunRecord:
    c = np.asarray(curve, dtype=float)
    return RunRecord(name, method, seed, c.size, 0, c, np.arange(1.0, c.size + 1), ())


def test_relative_targets_ecdf_and_summary_count_exactly_the_pairs_reached() -> None:
    # P* = 0.5: targets 0.5 (1 − δ) = 0.4995, 0.49995, 0.4999995
    runs = [
        _record("a", [0.1, 0.4996, 0.4996, 0.49996, 0.5]),  # 1e-3 at n = 2, 1e-4 at n = 4, 1e-6 at n = 5
        _record("a", [0.49999, 0.49999, 0.49999, 0.49999, 0.49999], seed=1),  # 1e-3 and 1e-4 from n = 1, never 1e-6
        _record("a", [-np.inf, 0.3, 0.3, 0.3, 0.3], seed=2),  # nothing
    ]
    ref = make_reference("a", runs, None, known=(0.5, "water-filling"))
    assert ref.coverage == 0.5 and ref.source == "known optimum (water-filling)"
    got = ecdf(runs, {"a": ref}, "m", [0, 1, 2, 3, 4, 5], RELATIVE_TARGETS, relative=True)
    assert got.tolist() == pytest.approx([0, 2 / 9, 3 / 9, 3 / 9, 4 / 9, 5 / 9], abs=1e-15)
    t = summarise_targets(runs, ref, "m", 4)
    assert t.by_target == pytest.approx((2 / 3, 2 / 3, 0.0), abs=1e-15) and t.reached == pytest.approx(4 / 9, abs=1e-15)
    assert t.gap == pytest.approx(0.5 - 0.49996, abs=1e-15) and t.min_gap == pytest.approx(0.5 - 0.49999, abs=1e-15)
    # an absolute Δ = 1e-3 would count what the relative target 5e-4 does not
    assert ecdf(runs[:1], {"a": ref}, "m", [1], (0.4,))[0] == 1.0
    assert ecdf(runs[:1], {"a": ref}, "m", [1], (0.4,), relative=True)[0] == 0.0


def test_known_optimum_replaces_the_grid_and_the_best_run(tmp_path: Path) -> None:
    (path,) = write_suite(0, tmp_path, [6])
    config = CompareConfig(instances=(path,), methods=("random",), budgets=(5,), seeds=1, grid_limit=5000)
    comparison = run_comparison(config)
    (ref,) = comparison.references.values()
    assert ref.source == "known optimum (water-filling)" and ref.grid_points == 0  # no reference lattice was searched
    assert ref.coverage == known_optimum(load_benchmark(path))[0] > ref.best_found


def test_suite_end_to_end_nobody_beats_the_exact_optimum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli_main(
        [
            "compare",
            "--suite",
            "classical",
            "--seed",
            "0",
            "--profiles",
            "6",
            "--methods",
            "gradient,slsqp-fd,de",
            "--budgets",
            "10,30",
            "--seeds",
            "0",
            "--json",
            "--out",
            str(tmp_path),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    payload = json.loads(captured.out)
    (label,) = payload["references"]
    exact = known_optimum(load_benchmark(str(tmp_path / "instances" / f"{label}.toml")))[0]
    assert payload["references"][label]["coverage"] == exact and payload["profiles"] == {label: 6}
    rows = payload["targets"]
    assert {(t["method"], t["budget"]) for t in rows} == {(m, b) for m in ("gradient", "slsqp-fd", "de") for b in (10, 30)}
    for t in rows:
        assert t["min_gap"] >= -1e-9 and t["gap"] >= -1e-9  # P* is the optimum: no run may beat it
        assert 0.0 <= t["reached"] <= 1.0 and t["targets"] == list(RELATIVE_TARGETS)
    gradient = {t["budget"]: t for t in rows if t["method"] == "gradient"}
    assert gradient[30]["reached"] == 1.0 and gradient[30]["relative_gap"] <= 1e-6
    with (tmp_path / "targets.csv").open() as handle:
        assert len(list(csv.DictReader(handle))) == len(rows)
    assert (tmp_path / "ecdf_targets.png").is_file()
    markdown = (tmp_path / "summary.md").read_text()
    assert f"| gradient | {gradient[30]['reached']:.2f} (" in markdown.split("**Budget 30: share")[1]


def test_the_target_ecdf_figure_is_readable(tmp_path: Path) -> None:
    paths = write_suite(0, tmp_path, [6, 15])
    comparison = run_comparison(CompareConfig(instances=paths, methods=("random", "spsa"), budgets=(4, 8), seeds=2))
    text = render_table(comparison)
    assert "Against the known optimum" in text and "classical_J6_K2" in text
    ref = comparison.references["classical_J4_K2"]
    assert f"classical_J4_K2: P* = {ref.coverage:.10f} (known optimum (water-filling); the best run reached" in text
    known = {t.instance: comparison.references[t.instance] for t in comparison.targets}
    assert_readable(target_ecdf_figure(comparison.runs, known, ("random", "spsa"), comparison.profiles))


def test_bad_suite_options_fail_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["compare", "--suite", "classical", "--profiles", "7"]) == 2
    assert "--profiles" in capsys.readouterr().err
    assert cli_main(["compare", "--profiles", "6"]) == 2
    assert "--suite classical" in capsys.readouterr().err
    assert [profiles_of(s) for s in suite_specs(0, [45, 6])] == [6, 45]
