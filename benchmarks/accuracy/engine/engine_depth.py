"""Fig. 7 on the batching engine: coverage against a uniform cached depth at light, moderate and heavy load.

Run: ``python -m edgeprefix.benchmarks.accuracy.engine.engine_depth`` (default: 13 depths, 800 requests per replay,
3 replications, 12 nodes; ``--queue-law engine`` predicts with the engine law where the model has it).
Writes ``benchmarks/accuracy/engine/engine_depth.png``.

The figure's construction (docs/model.md §13.3, :func:`~edgeprefix.benchmarks.paper.figures.fig7.uniform_instance`):
every node caches the first ``d`` tokens of the deepest shared path of ``paper_section6`` (one tier, so
the routers coincide: nearest node), with the trace-built instance's engine (Llama-2-70B, A100, TP 4).
The model's node has ``c(d) = ⌊(M − κ d)/m_run⌋`` slots; the engine's node has no slots: its KV memory
is ``(M − κ d)/κ`` tokens of running requests (docs/model.md §17.9), so the same memory–concurrency
trade-off acts through KV blocks instead.

Loads: ``--shares`` (light, moderate, heavy) of the engine's stability edge at ``d = 0`` (no static
cache: all memory is KV), found as in :mod:`.engine_gap`.  At each load the batching-engine simulation
(planned caches, tier router = nearest; common random numbers: replication ``r`` has the same requests,
network and arrivals at every depth and load) and the model (``--queue-model``, the mean field by default,
nearest routing, the queue law of ``--queue-law``) at the same depths; each curve's optimum depth, and the depths whose simulated
coverage is within 2 SE (of the difference, paired by replication) of the optimum's.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.accuracy.engine.engine_runs import (
    SimSize,
    add_queue_law_argument,
    add_queue_model_argument,
    add_size_arguments,
    checked_law,
    law_keywords,
    simulate,
    size_from_args,
    stability_edge,
    step_time,
    with_engine,
)
from edgeprefix.benchmarks.paper.figures._common import loads_of, resolve_instance
from edgeprefix.benchmarks.paper.figures.fig7 import DECODE_HEAVY_LOADS, QUICK_STEPS, decode_heavy, shared_depths, uniform_instance
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.progress import progress_bar

SHARES = {"light": 0.2, "moderate": 0.5, "heavy": 0.85}
FIGURE = Path(__file__).resolve().parent / "engine_depth.png"


def model_coverage(instance: Instance, load: float, law: str, queue_model: str = "meanfield") -> float:
    """The model's coverage of a uniform instance at ``Λ = load`` (nearest routing; 0 without a slot)."""
    inst = instance.with_network(request_intensity=float(load))
    if int(inst.concurrency[0]) < 1:
        return 0.0
    ev = evaluate(inst, None, "nearest", target=inst.placement.target, queue_model=queue_model, **law_keywords(law))
    return float(ev.coverage_at_target)


def depth_rows(
    instance: Instance,
    depths: Sequence[float],
    loads: dict[str, float],
    size: SimSize,
    law: str,
    bar: Any = None,
    edges: bool = False,
    model_loads: dict[str, float] | None = None,
    queue_model: str = "meanfield",
) -> list[dict[str, Any]]:
    """One row per depth and load: the simulated coverages per replication and the model's coverage; with
    ``edges`` each row also carries the engine's stability edge at its depth (``edge``: the lowest saturated
    load found, ``edge_stable`` the highest stable one); with ``model_loads`` the model's coverage at those
    loads (``model_at``)."""
    base = with_engine(instance)
    step = step_time(base)
    kappa, memory = base.gpu.kv_per_token, base.gpu.memory
    rows = []
    for d in depths:
        inst = uniform_instance(base, float(d))
        extra: dict[str, Any] = {}
        if edges:
            e = stability_edge(inst, None, size, start=min(loads.values()), router="tier", step=step)
            extra = {"edge": e.edge, "edge_stable": e.stable}
        if model_loads:
            extra["model_at"] = {lab: model_coverage(inst, lam, law, queue_model) for lab, lam in model_loads.items()}
            extra["model_loads"] = dict(model_loads)
        for label, lam in loads.items():
            pool = (memory - kappa * float(d)) / kappa
            covs = (
                [r.coverage() for r in simulate(inst, None, lam, size, router="tier", step=step)] if pool > 0 else [0.0] * size.replications
            )
            rows.append(
                {
                    "depth": float(d),
                    "load": label,
                    "intensity": float(lam),
                    "slots": int(inst.concurrency[0]),
                    "kv_tokens": pool,
                    "sim": covs,
                    "model": model_coverage(inst, lam, law, queue_model),
                    **extra,
                }
            )
            if bar is not None:
                bar.update(1)
    return rows


