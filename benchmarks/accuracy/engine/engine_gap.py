"""The model against the batching-engine network: coverage, mean TTFT and p90 up to the engine's edge.

Run: ``python -m edgeprefix.benchmarks.accuracy.engine.engine_gap`` (default size: 2,000 model-workload requests per
replay, 5 replications, 12 nodes; ``--queue-law engine`` predicts with the engine law where the
model has it).

Per instance (``paper_baseline`` with the trace-built instance's engine section, and the trace-built
``mooncake_engine``), one mix — the instance's own (``placement.mix``), the same at every load — and:

1. the engine's stability edge: the load at which the batching-engine network of the planned caches
   saturates (:func:`~.engine_runs.stability_edge`: waits that grow through the run), found for the
   package's online router and for the tier router;
2. at loads ``--shares`` of the online router's edge: the batching-engine network simulation (planned
   caches; the tier and the online router; common random numbers: replication ``r`` has the same
   requests, network and arrivals at every load and router) against the model's prediction of the same
   mix at the same load (load-aware routing; mean field and cell model, the queue law of ``--queue-law``).

Columns: coverage ``P(T ≤ τ)`` (simulated mean ± SE over replications; model; model − simulated), mean
TTFT of the served requests (simulated ± SE; model; model / simulated) and the TTFT p90 (simulated,
rejected requests infinite; model; model / simulated); ``sat`` marks a router whose network saturates at
that load.  ``no-wait``: the coverage without any waiting — the simulation's requests each alone on an idle
engine (their radio term plus their prefill steps, :func:`~.engine_runs.solo_coverage`), and the model's
queue-free coverage; their difference is the prefill law's part of the gap (``g`` against the engine's
step time), not the queue's.  The cell model's mean TTFT is the mean field's (docs/model.md §14); only its coverage and
quantile differ.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from typing import Any

from edgeprefix.benchmarks.accuracy.engine.engine_runs import (
    Edge,
    SimSize,
    add_queue_law_argument,
    add_size_arguments,
    checked_law,
    engine_instance,
    fmt,
    model_point,
    predict,
    saturated,
    sim_point,
    simulate,
    size_from_args,
    stability_edge,
    step_time,
)
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.progress import progress_bar

INSTANCES = ("paper_baseline", "mooncake_engine")
SHARES = (0.1, 0.3, 0.5, 0.7, 0.9)
ROUTERS = ("tier", "online")
START = {"paper_baseline": 0.8, "mooncake_engine": 0.1}  # where the edge search starts (any load > 0 works)


def _diff(a: float, b: float) -> str:
    return "n/a" if math.isnan(a) or math.isnan(b) else f"{a - b:+.3f}"


def gap_rows(
    instance: Instance,
    size: SimSize,
    shares: Sequence[float],
    law: str,
    *,
    edge: Edge | None = None,
    routers: Sequence[str] = ROUTERS,
    bar: Any = None,
) -> tuple[list[dict[str, Any]], dict[str, Edge]]:
    """The gap table's rows of one instance and the edges found (``edge`` given: the online router's, not searched)."""
    step = step_time(instance)
    tau = float(instance.placement.target)
    start = START.get(instance.name, float(instance.network.request_intensity) / 4.0)
    edges = {"online": edge if edge is not None else stability_edge(instance, None, size, start=start, router="online", step=step)}
    if edge is None and "tier" in routers:
        edges["tier"] = stability_edge(instance, None, size, start=edges["online"].stable / 2.0, router="tier", step=step)
    rows = []
    for share in shares:
        lam = float(share) * edges["online"].edge
        model = {qm: model_point(predict(instance, None, lam, qm, law)) for qm in ("meanfield", "cell")}
        for router in routers:
            results = simulate(instance, None, lam, size, router=router, step=step)
            rows.append(
                {
                    "instance": instance.name,
                    "intensity": lam,
                    "share": float(share),
                    "router": router,
                    "saturated": saturated(results, tau),
                    "sim": sim_point(results, instance, step),
                    "meanfield": model["meanfield"],
                    "cell": model["cell"],
                    "queue_law": law,
                }
            )
            if bar is not None:
                bar.update(1)
    return rows, edges


def _ratio(a: float, b: float) -> float:
    return a / b if (math.isfinite(a) and math.isfinite(b) and b > 0) else float("nan")


def table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown table of :func:`gap_rows` rows."""
    lines = [
        "| instance | Λ | Λ/edge | router | sim cov ± SE | MF cov | MF − sim | cell cov | cell − sim | no-wait: sim / MF | "
        "sim mean TTFT ± SE [s] | MF mean [s] | MF/sim | sim p90 [s] | MF p90 [s] | cell p90 [s] | MF/sim p90 | sat |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s, mf, cell = r["sim"], r["meanfield"], r["cell"]
        lines.append(
            f"| {r['instance']} | {r['intensity']:.3g} | {r['share']:.2f} | {r['router']} | "
            f"{fmt(s['coverage'])} ± {fmt(s['coverage_se'])} | {fmt(mf['coverage'])} | {mf['coverage'] - s['coverage']:+.3f} | "
            f"{fmt(cell['coverage'])} | {_diff(cell['coverage'], s['coverage'])} | {fmt(s['no_wait'])} / {fmt(mf['no_wait'])} | "
            f"{fmt(s['mean_ttft'], 2)} ± {fmt(s['mean_ttft_se'], 2)} | {fmt(mf['mean_ttft'], 2)} | "
            f"{fmt(_ratio(mf['mean_ttft'], s['mean_ttft']), 2)} | {fmt(s['p90'], 2)} | {fmt(mf['p90'], 2)} | "
            f"{fmt(cell['p90'], 2)} | {fmt(_ratio(mf['p90'], s['p90']), 2)} | {'sat' if r['saturated'] else ''} |"
        )
    return "\n".join(lines)


def summary(rows: Sequence[dict[str, Any]]) -> str:
    """Per model (mean field, cell model): the cells whose coverage is within ``max(0.02, 3 SE)`` of the simulation
    (all rows, and the rows of the router the model describes: the online router for the mean field, the tier
    router for the cell model, docs/model.md §14) and those whose mean TTFT is within 10 % (online router)."""
    lines = []
    for key, own in (("meanfield", "online"), ("cell", "tier")):
        hits, total, own_hits, own_total, ttft, ttft_total = 0, 0, 0, 0, 0, 0
        for r in rows:
            s, m = r["sim"], r[key]
            if math.isnan(m["coverage"]):
                continue
            ok = abs(m["coverage"] - s["coverage"]) <= max(0.02, 3.0 * s["coverage_se"])
            hits, total = hits + ok, total + 1
            if r["router"] == own:
                own_hits, own_total = own_hits + ok, own_total + 1
            if r["router"] == "online":
                ratio = _ratio(m["mean_ttft"], s["mean_ttft"])
                ttft, ttft_total = ttft + (math.isfinite(ratio) and abs(ratio - 1.0) <= 0.10), ttft_total + 1
        if total:
            lines.append(
                f"{key}: coverage within max(0.02, 3 SE) in {hits} of {total} cells ({own_hits} of {own_total} with the "
                f"{own} router); mean TTFT within 10 % in {ttft} of {ttft_total} online-router cells"
            )
    return "\n".join(lines)


def edge_lines(edges: dict[str, dict[str, Edge]]) -> str:
    return "\n".join(
        f"{name}: engine edge (online router) Λ ∈ ({e['online'].stable:.4g}, {e['online'].edge:.4g}]"
        + (f", tier router Λ ∈ ({e['tier'].stable:.4g}, {e['tier'].edge:.4g}]" if "tier" in e else "")
        for name, e in edges.items()
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--instances", default=",".join(INSTANCES), help=f"benchmark instances (default {','.join(INSTANCES)})")
    ap.add_argument(
        "--shares",
        default=",".join(f"{s:g}" for s in SHARES),
        help="loads as shares of the online router's engine edge (default 0.1,0.3,0.5,0.7,0.9)",
    )
    add_size_arguments(ap, requests=2000, replications=5)
    add_queue_law_argument(ap)
    args = ap.parse_args(argv)
    checked_law(args.queue_law)
    size = size_from_args(args)
    try:
        shares = tuple(float(x) for x in args.shares.split(","))
        if not all(math.isfinite(x) and x > 0 for x in shares):
            raise ValueError
    except ValueError:
        ap.exit(2, f"error: --shares: comma-separated numbers > 0, got {args.shares!r}\n")
    try:
        instances = [engine_instance(n.strip()) for n in args.instances.split(",") if n.strip()]
    except ValueError as exc:
        ap.exit(2, f"error: {exc}\n")
    t0, c0 = time.perf_counter(), time.process_time()
    rows, edges = [], {}
    with progress_bar(total=len(instances) * len(shares) * len(ROUTERS), desc="engine gap", unit="point") as bar:
        for inst in instances:
            r, e = gap_rows(inst, size, shares, args.queue_law, bar=bar)
            rows += r
            edges[inst.name] = e
    print(
        f"model (queue law {args.queue_law}) vs batching-engine network (Llama-2-70B A100 TP4, step time fitted to the "
        f"Splitwise timings; planned caches; the instance's mix): {size.requests} requests per replay, "
        f"{size.replications} replications, {size.nodes:g} nodes, seed {size.seed}"
    )
    print(edge_lines(edges))
    print(table(rows))
    print(summary(rows))
    print(f"wall time {time.perf_counter() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s")


if __name__ == "__main__":
    main()
