"""Overloaded nodes under the cell law (docs/model.md §14.9): the law's shares, the JSON keys of evaluate,
solve, plan-density and migrate, ``stable`` counting them under the cell model, and the cap as a constraint."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeprefix.cli import main
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.cell import overload_growth, overload_shares
from edgeprefix.placement.model.evaluation import MEAN_TTFT_TOLERANCE, OVERLOAD_TOLERANCE, REFERENCE_SERVICE_TIMES, evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.solvers import solve

KEYS = {"overloaded_node_share", "overloaded_request_share", "stable", "mean_wait_growth", "mean_ttft_horizon_s", "reference_horizon_s"}


@settings(max_examples=25, deadline=None)
@given(st.floats(0.02, 1.5), st.floats(0.0, 4.0), st.floats(0.3, 1.3))
def test_the_shares_are_the_pearson_iii_tail_and_its_size_biased_mass(variance, skewness, rho):
    law = SimpleNamespace(variance=np.array([variance]), skewness=np.array([skewness]))
    nodes, requests = overload_shares(law, np.array([rho]))
    rng = np.random.default_rng(0)
    n = 400_000
    if skewness > 1e-6:
        k = 4.0 / skewness**2
        theta = np.sqrt(variance) * skewness / 2.0
        x = 1.0 - k * theta + theta * rng.gamma(k, size=n)
    else:
        x = 1.0 + np.sqrt(variance) * rng.standard_normal(n)
    over = rho * x >= 1.0
    se = np.sqrt(max(over.mean() * (1 - over.mean()), 1.0 / n) / n)
    assert abs(nodes[0] - over.mean()) <= 5 * se + 1e-12
    mass = np.where(over, x, 0.0)
    # the draws' SE, or where few draws reach the tail the law's own (E[X²; tail] >= E[X; tail] / ρ there)
    se = np.sqrt(max(mass.var(), requests[0] / rho) / n)
    assert abs(requests[0] - min(max(mass.mean(), 0.0), 1.0)) <= 5 * se + 1e-5  # + a tail no draw reaches
    assert requests[0] >= nodes[0] - 1e-12 or rho * (1.0 - 3.0 * np.sqrt(variance)) >= 1.0  # big nodes overload first


@settings(max_examples=25, deadline=None)
@given(st.floats(0.02, 1.5), st.floats(0.0, 4.0), st.floats(0.3, 1.3))
def test_the_wait_growth_is_the_size_biased_excess_load(variance, skewness, rho):
    """(14.17): ``E[X (ρ X − 1)⁺]`` against draws of the Pearson III law."""
    law = SimpleNamespace(variance=np.array([variance]), skewness=np.array([skewness]))
    (growth,) = overload_growth(law, np.array([rho]))
    rng = np.random.default_rng(1)
    n = 400_000
    if skewness > 1e-3:  # the normal law below, as the function does
        k = 4.0 / skewness**2
        theta = np.sqrt(variance) * skewness / 2.0
        x = 1.0 - k * theta + theta * rng.gamma(k, size=n)
    else:
        x = 1.0 + np.sqrt(variance) * rng.standard_normal(n)
    excess = x * np.maximum(rho * x - 1.0, 0.0)
    assert growth >= 0.0
    assert abs(growth - excess.mean()) <= 5 * excess.std() / np.sqrt(n) + 1e-4  # + a tail no draw reaches


@pytest.fixture(scope="module")
def sample_instance(tmp_path_factory):
    out = tmp_path_factory.mktemp("overload") / "sample.toml"
    assert main(["profiles", "--out", str(out)]) == 0  # decode-heavy: 13 s of decode per request
    return load_instance(out)


def test_stable_under_the_tier_rule_means_the_overloaded_nodes_leave_the_mean_ttft_alone(sample_instance, capsys):
    """(14.18): stable iff at most 1 % of the nodes overload and their growth of the mean wait over 10 mean service
    times stays within 10 % of the mean TTFT.  On the decode-heavy sample at 0.4 Λ₀ 0.6 % of the nodes overload,
    within the node tolerance, but they move the mean TTFT by 10 % after 49 s, against 140 s: unstable; at 0.3 Λ₀
    stable.  The online router balances the nodes."""
    capsys.readouterr()
    inst, lam0 = sample_instance, sample_instance.network.request_intensity
    for load, stable in ((0.3, True), (0.4, False)):
        ev = evaluate(inst.with_network(request_intensity=load * lam0), queue_model="cell")
        kappa, ttft, ref = ev.overload_wait_growth, ev.mean_ttft, ev.reference_horizon
        assert ev.stable and ev.overloaded_shares[0] <= OVERLOAD_TOLERANCE  # the node share alone would pass both
        assert ev.mean_ttft_horizon == pytest.approx(2 * MEAN_TTFT_TOLERANCE * ttft / kappa)
        assert (kappa * ref / 2 <= MEAN_TTFT_TOLERANCE * ttft) is stable and ev.stable_on_nodes is stable
        served = ev.instance.probabilities @ ev.association[ev.active].T  # each tier's share of the requests
        assert ref == pytest.approx(REFERENCE_SERVICE_TIMES * float(served @ ev.mean_service[ev.active] / served.sum()))
        report = ev.to_dict()
        assert report["stable"] is stable and report["mean_ttft_horizon_s"] == pytest.approx(ev.mean_ttft_horizon)
        assert evaluate(inst.with_network(request_intensity=load * lam0)).stable_on_nodes


def test_the_replay_over_its_own_horizon_sees_the_growing_queues(sample_instance):
    """(14.17) in ``replay``: the steady state plus the overloaded nodes' growth over the replay's horizon is
    nearer the replayed mean TTFT than the steady state (the sample 20 times over, tier rule, 300 nodes)."""
    from importlib import resources

    from edgeprefix.placement.pipeline.trace_workload import load_trace_workload
    from edgeprefix.placement.simulation.replay import ReplaySpec, replay

    sample = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")
    inst, w = load_trace_workload(str(sample), sample_instance)
    k = 20
    long = w.repeated(k)
    spec = ReplaySpec(decode_per_token=0.0445, nodes=300, warm_start="resample")
    for load in (0.5, 0.7):  # 2.3 % and 6.2 % of the nodes overloaded
        rows = [replay(inst, long, None, spec, intensity=load * inst.network.request_intensity, seed=s).summary() for s in range(3)]
        replayed = float(np.mean([r["mean_ttft_replayed"] for r in rows]))
        steady, horizon = rows[0]["mean_ttft_predicted"], rows[0]["mean_ttft_predicted_horizon"]
        assert rows[0]["mean_wait_growth_predicted"] > 0 and horizon > steady
        assert abs(horizon - replayed) < 0.5 * abs(steady - replayed)
    none = replay(inst, w, None, ReplaySpec(decode_per_token=0.0445, nodes=10, warm_start="none"), seed=0).summary()
    assert none["mean_ttft_predicted_horizon"] is None  # from empty: no finite-horizon prediction


def test_evaluate_reports_the_shares_and_counts_them_in_stable_under_the_cell_model(capsys):
    inst = load_instance("paper_baseline")
    cell, mean_field = evaluate(inst, queue_model="cell"), evaluate(inst)
    assert cell.stable and mean_field.stable  # every tier's ρ_s < 1
    assert cell.overloaded_shares == mean_field.overloaded_shares  # one law, whatever the coverage model
    nodes, requests = cell.overloaded_shares
    assert nodes > 0.05 and requests > nodes  # requests crowd on the big (overloaded) nodes
    # their queues move the mean TTFT by 10 % within 10 mean service times: not stable under the tier rule (14.18)
    assert cell.mean_ttft_horizon < cell.reference_horizon
    assert cell.to_dict()["stable"] is False and mean_field.to_dict()["stable"] is True
    light = evaluate(inst.with_network(request_intensity=1.0), queue_model="cell")
    assert light.mean_ttft_horizon > light.reference_horizon and light.to_dict()["stable"] is True
    assert main(["evaluate", "--queue-model", "cell", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out) and out["overloaded_node_share"] == pytest.approx(nodes)
    assert main(["evaluate", "--queue-model", "cell"]) == 0
    text = capsys.readouterr().out
    assert "overloaded nodes (load >= 1 under the cell law)" in text and "move the mean TTFT by 10 %" in text


@pytest.mark.slow
def test_the_shares_match_the_network_simulator_under_the_tier_rule():
    inst = load_instance("paper_baseline")  # Λ = 3: 6 % of nodes, 21 % of requests
    ev = evaluate(inst, queue_model="cell")
    spec = SimulationSpec(horizon=300.0, warmup=50.0, layout=LayoutSpec(mean_nodes=400))
    nodes, requests = [], []
    for seed in range(2):
        r = simulate_network(inst, None, analytical_router(ev), spec, seed=seed)
        served = r.node >= 0
        load = np.bincount(r.node[served], weights=r.service[served], minlength=r.layout.nodes) / (r.horizon * r.layout.servers)
        nodes.append(np.mean(load >= 1.0))
        requests.append(np.mean((load >= 1.0)[r.node[served]]))
    model_nodes, model_requests = ev.overloaded_shares
    se = np.sqrt(model_nodes * (1 - model_nodes) / (2 * 400))  # binomial over the nodes of both draws
    assert abs(np.mean(nodes) - model_nodes) <= 3 * se + 0.01  # + a node's load measured over a finite horizon
    assert abs(np.mean(requests) - model_requests) <= 0.05


def test_a_cap_on_the_node_share_constrains_placement():
    inst = load_instance("paper_baseline").with_network(request_intensity=2.0)
    free = solve(placement_problem(inst, queue_model="cell"), "grid", resolution=20)
    capped = solve(placement_problem(inst, queue_model="cell", max_overloaded_share=0.005), "grid", resolution=20)
    share = lambda result: evaluate(inst, dict(result.mix), queue_model="cell").overloaded_shares[0]  # noqa: E731
    assert share(free) > 0.005  # the cap binds
    assert capped.success and share(capped) <= 0.005 and capped.coverage < free.coverage
    with pytest.raises(ValueError, match="--max-overload"):
        placement_problem(inst, max_overloaded_share=1.5)


def test_solve_plan_density_and_migrate_report_the_shares(tmp_path, capsys):
    assert main(["solve", "--method", "grid", "--intensity", "2", "--queue-model", "cell", "--max-overload", "0.005", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out) and out["overloaded_node_share"] <= 0.005 and out["stable"] is True and out["max_overload"] == 0.005
    assert "docs/model.md §14.10" in out["cell_accuracy_region"]  # where the cell model's measured accuracy lies
    assert main(["plan-density", "--reliability", "0.6", "--queue-model", "cell", "--json"]) == 0
    free = json.loads(capsys.readouterr().out)
    assert KEYS <= set(free) and free["stable"] is False  # the plan meets ζ only with overloaded nodes: never "stable"
    assert main(["plan-density", "--reliability", "0.6", "--queue-model", "cell", "--max-overload", "0.005", "--json"]) == 0
    capped = json.loads(capsys.readouterr().out)
    assert capped["overloaded_node_share"] <= 0.005 and capped["stable"] is True and capped["cell_accuracy_region"]
    assert capped["edge_density"] > free["edge_density"]
    epochs = tmp_path / "epochs.toml"
    epochs.write_text(
        "current_mix = { none = 0.18, shallow = 0.54, deep = 0.28 }\n"
        '[[epochs]]\nname = "night"\nrequest_intensity = 2.0\n[[epochs]]\nname = "peak"\nrequest_intensity = 3.5\n'
    )
    assert main(["migrate", str(epochs), "--resolution", "10", "--queue-model", "cell", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert all(KEYS <= set(e) for e in data["epochs"])
    assert data["epochs"][1]["overloaded_node_share"] > data["epochs"][0]["overloaded_node_share"]
    assert main(["solve", "--max-overload", "2"]) == 2
    assert "--max-overload" in capsys.readouterr().err
