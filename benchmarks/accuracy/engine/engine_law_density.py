"""A density planned on the engine law, simulated on the batching engine (docs/model.md §17.10).

``python -m edgeprefix.benchmarks.accuracy.engine.engine_law_density`` plans ``λ_b`` for ``P_cov ≥ ζ`` with
``--queue-law engine`` (and, for reference, with the slot law) on ``mooncake_engine`` with one
profile, simulates the batching-engine network at the engine law's density (planned cache, model
workload, ``--router``, seed 0), and prints beside it the engine law averaged over the load a
request meets in a Poisson–Voronoi cell (its cell's area is size-biased, ``Gamma(k + 1)/k`` with
``k = 3.575``; the radio distance is held at the mean field's): the mean field's one-load-per-tier
assumption is what that average removes; the last column is the cell model (docs/model.md §14) with the
engine law at the same density.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from edgeprefix.formulations.density import density_problem
from edgeprefix.placement.model.engine_law import default_step_time
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance, load_instance
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.placement.simulation.engine.model_workload import engine_rows
from edgeprefix.solvers.density import plan_density

INSTANCE = Path(__file__).resolve().parents[2] / "instances" / "mooncake_engine.toml"
VORONOI_SHAPE = 3.575  # Gamma shape of a planar Poisson–Voronoi cell's area (mean 1)


def cell_averaged_coverage(instance, mix, quantiles: int = 200) -> float:
    """The engine law's coverage averaged over the size-biased cell load (module docstring)."""
    law = stats.gamma(VORONOI_SHAPE + 1.0, scale=1.0 / VORONOI_SHAPE)
    lam = instance.network.request_intensity
    loads = law.ppf((np.arange(quantiles) + 0.5) / quantiles)
    return float(np.mean([evaluate(instance.with_network(request_intensity=lam * x), mix, queue_law="engine").coverage() for x in loads]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reliability", type=float, default=0.8)
    ap.add_argument("--router", default="online", help="router of the engine network (online or tier)")
    ap.add_argument("--requests", type=int, default=8000)
    ap.add_argument("--nodes", type=float, default=40.0)
    ap.add_argument("--replications", type=int, default=3)
    args = ap.parse_args(argv)
    if args.replications < 2:
        ap.error(f"--replications: at least 2 for a standard error, got {args.replications}")
    t0 = time.process_time()
    inst = load_instance(INSTANCE)
    mix = {"none": 1.0}
    plans = {law: plan_density(density_problem(inst, args.reliability, mix=mix, queue_law=law)) for law in ("slots", "engine")}
    planned = inst.with_network(edge_density=plans["engine"].edge_density)

    def simulated(at: Instance) -> dict[str, Any]:
        """The batching-engine network at ``at``'s density, the instance's own Λ, planned caches, seed 0."""
        return engine_rows(
            at,
            mix,
            (inst.network.request_intensity,),
            step=default_step_time(inst),
            engine="batching",
            cache="planned",
            router=args.router,
            telemetry=Telemetry(),
            requests=args.requests,
            replications=args.replications,
            nodes=args.nodes,
            seed=0,
            tau=float(inst.placement.target),
        )[0]

    row = simulated(planned)
    print(
        f"instance {inst.name}, mix none=1, Λ = {inst.network.request_intensity:g}, ζ = {args.reliability}, router {args.router}, "
        f"{args.nodes:g} nodes, {args.requests} requests × {args.replications} replications, seed 0"
    )
    cell = evaluate(planned, mix, queue_law="engine", queue_model="cell").coverage()  # docs/model.md §17.10.1
    # the density planned on the cell model with the engine law, simulated the same way
    cell_plan = plan_density(density_problem(inst, args.reliability, mix=mix, queue_law="engine", queue_model="cell"))
    cell_row = simulated(inst.with_network(edge_density=cell_plan.edge_density))
    print("| law | planned λ_b | predicted coverage | engine network ± SE | engine law over the cell load | cell model, engine law |")
    print("|---|---|---|---|---|---|")
    print(f"| slots | {plans['slots'].edge_density:.3f} | {plans['slots'].coverage:.4f} | | | |")
    print(
        f"| engine | {plans['engine'].edge_density:.3f} | {plans['engine'].coverage:.4f} | {row['coverage_engine']:.4f} ± "
        f"{row['coverage_engine_se']:.4f} | {cell_averaged_coverage(planned, mix):.4f} | {cell:.4f} |"
    )
    print(
        f"| engine, cell model | {cell_plan.edge_density:.3f} | {cell_plan.coverage:.4f} | {cell_row['coverage_engine']:.4f} ± "
        f"{cell_row['coverage_engine_se']:.4f} | | {cell_plan.coverage:.4f} |"
    )
    print(f"CPU {time.process_time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
