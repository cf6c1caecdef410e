"""Smoke runs of the fast-path benchmarks (docs/model.md §16): structure and claims, never wall times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgeprefix.benchmarks.memory import memory_peak
from edgeprefix.benchmarks.speed import batch_speed, erlang_speed, projection_speed


def test_projection_table_compares_both_paths_on_the_same_points():
    rows = projection_speed.projection_rows(count=25)
    assert [r.profiles for r in rows] == [10, 3, 7, 14]
    for r in rows:
        assert r.points == 25 and r.exact_ms > 0 and r.cvxpy_ms > 0
        assert r.max_distance_gain >= -1e-12  # the exact answer is never farther from z than cvxpy's
        assert r.max_dx < 1e-5
    assert rows[0].knapsack_binding > 0  # the 10-profile case exercises the knapsack row
    assert "goal: ≤ 0.3 ms" in projection_speed.render(rows)


def test_batch_speed_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert batch_speed.main(["--smoke", "--out", str(tmp_path)]) == 0
    payload = json.loads((tmp_path / "batch_speed.json").read_text())
    rows = payload["rows"]
    assert [r["case"].split()[0] for r in rows] == ["paper_baseline", "medium_forest", "mooncake_large"]
    for r in rows:
        assert r["max_coverage_diff"] < 1e-8 and r["fallbacks"] == 0 and r["single_seconds"] > 0
    for s in payload["solve"]:
        assert s["batched_best"] == pytest.approx(s["unbatched_best"], abs=1e-8)
    assert "batched pt/s" in capsys.readouterr().out


def test_erlang_speed_smoke(tmp_path: Path):
    assert erlang_speed.main(["--smoke", "--out", str(tmp_path)]) == 0
    payload = json.loads((tmp_path / "erlang_speed.json").read_text())
    assert all(q["relative_difference"] < 1e-12 for q in payload["queues"])
    evaluations = payload["evaluations"]
    assert [e["max_servers"] for e in evaluations] == [12, 1000]
    assert all(e["coverage_difference"] is not None and e["coverage_difference"] < 1e-12 for e in evaluations)


def test_memory_peak_smoke(tmp_path: Path):
    assert memory_peak.main(["--smoke", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "memory_peak.json").read_text())
    assert [r["mode"] for r in rows] == ["import + load", "blocks", "one block"]
    assert all(r["peak_mb"] > 10 for r in rows)
    assert memory_peak.one_block_estimate(200, 300, 2.0) == pytest.approx(8.0 * 200 * 300 * 200 * 20)
