"""Decisions re-simulated on the batching engine: the slot law's plan against the engine law's.

Run: ``python -m edgeprefix.benchmarks.accuracy.engine.engine_decisions`` (default: 800 model-workload requests per
replay, 3 replications, 12 nodes, the online router).  Until the model has the engine queue law
(``queue_law="engine"``) the engine law's columns print ``n/a`` and say so in the output.

Per instance (``paper_baseline`` and ``medium_forest`` with the trace-built instance's engine section,
and the trace-built ``mooncake_engine``):

1. the engine's stability edge for the reference mix — the instance's own mix, or where it has none
   (``medium_forest``) the slot law's optimum at the instance's own Λ — (online router, :mod:`.engine_runs`);
2. at a moderate and a heavy load (``--shares`` of that edge): the package's optimum (gradient search)
   with the slot law and with the engine law, each simulated on the batching-engine network (planned
   caches, ``--router``) with common random numbers (replication ``r``: the same requests, network and
   arrivals for both mixes), beside the reference mix; the gain is the engine-law mix's simulated
   coverage minus the slot-law mix's, its SE that of the paired differences (both mixes routed on the slot
   node, as before); ``--queue-model`` is the queue model of both laws' solves (default the mean field; the
   reference mix is unchanged by it);
3. ``plan-density --reliability 0.8`` (joint with the mix, the 1/10 grid) at the moderate load of the
   first instance: the density and mix planned with the slot law, the engine law with the mean field and the
   engine law with the cell model, and the coverage the batching-engine simulation gives at that density and
   mix, routed on the law that planned it (the engine law's goal: within 0.01 of 0.8).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from edgeprefix.benchmarks.accuracy.engine.engine_runs import (
    NOT_AVAILABLE,
    QUEUE_LAWS,
    SimSize,
    add_queue_model_argument,
    add_size_arguments,
    engine_instance,
    engine_law_available,
    law_keywords,
    mean_se,
    reference_mix,
    simulate,
    size_from_args,
    solved_mix,
    stability_edge,
    step_time,
)
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.progress import progress_bar

INSTANCES = ("paper_baseline", "medium_forest", "mooncake_engine")
SHARES = {"moderate": 0.5, "heavy": 0.85}
START = {"paper_baseline": 0.8, "medium_forest": 0.3, "mooncake_engine": 0.1}
RELIABILITY = 0.8
PLANS = (("slots", "meanfield"), ("engine", "meanfield"), ("engine", "cell"))  # (queue law, queue model) of the density plans


def laws() -> tuple[str, ...]:
    """The queue laws this tree's model has (``slots`` always; ``engine`` once the model takes ``queue_law``)."""
    return QUEUE_LAWS if engine_law_available() else ("slots",)


def coverages(instance: Instance, mix: Any, lam: float, size: SimSize, router: str, step: Any, route_law: str = "slots") -> list[float]:
    return [r.coverage() for r in simulate(instance, mix, lam, size, router=router, step=step, route_law=route_law)]


def decision_rows(
    instance: Instance,
    size: SimSize,
    shares: dict[str, float],
    router: str,
    *,
    budget: int = 60,
    bar: Any = None,
    queue_model: str = "meanfield",
) -> tuple[list[dict[str, Any]], Any]:
    """Per load: the simulated coverages (per replication) of the instance's mix and of each law's optimum (solved
    with ``queue_model``)."""
    step = step_time(instance)
    own = reference_mix(instance, budget=budget, seed=size.seed)
    edge = stability_edge(instance, own, size, start=START.get(instance.name, 0.25), router="online", step=step)
    rows = []
    for label, share in shares.items():
        lam = float(share) * edge.edge
        row: dict[str, Any] = {
            "instance": instance.name,
            "load": label,
            "intensity": lam,
            "own": coverages(instance, own, lam, size, router, step),
        }
        for law in QUEUE_LAWS:
            if law in laws():
                mix = solved_mix(instance, lam, law, budget=budget, seed=size.seed, queue_model=queue_model)
                row[law] = coverages(instance, mix, lam, size, router, step)
                row[f"{law}_mix"] = [float(x) for x in mix]
            else:
                row[law] = None
        rows.append(row)
        if bar is not None:
            bar.update(1)
    return rows, edge


def _cell(values: Sequence[float] | None) -> str:
    if values is None:
        return NOT_AVAILABLE
    m, se = mean_se(values)
    return f"{m:.3f} ± {se:.3f}"


def gain(row: dict[str, Any]) -> tuple[float, float] | None:
    """Engine-law mix minus slot-law mix, mean ± SE of the paired (same-replication) differences; None without the law."""
    if row.get("engine") is None:
        return None
    diff = np.asarray(row["engine"]) - np.asarray(row["slots"])
    return float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(diff.size))


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        "| instance | load | Λ | reference mix: sim cov ± SE | slot-law optimum: sim cov ± SE | "
        "engine-law optimum: sim cov ± SE | gain (engine − slot) ± SE |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        g = gain(r)
        lines.append(
            f"| {r['instance']} | {r['load']} | {r['intensity']:.3g} | {_cell(r['own'])} | {_cell(r['slots'])} | "
            f"{_cell(r['engine'])} | {NOT_AVAILABLE if g is None else f'{g[0]:+.3f} ± {g[1]:.3f}'} |"
        )
    return "\n".join(lines)


