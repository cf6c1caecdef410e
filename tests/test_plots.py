"""Every CLI plot rendered once (Agg) and checked with :mod:`plot_checks`; the checker itself is checked too."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
from plot_checks import assert_readable, figure_problems
from validate_fixtures import fast_validate_args

from edgeprefix.cli import main


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# -- the checker ------------------------------------------------------------------------------


def _good_figure():
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    x = np.linspace(1.0, 5.0, 20)
    ax.plot(x, np.sin(x), label="a curve")
    ax.set_title("title")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    fig.legend(loc="outside right upper")
    return fig, ax


def test_checker_accepts_a_good_figure():
    fig, _ = _good_figure()
    assert figure_problems(fig) == []


def test_checker_flags_missing_labels_clipping_markup_and_a_covering_legend():
    fig, ax = _good_figure()
    ax.set_title("")
    ax.set_xlabel("")
    ax.set_ylim(-0.5, 0.5)  # sin reaches ±1: clipped
    ax.set_ylabel("A_{s,q} by eq. (39)")
    problems = "\n".join(figure_problems(fig))
    assert "no title" in problems and "no x-axis label" in problems
    assert "outside the limits" in problems and "raw markup" in problems

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label="diagonal")
    ax.plot([0, 1], [0.95, 0.95], label="top")
    ax.set_title("t")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend(loc="upper left", fontsize=14)  # sits on the 'top' line
    assert any("legend covers line 'top'" in p for p in figure_problems(fig))


# -- validate ---------------------------------------------------------------------------------

FAST = fast_validate_args("1,2")


def test_validate_plots(capsys):
    from edgeprefix.commands import validate
    from edgeprefix.placement.model.instance import load_instance

    assert main(["validate", *FAST, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    instance = load_instance(None)
    assert report["queues"]
    for fig in (validate.association_figure(report, instance), validate.queues_figure(report), validate.coverage_figure(report)):
        assert_readable(fig)


# -- compare ----------------------------------------------------------------------------------


def test_compare_plots_fit_their_data():
    from edgeprefix.benchmarks.optimisers.compare import CompareConfig, run_comparison
    from edgeprefix.benchmarks.optimisers.compare_plots import curves_figure, ecdf_figure

    config = CompareConfig(
        instances=("paper_baseline",), methods=("spsa", "random", "grid"), budgets=(4, 12), seed_values=(0, 1), grid_limit=1
    )
    comparison = run_comparison(config)
    ((name, ref),) = comparison.references.items()
    fig = curves_figure(name, comparison.runs, comparison.summaries, ref, config.methods)
    assert_readable(fig)  # includes: the early, low part of the curves lies inside the y-range
    assert_readable(ecdf_figure(comparison.runs, comparison.references, config.methods, comparison.summaries))


# -- solve ------------------------------------------------------------------------------------


def test_solve_best_so_far_plot():
    from edgeprefix.commands.solve import best_so_far_figure
    from edgeprefix.formulations.placement import placement_problem
    from edgeprefix.placement.model.instance import load_instance
    from edgeprefix.solvers import solve

    problem = placement_problem(load_instance(None))
    result = solve(problem, "random", budget=15, seed=0)
    assert_readable(best_so_far_figure(result, problem.target))
