"""The sampled prediction of the online router under old telemetry (docs/model.md (11.19)): its limits and the simulator."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from edgeprefix.cli import main
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.sampled_router import predict_sampled
from edgeprefix.placement.model.stale_router import predict_online
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter

NODES = 100  # small networks keep each prediction well under a second


@pytest.fixture(scope="module")
def calibrated():
    return load_instance("paper_calibrated")


@pytest.mark.slow
def test_fresh_telemetry_is_sampled_too_and_lies_below_eq_39_near_the_edge(calibrated):
    """The mean field keeps eq. (39) at D = 0 bit for bit (tests/test_stale_router.py); the sampled method samples
    fresh telemetry like every other age (docs/model.md (11.19)).  Λ = 5.245 is 55 % of the stability edge, where the
    simulated fresh online router was measured 0.043 below eq. (39) (benchmarks/README.md §11): the sampled
    prediction must lie below eq. (39) by more than 3 SE, and is the sampled network of predict_sampled itself."""
    inst = calibrated.with_network(request_intensity=5.245)
    tau = float(inst.placement.target)
    ev = evaluate(inst, None, "load_aware")
    pred = predict_online(inst, None, Telemetry(), method="sampled")
    assert pred.coverage_se is not None and 0 < pred.coverage_se < 0.01 and pred.to_dict()["method"] == "sampled"
    assert pred.meanfield_coverage == ev.coverage(tau)
    assert ev.coverage(tau) - pred.coverage > 3 * pred.coverage_se
    small = predict_online(inst, None, Telemetry(), method="meanfield")
    assert small.coverage == ev.coverage(tau) and small.coverage_se is None


def test_the_output_states_the_near_edge_region(calibrated):
    """The fraction of the stability edge and the bias measured there, in JSON (``fresh_edge``) and in the text line."""
    from edgeprefix.placement.model.stale_router import EDGE_BIAS, EDGE_REGION, edge_region, stability_edge

    edge = stability_edge(calibrated, None)
    assert evaluate(calibrated.with_network(request_intensity=edge), None, "load_aware").stable
    assert not evaluate(calibrated.with_network(request_intensity=edge * 1.01), None, "load_aware").stable
    light = edge_region(calibrated.with_network(request_intensity=0.15 * edge), None)
    assert light["stability_edge"] == pytest.approx(edge, rel=1e-3)  # the edge does not depend on the instance's Λ
    near = edge_region(calibrated.with_network(request_intensity=0.7 * edge), None, edge=edge)
    beyond = edge_region(calibrated.with_network(request_intensity=0.98 * edge), None, method="sampled", edge=edge)
    assert not light["in_region"] and light["edge_fraction"] == pytest.approx(0.15, rel=1e-3)
    assert near["in_region"] and near["bias_measured"] == list(EDGE_BIAS) and near["region"] == list(EDGE_REGION)
    assert "--telemetry-model sampled" in near["note"] and not near["corrected"]
    assert beyond["bias_measured"] is None and beyond["corrected"] and "not measured" in beyond["note"]


def test_cli_states_the_region_of_the_fresh_prediction(capsys):
    assert main(["evaluate", "paper_calibrated", "--intensity", "6.67", "--json"]) == 0
    block = json.loads(capsys.readouterr().out)["online_predicted"]
    assert block["fresh_edge"]["in_region"] and block["fresh_edge"]["edge_fraction"] == pytest.approx(0.70, abs=0.01)
    assert block["coverage"] == block["meanfield_coverage"]  # the mean field: eq. (39) at D = 0, with the region stated
    assert main(["evaluate", "paper_calibrated", "--intensity", "6.67"]) == 0
    assert "near-edge region 55%–95%" in capsys.readouterr().out
    assert main(["evaluate", "paper_calibrated", "--intensity", "1"]) == 0
    assert "online router, fresh telemetry" not in capsys.readouterr().out  # light load: no line


def test_a_prediction_is_a_function_of_its_inputs(calibrated):
    inst = calibrated.with_network(request_intensity=4.0)
    a = predict_sampled(inst, None, Telemetry(delay=1.0), nodes=NODES, replications=1)
    b = predict_sampled(inst, None, Telemetry(delay=1.0), nodes=NODES, replications=1)
    assert (a.coverage, a.coverage_se, a.mean_ttft, a.requests) == (b.coverage, b.coverage_se, b.mean_ttft, b.requests)
    assert np.array_equal(a.utilization, b.utilization, equal_nan=True)
    other = predict_sampled(inst, None, Telemetry(delay=1.0), nodes=NODES, replications=1, seed=1)
    assert other.coverage != a.coverage  # the seed is the only randomness


def test_at_light_load_the_delay_changes_nothing(calibrated):
    """About 3 % of the stability edge: nodes almost never queue, so what the router reads does not matter (as simulated)."""
    inst = calibrated.with_network(request_intensity=0.3)
    near = predict_sampled(inst, None, Telemetry(delay=0.5), nodes=NODES, replications=1)
    old = predict_sampled(inst, None, Telemetry(delay=8.0), nodes=NODES, replications=1)
    board = predict_sampled(inst, None, Telemetry(refresh=8.0), nodes=NODES, replications=1)
    # the same networks and arrivals (one seed): only requests that met a queue can differ
    assert abs(old.coverage - near.coverage) < 2e-3
    assert abs(board.coverage - near.coverage) < 2e-3
    fresh = evaluate(inst, None, "load_aware").coverage(inst.placement.target)
    assert abs(near.coverage - fresh) <= max(0.02, 3 * near.coverage_se)  # and eq. (39) holds there


def test_older_telemetry_costs_coverage_and_moves_load_off_the_deep_tier(calibrated):
    inst = calibrated.with_network(request_intensity=5.0)
    preds = [predict_sampled(inst, None, Telemetry(delay=d), nodes=NODES, replications=1) for d in (0.5, 2.0, 8.0)]
    covs = [p.coverage for p in preds]
    for fresher, older in zip(preds, preds[1:]):
        assert fresher.coverage - older.coverage > 3 * math.hypot(fresher.coverage_se, older.coverage_se)
    assert preds[2].utilization[-1] < preds[0].utilization[-1] - 0.03  # herding empties the deep tier
    assert covs[0] < evaluate(inst, None, "load_aware").coverage(inst.placement.target)


@pytest.mark.slow
@pytest.mark.parametrize("telemetry", [Telemetry(delay=2.0, refresh=1.0)], ids=["delay2-board1"])
def test_the_prediction_is_the_simulated_coverage_within_its_errors(calibrated, telemetry):
    """Independent seeds: the simulator's networks and the prediction's differ; the gap is sampling error only.

    Both standard errors are the spread between networks (a run's batch means miss the layout's spread)."""
    inst = calibrated.with_network(request_intensity=5.0)
    tau = float(inst.placement.target)
    pred = predict_sampled(inst, None, telemetry, nodes=250, replications=3)
    spec = SimulationSpec(
        horizon=40.0,
        warmup=30.0,
        telemetry_delay=telemetry.delay,
        refresh_period=telemetry.refresh,
        layout=LayoutSpec(mean_nodes=250, counts="exact"),
    )
    router = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    covs = [simulate_network(inst, None, router, spec, seed=np.random.default_rng(s)).coverage(tau) for s in (101, 102, 103)]
    sim, sim_se = float(np.mean(covs)), float(np.std(covs, ddof=1)) / math.sqrt(len(covs))
    assert abs(pred.coverage - sim) <= 4 * math.hypot(pred.coverage_se, sim_se)
    fresh = evaluate(inst, None, "load_aware").coverage(tau)
    assert fresh - pred.coverage > 0.1  # the age costs far more than the sampling error


def test_bad_options_are_named(calibrated):
    with pytest.raises(ValueError, match="method"):
        predict_online(calibrated, None, Telemetry(delay=1.0), method="exact")
    with pytest.raises(ValueError, match="nodes"):
        predict_sampled(calibrated, None, Telemetry(delay=1.0), nodes=3)
    with pytest.raises(ValueError, match="replications"):
        predict_sampled(calibrated, None, Telemetry(delay=1.0), replications=0)


def test_cli_telemetry_model_selects_the_sampled_prediction(capsys):
    argv = ["evaluate", "paper_calibrated", "--intensity", "5", "--telemetry-delay", "2", "--json"]
    assert main([*argv, "--telemetry-model", "sampled"]) == 0
    sampled = json.loads(capsys.readouterr().out)["online_predicted"]
    assert sampled["method"] == "sampled" and 0 < sampled["coverage_se"] < 0.01
    assert sampled["coverage"] < sampled["meanfield_coverage"] - 0.1
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--telemetry-model", "exact"])
    assert stop.value.code == 2
    assert "--telemetry-model" in capsys.readouterr().err
