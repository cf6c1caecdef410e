"""The scaling benchmark (benchmarks/speed/scale_speed.py): its fit, its instances and its batch table."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.benchmarks.speed import scale_speed
from edgeprefix.benchmarks.workloads.scale_instances import scale_instance


def test_exponent_is_the_log_log_slope():
    xs = [10.0, 20.0, 40.0, 80.0]
    assert scale_speed.exponent(xs, [3.0 * x**1.7 for x in xs]) == pytest.approx(1.7, abs=1e-12)


def test_scale_instance_has_distinct_feasible_profiles():
    inst = scale_instance(12, 25, alpha=3.5)
    assert len(inst.profiles) == 25 and len(inst.requests) == 12
    assert len({frozenset(s.prefixes) for s in inst.profiles}) == 25
    assert np.all(inst.concurrency >= 1) and inst.network.radio_exponent == 3.5
    with pytest.raises(ValueError, match="n_profiles"):
        scale_instance(1, 500)


def test_tables_report_what_they_measured():
    rows = scale_speed.size_rows([3, 6], 4)
    assert [r.profiles for r in rows] == [3, 6] and all(r.map_evaluations >= 1 and r.cpu_seconds > 0 for r in rows)
    assert "|S| exponent over 3–6 profiles" in scale_speed.render_sizes(rows)
    batch = scale_speed.batch_rows(2)
    assert [r["route"] == "batched" for r in batch] == [True, False]  # α = 2 batched, α = 3.5 one mix at a time
    repeated = scale_speed.batch_rows(2, alphas=(2.0,), repeats=3)[0]
    assert len(repeated["ratios"]) == 3 and min(repeated["ratios"]) <= repeated["ratio"] <= max(repeated["ratios"])
    assert "over 3 alternating runs" in scale_speed.render_batch([repeated])
    assert all(r["max_coverage_diff"] <= 1e-8 for r in batch)
    grad = scale_speed.gradient_row(4, 3)
    assert grad["gradient_cpu"] > 0 and grad["gradient_peak_mb"] > 0


def test_target_row_measures_a_fresh_process_and_says_when_it_has_no_verdict():
    row = scale_speed.target_row(4, 3)
    assert row["evaluation_cpu"] > 0 and row["gradient_cpu"] > 0 and row["peak_mb"] >= row["floor_mb"] > 0
    text = scale_speed.render_targets(row, None)
    assert text.count("reduced size, no verdict") == 2  # CPU and memory targets hold at 300 × 1,000 only
    full = dict(row, profiles=300, types=1000, evaluation_cpu=25.0, peak_mb=100.0)
    text = scale_speed.render_targets(full, (scale_speed.size_rows([3, 6], 2), 2.5))
    assert "NOT met (2.5x the limit)" in text and "peak resident MB" in text and "|S| exponent of the evaluation over 3–6" in text


def test_bound_tables_measure_the_rule_the_loop_uses_and_batch_it_with_the_same_numbers():
    rows = scale_speed.rule_rows(2, nodes=(24, 32))
    by_nodes = {int(r["nodes"]): r for r in rows}
    assert by_nodes[32]["default"] == 32 and by_nodes[32]["max"] == 0.0  # the reference is evaluate's own rule
    assert by_nodes[24]["min"] > 0.0  # another rule moves the coverage: the kernel received the node count
    folded = scale_speed.batch_rows(2, alphas=(3.5,), folded=True)[0]
    assert folded["route"] == "batched" and folded["max_coverage_diff"] <= 1e-12
    assert "against the default rule" in scale_speed.render_rules(rows)
