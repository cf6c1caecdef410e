"""The recent-window forecast benchmark (docs/model.md §17.11): its forecasts, its score and its bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprefix.benchmarks.accuracy.replay.length_bins import variant
from edgeprefix.benchmarks.accuracy.replay.recent_window import prefill_forecasts, score, trace_records
from edgeprefix.benchmarks.accuracy.replay.replay_steady import cases


def test_forecasts_of_a_linear_series():
    time = np.arange(100.0)
    prefill = 10.0 - 0.05 * time
    out = prefill_forecasts(time, prefill, until=150.0, windows=(1.0, 0.5, 0.1))
    assert out["none"] == pytest.approx(prefill.mean())
    assert out["recent 0.5"] == pytest.approx(prefill[50:].mean())
    assert out["recent 0.1"] == pytest.approx(prefill[90:].mean())
    # the trend is exact on a line; the windows lag it, the longer the more
    assert out["linear trend"] == pytest.approx(10.0 - 0.05 * 150.0)
    assert out["none"] > out["recent 0.5"] > out["recent 0.1"] > out["linear trend"]


def test_score_counts_coverage_everywhere_and_ttft_where_stable():
    rows = [
        {"coverage_ok": True, "stable_planned": True, "mean_ttft_predicted": 10.0, "mean_ttft_replayed": 9.5},
        {"coverage_ok": False, "stable_planned": True, "mean_ttft_predicted": 10.0, "mean_ttft_replayed": 8.5},
        {"coverage_ok": True, "stable_planned": False, "mean_ttft_predicted": 10.0, "mean_ttft_replayed": 10.0},
    ]
    assert score(rows) == (2, 1, 2)


def test_bad_input_names_the_option():
    with pytest.raises(ValueError, match="--traces"):
        trace_records("nope")
    with pytest.raises(ValueError, match="recent"):
        cases(recent=0.0)


def test_variants_name_bins_and_the_split_at_the_target():
    assert variant("8") == (8, False) and variant(" 16T ") == (16, True)
    for bad in ("t", "0", "x8", "-2t"):
        with pytest.raises(ValueError, match="--variants"):
            variant(bad)


def test_the_auto_window_keeps_everything_without_drift_and_follows_a_step():
    from edgeprefix.placement.pipeline.recent_window import choose_window

    rng = np.random.default_rng(0)
    flat = rng.gamma(2.0, 4.0, size=4000)  # one law throughout: no window is needed
    choice = choose_window(flat)
    assert choice.fraction == 1.0 and "no drift" in choice.reason
    # the law steps down at 3/8 of the training part: the whole fit part over-forecasts the check part,
    # its last quarter (after the step) does not; the largest consistent window is taken
    step = np.concatenate([rng.gamma(2.0, 6.0, size=1500), rng.gamma(2.0, 4.0, size=2500)])
    choice = choose_window(step)
    assert choice.fraction == 0.25 and choice.candidates[0]["consistent"] is False
    assert choice.to_dict()["fraction"] == 0.25 and "drift" in choice.reason
    assert choose_window(flat[:30]).fraction == 1.0  # too few requests to test a window
    with pytest.raises(ValueError, match="fractions"):
        choose_window(flat, windows=(1.5,))


def test_profiles_with_split_chooses_the_window_says_why_and_records_it(tmp_path, capsys):
    from edgeprefix.cli import main
    from edgeprefix.placement.model.instance import load_instance

    out = tmp_path / "half.toml"
    assert main(["profiles", "--split", "0.5", "--out", str(out)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("recent window")]
    assert len(lines) == 1 and "F = " in lines[0]
    meta = load_instance(out).metadata["recent_window"]
    assert meta["fraction"] in (1.0, 0.5, 0.25, 0.125) and meta["reason"] in lines[0] and "(17.24)" in meta["rule"]
    assert main(["profiles", "--split", "0.5", "--recent", "0.5", "--json"]) == 0  # a given F keeps working
    report = json.loads(capsys.readouterr().out)
    assert report["recent_window"] == {"rule": "given (--recent)", "fraction": 0.5} and report["forest"]["requests"] == 50
    assert main(["profiles", "--json"]) == 0  # without --split nothing changes
    assert "recent_window" not in json.loads(capsys.readouterr().out)
    assert main(["profiles", "--split", "0.5", "--recent", "soon"]) == 2
    assert "--recent" in capsys.readouterr().err
