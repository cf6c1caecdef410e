"""Overloaded nodes: the cell law's share against the network simulator (docs/model.md §14.9).

Run ``python -m edgeprefix.benchmarks.accuracy.cell.overload_validation [--seeds 3] [--nodes 400] [--horizon 400]``.
For each case the instance's default mix is evaluated under the cell model and simulated with the
tier rule (the router whose node loads the cell law describes) on ``--seeds`` network draws: a node
counts as overloaded when its measured offered load (busy slot-seconds over the horizon per slot)
is ≥ 1.  Printed: the model's share of nodes and of requests at such nodes, the simulated ones
(mean ± sd over the draws), and their ratio.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np

from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network

CASES = (("paper_baseline", 2.0), ("paper_baseline", 3.0), ("paper_calibrated", 3.3))


def simulated_shares(instance, ev, seeds: int, nodes: float, horizon: float) -> tuple[np.ndarray, np.ndarray]:
    """Per draw: share of nodes with measured offered load ≥ 1, share of requests served at them."""
    spec = SimulationSpec(horizon=horizon, warmup=50.0, layout=LayoutSpec(mean_nodes=nodes))
    out_nodes, out_requests = [], []
    for seed in range(seeds):
        r = simulate_network(instance, None, analytical_router(ev), spec, seed=seed)
        served = r.node >= 0
        work = np.bincount(r.node[served], weights=r.service[served], minlength=r.layout.nodes)
        over = work / (r.horizon * r.layout.servers) >= 1.0
        out_nodes.append(over.mean())
        out_requests.append(over[r.node[served]].mean())
    return np.array(out_nodes), np.array(out_requests)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--nodes", type=float, default=400.0)
    parser.add_argument("--horizon", type=float, default=400.0)
    args = parser.parse_args(argv)
    print(f"{'instance':<18}{'Λ':>5}{'nodes model':>13}{'simulated':>16}{'ratio':>7}{'requests model':>16}{'simulated':>16}{'ratio':>7}")
    for name, lam in CASES:
        inst = load_instance(name).with_network(request_intensity=lam)
        ev = evaluate(inst, queue_model="cell")
        model_nodes, model_requests = ev.overloaded_shares
        sim_nodes, sim_requests = simulated_shares(inst, ev, args.seeds, args.nodes, args.horizon)
        print(
            f"{name:<18}{lam:>5g}{model_nodes:>13.4f}{sim_nodes.mean():>9.4f} ± {sim_nodes.std(ddof=1):.3f}"
            f"{model_nodes / sim_nodes.mean():>7.2f}{model_requests:>16.4f}{sim_requests.mean():>9.4f} ± {sim_requests.std(ddof=1):.3f}"
            f"{model_requests / sim_requests.mean():>7.2f}"
        )


if __name__ == "__main__":
    main()
