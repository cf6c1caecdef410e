"""Smoke run of the gradient-cost benchmark (benchmarks/speed/gradient_cost.py): structure and its claims."""

from __future__ import annotations

import json

from edgeprefix.benchmarks.speed.gradient_cost import main, measure, to_target


def test_costs_are_measured_at_both_mixes():
    rows = measure("paper_baseline", repeats=2)
    assert [r.mix for r in rows] == ["uniform", "optimum"]
    assert all(r.score_cold_ms > 0 and r.score_warm_ms > 0 and r.gradient_ms > 0 for r in rows)
    assert rows[0].zero_shares == 0


def test_the_gradient_method_reaches_the_target_first():
    cells = to_target("paper_baseline", 1.0)
    gradient, slsqp = cells["gradient"], cells["slsqp-fd"]
    assert gradient is not None and slsqp is not None
    assert gradient[0] <= 40 and gradient[0] <= slsqp[0]


def test_cli_writes_json(tmp_path, capsys):
    assert main(["--repeats", "1", "--instances", "paper_calibrated", "--out", str(tmp_path)]) == 0
    assert "paper_calibrated" in capsys.readouterr().out
    payload = json.loads((tmp_path / "gradient_cost.json").read_text())
    assert len(payload["cost"]) == 2 and payload["to_target"] == {}
