"""The constants of the cell model (``K``, ``δ_0``) against the node-level Erlang-C reference (docs/model.md §14).

Run ``python -m edgeprefix.benchmarks.accuracy.cell.cell_sectors [--instances A,B] [--variants 3.5:0,3.85:0.35] [--out DIR]``.

The cell model approximates the *node-level* coverage: one Erlang-C queue per node of a sampled
network, at the node's own expected load (its routed region's work), the request's own serving
distance (:func:`edgeprefix.placement.simulation.correction.node_erlang_coverage`).  That reference
has no queue simulation, so no warm-up or horizon; it matches the long-run network simulation
(``python -m edgeprefix.benchmarks.accuracy.cell.cell_horizon``).  For every instance, policy and load (as in
``cell_validation``) this prints the reference (mean ± SE over ``--networks`` networks, the same
networks for every policy and load; the sample's queue-free coverage, whose expectation eq. (39)
gives exactly, is a control variate) and the cell model's error for each variant ``K:δ_0`` in ``--variants`` (sector count ``K`` and
Voronoi band ``δ_0`` of eq. (14.13)).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

import edgeprefix.placement.model.cell as cell_module
from edgeprefix.benchmarks.accuracy.cell.cell_validation import (
    INSTANCES,
    LOAD_FRACTIONS,
    benchmark_case,
    control_variate_estimate,
    stability_edge,
)
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.compare import ANALYTICAL_POLICIES
from edgeprefix.placement.simulation.correction import node_erlang_coverage


def cell_coverage(evaluation, variant: str) -> float:
    """The cell model's coverage at ``τ_0`` for ``variant`` ``"K:δ_0"`` (``δ_0 = 0``: the ray closure alone;
    ``inf``: the Voronoi conditional mean everywhere) at the evaluation's operating point."""
    sectors, band = (float(x) for x in variant.split(":"))
    default = cell_module.SECTORS, cell_module.VORONOI_BAND
    cell_module.SECTORS, cell_module.VORONOI_BAND = sectors, band
    try:
        ev = evaluate(evaluation.instance, evaluation.mix, evaluation.policy, queue_model="cell", warm_start=evaluation.advertised_wait)
        return float(ev.coverage())
    finally:
        cell_module.SECTORS, cell_module.VORONOI_BAND = default


def sector_rows(
    name: str,
    sectors: list[str],
    *,
    networks: int,
    nodes: float,
    points: int,
    seed: int = 0,
    fractions=LOAD_FRACTIONS,
    policies=ANALYTICAL_POLICIES,
) -> list[dict]:
    case = benchmark_case(name)
    inst, mix = case.instance, case.mix
    seeds = np.random.SeedSequence(seed).spawn(networks)
    rows = []
    for policy in policies:
        edge = stability_edge(inst, mix, policy)
        for frac in progress_bar(fractions, desc=f"{name} {policy}"):
            lam = round(edge * frac, 4)
            mf = evaluate(inst.with_network(request_intensity=lam), mix, policy)
            runs = np.array(
                [
                    node_erlang_coverage(mf, mean_nodes=nodes, points_per_node=points, seed=np.random.default_rng(s), with_queue_free=True)
                    for s in seeds
                ]
            )
            ref, se = control_variate_estimate(runs[:, 0], runs[:, 1], float(mf.coverage_queue_free()))
            rows.append(
                {
                    "instance": name,
                    "policy": policy,
                    "intensity": lam,
                    "load_fraction": frac,
                    "node_erlang": ref,
                    "node_erlang_se": se,
                    "meanfield": float(mf.coverage()),
                    "cell": {str(k): cell_coverage(mf, k) for k in sectors},
                }
            )
    return rows


def rescore(saved: list[dict], sectors: list[str]) -> list[dict]:
    """Saved rows with the model columns recomputed for ``sectors`` (the reference does not depend on the model)."""
    cases: dict[str, object] = {}
    out = []
    for r in saved:
        case = cases.setdefault(r["instance"], benchmark_case(r["instance"]))
        mf = evaluate(case.instance.with_network(request_intensity=r["intensity"]), case.mix, r["policy"])  # type: ignore[attr-defined]
        out.append(r | {"meanfield": float(mf.coverage()), "cell": {k: cell_coverage(mf, k) for k in sectors}})
    return out


