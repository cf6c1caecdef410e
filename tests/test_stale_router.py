"""The online router under old telemetry (docs/model.md §11): the model's limits, its pieces, the simulator's delay."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from edgeprefix.cli import main
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, load_instance, write_instance
from edgeprefix.placement.model.queueing import erlang_c
from edgeprefix.placement.model.stale_router import _board, _catchment, _radial, flood_length, node_model, predict_online
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, _LaggedQueues, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter


@pytest.fixture(scope="module")
def calibrated():
    return load_instance("paper_calibrated")


def test_fresh_telemetry_is_the_mean_field_prediction_bit_for_bit(calibrated):
    for lam in (1.0, 3.0, 6.0):
        inst = calibrated.with_network(request_intensity=lam)
        ev = evaluate(inst, None, "load_aware")
        pred = predict_online(inst, None, Telemetry())
        assert pred.coverage == ev.coverage(inst.placement.target)
        assert pred.mean_ttft == ev.mean_ttft
        assert np.array_equal(pred.utilization, np.asarray(ev.utilization), equal_nan=True)
        assert pred.node is None


def test_at_light_load_the_delay_changes_nothing(calibrated):
    inst = calibrated.with_network(request_intensity=0.3)  # about 3 % of the stability edge
    fresh = predict_online(inst, None, Telemetry()).coverage
    for tel in (Telemetry(delay=8.0), Telemetry(refresh=8.0)):
        assert abs(predict_online(inst, None, tel).coverage - fresh) < 1e-3


def test_older_telemetry_costs_coverage_and_moves_load_off_the_deep_tier(calibrated):
    inst = calibrated.with_network(request_intensity=3.0)
    preds = [predict_online(inst, None, Telemetry(delay=d)) for d in (0.0, 1.0, 4.0)]
    covs = [p.coverage for p in preds]
    assert covs[0] > covs[1] > covs[2]
    assert preds[2].utilization[-1] < preds[0].utilization[-1]  # herding empties the deep tier (as simulated)
    assert preds[2].utilization[1] > preds[0].utilization[1]


def test_flood_length_of_delay_and_refresh():
    assert flood_length(Telemetry()) == 0.0
    assert flood_length(Telemetry(delay=3.0)) == 3.0
    assert flood_length(Telemetry(refresh=2.0)) == 2.0
    assert flood_length(Telemetry(delay=1.0, refresh=2.0)) == 2.0
    assert flood_length(Telemetry(delay=5.0, refresh=2.0)) == 6.0


def test_a_board_whose_rate_ignores_the_shown_state_is_the_erlang_queue():
    c, mu, lam, size = 4, 1.0, 3.0, 80
    beta, avg = _board(np.full(size, lam), c, mu, 2.0)
    wait_probability = float(beta @ avg @ (np.arange(size) >= c))
    assert wait_probability == pytest.approx(float(erlang_c(lam / mu, c)), abs=1e-9)
    fresh, _ = _board(np.full(size, lam), c, mu, 0.0)
    assert np.allclose(fresh, beta @ avg, atol=1e-10)


@pytest.mark.parametrize("k", [1, 2])
def test_the_catchments_share_out_every_request(calibrated, k):
    """Every location goes to one node: Σ_s λ_s Σ_n β_s(n) λ_{s,q}(n) = Λ p_q for any shown-state laws (here with
    few enough distinct shown waits that no state is merged or interpolated)."""
    inst = calibrated
    lam_s = np.asarray(inst.mix_vector(None)) * inst.network.edge_density
    c = np.asarray(inst.concurrency)
    unit = (np.asarray(inst.service_time) @ np.asarray(inst.probabilities)) / c
    rng = np.random.default_rng(0)
    beta = [rng.dirichlet(np.ones(int(cs) + 11) * 0.3) for cs in c]
    shown = [np.maximum(np.arange(int(c[s]) + 11) - c[s] + 1, 0) * unit[s] for s in range(c.size)]
    v, wv = _radial(float(lam_s.sum()))
    radio = inst.network.radio_scale * v
    type_rate = inst.network.request_intensity * np.asarray(inst.probabilities)
    rates, _ = _catchment(beta, shown, lam_s, np.asarray(inst.first_token_time), radio, wv, inst.network.radio_scale,
                          inst.network.radio_exponent, type_rate, k)
    served = sum(lam_s[s] * rates[s] @ beta[s] for s in range(c.size))
    assert served == pytest.approx(type_rate, rel=3e-4)  # Gauss–Legendre across the kinks of max(0, ·)


def test_only_one_or_two_candidates_have_the_closed_form(calibrated):
    ev = evaluate(calibrated, None, "load_aware")
    with pytest.raises(ValueError, match="candidates_per_profile"):
        node_model(calibrated, ev, 1.0, 0.8, k=3)


def test_lagged_queues_read_the_count_as_it_was():
    rng = np.random.default_rng(1)
    arrivals = np.sort(rng.random(200) * 50.0)
    departures = arrivals + rng.exponential(2.0, arrivals.size)
    lagged = _LaggedQueues(1)
    for t, d in zip(arrivals, departures):
        lagged.add(0, float(t), float(d))
    for at in np.linspace(0.0, 60.0, 37):
        expected = int(np.sum((arrivals <= at) & (departures > at)))
        assert lagged.read(0, float(at)) == expected
    assert lagged.read(0, 60.0, own=True) == 0.0 + int(np.sum(departures > 60.0))


def test_simulator_rejects_a_negative_delay():
    with pytest.raises(ValueError, match="telemetry_delay"):
        SimulationSpec(telemetry_delay=-1.0)


@pytest.mark.slow
def test_simulated_delay_costs_coverage_as_predicted(calibrated):
    """Λ = 3 (31 % of the edge): D = 4 s loses over 0.1 against fresh telemetry (common random numbers), and
    the prediction lies within its benchmarked error (0.03) plus 3 SE of the simulation."""
    inst = calibrated.with_network(request_intensity=3.0)
    spec = SimulationSpec(horizon=30.0, warmup=20.0, layout=LayoutSpec(mean_nodes=150.0, counts="exact"))
    router = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    tau = inst.placement.target
    runs = {d: simulate_network(inst, None, router, dataclasses.replace(spec, telemetry_delay=d), seed=3) for d in (0.0, 4.0)}
    cov = {d: r.coverage(tau) for d, r in runs.items()}
    se = {d: r.coverage_standard_error(tau) for d, r in runs.items()}
    assert cov[0.0] - cov[4.0] > 0.1 + 3 * np.hypot(se[0.0], se[4.0])
    pred = predict_online(inst, None, Telemetry(delay=4.0)).coverage
    assert abs(pred - cov[4.0]) <= 0.03 + 3 * se[4.0]


@pytest.mark.slow
def test_at_light_load_the_simulated_delay_changes_nothing(calibrated):
    inst = calibrated.with_network(request_intensity=0.3)
    spec = SimulationSpec(horizon=40.0, warmup=20.0, layout=LayoutSpec(mean_nodes=150.0, counts="exact"))
    router = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    tau = inst.placement.target
    runs = [simulate_network(inst, None, router, dataclasses.replace(spec, telemetry_delay=d), seed=4) for d in (0.0, 8.0)]
    gap = runs[0].coverage(tau) - runs[1].coverage(tau)
    assert abs(gap) <= 3 * np.hypot(*(r.coverage_standard_error(tau) for r in runs)) + 1e-3


def test_evaluate_reports_the_online_router_at_the_telemetry_age(capsys, calibrated, tmp_path):
    assert main(["evaluate", "paper_calibrated", "--telemetry-delay", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["telemetry"] == {"delay": 1.0, "refresh": 0.0}
    assert out["online_predicted"]["coverage"] < out["coverage"] - 0.05
    data = instance_to_mapping(calibrated)
    data["telemetry"] = {"delay": 1.0}
    path = tmp_path / "stale.toml"
    write_instance(instance_from_mapping(data), path)
    assert main(["evaluate", str(path), "--json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert from_file["telemetry"] == {"delay": 1.0, "refresh": 0.0}
    assert from_file["online_predicted"]["coverage"] == out["online_predicted"]["coverage"]
    assert main(["evaluate", str(path), "--telemetry-delay", "0", "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    assert fresh["online_predicted"]["coverage"] == fresh["coverage"]


def test_a_negative_telemetry_option_is_a_one_line_error(capsys):
    assert main(["evaluate", "paper_calibrated", "--telemetry-refresh", "-2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--telemetry-refresh" in err[0]


def test_validate_rows_carry_the_online_prediction(capsys):
    argv = ["validate", "paper_calibrated", "--samples", "2000", "--customers", "1000", "--intensities", "2",
            "--nodes", "80", "--horizon", "10", "--warmup", "5", "--replications", "1", "--telemetry-delay", "2", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["telemetry"] == {"delay": 2.0, "refresh": 0.0}
    rows = {r["policy"]: r for r in report["coverage_table"]}
    expected = predict_online(load_instance("paper_calibrated").with_network(request_intensity=2.0), None,
                              Telemetry(delay=2.0)).coverage
    assert rows["load_aware"]["online_predicted"] == expected
    assert rows["load_aware"]["online"] is not None and rows["load_aware"]["online_se"] is not None
    assert rows["nearest"]["online_predicted"] is None


def test_local_accounting_is_predicted_to_undo_most_of_the_herding(calibrated):
    inst = calibrated.with_network(request_intensity=3.0)
    plain = predict_online(inst, None, Telemetry(delay=4.0))
    counted = predict_online(inst, None, Telemetry(delay=4.0), fresh=plain.fresh_node, local_accounting=True)
    assert plain.coverage < counted.coverage <= plain.meanfield_coverage + 1e-9
    with pytest.raises(ValueError, match="margin"):
        predict_online(inst, None, Telemetry(delay=4.0), margin=-1.0)
