"""A planner's first day: silent or misleading output, fixed (each test fails on the code before)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from edgeprefix.cli import main

VALIDATE_FAST = ["--samples", "2000", "--customers", "500", "--nodes", "40", "--horizon", "4", "--warmup", "2", "--replications", "1"]


def _code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's own refusals
        return int(exc.code)


def test_reproduce_out_announces_every_file(tmp_path, capsys):
    assert main(["reproduce", "--figure", "3", "--quick", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    for name in ("fig3.csv", "fig3.png"):
        assert f"wrote {tmp_path / name}" in err and (tmp_path / name).is_file()
    assert main(["reproduce", "--figure", "3", "--quick", "--json", "--out", str(tmp_path)]) == 0
    assert f"wrote {tmp_path / 'fig3.csv'}" in capsys.readouterr().err


def test_migrate_draws_progress(monkeypatch, capsys):
    from pathlib import Path

    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "1")
    epochs = Path(__file__).resolve().parents[1] / "examples" / "epochs.toml"
    assert main(["migrate", str(epochs), "--resolution", "5", "--json"]) == 0
    captured = capsys.readouterr()
    assert "migrate:" in captured.err and "/3 [" in captured.err and "evaluations" in captured.err
    json.loads(captured.out)  # the bar never reaches stdout


def test_the_mean_of_a_profile_without_nodes_warns_nothing(baseline):
    from edgeprefix.placement.simulation.compare import compare_coverage, mean_over_runs
    from edgeprefix.placement.simulation.layout import LayoutSpec
    from edgeprefix.placement.simulation.network import SimulationSpec

    rows = [[0.5, np.nan, 0.2], [0.7, np.nan, np.nan]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = mean_over_runs(rows)
        spec = SimulationSpec(horizon=3.0, warmup=1.0, layout=LayoutSpec(mean_nodes=30.0, counts="exact"))
        row = compare_coverage(
            baseline,
            {"none": 0.0, "shallow": 0.5, "deep": 0.5},
            intensities=(1.0,),
            policies=("nearest",),
            spec=spec,
            replications=2,
            online=False,
        )[0]
    np.testing.assert_allclose(got, [0.6, np.nan, 0.2])
    assert np.isnan(row.utilization_simulated[0]) and np.isfinite(row.utilization_simulated[1:]).all()


def test_plan_density_refuses_density(capsys):
    assert main(["plan-density", "--reliability", "0.6", "--density", "5"]) == 2
    err = capsys.readouterr().err
    assert "--density" in err and "plan-density" in err and len(err.strip().splitlines()) == 1


def test_validate_nodes_names_the_option(capsys):
    assert main(["validate", "--nodes", "0", "--intensities", "1"]) == 2
    err = capsys.readouterr().err
    assert "--nodes" in err and "mean_nodes" not in err


def test_validate_intensities_default_to_the_instances_load(tmp_path, baseline_mapping, capsys):
    from edgeprefix.placement.model.instance import instance_from_mapping, write_instance

    baseline_mapping["network"]["request_intensity"] = 1.4  # a trace-built instance's Λ
    path = tmp_path / "light.toml"
    write_instance(instance_from_mapping(baseline_mapping), path)
    assert main(["validate", str(path), *VALIDATE_FAST, "--no-online", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["intensities"] == pytest.approx([1.4 / 3, 2.8 / 3, 1.4], rel=1e-6)
    assert max(row["intensity"] for row in report["coverage"]) == pytest.approx(1.4)
    assert report["mix"] == pytest.approx({"none": 0.18, "shallow": 0.54, "deep": 0.28})  # the mix it used


def test_overloaded_network_exits_non_zero_and_says_so(capsys):
    assert main(["evaluate", "--intensity", "100"]) == 1
    captured = capsys.readouterr()
    assert "stable (every load < 1)     False" in captured.out  # the tables are still printed
    assert "overloaded" in captured.err and "--intensity" in captured.err and len(captured.err.strip().splitlines()) == 1
    assert main(["evaluate"]) == 0


@pytest.mark.parametrize("command", ["evaluate", "solve", "plan-density", "migrate", "validate", "compare", "sweep"])
def test_queue_model_choices_appear_in_usage(command, capsys):
    assert _code([command, "--help"]) == 0
    assert "--queue-model {meanfield,cell}" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["evaluate", "solve", "plan-density", "migrate", "validate", "replay"])
def test_router_option_on_every_predicting_command(command, capsys):
    assert _code([command, "--help"]) == 0
    # the simulating commands also offer the production routers (engine nodes)
    assert "--router {tier,online" in capsys.readouterr().out


def test_replay_policy_is_a_choice(capsys):
    from edgeprefix.commands import replay
    from edgeprefix.placement.model.policies import POLICIES

    assert replay.POLICIES == POLICIES
    assert _code(["replay", "--help"]) == 0
    assert "--policy {load_aware,prefix,nearest}" in capsys.readouterr().out


COMMANDS = [
    "evaluate",
    "solve",
    "plan-density",
    "migrate",
    "validate",
    "profiles",
    "reproduce",
    "compare",
    "sweep",
    "instance",
    "benchmark-instance",
    "replay",
    "epochs",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_no_raw_markup(command, capsys):
    assert _code([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert "``" not in text and ":func:`" not in text and ":mod:`" not in text


def test_sweep_policy_has_help(capsys):
    assert _code(["sweep", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--policy {load_aware,prefix,nearest} routing policy" in text


def test_library_solve_seed_defaults_to_the_clis(baseline):
    import inspect

    import edgeprefix as ep
    from edgeprefix.commands import solve as solve_command

    parser = __import__("argparse").ArgumentParser()
    solve_command.add_search_arguments(parser, default_method="spsa", budget_help="")
    assert inspect.signature(ep.solve).parameters["seed"].default == parser.get_default("seed") == 0
    problem = ep.placement_problem(baseline)
    assert ep.solve(problem, "random", budget=5).mix == ep.solve(problem, "random", budget=5).mix


def test_short_reprs(baseline):
    import edgeprefix as ep
    from edgeprefix.placement.model.batch import evaluate_batch

    problem, batch = ep.placement_problem(baseline), evaluate_batch(baseline, [None, None])
    for text in (repr(problem), repr(batch)):
        assert len(text) < 200 and "\n" not in text and "paper_baseline" in text


def test_compare_plots_are_titled_labelled_once_and_tell_methods_apart():
    from edgeprefix.benchmarks.optimisers.compare import CompareConfig, run_comparison
    from edgeprefix.benchmarks.optimisers.compare_plots import curves_figure, ecdf_figure

    config = CompareConfig(
        instances=("paper_baseline",), methods=("spsa", "random", "grid"), budgets=(4, 12), seed_values=(0, 1), grid_limit=1
    )
    comparison = run_comparison(config)
    ((name, ref),) = comparison.references.items()
    curves = curves_figure(name, comparison.runs, comparison.summaries, ref, config.methods)
    ecdf = ecdf_figure(comparison.runs, comparison.references, config.methods, comparison.summaries)
    assert ecdf._suptitle is not None and ecdf._suptitle.get_text()
    for fig in (curves, ecdf):
        fig.canvas.draw()
        for ax in fig.axes:
            assert ax.get_xscale() == "log"
            assert not [t.get_text() for t in ax.get_xticklabels(minor=True) if t.get_text()]  # one set of labels
            lines = [line for line in ax.get_lines() if line.get_label() in ("spsa", "random") or "run at b" in line.get_label()]
            looks = {(line.get_linestyle(), line.get_marker()) for line in lines}
            assert len(lines) >= 2 and len(looks) == len(lines)  # coinciding curves stay distinguishable


def test_validate_plots_skip_share_zero_profiles_and_show_the_online_router(capsys):
    from edgeprefix.commands import validate
    from edgeprefix.placement.model.instance import load_instance

    assert main(["validate", *VALIDATE_FAST, "--intensities", "1,2", "--mix", "none=0,shallow=0.5,deep=0.5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    instance = load_instance(None)
    fig = validate.association_figure(report, instance)
    fig.canvas.draw()
    for ax in fig.axes:
        assert not any(t.get_rotation() for t in ax.get_xticklabels() if t.get_text())  # no rotated tick labels
        assert not ax.patches  # no bars (empty ones for share-0 profiles were drawn before)
        points = [line for line in ax.get_lines() if line.get_marker() == "o"]
        assert len(points) == 1 and len(points[0].get_xdata()) == 2 * len(instance.request_ids)  # two active profiles
    labels = [c.get_label() for ax in validate.coverage_figure(report).axes for c in ax.containers]
    assert any("online router" in label for label in labels)


def test_replay_epochs_draws_progress(tmp_path, monkeypatch, capsys):
    from replay_fixtures import B, epochs_case

    trace, inst_path, epochs = epochs_case(tmp_path)
    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "1")
    assert (
        main(
            [
                "replay",
                str(trace),
                "--instance",
                str(inst_path),
                "--block-size",
                str(B),
                "--epochs",
                str(epochs),
                "--resolution",
                "4",
                "--nodes",
                "8",
                "--json",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "replay --epochs:" in captured.err and "/4 [" in captured.err and "migrate:" in captured.err
    json.loads(captured.out)
