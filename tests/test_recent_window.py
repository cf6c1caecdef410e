"""The recent-window forecast benchmark (docs/model.md §17.11): its forecasts, its score and its bad input."""

from __future__ import annotations

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
