"""``plan-density --queue-law engine --refine-on-engine`` (docs/model.md §17.10.2): the density refined on the
batching-engine simulation, its JSON block, the model's keys unchanged, the bad inputs, and the benchmark's
function giving the CLI's numbers.  A small network (8 expected nodes, 10 requests per node, 3 replications)
keeps each run to a few seconds; the search is deterministic given its seeds, so its coverages are asserted exactly.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.cli import main
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.simulation.engine.model_network import SimSize
from edgeprefix.solvers.engine_refine import FRESH_SEED, REFINE_MAX, REFINE_TOL, EngineNetwork

INSTANCE = Path(__file__).resolve().parents[1] / "benchmarks" / "instances" / "mooncake_engine.toml"
PLAN = ["plan-density", str(INSTANCE), "--reliability", "0.8", "--mix", "none=1", "--queue-model", "cell", "--queue-law", "engine"]
SMALL = ["--refine-nodes", "8", "--refine-requests-per-node", "10", "--refine-replications", "3", "--seed", "11"]
KEYS = {
    "edge_density",
    "model_edge_density",
    "coverage_search",
    "coverage_held_out",
    "coverage_held_out_se",
    "coverage_model",
    "converged",
    "tolerance",
    "simulations",
    "nodes",
    "replications",
    "requests_per_node",
    "seed",
    "held_out_seed",
    "points",
    "router",
    "route_law",
    "intensity",
}


def _json(argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return json.loads(out.getvalue())


@pytest.fixture(scope="module")
def refined() -> dict:
    return _json([*PLAN, "--refine-on-engine", *SMALL, "--json"])


@pytest.fixture(scope="module")
def mooncake():
    return load_instance(INSTANCE)


def test_the_search_ends_within_its_tolerance_of_zeta_on_the_search_seeds(refined, mooncake) -> None:
    block = refined["engine_refinement"]
    assert set(block) == KEYS
    assert block["converged"] and abs(block["coverage_search"] - 0.8) <= REFINE_TOL
    assert block["points"][0][0] == refined["edge_density"] == block["model_edge_density"]  # it starts at the model's density
    assert block["points"][-1] == [block["edge_density"], block["coverage_search"]]
    assert 2 <= len(block["points"]) <= REFINE_MAX and block["simulations"] == len(block["points"]) + 1
    assert (block["nodes"], block["replications"], block["requests_per_node"], block["seed"]) == (8.0, 3, 10.0, 11)
    assert block["held_out_seed"] == 11 + FRESH_SEED and block["router"] == "online" and block["route_law"] == "engine"
    # the same simulation, re-run outside the command, gives the search's coverage exactly (common random numbers)
    from edgeprefix.commands._engine_refine import engine_step

    net = EngineNetwork(mooncake, np.asarray(mooncake.mix_vector({"none": 1.0}), dtype=float), engine_step(mooncake))
    again = net.simulated(block["edge_density"], SimSize(80, 3, 8.0, 11))
    assert float(np.mean(again)) == block["coverage_search"]
    held = net.simulated(block["edge_density"], SimSize(80, 3, 8.0, 11 + FRESH_SEED))
    assert float(np.mean(held)) == block["coverage_held_out"]
    assert block["coverage_held_out_se"] == pytest.approx(np.std(held, ddof=1) / np.sqrt(3), rel=1e-12)
    assert block["coverage_model"] == pytest.approx(net.model_coverage(block["edge_density"]), abs=1e-12)


def test_the_model_s_keys_are_unchanged_with_and_without_the_option(refined) -> None:
    plain = _json([*PLAN, "--seed", "11", "--json"])
    assert "engine_refinement" not in plain
    assert set(refined) - set(plain) == {"engine_refinement"}
    timing = {"seconds"}
    assert {k: v for k, v in refined.items() if k not in timing | {"engine_refinement"}} == {
        k: v for k, v in plain.items() if k not in timing
    }


def test_the_benchmark_function_gives_the_cli_s_numbers(refined) -> None:
    """engine_law_density.refined_density is the function plan-density --refine-on-engine runs."""
    from edgeprefix.benchmarks.accuracy.engine import engine_law_density as eld
    from edgeprefix.benchmarks.accuracy.engine.engine_runs import step_time

    c = eld.case("mooncake_engine")
    density, _, mix = eld.plan(c, 0.8, "engine", "cell")
    assert density == refined["edge_density"]
    r = eld.refined_density(c, mix, density, 0.8, SimSize(80, 3, 8.0, 11), "online", step_time(c.instance))
    block = refined["engine_refinement"]
    assert [list(p) for p in r.points] == block["points"]
    assert (r.density, r.search_coverage, r.held_out_mean, r.simulations) == (
        block["edge_density"],
        block["coverage_search"],
        block["coverage_held_out"],
        block["simulations"],
    )


def test_text_output_names_both_densities_and_the_held_out_coverage(capsys) -> None:
    assert main([*PLAN, "--refine-on-engine", *SMALL]) == 0
    out = capsys.readouterr().out
    assert "refined on the engine simulation (docs/model.md §17.10.2" in out
    assert "the model's 25.750" in out and "held out (seed 1011): simulated coverage" in out and "search (seed 11)" in out


def test_a_search_out_of_simulations_says_so() -> None:
    from edgeprefix.commands._engine_refine import refinement_lines

    block = {
        "points": [[1.0, 0.7], [1.5, 0.75]],
        "model_edge_density": 1.0,
        "edge_density": 1.5,
        "converged": False,
        "tolerance": REFINE_TOL,
        "coverage_held_out": 0.74,
        "coverage_held_out_se": 0.01,
        "router": "online",
        "nodes": 8.0,
        "requests_per_node": 10.0,
        "replications": 3,
        "coverage_model": 0.9,
        "seed": 0,
        "coverage_search": 0.75,
        "held_out_seed": 1000,
        "simulations": 3,
    }
    text = "\n".join(refinement_lines(block, 0.8))
    assert "NOT within 0.002 of ζ after 2 search simulations" in text and "-0.0600 against ζ = 0.8" in text


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        ([*PLAN[:-2], "--refine-on-engine"], "--queue-law engine"),  # the slot law
        (["plan-density", "paper_baseline", "--reliability", "0.8", "--queue-law", "engine", "--refine-on-engine"], "[engine]"),
        ([*PLAN, "--refine-on-engine", "--refine-replications", "1"], "--refine-replications"),
        ([*PLAN, "--refine-on-engine", "--refine-requests-per-node", "5"], "--refine-requests-per-node"),
        ([*PLAN, "--refine-on-engine", "--refine-nodes", "0"], "--refine-nodes"),
        ([*PLAN, "--refine-on-engine", "--refine-nodes", "nan"], "--refine-nodes"),
        ([*PLAN, "--refine-on-engine", "--refine-nodes", "2", "--refine-requests-per-node", "10"], "at least 40 requests"),
        ([*PLAN, "--refine-nodes", "8"], "--refine-nodes: applies only with --refine-on-engine"),
        ([*PLAN, "--refine-router", "tier"], "--refine-router: applies only with --refine-on-engine"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, flag, capsys) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and flag in err, err
    assert captured.out == ""