def optimum(rows: Sequence[dict[str, Any]], label: str, key: str) -> dict[str, Any]:
    """The best depth of one load's curve (``key``: ``sim`` or ``model``); for ``sim`` also the depths within
    2 SE of it (the SE of the paired difference over replications)."""
    curve = [r for r in rows if r["load"] == label]
    value = (lambda r: float(np.mean(r["sim"]))) if key == "sim" else (lambda r: float(r["model"]))
    best = max(curve, key=value)
    out: dict[str, Any] = {"depth": best["depth"], "coverage": value(best)}
    if key == "sim":
        ref = np.asarray(best["sim"])
        near = []
        for r in curve:
            diff = ref - np.asarray(r["sim"])
            se = float(diff.std(ddof=1) / math.sqrt(diff.size)) if diff.size > 1 else 0.0
            if diff.mean() <= 2.0 * se:
                near.append(r["depth"])
        out["near"] = (min(near), max(near))
    return out


def table(rows: Sequence[dict[str, Any]], loads: dict[str, float]) -> str:
    """Markdown: per depth, the slots and KV tokens a node has, and coverage per load (simulated ± SE, model)."""
    edges = "edge" in rows[0]
    model_at = rows[0].get("model_loads") or {}
    head = (
        "| depth d | model slots c(d) | engine KV tokens | "
        + ("engine edge Λ | " if edges else "")
        + " | ".join(f"{lab} Λ={lam:.3g}: sim ± SE | model" for lab, lam in loads.items())
        + " |"
        + "".join(f" model at Λ={lam:g} |" for lam in model_at.values())
    )
    lines = [head, "|---|---|---|" + ("---|" if edges else "") + "---|---|" * len(loads) + "---|" * len(model_at)]
    for d in sorted({r["depth"] for r in rows}):
        cells = []
        first = None
        for label in loads:
            r = next(x for x in rows if x["depth"] == d and x["load"] == label)
            first = first or r
            c = np.asarray(r["sim"])
            cells.append(f"{c.mean():.3f} ± {c.std(ddof=1) / math.sqrt(c.size):.3f} | {r['model']:.3f}")
        assert first is not None
        edge = f"({first['edge_stable']:.3g}, {first['edge']:.3g}] | " if edges else ""
        tail = "".join(f" {v:.3f} |" for v in (first.get("model_at") or {}).values())
        lines.append(f"| {d:.0f} | {first['slots']} | {first['kv_tokens']:.0f} | {edge}" + " | ".join(cells) + " |" + tail)
    return "\n".join(lines)


def answer(rows: Sequence[dict[str, Any]], loads: dict[str, float]) -> str:
    """The optimum per load and curve, and whether the simulated optimum moves shallower with load."""
    lines = []
    for key, name in (("sim", "batching engine"), ("model", "model")):
        opts = {lab: optimum(rows, lab, key) for lab in loads}
        parts = []
        for lab, o in opts.items():
            near = f" (within 2 SE: {o['near'][0]:.0f}–{o['near'][1]:.0f})" if "near" in o else ""
            parts.append(f"{lab} d* = {o['depth']:.0f}, coverage {o['coverage']:.3f}{near}")
        moves = opts["heavy"]["depth"] < opts["light"]["depth"]
        lines.append(
            f"{name}: " + "; ".join(parts) + f" — optimum {'moves shallower' if moves else 'does not move shallower'} "
            "from light to heavy load"
        )
    model_at = rows[0].get("model_loads") or {}
    if model_at:
        best = {lab: max(rows, key=lambda r: r["model_at"][lab])["depth"] for lab in model_at}
        lines.append(
            "model at its own Fig. 7 loads ("
            + ", ".join(f"{lab} Λ={lam:g}" for lab, lam in model_at.items())
            + "): d* = "
            + ", ".join(f"{best[lab]:.0f}" for lab in model_at)
        )
    return "\n".join(lines)


