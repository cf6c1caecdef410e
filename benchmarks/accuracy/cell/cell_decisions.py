"""Do the queue models choose different placements, and which does the simulator prefer? (docs/model.md §14)

Run ``python -m edgeprefix.benchmarks.accuracy.cell.cell_decisions [--instances A,B] [--reps 8] [--out DIR]``.

1. Placement: for each instance at a moderate and a heavy load (35 % and 70 % of the load-aware
   stability edge of the instance's validation mix) the placement problem is solved once with
   each queue model (same method, budget and seed); both chosen mixes are then simulated on
   the same networks and arrivals (common random numbers; Theorem 1's tier rule with each
   mix's own advertised delays) and the paired difference is reported with its standard error.
2. Density planning on ``paper_calibrated``: ``plan-density --reliability 0.8`` with each queue
   model (joint with the mix, the 1/10 grid); the simulated coverage at each plan's ``λ_b`` and mix.

The simulated coverages use the queue-free control variate of
:func:`edgeprefix.benchmarks.accuracy.cell.cell_validation.simulate_until`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from edgeprefix.benchmarks.accuracy.cell.cell_validation import INSTANCES, benchmark_case, control_variate_estimate, stability_edge
from edgeprefix.formulations.density import density_problem
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import simulate_network
from edgeprefix.solvers.api import solve
from edgeprefix.solvers.density import plan_density

QUEUE_MODELS = ("meanfield", "cell")


def search(problem, profiles: int, seed: int):
    """Grid for ≤ 3 profiles (step 1/20), else CMA-ES with 200 evaluations."""
    if profiles <= 3:
        return solve(problem, "grid", budget=None, resolution=20)
    return solve(problem, "cmaes", budget=200, seed=seed)


def simulate_mixes(instance, mixes: dict[str, np.ndarray], spec, seeds, tau: float) -> dict[str, dict]:
    """Each mix on the same seeds; per mix the control-variate estimate, and the paired differences."""
    raw: dict[str, list[tuple[float, float]]] = {k: [] for k in mixes}
    free_exact = {}
    for key, mix in mixes.items():
        ev = evaluate(instance, mix)
        free_exact[key] = float(ev.coverage_queue_free(tau))
        for s in seeds:
            run = simulate_network(instance, mix, analytical_router(ev), spec, seed=np.random.default_rng(s))
            free = float(np.mean(np.where(np.isfinite(run.ttft), run.ttft - run.wait, np.inf) <= tau))
            raw[key].append((run.coverage(tau), free))
    out = {}
    for key, values in raw.items():
        covs, free = np.array(values).T
        mean, se = control_variate_estimate(covs, free, free_exact[key])
        out[key] = {"simulated": mean, "simulated_se": se, "raw": covs.tolist()}
    return out


def placement_rows(name: str, *, reps: int, seed: int, nodes: float) -> list[dict]:
    case = benchmark_case(name)
    inst, spec = case.instance, replace(case.spec, layout=LayoutSpec(mean_nodes=nodes, counts="exact"))
    edge = stability_edge(inst, case.mix)
    seeds = np.random.SeedSequence(seed).spawn(reps)
    rows = []
    for label, frac in (("moderate", 0.35), ("heavy", 0.7)):
        lam = round(edge * frac, 4)
        net = inst.with_network(request_intensity=lam)
        tau = float(net.placement.target)
        chosen, predicted = {}, {}
        for qm in QUEUE_MODELS:
            result = search(placement_problem(net, queue_model=qm), len(net.profiles), seed)
            chosen[qm] = np.asarray(result.x, dtype=float)
        for qm, mix in chosen.items():
            predicted[qm] = {m: float(evaluate(net, mix, queue_model=m).coverage(tau)) for m in QUEUE_MODELS}
        same = bool(np.allclose(chosen["meanfield"], chosen["cell"], atol=1e-9))
        sims = simulate_mixes(net, {"meanfield": chosen["meanfield"]} if same else chosen, spec, seeds, tau)
        if same:
            sims["cell"] = sims["meanfield"]
        diff = np.array(sims["cell"]["raw"]) - np.array(sims["meanfield"]["raw"])
        rows.append(
            {
                "instance": name,
                "load": label,
                "intensity": lam,
                "same_mix": same,
                "mix_meanfield": dict(zip(net.profile_ids, chosen["meanfield"].round(4).tolist())),
                "mix_cell": dict(zip(net.profile_ids, chosen["cell"].round(4).tolist())),
                "predicted": predicted,
                "simulated_meanfield_mix": sims["meanfield"]["simulated"],
                "se_meanfield_mix": sims["meanfield"]["simulated_se"],
                "simulated_cell_mix": sims["cell"]["simulated"],
                "se_cell_mix": sims["cell"]["simulated_se"],
                "gain": float(diff.mean()),
                "gain_se": float(diff.std(ddof=1) / np.sqrt(diff.size)) if not same else 0.0,
            }
        )
        print(render_placement(rows[-1:]), flush=True)
    return rows


def density_rows(*, reps: int, seed: int, nodes: float, reliability: float = 0.8) -> list[dict]:
    case = benchmark_case("paper_calibrated")
    inst, spec = case.instance, replace(case.spec, layout=LayoutSpec(mean_nodes=nodes, counts="exact"))
    tau = float(inst.placement.target)
    seeds = np.random.SeedSequence(seed + 1).spawn(reps)
    rows = []
    for qm in QUEUE_MODELS:
        plan = plan_density(density_problem(inst, reliability, queue_model=qm))
        dense = inst.with_network(edge_density=plan.edge_density)
        mix = np.array([plan.mix[s] for s in inst.profile_ids])
        sim = simulate_mixes(dense, {qm: mix}, spec, seeds, tau)[qm]
        rows.append(
            {
                "queue_model": qm,
                "edge_density": plan.edge_density,
                "mix": plan.mix,
                "predicted": plan.coverage,
                "simulated": sim["simulated"],
                "simulated_se": sim["simulated_se"],
                "reliability": reliability,
            }
        )
        print(
            f"plan-density ζ = {reliability} with {qm}: λ_b = {plan.edge_density:.4f}, predicted {plan.coverage:.4f}, "
            f"simulated {sim['simulated']:.4f} ± {sim['simulated_se']:.4f}",
            flush=True,
        )
    return rows


def render_placement(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        lines.append(
            f"{r['instance']:<17}{r['load']:<9}Λ = {r['intensity']:<8g}"
            f"meanfield mix {_mix(r['mix_meanfield'])}  cell mix {_mix(r['mix_cell'])}\n"
            f"{'':<17}predicted (mf, cell) for the mf mix {r['predicted']['meanfield']['meanfield']:.4f}, "
            f"{r['predicted']['meanfield']['cell']:.4f}; for the cell mix {r['predicted']['cell']['meanfield']:.4f}, "
            f"{r['predicted']['cell']['cell']:.4f}\n"
            f"{'':<17}simulated: mf mix {r['simulated_meanfield_mix']:.4f} ± {r['se_meanfield_mix']:.4f}, "
            f"cell mix {r['simulated_cell_mix']:.4f} ± {r['se_cell_mix']:.4f}, gain {r['gain']:+.4f} ± {r['gain_se']:.4f}"
        )
    return "\n".join(lines)


def _mix(mix: dict) -> str:
    return ",".join(f"{k}={v:.2f}" for k, v in mix.items() if v > 0.005)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgeprefix.benchmarks.accuracy.cell.cell_decisions", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--instances", default=",".join(INSTANCES))
    parser.add_argument("--reps", type=int, default=8, help="simulated networks per mix (common to both mixes)")
    parser.add_argument("--nodes", type=float, default=1000.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-density", action="store_true", help="skip the plan-density check")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    report: dict = {"placement": [], "density": []}
    for name in filter(None, (n.strip() for n in args.instances.split(","))):
        report["placement"] += placement_rows(name, reps=args.reps, seed=args.seed, nodes=args.nodes)
    if not args.no_density:
        report["density"] = density_rows(reps=args.reps, seed=args.seed, nodes=args.nodes)
    if args.out is not None:
        atomic_write_text(args.out / "cell_decisions.json", json.dumps(report, indent=2, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
