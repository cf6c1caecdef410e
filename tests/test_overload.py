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
from edgeprefix.placement.model.cell import overload_shares
from edgeprefix.placement.model.evaluation import OVERLOAD_TOLERANCE, evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.solvers import solve

KEYS = {"overloaded_node_share", "overloaded_request_share", "stable"}


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
    assert abs(requests[0] - min(max(mass.mean(), 0.0), 1.0)) <= 5 * mass.std() / np.sqrt(n) + 1e-5  # + a tail no draw reaches
    assert requests[0] >= nodes[0] - 1e-12 or rho * (1.0 - 3.0 * np.sqrt(variance)) >= 1.0  # big nodes overload first


def test_evaluate_reports_the_shares_and_counts_them_in_stable_under_the_cell_model(capsys):
    inst = load_instance("paper_baseline")
    cell, mean_field = evaluate(inst, queue_model="cell"), evaluate(inst)
    assert cell.stable and mean_field.stable  # every tier's ρ_s < 1
    assert cell.overloaded_shares == mean_field.overloaded_shares  # one law, whatever the coverage model
    nodes, requests = cell.overloaded_shares
    assert nodes > OVERLOAD_TOLERANCE and requests > nodes  # requests crowd on the big (overloaded) nodes
    assert cell.to_dict()["stable"] is False and mean_field.to_dict()["stable"] is True
    light = evaluate(inst.with_network(request_intensity=1.0), queue_model="cell")
    assert light.overloaded_shares[0] < OVERLOAD_TOLERANCE and light.to_dict()["stable"] is True
    assert main(["evaluate", "--queue-model", "cell", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert KEYS <= set(out) and out["overloaded_node_share"] == pytest.approx(nodes)
    assert main(["evaluate", "--queue-model", "cell"]) == 0
    assert "overloaded nodes (load >= 1 under the cell law)" in capsys.readouterr().out


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
    assert main(["plan-density", "--reliability", "0.6", "--queue-model", "cell", "--json"]) == 0
    free = json.loads(capsys.readouterr().out)
    assert KEYS <= set(free) and free["stable"] is False  # the plan meets ζ only with overloaded nodes: never "stable"
    assert main(["plan-density", "--reliability", "0.6", "--queue-model", "cell", "--max-overload", "0.005", "--json"]) == 0
    capped = json.loads(capsys.readouterr().out)
    assert capped["overloaded_node_share"] <= 0.005 and capped["stable"] is True
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