def render(rows: list[dict], sectors: list[float]) -> str:
    head = f"{'instance':<17}{'policy':>11}{'Λ':>8}{'node':>8}{'± SE':>8}{'meanfield':>10}" + "".join(f"{k:>12}" for k in sectors)
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['instance']:<17}{r['policy']:>11}{r['intensity']:>8.4g}{r['node_erlang']:>8.4f}{r['node_erlang_se']:>8.4f}"
            f"{r['meanfield'] - r['node_erlang']:>+10.4f}" + "".join(f"{r['cell'][str(k)] - r['node_erlang']:>+12.4f}" for k in sectors)
        )
    for name in dict.fromkeys(r["instance"] for r in rows):
        sel = [r for r in rows if r["instance"] == name]
        worst = "  ".join(
            f"K={k}: max {max(abs(r['cell'][str(k)] - r['node_erlang']) for r in sel):.4f}"
            f" mean {np.mean([r['cell'][str(k)] - r['node_erlang'] for r in sel]):+.4f}"
            for k in sectors
        )
        lines.append(f"{name}: {worst}")
    worst = "  ".join(f"K={k}: max {max(abs(r['cell'][str(k)] - r['node_erlang']) for r in rows):.4f}" for k in sectors)
    lines.append(f"all: {worst}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.accuracy.cell.cell_sectors", description=__doc__.splitlines()[0])
    parser.add_argument("--instances", default=",".join(INSTANCES))
    parser.add_argument(
        "--variants",
        default="3.5:0,3.85:0,3.85:0.35",
        help="comma-separated K:δ_0 (δ_0 = 0: ray closure alone, inf: Voronoi mean everywhere)",
    )
    parser.add_argument("--networks", type=int, default=6)
    parser.add_argument("--nodes", type=float, default=1000.0)
    parser.add_argument("--points", type=int, default=200, help="sampled requests per node")
    parser.add_argument("--policies", default=",".join(ANALYTICAL_POLICIES), help="comma-separated policies")
    parser.add_argument(
        "--fractions",
        default=None,
        metavar="F,...",
        help="loads as fractions of each policy's stability edge (default: cell_validation's six)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--reference",
        type=Path,
        default=None,
        metavar="JSON",
        help="take the node-level reference from a saved cell_sectors.json (recompute only the model columns)",
    )
    parser.add_argument("--out", type=Path, default=None, help="folder for cell_sectors.json")
    args = parser.parse_args(argv)
    sectors = [k.strip() for k in args.variants.split(",") if k.strip()]
    for k in sectors:
        try:
            ok = len([float(x) for x in k.split(":")]) == 2
        except ValueError:
            ok = False
        if not ok:
            parser.error(f"--variants: {k!r} is not K:δ_0 (e.g. 3.85:0.35)")
    if args.networks < 4:
        parser.error("--networks: need at least 4 (the control variate's SE has n − 2 degrees of freedom)")
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    unknown = sorted(set(policies) - set(ANALYTICAL_POLICIES))
    if unknown:
        parser.error(f"--policies: unknown {unknown[0]!r} (valid: {', '.join(ANALYTICAL_POLICIES)})")
    fractions = LOAD_FRACTIONS if args.fractions is None else tuple(float(f) for f in args.fractions.split(",") if f.strip())
    rows: list[dict] = []
    if args.reference is not None:
        rows = rescore(json.loads(args.reference.read_text()), sectors)
    for name in [] if args.reference is not None else filter(None, (n.strip() for n in args.instances.split(","))):
        rows += sector_rows(
            name,
            sectors,
            networks=args.networks,
            nodes=args.nodes,
            points=args.points,
            seed=args.seed,
            fractions=fractions,
            policies=policies,
        )
        print(render([r for r in rows if r["instance"] == name], sectors), flush=True)
    print(render(rows, sectors))
    if args.out is not None:
        atomic_write_text(args.out / "cell_sectors.json", json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
