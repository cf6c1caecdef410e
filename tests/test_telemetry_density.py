"""The telemetry as a decision in plan-density (docs/model.md (11.18)) and the sampled mitigations' sizing (11.19)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import edgeprefix.placement.model.sampled_router as sampled_router
from edgeprefix.cli import main
from edgeprefix.commands.plan_density import telemetry_plan_line
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.stale_router import predict_online
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.solvers.telemetry_mix import density_for_telemetry

MIX = np.array([0.6, 0.2, 0.2])  # none, shallow, deep: inside paper_calibrated's memory budget


@pytest.fixture(scope="module")
def calibrated():
    return load_instance("paper_calibrated")


def test_fresh_telemetry_plans_the_density_of_eq_39(calibrated, capsys):
    """D = 0 with the mean field is eq. (39): the density found is plan-density's own, within the bracket's width."""
    got = density_for_telemetry(calibrated, 0.8, Telemetry(), mix=MIX, rtol=1e-3)
    assert got.coverage >= 0.8 and got.lower < got.edge_density <= got.lower * (1 + 1e-3)
    misses = [c for d, c in got.trace if d <= got.lower]
    assert misses and max(misses) < 0.8
    assert main(["plan-density", "paper_calibrated", "--reliability", "0.8", "--mix", "none=0.6,shallow=0.2,deep=0.2", "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert got.edge_density == pytest.approx(fresh["edge_density"], rel=2e-3)


@pytest.mark.slow
def test_old_telemetry_needs_more_nodes_and_the_cli_says_how_many(capsys):
    """About 10 CPU-s: nine mean-field predictions at D = 0.5 s (h = 1 s) after the fresh plan."""
    argv = ["plan-density", "paper_calibrated", "--reliability", "0.8", "--mix", "none=0.6,shallow=0.2,deep=0.2"]
    assert main([*argv, "--telemetry-delay", "0.5", "--for-telemetry", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    plan = out["telemetry_plan"]
    assert plan["telemetry"] == {"delay": 0.5, "refresh": 0.0} and plan["method"] == "meanfield" and not plan["joint"]
    assert plan["fresh_edge_density"] == out["edge_density"]
    assert plan["edge_density"] > 1.02 * out["edge_density"]  # the age costs coverage: more nodes for the same ζ
    assert plan["coverage"] >= 0.8 > max(c for d, c in plan["trace"] if d <= plan["lower"])
    line = telemetry_plan_line(plan)
    assert line.startswith("online router at telemetry delay 0.5 s") and f"{plan['edge_density']:.4f}" in line
    assert main([*argv, "--for-telemetry", "0"]) == 2
    assert "--for-telemetry" in capsys.readouterr().err


def test_the_mix_optimised_at_each_density_needs_no_more_nodes_than_a_fixed_one(calibrated):
    joint = density_for_telemetry(calibrated, 0.8, Telemetry(), resolution=5, rtol=0.01)
    fixed = density_for_telemetry(calibrated, 0.8, Telemetry(), mix=MIX, rtol=0.01)
    assert joint.joint and not fixed.joint and len(joint.mix) == 3
    assert joint.edge_density <= fixed.edge_density * 1.01  # (0.6, 0.2, 0.2) is on the 1/5 lattice
    with pytest.raises(ValueError, match="reliability"):
        density_for_telemetry(calibrated, 1.2, Telemetry(), mix=MIX)
    # the 1/2 lattice has no deep cache (its share is capped at 0.2): coverage levels off near 0.39 at any density
    with pytest.raises(ValueError, match="levels off at 0.389"):
        density_for_telemetry(calibrated, 0.8, Telemetry(), resolution=2)


def test_a_loop_mitigation_is_sized_to_its_request_budget(calibrated, monkeypatch):
    """Local accounting, power of d and admission take the per-request loop; the sampled prediction then sizes its
    networks to LOOP_REQUESTS requests (docs/model.md (11.19)), and predict_online passes every option through."""
    inst = calibrated.with_network(request_intensity=5.245)  # 55 % of the stability edge
    assert sampled_router.takes_loop(local_accounting=True) and sampled_router.takes_loop(sample=2)
    assert sampled_router.takes_loop(admission=1.5) and not sampled_router.takes_loop()
    horizon, warmup = sampled_router.run_length(inst)
    per_node = 5.245 / inst.network.edge_density * (horizon + warmup)
    assert sampled_router.loop_nodes(inst) == int(sampled_router.LOOP_REQUESTS / (3 * per_node))
    monkeypatch.setattr(sampled_router, "LOOP_REQUESTS", 30_000)
    monkeypatch.setattr(sampled_router, "LOOP_MIN_NODES", 40)
    small = sampled_router.loop_nodes(inst)
    assert small == max(40, int(30_000 / (3 * per_node)))
    tel = Telemetry(delay=2.0)
    local = predict_online(inst, None, tel, local_accounting=True, method="sampled")
    direct = sampled_router.predict_sampled(inst, None, tel, local_accounting=True)
    assert direct.loop and direct.nodes == small and local.coverage == direct.coverage
    plain = sampled_router.predict_sampled(inst, None, tel, nodes=small)
    assert not plain.loop
    # router-local in-flight counts undo most of the herding (simulated +0.30 at this load, benchmarks/README.md §11)
    assert local.coverage - plain.coverage > 0.1 + 3 * np.hypot(local.coverage_se, plain.coverage_se)


def test_the_freshness_sweep_benchmark_runs_small(capsys, tmp_path):
    """The sweep of benchmarks/README.md §11 on a tiny reference (mean field, two 40-node networks): one row per delay,
    the bisected answer and the JSON written."""
    from edgeprefix.benchmarks.accuracy.telemetry import telemetry_density

    argv = ["--delays", "0", "--method", "meanfield", "--nodes", "40", "--replications", "2", "--resolution", "5", "--out", str(tmp_path)]
    assert telemetry_density.main(argv) == 0
    out = capsys.readouterr().out
    assert "largest delay keeping ζ = 0.8 at λ_b = 2" in out
    result = json.loads((tmp_path / "telemetry_density.json").read_text())
    (row,) = result["rows"]
    assert row["delay"] == 0.0 and row["predicted"] == pytest.approx(result["eq39"])  # the mean field at D = 0: eq. (39)
    assert row["density_coverage"] >= 0.8 and row["density_for_reliability"] < 2.0  # eq. (39) is above 0.8 at λ_b = 2
    with pytest.raises(SystemExit):
        telemetry_density.main(["--replications", "1"])


def test_the_mitigations_table_states_sizes_and_gains():
    from edgeprefix.benchmarks.accuracy.telemetry.telemetry_age import render_mitigations

    rows = [
        {
            "load": 0.3,
            "intensity": 2.9,
            "mitigation": m,
            "simulated": s,
            "simulated_se": 0.003,
            "predicted": p,
            "predicted_se": 0.002,
            "error": p - s,
            "passed": abs(p - s) <= 0.02,
            "prediction_nodes": n,
            "prediction_cpu_seconds": 1.0,
        }
        for m, s, p, n in (("none", 0.55, 0.56, 1000), ("local accounting", 0.68, 0.67, 499))
    ]
    table = render_mitigations(rows)
    assert "| 0.30 | 2.900 | local accounting | 0.6800 ± 0.0030 | 0.6700 ± 0.0020 | -0.0100 | yes | +0.1300 | +0.1100 | 499 |" in table
    assert "2 of 2 cells within" in table