def density_rows(instance: Instance, lam: float, size: SimSize, router: str, reliability: float = RELIABILITY) -> list[dict[str, Any]]:
    """``plan-density --reliability ζ`` (joint, 1/10 grid) with each law (the engine law with the mean field and with the
    cell model, its pairing, docs/model.md §17.10.1), and the engine simulation at the planned density and mix, routed
    on the law that planned it."""
    from edgeprefix.formulations.density import density_problem
    from edgeprefix.solvers.density import plan_density

    base = instance.with_network(request_intensity=float(lam))
    step = step_time(instance)
    out: list[dict[str, Any]] = []
    for law, queue_model in PLANS:
        if law not in laws():
            out.append({"law": law, "queue_model": queue_model, "density": None})
            continue
        problem = density_problem(base, reliability, queue_model=queue_model, **law_keywords(law, density_problem))
        plan = plan_density(problem, method="grid")
        at = instance.with_network(edge_density=float(plan.edge_density))
        mix = instance.mix_vector(plan.mix) if isinstance(plan.mix, dict) else plan.mix
        out.append(
            {
                "law": law,
                "queue_model": queue_model,
                "density": float(plan.edge_density),
                "predicted": float(plan.coverage),
                "mix": plan.mix,
                "sim": coverages(at, mix, lam, size, router, step, route_law=law),
            }
        )
    return out


def density_table(rows: Sequence[dict[str, Any]], reliability: float = RELIABILITY) -> str:
    lines = ["| queue law | planned λ_b | predicted coverage | engine-simulated coverage ± SE | sim − ζ |", "|---|---|---|---|---|"]
    for r in rows:
        label = r["law"] + (", cell model" if r.get("queue_model") == "cell" else "")
        if r["density"] is None:
            lines.append(f"| {label} | {NOT_AVAILABLE} | n/a | n/a | n/a |")
            continue
        m, se = mean_se(r["sim"])
        lines.append(f"| {label} | {r['density']:.4g} | {r['predicted']:.3f} | {m:.3f} ± {se:.3f} | {m - reliability:+.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--instances", default=",".join(INSTANCES), help=f"benchmark instances (default {','.join(INSTANCES)})")
    ap.add_argument("--router", choices=("tier", "online"), default="online", help="the simulation's router (default online)")
    ap.add_argument("--budget", type=int, default=60, help="gradient-search evaluations per solve (default 60)")
    ap.add_argument("--no-density", action="store_true", help="skip the plan-density check")
    add_queue_model_argument(ap, "both laws' solves")
    add_size_arguments(ap)
    args = ap.parse_args(argv)
    size = size_from_args(args)
    if args.budget < 1:
        ap.exit(2, f"error: --budget: at least 1 evaluation, got {args.budget}\n")
    try:
        instances = [engine_instance(n.strip()) for n in args.instances.split(",") if n.strip()]
    except ValueError as exc:
        ap.exit(2, f"error: {exc}\n")
    t0, c0 = time.perf_counter(), time.process_time()
    if not engine_law_available():
        print(
            f"note: this tree's model has no engine queue law (evaluate takes no queue_law): the engine-law columns are "
            f"'{NOT_AVAILABLE}'; only the slot law's decisions are simulated"
        )
    rows, edges = [], {}
    with progress_bar(total=len(instances) * len(SHARES), desc="engine decisions", unit="load") as bar:
        for inst in instances:
            r, e = decision_rows(inst, size, SHARES, args.router, budget=args.budget, bar=bar, queue_model=args.queue_model)
            rows += r
            edges[inst.name] = e
    print(
        f"decisions on the batching engine (planned caches, {args.router} router): {size.requests} requests per replay, "
        f"{size.replications} replications, {size.nodes:g} nodes, seed {size.seed}; loads {SHARES} of the engine edge"
        + ("" if args.queue_model == "meanfield" else f"; optima solved with the {args.queue_model} queue model")
    )
    for name, e in edges.items():
        print(f"{name}: engine edge (online router, the reference mix) Λ ∈ ({e.stable:.4g}, {e.edge:.4g}]")
    print(table(rows))
    if not args.no_density:
        first = instances[0]
        lam = SHARES["moderate"] * edges[first.name].edge
        print(f"\nplan-density --reliability {RELIABILITY} on {first.name} at Λ = {lam:.3g} (joint with the mix, 1/10 grid):")
        print(density_table(density_rows(first, lam, size, args.router)))
    print(f"wall time {time.perf_counter() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s")


if __name__ == "__main__":
    main()
