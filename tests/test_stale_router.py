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
    assert flood_length(Telemetry(delay=3.0)) == 6.0  # the board of the same mean age, 2D
    assert flood_length(Telemetry(refresh=2.0)) == 2.0
    assert flood_length(Telemetry(delay=1.0, refresh=2.0)) == 4.0


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
    rates, _ = _catchment(
        beta,
        shown,
        lam_s,
        np.asarray(inst.first_token_time),
        radio,
        wv,
        inst.network.radio_scale,
        inst.network.radio_exponent,
        type_rate,
        k,
    )
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
    assert out["online_predicted"]["coverage"] < out["coverage"] - 0.02
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
    argv = [
        "validate",
        "paper_calibrated",
        "--samples",
        "2000",
        "--customers",
        "1000",
        "--intensities",
        "2",
        "--nodes",
        "80",
        "--horizon",
        "10",
        "--warmup",
        "5",
        "--replications",
        "1",
        "--telemetry-delay",
        "2",
        "--json",
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["telemetry"] == {"delay": 2.0, "refresh": 0.0}
    rows = {r["policy"]: r for r in report["coverage_table"]}
    expected = predict_online(load_instance("paper_calibrated").with_network(request_intensity=2.0), None, Telemetry(delay=2.0)).coverage
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


def test_the_board_phase_laws_are_the_transient_of_each_phase():
    """Row j of the end law is e_j exp(Q_j h) and of the phase average (1/h) ∫_0^h e_j exp(Q_j t) dt, with Q_j the
    birth–death generator of birth rate rate[j] (the top state refuses) and death min(n, c) μ (docs/model.md (11.12))."""
    from scipy.linalg import expm
    from scipy.stats import poisson  # noqa: F401  (the board imports it lazily)

    size, c, mu, h = 14, 2, 1.0, 1.5
    rate = np.linspace(3.0, 0.2, size)
    n = np.arange(size)
    beta, avg = _board(rate, c, mu, h)
    y, w = np.polynomial.legendre.leggauss(40)
    t = 0.5 * h * (y + 1.0)
    ends = []
    for j in range(size):
        q = np.zeros((size, size))
        q[n[:-1], n[:-1] + 1] = rate[j]
        q[n[1:], n[1:] - 1] = np.minimum(n[1:], c) * mu
        q -= np.diag(q.sum(axis=1))
        mean = sum(0.5 * wk * expm(q * tk)[j] for tk, wk in zip(t, w))
        assert np.allclose(avg[j], mean, atol=1e-9)
        ends.append(expm(q * h)[j])
    assert np.allclose(beta @ np.array(ends), beta, atol=1e-9)  # β is the board chain's stationary law


def _random_marks(rng, shape, atoms):
    c = np.sort(rng.exponential(1.5, shape + (atoms,)), axis=-1)[..., ::-1].copy()  # non-increasing in the atoms
    return c, rng.dirichlet(np.ones(atoms))


def test_the_law_of_beaters_has_the_best_choice_closed_forms_at_zero():
    """P(no candidate of the tier beats the node) is eq. (11.11)'s closed form; each law sums to one (another tier)
    or to the chance that the node is one of the k nearest of its own tier."""
    from edgeprefix.placement.model.stale_router import _beaten, _pair_sum

    rng = np.random.default_rng(5)
    c, w = _random_marks(rng, (2, 3, 7), 6)
    a_r = rng.exponential(1.0, 7)
    other = _beaten(c, w, a_r, 2, own=False)
    assert np.allclose(other[..., 0], _pair_sum(c, w), atol=1e-12)
    assert np.allclose(other.sum(axis=-1), 1.0) and (other >= -1e-12).all()
    assert np.allclose(_beaten(c, w, a_r, 1, own=False)[..., 0], np.exp(-c) @ w, atol=1e-12)
    own = _beaten(c, w, a_r, 2, own=True)
    m = np.maximum(a_r[None, None, :, None], c)
    assert np.allclose(own[..., 0], np.exp(-m) * (m - c + 1.0) @ w, atol=1e-12)
    assert np.allclose(own.sum(axis=-1), np.exp(-a_r) * (1.0 + a_r))  # one of the two nearest of its tier


@pytest.mark.parametrize("sample", [1, 3])
def test_power_of_d_catchments_share_out_every_request(calibrated, sample):
    """Every request goes to one of the d sampled candidates (d = 1: a uniform one; d = 3 of K = 6); the tolerance
    is the quadrature's: a uniform choice reaches far into the sparse tier's area, X_MAX truncates at e^{-8}."""
    inst = calibrated
    lam_s = np.asarray(inst.mix_vector(None)) * inst.network.edge_density
    c = np.asarray(inst.concurrency)
    unit = (np.asarray(inst.service_time) @ np.asarray(inst.probabilities)) / c
    rng = np.random.default_rng(2)
    beta = [rng.dirichlet(np.ones(int(cs) + 11) * 0.3) for cs in c]
    shown = [np.maximum(np.arange(int(c[s]) + 11) - c[s] + 1, 0) * unit[s] for s in range(c.size)]
    v, wv = _radial(float(lam_s.sum()))
    radio = inst.network.radio_scale * v
    type_rate = inst.network.request_intensity * np.asarray(inst.probabilities)
    k_all = 2 * c.size
    assert sample < k_all
    rates, _ = _catchment(
        beta,
        shown,
        lam_s,
        np.asarray(inst.first_token_time),
        radio,
        wv,
        inst.network.radio_scale,
        inst.network.radio_exponent,
        type_rate,
        2,
        sample,
    )
    served = sum(lam_s[s] * rates[s] @ beta[s] for s in range(c.size))
    assert served == pytest.approx(type_rate, rel=1.5e-3)


def test_mitigation_limits_of_the_model(calibrated):
    """d = K candidates and ρ = inf are the plain prediction bit for bit; a closed node receives nothing."""
    inst = calibrated.with_network(request_intensity=4.0)
    ev = evaluate(inst, None, "load_aware")
    plain = node_model(inst, ev, 2.0, 0.8)
    assert node_model(inst, ev, 2.0, 0.8, sample=6).coverage == plain.coverage
    assert node_model(inst, ev, 2.0, 0.8, sample=99).coverage == plain.coverage
    closed = node_model(inst, ev, 0.0, 0.8, admission=1.0)  # fresh: a node shown with n >= c gets no arrivals
    assert all(float(b[int(cs) + 1 :].sum()) < 1e-6 for b, cs in zip(closed.shown, inst.concurrency))
    with pytest.raises(ValueError, match="sample"):
        node_model(inst, ev, 2.0, 0.8, sample=-1)
    with pytest.raises(ValueError, match="admission"):
        node_model(inst, ev, 2.0, 0.8, admission=0.0)


def test_the_sampled_router_with_every_candidate_is_the_online_router(calibrated):
    from edgeprefix.placement.simulation.routers import SampledOnlineRouter

    inst = calibrated.with_network(request_intensity=4.0)
    spec = SimulationSpec(horizon=8.0, warmup=4.0, telemetry_delay=1.0, layout=LayoutSpec(mean_nodes=60.0, counts="exact"))
    online = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    a = simulate_network(inst, None, online, spec, seed=4)
    b = simulate_network(inst, None, SampledOnlineRouter(online, 6), spec, seed=4)
    assert np.array_equal(a.ttft, b.ttft)
    with pytest.raises(ValueError, match="sample"):
        SampledOnlineRouter(online, 0)


def test_the_fresh_prediction_states_its_region(calibrated):
    """Item 4: the online block says whether eq. (39) is near the stability edge, where its measured bias grows."""
    light = predict_online(calibrated.with_network(request_intensity=1.0), None, Telemetry()).to_dict()["fresh_region"]
    heavy = predict_online(calibrated.with_network(request_intensity=8.0), None, Telemetry()).to_dict()["fresh_region"]
    assert not light["near_edge"] and heavy["near_edge"]
    assert heavy["max_utilization"] > light["max_utilization"]
    assert heavy["bias_measured"][1] > light["bias_measured"][1]


@pytest.mark.slow
def test_power_of_two_undoes_part_of_the_herding_as_predicted(calibrated):
    """Λ = 5.245 (55 % of the edge), D = 2 s: two sampled candidates of the six beat the best choice by more than
    0.05 + 3 SE (common random numbers; benchmarks/README.md §11 measured +0.105), and the predicted gain lies
    within 0.03 + 3 SE of the simulated one (measured there: +0.126 against +0.105)."""
    from edgeprefix.placement.simulation.routers import SampledOnlineRouter

    inst = calibrated.with_network(request_intensity=5.245)
    spec = SimulationSpec(horizon=30.0, warmup=20.0, telemetry_delay=2.0, layout=LayoutSpec(mean_nodes=150.0, counts="exact"))
    online = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    tau = inst.placement.target
    runs = [simulate_network(inst, None, r, spec, seed=7) for r in (online, SampledOnlineRouter(online, 2))]
    cov = [r.coverage(tau) for r in runs]
    se = float(np.hypot(*[r.coverage_standard_error(tau) for r in runs]))
    assert cov[1] - cov[0] > 0.05 + 3 * se
    plain = predict_online(inst, None, Telemetry(delay=2.0))
    sampled = predict_online(inst, None, Telemetry(delay=2.0), fresh=plain.fresh_node, sample=2)
    assert abs((sampled.coverage - plain.coverage) - (cov[1] - cov[0])) <= 0.03 + 3 * se


def test_each_benchmarked_mitigation_is_a_simulated_router():
    from edgeprefix.benchmarks.accuracy.telemetry.telemetry_age import MITIGATIONS, mitigation_router
    from edgeprefix.placement.simulation.routers import SampledOnlineRouter

    for label, margin, _local, sample, admission in MITIGATIONS:
        router = mitigation_router(margin, sample, admission)
        inner = router.router if isinstance(router, SampledOnlineRouter) else router
        assert isinstance(router, SampledOnlineRouter) == (sample > 0), label
        assert inner.margin == margin and inner.rho_high == admission == router.rho_low, label
