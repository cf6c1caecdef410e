"""How fresh must telemetry be for coverage ζ at a density: a sweep over the telemetry delay (docs/model.md (11.18)).

Run ``python -m edgeprefix.benchmarks.accuracy.telemetry.telemetry_density [--instance paper_calibrated]
[--reliability 0.8] [--density 2] [--delays 0,0.25,0.5,1,2,4] [--out DIR]``.

At the instance's load and the fixed edge density ``--density``, the mix eq. (39) chooses for fresh telemetry (the
``1/--resolution`` grid) is held fixed while the telemetry delay ``D`` grows.  For each ``D`` it prints the online
router's predicted coverage (``--method``, default the sampled network of docs/model.md (11.19)) with its SE, the
simulated coverage (the network simulator on its own seeds: ``--nodes`` nodes, ``--replications`` networks, the SE
their spread), whether each reaches ζ, and the smallest density at which the prediction at that age reaches ζ with
the same mix (:func:`edgeprefix.solvers.telemetry_mix.density_for_telemetry`, as ``plan-density --for-telemetry``).
Then :func:`edgeprefix.solvers.telemetry_mix.freshness_for` bisects the largest delay that keeps ζ at the density.
Nothing is fitted; the sampled prediction simulates the same network as the reference (the check is of the
implementation and the sampling noise, not of an independent model).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.stale_router import predict_online
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter
from edgeprefix.solvers.telemetry_mix import density_for_telemetry, freshness_for

TOLERANCE = 0.02


def fresh_mix(instance, resolution: int) -> np.ndarray:
    """The mix of best eq. (39) coverage on the ``1/resolution`` grid (fresh telemetry)."""
    from edgeprefix.formulations.placement import placement_problem
    from edgeprefix.solvers.api import solve

    result = solve(placement_problem(instance), "grid", resolution=resolution)
    return np.asarray(result.x, dtype=float)


def sweep(name, reliability, density, delays, *, resolution, method, nodes, replications, seed=0, rtol=0.01) -> dict:
    """Every row of the sweep (module docstring) and the bisected largest delay."""
    base = load_instance(name)
    inst = base.with_network(edge_density=float(density))
    tau = float(inst.placement.target)
    mix = fresh_mix(inst, resolution)
    ev = evaluate(inst, mix, "load_aware", target=tau)
    router = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    seeds = np.random.SeedSequence(seed).spawn(replications)
    rows = []
    for d in delays:
        tel = Telemetry(delay=float(d))
        clock = time.process_time()
        pred = predict_online(inst, mix, tel, target=tau, evaluation=ev, method=method)
        cpu = time.process_time() - clock
        spec = SimulationSpec(
            horizon=40.0, warmup=30.0, telemetry_delay=float(d), layout=LayoutSpec(mean_nodes=float(nodes), counts="exact")
        )
        covs = np.array([simulate_network(inst, mix, router, spec, seed=np.random.default_rng(s)).coverage(tau) for s in seeds])
        sim, sim_se = float(covs.mean()), float(covs.std(ddof=1) / math.sqrt(covs.size)) if covs.size > 1 else float("nan")
        plan = density_for_telemetry(base, reliability, tel, mix=mix, target=tau, method=method, rtol=rtol, start=float(density))
        rows.append(
            {
                "delay": float(d),
                "predicted": float(pred.coverage),
                "predicted_se": pred.coverage_se,
                "prediction_cpu_seconds": cpu,
                "simulated": sim,
                "simulated_se": sim_se,
                "error": float(pred.coverage) - sim,
                "within": bool(abs(float(pred.coverage) - sim) <= max(TOLERANCE, 3.0 * sim_se)),
                "predicted_meets": bool(pred.coverage >= reliability),
                "simulated_meets": bool(sim >= reliability),
                "density_for_reliability": plan.edge_density,
                "density_coverage": plan.coverage,
                "density_steps": plan.steps,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    fresh = freshness_for(inst, mix, reliability, target=tau, method=method)
    return {
        "instance": name,
        "intensity": float(inst.network.request_intensity),
        "edge_density": float(density),
        "reliability": float(reliability),
        "mix": dict(zip(inst.profile_ids, (float(v) for v in mix))),
        "eq39": float(ev.coverage(tau)),
        "method": method,
        "nodes": nodes,
        "replications": replications,
        "rows": rows,
        "freshness": fresh,
    }


def render(result: dict) -> str:
    z = result["reliability"]
    lines = [
        f"| D [s] | predicted ± SE | simulated ± SE | error | within | predicted ≥ {z:g} | simulated ≥ {z:g} | λ_b for ζ = {z:g} at D |",
        "|---:|---:|---:|---:|:-:|:-:|:-:|---:|",
    ]
    for r in result["rows"]:
        pse = "" if r["predicted_se"] is None else f" ± {r['predicted_se']:.4f}"
        lines.append(
            f"| {r['delay']:g} | {r['predicted']:.4f}{pse} | {r['simulated']:.4f} ± {r['simulated_se']:.4f} | {r['error']:+.4f} | "
            f"{'yes' if r['within'] else '**no**'} | {'yes' if r['predicted_meets'] else 'no'} | {'yes' if r['simulated_meets'] else 'no'} | "
            f"{r['density_for_reliability']:.4f} |"
        )
    f = result["freshness"]
    age = "none (fresh telemetry already misses ζ)" if f["max_age"] is None else f"{f['max_age']:g} s"
    lines.append(
        f"\nlargest delay keeping ζ = {z:g} at λ_b = {result['edge_density']:g} (bisected, {result['method']}): {age}; "
        f"mix {result['mix']}; eq. (39) fresh {result['eq39']:.4f}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default="paper_calibrated")
    parser.add_argument("--reliability", type=float, default=0.8)
    parser.add_argument("--density", type=float, default=2.0, help="the fixed edge density λ_b of the sweep")
    parser.add_argument("--delays", default="0,0.25,0.5,1,2,4")
    parser.add_argument("--resolution", type=int, default=10, help="the grid of the fresh-telemetry mix")
    parser.add_argument("--method", choices=("meanfield", "sampled"), default="sampled")
    parser.add_argument("--nodes", type=int, default=200, help="nodes per simulated reference network")
    parser.add_argument("--replications", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, metavar="DIR", help="write telemetry_density.json here")
    args = parser.parse_args(argv)
    if args.replications < 2:
        parser.error("--replications: at least 2 (the SE is the spread between networks)")
    delays = tuple(float(v) for v in args.delays.split(",") if v.strip())
    result = sweep(
        args.instance,
        args.reliability,
        args.density,
        delays,
        resolution=args.resolution,
        method=args.method,
        nodes=args.nodes,
        replications=args.replications,
        seed=args.seed,
    )
    print(render(result))
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / "telemetry_density.json", json.dumps(result, indent=1))
        print(f"wrote {out / 'telemetry_density.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
