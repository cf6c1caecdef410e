"""Smoke runs of the cell model's evidence benchmarks (structure and claims, never wall time)."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.benchmarks.accuracy.cell import cell_horizon, cell_sectors, cell_validation
from edgeprefix.placement.model.evaluation import evaluate


def test_horizon_drift_windows_and_reference():
    row = cell_horizon.drift(
        "paper_calibrated", "load_aware", 0.55, windows=2, seeds=2, nodes=150.0, warmup=20.0, horizon=15.0, node_points=50
    )
    assert row["window_start"] == [20.0, 35.0] and len(row["coverage"]) == 2
    assert all(0.0 < c < 1.0 for c in row["coverage"]) and 0.0 < row["node_erlang"] < 1.0
    assert row["drift_se"][0] == 0.0  # the first window is the drift's reference
    assert row["meanfield"] > row["cell"]  # the load spread costs coverage at this load
    assert "window start s" in cell_horizon.render([row])


def test_sector_variants_rescore_a_saved_reference():
    case = cell_validation.benchmark_case("paper_calibrated")
    saved = [
        {
            "instance": "paper_calibrated",
            "policy": "load_aware",
            "intensity": 3.338,
            "load_fraction": 0.35,
            "node_erlang": 0.52,
            "node_erlang_se": 0.003,
            "meanfield": 0.0,
            "cell": {},
        }
    ]
    rows = cell_sectors.rescore(saved, ["3.85:0.35", "3.85:0", "3.569:inf"])
    shipped = evaluate(case.instance.with_network(request_intensity=3.338), case.mix, queue_model="cell").coverage()
    assert rows[0]["cell"]["3.85:0.35"] == pytest.approx(shipped, abs=1e-12)  # the shipped constants
    assert len({round(v, 6) for v in rows[0]["cell"].values()}) == 3  # the variants are different models
    assert rows[0]["node_erlang"] == 0.52  # the reference is kept
    assert "3.85:0.35" in cell_sectors.render(rows, ["3.85:0.35", "3.85:0", "3.569:inf"])


def test_validation_reevaluate_keeps_the_simulation_and_recomputes_the_models():
    saved = [
        {
            "instance": "paper_calibrated",
            "policy": "nearest",
            "intensity": 2.842,
            "load_fraction": 0.35,
            "simulated": 0.499,
            "simulated_se": 0.001,
            "replications": 6,
            "meanfield": 0.0,
            "cell": 0.0,
        }
    ]
    row = cell_validation.reevaluate(saved)[0]
    case = cell_validation.benchmark_case("paper_calibrated")
    net = case.instance.with_network(request_intensity=2.842)
    assert row["simulated"] == 0.499 and row["replications"] == 6
    assert row["cell"] == pytest.approx(evaluate(net, case.mix, "nearest", queue_model="cell").coverage(), abs=1e-9)
    assert row["meanfield"] == pytest.approx(evaluate(net, case.mix, "nearest").coverage(), abs=1e-12)
    assert np.isfinite(row["cell"]) and row["cell"] < row["meanfield"]
