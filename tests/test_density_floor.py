"""The density bracket starts at the capacity floor of docs/model.md §20 (an extreme load is planned in a few
steps or refused in one line) and leaves every shipped instance's plan unchanged."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from edgeprefix.formulations.density import density_problem
from edgeprefix.placement.model.evaluation import capacity_condition
from edgeprefix.placement.model.instance import default_instance, instance_from_mapping, instance_to_mapping, load_instance
from edgeprefix.solvers import density as density_solver
from edgeprefix.solvers.density import capacity_floor, plan_density

FOLDER = Path(__file__).resolve().parents[1] / "benchmarks" / "instances"
SHIPPED = sorted(p.stem for p in FOLDER.glob("*.toml"))
MIX = {"none": 0.2, "shallow": 0.4, "deep": 0.4}


def test_extreme_load_is_planned_in_a_few_steps_from_the_floor():
    # Λ = 10⁷ needs λ_b ≈ 1.3·10⁶: from λ_b = 1 the doubling ran out of its 20 steps (each a failing evaluation)
    instance = default_instance().with_network(request_intensity=1e7)
    problem = density_problem(instance, 0.9, mix=MIX, queue_model="cell")
    floor = capacity_floor(problem)
    assert floor > 2.0**density_solver.MAX_DOUBLINGS * instance.network.edge_density
    assert not capacity_condition(problem.at_density(floor), problem.mix)  # (35) fails at the floor: a lower bound
    plan = plan_density(problem)
    assert plan.steps <= 16 and plan.evaluations == plan.steps  # a doubling or two, then the bisection
    assert plan.coverage >= 0.9 and problem.meets(problem.score(plan.edge_density))
    assert floor < plan.edge_density <= plan.lower * 1.001


def test_a_load_no_accepted_density_carries_is_refused_before_any_evaluation(monkeypatch):
    mapping = instance_to_mapping(default_instance())
    mapping["network"]["request_intensity"] = 1e30
    for request in mapping["requests"]:
        request["decode"] = 1e3  # work of ≥ 10³ s per request: λ_b > 10³² is needed
    instance = instance_from_mapping(mapping)
    problem = density_problem(instance, 0.9, mix=MIX)

    def no_evaluation(*args, **kwargs):
        raise AssertionError("evaluated a density below the capacity floor")

    monkeypatch.setattr(type(problem), "score", no_evaluation)
    monkeypatch.setattr(type(problem), "placement", no_evaluation)
    with pytest.raises(
        ValueError, match=r"^network.request_intensity \(--intensity\) .* network.edge_density \[1e-30, 1e\+30\]: lower --intensity$"
    ):
        plan_density(problem)
    with pytest.raises(ValueError, match="lower --intensity"):
        plan_density(replace(problem, mix=None))


@pytest.mark.parametrize("name", SHIPPED)
def test_the_floor_lies_below_every_shipped_instance_density(name):
    """Below its own λ_b, so the bracket of every shipped instance starts where it did without the floor."""
    instance = load_instance(FOLDER / f"{name}.toml")
    problems = [density_problem(instance, 0.9)]
    if instance.placement.mix is not None:
        problems.append(density_problem(instance, 0.9, mix=dict(instance.placement.mix)))
    for problem in problems:
        assert 0 < capacity_floor(problem) < instance.network.edge_density


@pytest.mark.parametrize("name", ["paper_baseline", "serving_chunked", "serving_tiers"])
def test_planned_density_is_bit_identical_without_the_floor(name, monkeypatch):
    instance = load_instance(FOLDER / f"{name}.toml")
    problem = density_problem(instance, 0.9, mix=dict(instance.placement.mix))
    with_floor = plan_density(problem)
    monkeypatch.setattr(density_solver, "capacity_floor", lambda problem: 0.0)
    without = plan_density(problem)
    drop = ("seconds",)
    assert {k: v for k, v in with_floor.to_dict().items() if k not in drop} == {k: v for k, v in without.to_dict().items() if k not in drop}
