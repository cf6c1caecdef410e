"""``plan-density --refine-on-engine``: the planned density refined on the batching-engine simulation
(docs/model.md §17.10.2; the search is :mod:`edgeprefix.solvers.engine_refine`).

The default size of the simulated network is the benchmark's for ``mooncake_engine`` (benchmarks/README.md §12):
120 expected nodes, 100 requests per node, 20 replications — past the size (about 48 nodes) from which the
simulated coverage no longer depends on the network's size, with a standard error near 0.003 at ζ = 0.8.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

DEFAULT_NODES = 120.0
DEFAULT_PER_NODE = 100
DEFAULT_REPLICATIONS = 20
MIN_PER_NODE = 10
OPTIONS = ("refine_nodes", "refine_replications", "refine_requests_per_node", "refine_router")


def add_refine_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "refined on the engine",
        "with --queue-law engine: the density whose coverage simulated on a network of the instance's batching-engine "
        "nodes is ζ (docs/model.md §17.10.2). Its accuracy is the simulation's, not the law's; each simulation takes "
        "tens of CPU seconds at the default size",
    )
    group.add_argument(
        "--refine-on-engine",
        action="store_true",
        help="refine the planned λ_b on the engine simulation: a Newton step in log λ_b on the model's slope, then "
        "secant/bisection steps on the simulated coverage with common random numbers (seed --seed), stopping within "
        "0.002 of ζ (at most 8 simulations), then a held-out simulation on seed --seed + 1000; JSON key engine_refinement",
    )
    group.add_argument(
        "--refine-nodes",
        type=float,
        default=None,
        metavar="N",
        help=f"expected nodes of the simulated network (default {DEFAULT_NODES:g})",
    )
    group.add_argument(
        "--refine-replications",
        type=int,
        default=None,
        metavar="R",
        help=f"replications of each simulation, >= 2 (default {DEFAULT_REPLICATIONS})",
    )
    group.add_argument(
        "--refine-requests-per-node",
        type=int,
        default=None,
        metavar="K",
        help=f"model-workload requests per expected node and replication, >= {MIN_PER_NODE} (default {DEFAULT_PER_NODE})",
    )
    group.add_argument(
        "--refine-router",
        choices=("online", "tier"),
        default=None,
        help="router of the simulated network, routed on the engine law (default online, as in benchmarks/README.md §12)",
    )


def refine_size_from_args(args: argparse.Namespace) -> Any:
    """The checked ``SimSize`` of ``--refine-on-engine`` (``None`` without it); a ``--refine-*`` option without
    ``--refine-on-engine`` or out of range is a one-line ``ValueError``."""
    if not getattr(args, "refine_on_engine", False):
        given = [name for name in OPTIONS if getattr(args, name, None) is not None]
        if given:
            raise ValueError(f"--{given[0].replace('_', '-')}: applies only with --refine-on-engine (add it, or drop the option)")
        return None
    nodes = DEFAULT_NODES if args.refine_nodes is None else float(args.refine_nodes)
    reps = DEFAULT_REPLICATIONS if args.refine_replications is None else int(args.refine_replications)
    per = DEFAULT_PER_NODE if args.refine_requests_per_node is None else int(args.refine_requests_per_node)
    if not (math.isfinite(nodes) and nodes >= 1):
        raise ValueError(f"--refine-nodes: a number of expected nodes >= 1, got {nodes!r}")
    if reps < 2:
        raise ValueError(f"--refine-replications: at least 2 (a standard error needs two), got {reps}")
    if per < MIN_PER_NODE:
        raise ValueError(f"--refine-requests-per-node: at least {MIN_PER_NODE} requests per node, got {per}")
    requests = int(round(nodes * per))
    if requests < 40:
        raise ValueError(f"--refine-nodes × --refine-requests-per-node: at least 40 requests per replay, got {requests}")
    from edgeprefix.placement.simulation.engine.model_network import SimSize

    return SimSize(requests, reps, nodes, int(args.seed))


def engine_step(instance: Any) -> Any:
    """The step time of the instance's ``[engine]`` (its coefficients, or the fit of its timings), checked for the
    model workload's block size; no ``[engine]`` is a one-line ``ValueError``."""
    if instance.engine is None:
        raise ValueError(
            f"--refine-on-engine: instance {instance.name!r} has no [engine] section; add [engine.timings] "
            "(model, hardware, tensor_parallel; docs/instances.md)"
        )
    if 16 % instance.engine.block_size:
        raise ValueError(
            f"engine.block_size: {instance.engine.block_size} tokens does not divide the model workload's block size 16: "
            "pick 1, 2, 4, 8 or 16"
        )
    from edgeprefix.benchmarks.datasets import SPLITWISE_TIMINGS
    from edgeprefix.placement.simulation.engine.step_time import step_time_from_section

    return step_time_from_section(instance.engine, SPLITWISE_TIMINGS)


def run_refinement(
    args: argparse.Namespace, problem: Any, plan: Any, policy: str, queue_model: str, size: Any, step: Any
) -> dict[str, Any]:
    """The ``engine_refinement`` block: the plan's density refined on the engine simulation at the plan's mix, with
    the engine's ``step`` time (:func:`engine_step`, checked before the plan)."""
    import dataclasses

    import numpy as np

    from edgeprefix.solvers.engine_refine import EngineNetwork, refined_density

    if plan.coverage is None or not plan.mix:
        raise ValueError("--refine-on-engine: the model found no density meeting ζ, nothing to refine (lower --reliability)")
    base = problem.at_density(plan.edge_density)
    target = float(problem.objective.target)
    if target != float(base.placement.target):  # --target: the simulation counts against the same τ_0
        base = base.replace(placement=dataclasses.replace(base.placement, target=target))
    router = args.refine_router or "online"
    mix = np.asarray(base.mix_vector(dict(plan.mix)), dtype=float)
    net = EngineNetwork(base, mix, step, router, policy, queue_model)
    got = refined_density(net, float(plan.edge_density), float(problem.reliability), size)
    return got.to_dict(
        {
            "router": router,
            "route_law": "engine",
            "intensity": float(base.network.request_intensity),
            "coverage_model": net.model_coverage(got.density),
        }
    )


def refinement_lines(block: dict[str, Any], reliability: float) -> list[str]:
    """The text lines of ``--refine-on-engine``."""
    pts = "  ".join(f"({d:.4g}, {c:.4f})" for d, c in block["points"])
    start, density = float(block["model_edge_density"]), float(block["edge_density"])
    how = (
        f"within {block['tolerance']:g} of ζ"
        if block["converged"]
        else f"NOT within {block['tolerance']:g} of ζ after {len(block['points'])} search simulations (the nearest point)"
    )
    held, se = float(block["coverage_held_out"]), float(block["coverage_held_out_se"])
    return [
        f"refined on the engine simulation (docs/model.md §17.10.2; {block['router']} router routed on the engine law, "
        f"{block['nodes']:g} nodes × {block['requests_per_node']:g} requests per node × {block['replications']} replications):",
        f"  edge density λ_b   {density:.4f}   (the model's {start:.4f}, ×{density / start:.3f}; the model predicts "
        f"{block['coverage_model']:.4f} there)",
        f"  search (seed {block['seed']}): λ_b, simulated coverage  {pts}  -> {block['coverage_search']:.4f}, {how}",
        f"  held out (seed {block['held_out_seed']}): simulated coverage {held:.4f} ± {se:.4f}  ({held - reliability:+.4f} "
        f"against ζ = {reliability:g})   simulations {block['simulations']}",
        "  this density is the simulation's: the engine law alone gives the model's density above",
    ]