def plot(rows: Sequence[dict[str, Any]], loads: dict[str, float], law: str, path: Path = FIGURE, queue_model: str = "meanfield") -> None:
    """Coverage against the cached depth per load, engine and model side by side, written atomically to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from edgeprefix.placement.atomic import atomic_savefig

    fig, axes = plt.subplots(1, 2, figsize=(10.0, 4.0), sharey=True)
    colors = {"light": "tab:blue", "moderate": "tab:orange", "heavy": "tab:red"}
    for label, lam in loads.items():
        curve = sorted((r for r in rows if r["load"] == label), key=lambda r: r["depth"])
        x = [r["depth"] for r in curve]
        sim = np.array([np.mean(r["sim"]) for r in curve])
        se = np.array([np.std(r["sim"], ddof=1) / math.sqrt(len(r["sim"])) for r in curve])
        axes[0].errorbar(x, sim, yerr=se, marker="o", ms=3, capsize=2, color=colors.get(label), label=f"{label}, Λ = {lam:.3g}")
        axes[1].plot(x, [r["model"] for r in curve], marker="s", ms=3, color=colors.get(label), label=f"{label}, Λ = {lam:.3g}")
        for ax, key in ((axes[0], "sim"), (axes[1], "model")):
            o = optimum(rows, label, key)
            ax.plot([o["depth"]], [o["coverage"]], marker="*", ms=14, color=colors.get(label), mec="k", zorder=5)
    axes[0].set_title("batching-engine simulation (planned caches, nearest)", fontsize=9)
    model_name = "mean field" if queue_model == "meanfield" else f"{queue_model} model"
    axes[1].set_title(f"model ({model_name}, nearest; queue law {law})", fontsize=9)
    for ax in axes:
        ax.set_xlabel("uniform cached depth d [tokens]")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TTFT coverage P(T ≤ τ)")
    axes[0].legend(fontsize=7)
    fig.suptitle("Fig. 7 on the batching engine (paper_section6, Llama-2-70B A100 TP4; ★ = optimum)", fontsize=10)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--steps", type=int, default=QUICK_STEPS, help=f"depths from 0 to the deepest shared path (default {QUICK_STEPS})")
    ap.add_argument(
        "--shares",
        default=",".join(f"{v:g}" for v in SHARES.values()),
        help="light, moderate, heavy load as shares of the engine's edge at d = 0 (default 0.2,0.5,0.85)",
    )
    ap.add_argument("--no-plot", action="store_true", help="print the tables only")
    ap.add_argument(
        "--variant",
        choices=("calibrated", "decode-heavy", "both"),
        default="both",
        help="the instance as calibrated, its decode-heavy variant (D = 2.5 / 1.5 s), or both (default)",
    )
    add_size_arguments(ap)
    add_queue_law_argument(ap)
    add_queue_model_argument(ap, "the model's column")
    args = ap.parse_args(argv)
    checked_law(args.queue_law)
    size = size_from_args(args)
    try:
        shares = tuple(float(x) for x in args.shares.split(","))
        if len(shares) != 3 or not all(math.isfinite(x) and x > 0 for x in shares):
            raise ValueError
    except ValueError:
        ap.exit(2, f"error: --shares: three comma-separated numbers > 0 (light, moderate, heavy), got {args.shares!r}\n")
    if args.steps < 2:
        ap.exit(2, f"error: --steps: at least 2 depths, got {args.steps}\n")
    t0, c0 = time.perf_counter(), time.process_time()
    calibrated = with_engine(resolve_instance(None))
    variants = {"calibrated": calibrated, "decode-heavy": decode_heavy(calibrated)}
    chosen = list(variants) if args.variant == "both" else [args.variant]
    top, _ = shared_depths(calibrated)
    depths = np.linspace(0.0, top, args.steps)
    print(
        f"Fig. 7 on the batching engine: {calibrated.name}, uniform depth, nearest node; {size.requests} requests per "
        f"replay, {size.replications} replications, {size.nodes:g} nodes, seed {size.seed}; model queue law {args.queue_law}"
        + ("" if args.queue_model == "meanfield" else f", queue model {args.queue_model}")
    )
    for name in chosen:
        inst = variants[name]
        edge = stability_edge(uniform_instance(inst, 0.0), None, size, start=0.5, router="tier")
        loads = {lab: s * edge.edge for lab, s in zip(SHARES, shares)}
        own = loads_of(calibrated).fig7_labels if name == "calibrated" else DECODE_HEAVY_LOADS
        with progress_bar(total=len(depths) * len(loads), desc=f"engine depth ({name})", unit="point") as bar:
            rows = depth_rows(
                inst, depths.tolist(), loads, size, args.queue_law, bar=bar, edges=True, model_loads=own, queue_model=args.queue_model
            )
        print(f"\n{name}: engine edge at d = 0 (tier router) Λ ∈ ({edge.stable:.4g}, {edge.edge:.4g}]; loads {shares} of it")
        print(table(rows, loads))
        print(answer(rows, loads))
        if not args.no_plot and name == "calibrated":
            plot(rows, loads, args.queue_law, queue_model=args.queue_model)
    print(f"wall time {time.perf_counter() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s")


if __name__ == "__main__":
    main()
