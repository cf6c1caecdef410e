"""The joint calibration of ``paper_section6``: the family, the staged assessment, the search, the CLI.

The search itself is not run here beyond a few candidates; the shipped instance is checked
against every target by the assessment (and by the figures in ``test_reproduce_results.py``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprefix.benchmarks.paper.calibration import assess as assess_module
from edgeprefix.benchmarks.paper.calibration.__main__ import main
from edgeprefix.benchmarks.paper.calibration.assess import CAPS, WEIGHTS, Assessment, assess, plateau_ends
from edgeprefix.benchmarks.paper.calibration.search import pareto_front, read_log, search
from edgeprefix.benchmarks.paper.calibration.section6 import (
    NAME,
    START,
    FigureLoads,
    Parameters,
    build_instance,
    figure_loads,
    prefill_bounds,
    shipped_parameters,
)
from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import EMBEDDED, load_instance
from edgeprefix.placement.pipeline.calibration import DEFAULT_PREFILL


@pytest.fixture(scope="module")
def shipped_assessment() -> Assessment:
    return assess(shipped_parameters())


def test_shipped_instance_meets_every_target_of_the_search(shipped_assessment):
    a = shipped_assessment
    assert a.complete, a.details
    assert a.shortfalls == {key: 0.0 for key in WEIGHTS}
    assert a.penalty() == 0.0
    assert a.figure_loads() == figure_loads(NAME)  # the loads the figures use are the ones chosen


def test_embedded_toml_is_the_shipped_parameter_vector():
    assert NAME in EMBEDDED
    shipped, built = load_instance(NAME), build_instance(shipped_parameters())
    assert shipped.concurrency.tolist() == built.concurrency.tolist()
    np.testing.assert_allclose(shipped.service_time, built.service_time, rtol=1e-9)
    np.testing.assert_allclose(shipped.mix_vector(None), built.mix_vector(None), atol=1e-12)
    for policy in ("load_aware", "prefix", "nearest"):
        assert float(evaluate(shipped, None, policy).coverage(0.8)) == pytest.approx(
            float(evaluate(built, None, policy).coverage(0.8)), abs=1e-9
        )


def test_prefill_inside_the_splitwise_range():
    box = prefill_bounds()
    assert box["linear"][0] < DEFAULT_PREFILL.linear < box["linear"][1]  # the package's default fit lies inside
    assert box["intercept"][0] < DEFAULT_PREFILL.intercept < box["intercept"][1]
    p = shipped_parameters()
    for key, value in (("linear", p.linear), ("quadratic", p.quadratic), ("intercept", p.intercept)):
        assert box[key][0] <= value <= box[key][1], key


def test_unit_cube_round_trip_and_bounds():
    rng = np.random.default_rng(3)
    for u in rng.random((5, len(Parameters.names()))):
        np.testing.assert_allclose(Parameters.from_unit(u).to_unit(), u, atol=1e-12)
    nat = START.natural()
    again = Parameters.from_natural(
        radio_scale=nat["ξ"],
        memory=nat["M"],
        deep_memory=nat["κ"] * nat["ℓ_tool"],
        linear=nat["a"],
        quadratic=nat["b"],
        intercept=nat["g_0"],
        short_decode=nat["D_short"],
        long_decode=nat["D_long"],
        tool_depth=nat["ℓ_tool"],
        system_depth=nat["ℓ_sys"],
        short_probability=nat["p_short"],
        mix=tuple(nat["mix"].values()),
        memory_budget=nat["B̄"],
        deep_cap=nat["π_deep^max"],
        fallback_min=nat["π_min"],
    )
    np.testing.assert_allclose(again.to_unit(), START.to_unit(), atol=1e-12)
    with pytest.raises(InstanceError, match="section6.intercept"):
        Parameters(**{**START.as_dict(), "intercept": 0.5})  # far above the Splitwise fits
    assert START.rounded(3).memory == pytest.approx(START.memory, rel=1e-3)


def test_figure_loads_validation_and_defaults():
    assert figure_loads("no_such_instance") == FigureLoads()
    with pytest.raises(ValueError, match="fig10"):
        FigureLoads(fig10=(2.0, 1.0, 3.0))
    with pytest.raises(ValueError, match="unknown key"):
        FigureLoads.from_dict({"fig13": 1.0})
    loads = FigureLoads(fig7=(1.0, 2.0, 8.0), fig11=(1.0, 4.0))
    assert FigureLoads.from_dict(loads.as_dict()) == loads


def test_plateau_ends_are_the_first_and_last_depth_of_each_concurrency():
    slots = np.array([12, 12, 12, 11, 11, 9, 9, 9, 9])
    assert plateau_ends(slots, np.arange(9)).tolist() == [0, 2, 3, 4, 5, 8]
    assert plateau_ends(slots, np.arange(0, 9, 2)).tolist() == [0, 2, 4, 6, 8]


def test_early_rejection_stops_after_the_cheap_stage():
    bad = Parameters.from_unit(np.zeros(len(Parameters.names())))  # every coordinate at its lower bound
    a = assess(bad)
    assert a.stage in ("", "points") and not a.complete
    assert a.evaluations <= 12  # Fig. 8 only: the Fig. 12 demand search and later stages are skipped
    assert a.penalty() >= sum(WEIGHTS[k] * CAPS[k] for k in WEIGHTS if k != "points")


def test_search_on_a_tiny_budget_is_seeded_and_logged(tmp_path):
    log = tmp_path / "search.jsonl"
    first = search(START, seed=3, budget=4, restarts=1, log=log, verbose=False)
    second = search(START, seed=3, budget=4, restarts=1, verbose=False)
    assert first.trials >= 4 and first.trials == len(read_log(log)) == second.trials
    assert [r["penalty"] for r in first.history] == [r["penalty"] for r in second.history]
    assert first.best.penalty() == min(r["penalty"] for r in first.history)
    assert all(set(r["objectives"]) == set(WEIGHTS) for r in read_log(log))


def test_pareto_front_keeps_only_non_dominated_complete_records():
    def rec(trial, stage="fig10", **obj):
        return {"trial": trial, "stage": stage, "penalty": sum(obj.values()), "objectives": {k: obj.get(k, 0.0) for k in WEIGHTS}}

    records = [
        rec(0, points=0.1, fig10=0.2),
        rec(1, points=0.2, fig10=0.1),
        rec(2, points=0.2, fig10=0.2),
        rec(3, stage="points", points=0.0, fig10=0.0),
    ]
    assert sorted(r["trial"] for r in pareto_front(records)) == [0, 1]


def test_check_command_reports_the_shipped_instance(capsys):
    assert main(["--check"]) == 0
    out = capsys.readouterr().out
    assert "penalty = 0.00000" in out and "fig10" in out


def test_pareto_command_reads_a_log(tmp_path, capsys):
    log = tmp_path / "log.jsonl"
    rows = [
        {"trial": i, "stage": "fig10", "penalty": float(i), "objectives": {k: float(i == j) for j, k in enumerate(WEIGHTS)}}
        for i in range(3)
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["--pareto", str(log), "--plot", str(tmp_path / "front.png")]) == 0
    assert "non-dominated" in capsys.readouterr().out
    assert (tmp_path / "front.png").stat().st_size > 1000
    with pytest.raises(SystemExit, match="no such log"):
        main(["--pareto", str(tmp_path / "missing.jsonl")])


def test_legacy_calibration_still_reports_paper_calibrated(capsys):
    assert main(["--legacy", "--check"]) == 0
    assert "every fitted comparison holds: True" in capsys.readouterr().out


def test_stage_functions_cover_every_weighted_target():
    produced = set()
    a = Assessment(shipped_parameters())
    base = build_instance(shipped_parameters())
    counter = assess_module._Counter()
    for stage in assess_module.STAGES:
        assess_module._STAGE_FUNCTIONS[stage](base, a, counter)
        produced |= set(a.shortfalls)
    assert produced == set(WEIGHTS)
