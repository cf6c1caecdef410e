"""The replay study in smoke mode: its tables have the promised rows and its ablation's claims hold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from edgeprefix.benchmarks.accuracy.replay.replay_study import main


@pytest.mark.slow
def test_quick_study_writes_loads_and_an_ablation_that_isolates_each_effect(tmp_path: Path, capsys) -> None:
    assert main(["--quick", "--parts", "loads,ablation", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    report = json.loads((tmp_path / "replay_study.json").read_text())
    assert (tmp_path / "replay_study.md").read_text().strip() == text.strip()
    assert [(r["load"], r["router"]) for r in report["loads"]] == [(0.5, "tier"), (0.5, "online"), (1.0, "tier"), (1.0, "online")]
    for load in report["ablation"]["loads"]:
        rows = {r["name"]: r for r in load["rows"]}
        # the Mooncake requests pass whole vertices: per-type hit depths change nothing
        assert rows["per-type hit depths"]["coverage_replayed"] == rows["trace"]["coverage_replayed"]
        assert rows["per-type hit depths"]["hit_depth_replayed"] == rows["trace"]["hit_depth_replayed"]
        # every row replays the same requests on the same networks: one prediction
        assert len({r["coverage_predicted"] for r in rows.values()}) == 1
    jensen = report["ablation"]["prefill_jensen"]
    assert jensen["mean_g_of_requests"] > jensen["type_weighted_g_of_means"]  # g convex, lengths spread
