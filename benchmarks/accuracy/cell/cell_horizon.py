"""Does the simulated coverage drift with the run's length?  (docs/model.md §14, finite horizon.)

Run ``python -m edgeprefix.benchmarks.accuracy.cell.cell_horizon --instance medium_forest --fractions 0.35,0.55,0.7 [--out DIR]``.

The cell model (and eq. (39)) describe the steady state of an infinite network: a node whose
load exceeds its servers never serves in time, a node near saturation has its stationary
queue.  A simulation run starts with empty queues and measures a finite window, so such nodes
still serve some requests in time.  This benchmark runs each network once for a long time
(``--windows`` windows of the validation's horizon after its warm-up) and prints the coverage
of each window of arrivals (the requests are in arrival order, so window ``k`` holds the arrivals
of ``[warm-up + k H, warm-up + (k + 1) H)``), averaged over the same networks (common random
numbers), next to the node-level Erlang-C coverage of the same networks (each node's expected load
from its own routed region, :func:`edgeprefix.placement.simulation.correction.node_erlang_coverage`:
the steady state the cell model approximates), eq. (39) and the cell model.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from edgeprefix.benchmarks.accuracy.cell.cell_validation import benchmark_case, stability_edge
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.correction import node_erlang_coverage
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import simulate_network


def drift(
    name: str,
    policy: str,
    fraction: float,
    *,
    windows: int,
    seeds: int,
    nodes: float,
    seed: int = 0,
    warmup: float | None = None,
    horizon: float | None = None,
    node_points: int = 200,
) -> dict:
    """Coverage per window of one long run on each of ``seeds`` networks, with the steady-state references."""
    case = benchmark_case(name)
    inst, mix = case.instance, case.mix
    lam = round(stability_edge(inst, mix, policy) * fraction, 4)
    net = inst.with_network(request_intensity=lam)
    tau = float(inst.placement.target)
    mf = evaluate(net, mix, policy)
    cell = evaluate(net, mix, policy, queue_model="cell")
    h = case.spec.horizon if horizon is None else horizon
    w0 = case.spec.warmup if warmup is None else warmup
    spec = replace(case.spec, warmup=w0, horizon=h * windows, layout=LayoutSpec(mean_nodes=nodes, counts="exact"))
    per_window, node_level = [], []
    for s in progress_bar(np.random.SeedSequence(seed).spawn(seeds), desc=f"{name} {policy} Λ={lam}"):
        run = simulate_network(net, mix, analytical_router(mf), spec, seed=np.random.default_rng(s))
        hits = run.ttft <= tau
        per_window.append([float(b.mean()) for b in np.array_split(hits, windows)])
        node_level.append(node_erlang_coverage(mf, tau, mean_nodes=nodes, points_per_node=node_points, seed=np.random.default_rng(s)))
    cov = np.array(per_window)  # (seeds, windows)
    diff = cov - cov[:, :1]  # paired with the first window: the drift, free of the network-to-network spread
    return {
        "instance": name,
        "policy": policy,
        "intensity": lam,
        "load_fraction": fraction,
        "warmup": w0,
        "window": h,
        "networks": seeds,
        "nodes": nodes,
        "window_start": [w0 + k * h for k in range(windows)],
        "coverage": cov.mean(axis=0).tolist(),
        "coverage_se": (cov.std(axis=0, ddof=1) / np.sqrt(seeds)).tolist(),
        "drift_se": (diff.std(axis=0, ddof=1) / np.sqrt(seeds)).tolist(),
        "node_erlang": float(np.mean(node_level)),
        "node_erlang_se": float(np.std(node_level, ddof=1) / np.sqrt(seeds)),
        "meanfield": float(mf.coverage(tau)),
        "cell": float(cell.coverage(tau)),
    }


def render(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        lines.append(
            f"{r['instance']} {r['policy']} Λ = {r['intensity']} ({r['load_fraction']:.0%} of the edge), "
            f"{r['networks']} networks of {r['nodes']:.0f} nodes: meanfield {r['meanfield']:.4f}, cell {r['cell']:.4f}, "
            f"node-level Erlang C {r['node_erlang']:.4f} ± {r['node_erlang_se']:.4f}"
        )
        lines.append(f"{'window start s':>16}{'simulated':>11}{'± SE':>8}{'drift SE':>10}{'cell − sim':>12}{'node − sim':>12}")
        for k, start in enumerate(r["window_start"]):
            c = r["coverage"][k]
            lines.append(
                f"{start:>16.0f}{c:>11.4f}{r['coverage_se'][k]:>8.4f}{r['drift_se'][k]:>10.4f}"
                f"{r['cell'] - c:>+12.4f}{r['node_erlang'] - c:>+12.4f}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.accuracy.cell.cell_horizon", description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default="medium_forest")
    parser.add_argument("--policy", default="load_aware")
    parser.add_argument("--fractions", default="0.35,0.55,0.7", help="loads as fractions of the policy's stability edge")
    parser.add_argument("--windows", type=int, default=16, help="consecutive measured windows per run")
    parser.add_argument("--seeds", type=int, default=8, help="networks (common to every load)")
    parser.add_argument("--nodes", type=float, default=1000.0)
    parser.add_argument("--warmup", type=float, default=None, help="seconds before the first window (default: the validation's)")
    parser.add_argument("--window", type=float, default=None, help="seconds per window (default: the validation's horizon)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="folder for cell_horizon.json")
    args = parser.parse_args(argv)
    if args.windows < 2 or args.seeds < 2:
        parser.error("--windows and --seeds: need at least 2")
    rows = []
    for f in (float(x) for x in args.fractions.split(",") if x.strip()):
        rows.append(
            drift(
                args.instance,
                args.policy,
                f,
                windows=args.windows,
                seeds=args.seeds,
                nodes=args.nodes,
                seed=args.seed,
                warmup=args.warmup,
                horizon=args.window,
            )
        )
        print(render(rows[-1:]), flush=True)
    if args.out is not None:
        atomic_write_text(args.out / f"cell_horizon_{args.instance}.json", json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
