"""The out-of-sample validation of the cell model: its random draws and the accuracy flag (docs/model.md §14.10)."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.benchmarks.accuracy.cell import cell_out_of_sample as oos


def test_draw_parameters_are_reproducible_and_in_range():
    params = [oos.draw_parameters(i, 0) for i in range(40)]
    assert params == [oos.draw_parameters(i, 0) for i in range(40)]  # the same seed, the same draws
    assert params != [oos.draw_parameters(i, 1) for i in range(40)]  # another seed, other draws
    alpha, profiles, types, _ = map(np.array, zip(*params))
    assert ((alpha >= 2.0) & (alpha <= 4.0)).all() and alpha.min() < 2.5 and alpha.max() > 3.5
    assert profiles.min() == 3 and profiles.max() == 10  # 40 draws of U{3..10} reach both ends (p ≈ 0.99)
    assert ((types >= 4) & (types <= 12)).all()
    a, b = oos.draw_base(3, 0), oos.draw_base(3, 0)
    assert a == b and len(a.profiles) == params[3][1] and a.network.radio_exponent == params[3][0]


def test_the_accuracy_note_names_the_alpha_band_it_was_measured_in():
    from edgeprefix.placement.model.cell import OUT_OF_SAMPLE_ACCURACY, accuracy_region

    low = accuracy_region(2.0, 3, 0.5)
    high = accuracy_region(3.2, 3, 0.5)
    assert low is not None and "[2, 2.5)" in low and "§14.10" in low
    assert high is not None and "[2.5, 4]" in high and high != low
    assert accuracy_region(4.0, 5, 0.9) == high  # the last band is closed
    assert "no error bound" in accuracy_region(4.5, 5, 0.9) and "no error bound" in accuracy_region(1.5, 5, 0.9)
    assert accuracy_region(3.0, 3, 1.2) is None and accuracy_region(3.0, 3, float("nan")) is None  # no steady state
    for lo, hi, cells, over, worst_low, worst_high in OUT_OF_SAMPLE_ACCURACY:
        assert lo < hi and 0 <= over <= cells and worst_low <= worst_high
        assert f"{worst_low:+.3f}" in accuracy_region(0.5 * (lo + hi), 4, 0.5)


def test_evaluate_reports_the_note_only_for_the_cell_model(capsys):
    import json

    from edgeprefix.cli import main

    assert main(["evaluate", "paper_calibrated", "--queue-model", "cell", "--json"]) == 0
    cell = json.loads(capsys.readouterr().out)
    assert main(["evaluate", "paper_calibrated", "--json"]) == 0
    meanfield = json.loads(capsys.readouterr().out)
    assert "[2, 2.5)" in cell["cell_accuracy_region"] and meanfield["cell_accuracy_region"] is None
    assert main(["evaluate", "paper_calibrated", "--queue-model", "cell"]) == 0
    assert "note: cell model, α in [2, 2.5)" in capsys.readouterr().out


@pytest.mark.slow  # three gradient solves: ~5 s on an idle core
def test_a_drawn_mix_meets_its_cap_and_budget_and_the_cap_binds():
    draw = oos.draw_instance(11, 0)  # |S| = 4, |Q| = 5: the cheapest of the reported draws
    inst, mix = draw.case.instance, np.asarray(draw.case.mix)
    cap = dict(inst.placement.max_share)[draw.cap_profile]
    memory = float(mix @ np.asarray(inst.memory))
    assert abs(mix.sum() - 1.0) < 1e-9 and (mix >= -1e-12).all()
    assert mix[inst.profile_ids.index(draw.cap_profile)] <= cap + 1e-9 and memory <= inst.placement.memory_budget + 1e-9
    assert draw.cap_active and draw.budget_active  # both constraints bind at the validated mix
    assert draw.alpha == oos.draw_parameters(11, 0)[0] and draw.active >= 1


def test_summary_names_the_worst_cell_and_counts_cells_over_the_limit():
    base = {
        "alpha": 3.0,
        "profiles": 5,
        "types": 6,
        "active": 3,
        "cap_active": True,
        "budget_active": False,
        "intensity": 1.0,
        "simulated_se": 0.002,
        "replications": 6,
        "meanfield": 0.9,
    }
    rows = [
        base | {"draw": 0, "load_fraction": 0.35, "simulated": 0.80, "cell": 0.79},
        base | {"draw": 1, "alpha": 2.2, "load_fraction": 0.95, "simulated": 0.30, "cell": 0.27},
        base | {"draw": 2, "load_fraction": 0.7, "max_utilization": 1.1},
    ]  # unstable: not simulated
    text = oos.render(rows)
    assert "draw 1, α = 2.200" in text and "load 0.95" in text and "1 of 2 cells over 0.015" in text
    assert "not simulated" in text and "c-" in text
    assert oos.to_csv(rows).splitlines()[0].startswith("draw,alpha,profiles")
