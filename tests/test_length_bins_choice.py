"""The out-of-sample choice of the number of length sub-types (docs/model.md §2.3 (2.9))."""

from __future__ import annotations

import pytest

from edgeprefix.benchmarks.accuracy.replay.length_bins import trace_instance
from edgeprefix.benchmarks.accuracy.replay.length_bins_choice import Fit, choose, compare
from edgeprefix.placement.pipeline.traces import TraceRecord

B = 512


def _records(lengths: list[int]) -> list[TraceRecord]:
    # one shared block, then private ones: every request of one type, its own input length
    return [
        TraceRecord(i + 1, float(i), n, 100, (0,) + tuple(range(10**6 + 100 * i, 10**6 + 100 * i + n // B - 1)))
        for i, n in enumerate(lengths)
    ]


def test_one_length_is_reproduced_exactly() -> None:
    records = _records([3 * B] * 32)
    fit = compare(trace_instance(records, 1), records, 1)
    assert fit.distance == 0.0 and fit.mean_ratio == pytest.approx(1.0, abs=1e-12)
    assert fit.coverage_error == pytest.approx(0.0, abs=1e-12)


def test_two_lengths_need_two_bins() -> None:
    records = _records([3 * B] * 16 + [8 * B] * 16)  # shares of 1/32: the bins' means are exact
    one, two = compare(trace_instance(records, 1), records, 1), compare(trace_instance(records, 2), records, 2)
    assert one.distance == pytest.approx(0.5)  # the mean length sits between the two: half the requests on each side
    assert two.distance == pytest.approx(0.0, abs=1e-12) and two.coverage_error == pytest.approx(0.0, abs=1e-12)


def test_rule_takes_the_smallest_k_within_the_slack() -> None:
    fits = [Fit(1, 1, 0.5, 0.6, -0.30), Fit(4, 4, 0.9, 0.3, -0.05), Fit(8, 8, 1.0, 0.2, -0.02), Fit(16, 16, 1.0, 0.1, 0.015)]
    assert choose(fits, 0.01) == 8  # 0.02 is within 0.01 of the best |error| 0.015
    assert choose(fits, 0.001) == 16
    assert choose(fits, 0.05) == 4
