"""Regret of the analytical optima against simulation in the loop (docs/model.md §14).

Run ``python -m edgeprefix.benchmarks.accuracy.cell.cell_regret [--instance paper_calibrated] [--out DIR]``.

On a small instance at a moderate and a heavy load: the placement problem is solved three
ways on the same 1/10 lattice — with the mean-field model, with the cell model, and with the
simulator in the loop (``solve --objective simulation``: mean simulated coverage over a fixed
seed set on 300-node networks, common random numbers).  The three chosen mixes are then
re-simulated on *fresh* seeds (1000-node networks, common random numbers, so the simulated
optimum's selection bias is gone) and each analytical optimum's regret is the simulated
coverage it loses against the simulated optimum (negative: it did better on the fresh seeds).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.accuracy.cell.cell_decisions import simulate_mixes
from edgeprefix.benchmarks.accuracy.cell.cell_validation import benchmark_case, stability_edge
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.formulations.simulated import SimulationSettings
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.solvers.api import solve


def regret_rows(name: str, *, resolution: int = 10, reps: int = 8, seed: int = 0, nodes: float = 1000.0) -> list[dict]:
    case = benchmark_case(name)
    inst = case.instance
    spec = replace(case.spec, layout=LayoutSpec(mean_nodes=nodes, counts="exact"))
    edge = stability_edge(inst, case.mix)
    fresh = np.random.SeedSequence(seed + 1000).spawn(reps)
    rows = []
    for label, frac in (("moderate", 0.35), ("heavy", 0.7)):
        net = inst.with_network(request_intensity=round(edge * frac, 4))
        tau = float(net.placement.target)
        problems = {
            "meanfield": placement_problem(net),
            "cell": placement_problem(net, queue_model="cell"),
            "simulation": placement_problem(net, simulation=SimulationSettings(seeds=tuple(range(seed, seed + 4)))),
        }
        chosen, evaluations = {}, {}
        for key, problem in problems.items():
            result = solve(problem, "grid", budget=None, resolution=resolution)
            chosen[key] = np.asarray(result.x, dtype=float)
            evaluations[key] = result.nfev
        sims = simulate_mixes(net, chosen, spec, fresh, tau)
        base = np.array(sims["simulation"]["raw"])
        row: dict[str, Any] = {
            "instance": name,
            "load": label,
            "intensity": net.network.request_intensity,
            "resolution": resolution,
            "evaluations": evaluations,
            "mixes": {k: dict(zip(net.profile_ids, v.round(4).tolist())) for k, v in chosen.items()},
            "simulated": {k: v["simulated"] for k, v in sims.items()},
            "simulated_se": {k: v["simulated_se"] for k, v in sims.items()},
        }
        for key in ("meanfield", "cell"):
            diff = base - np.array(sims[key]["raw"])
            row[f"regret_{key}"] = float(diff.mean())
            row[f"regret_{key}_se"] = float(diff.std(ddof=1) / np.sqrt(diff.size))
        rows.append(row)
        print(
            f"{name} {label} Λ = {row['intensity']:g}: mixes {row['mixes']}\n  simulated on fresh seeds "
            + ", ".join(f"{k} {row['simulated'][k]:.4f} ± {row['simulated_se'][k]:.4f}" for k in chosen)
            + f"\n  regret meanfield {row['regret_meanfield']:+.4f} ± {row['regret_meanfield_se']:.4f}, "
            f"cell {row['regret_cell']:+.4f} ± {row['regret_cell_se']:.4f}",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.accuracy.cell.cell_regret", description=__doc__.splitlines()[0])
    parser.add_argument("--instance", default="paper_calibrated")
    parser.add_argument("--resolution", type=int, default=10, help="lattice step 1/K of the three searches")
    parser.add_argument("--reps", type=int, default=8, help="fresh simulated networks per mix")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    rows = regret_rows(args.instance, resolution=args.resolution, reps=args.reps, seed=args.seed)
    if args.out is not None:
        atomic_write_text(args.out / "cell_regret.json", json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
