"""Planned placement vs what operators run: LRU caches with production routers, all on batching engines.

Run: ``python -m edgeprefix.benchmarks.accuracy.engine.engine_comparison`` (the reduced size of benchmarks/README.md);
the full size: ``--requests 12031 --model-requests 5000 --replications 5 --nodes 50``; ``--dask ADDRESS``
runs the grid's cells (one per workload and load) as tasks on that Dask scheduler, with the same rows.

Two workloads, every row on the batching engine (docs/model.md §17.9) with the same networks,
locations and arrivals per replication (common random numbers); rows differ only in cache and
router:

- the shipped Mooncake conversation trace (its first ``--requests``) on
  ``benchmarks/instances/mooncake_engine.toml`` (Llama-2-70B, A100, TP 4);
- the model workload (Poisson arrivals of the instance's types, :mod:`~edgeprefix.placement.
  simulation.engine.model_workload`) of ``paper_baseline`` and ``medium_forest`` with the same
  engine section.

Rows: the plan (``planned`` cache, the package's online router), the hybrid (``planned+lru``,
online router), and LRU caches in the same memory with the online router and with each production
router.  Three loads each (request intensities Λ per unit area, chosen below the engine's
saturation), ``--replications`` replications; coverage ``P(T ≤ τ)`` mean ± SE and the ratio to
the plan's in the same run.  Writes ``benchmarks/accuracy/engine/engine_comparison.png``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE, SPLITWISE_TIMINGS
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.placement.pipeline.trace_workload import decode_per_token, load_trace_workload
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.engine.blocks import read_block_trace
from edgeprefix.placement.simulation.engine.model_workload import engine_rows
from edgeprefix.placement.simulation.engine.step_time import step_time_from_section
from edgeprefix.placement.simulation.replay import ReplaySpec
from edgeprefix.placement.simulation.replay_analysis import replay_replicated
from edgeprefix.solvers.api import solve
from edgeprefix.solvers.distributed import dask_client, map_ordered

ROOT = Path(__file__).resolve().parents[3]
TRACE_INSTANCE = ROOT / "benchmarks" / "instances" / "mooncake_engine.toml"
MODEL_INSTANCES = (ROOT / "benchmarks" / "instances" / "paper_baseline.toml", ROOT / "benchmarks" / "instances" / "medium_forest.toml")
ROWS = (
    ("plan: planned + online", "planned", "online"),
    ("hybrid: planned+lru + online", "planned+lru", "online"),
    ("lru + online", "lru", "online"),
    ("lru + sglang", "lru", "sglang"),
    ("lru + dynamo", "lru", "dynamo"),
    ("lru + llm-d", "lru", "llm-d"),
    ("lru + vllm-prefix", "lru", "vllm-prefix"),
    ("lru + vllm-kv", "lru", "vllm-kv"),
)
TRACE_LOADS = (0.02, 0.04, 0.08)
MODEL_LOAD_SHARES = (1 / 12, 1 / 6, 1 / 3)  # of the instance's own Λ (its FCFS-slot operating point)
KEYS = ("ttft_p50", "ttft_p99", "hit_rate_blocks", "node_load_cv", "preemptions", "radio_mean")


def _trace_inputs(args: argparse.Namespace) -> tuple[Any, Any, Any, int, Any, float]:
    """The engine instance, the first ``--requests`` of the Mooncake trace with their block ids, the fitted
    step time and the decode seconds per token: ``(instance, workload, blocks, n, step, decode)``."""
    inst, wl = load_trace_workload(MOONCAKE_TRACE, load_instance(TRACE_INSTANCE))
    blocks = read_block_trace(MOONCAKE_TRACE, inst)
    n = min(args.requests, wl.requests)
    wl, blocks = wl.part(slice(0, n)), blocks.part(0, n)
    step = step_time_from_section(inst.engine, SPLITWISE_TIMINGS)
    d = decode_per_token(inst, float(wl.output.mean()))
    return inst, wl, blocks, n, step, d


def _trace_rows(args: argparse.Namespace, lam: float) -> list[dict[str, Any]]:
    """The trace's rows at load ``lam`` (one grid cell)."""
    inst, wl, blocks, n, step, d = _trace_inputs(args)
    out = []
    for name, cache, router in ROWS:
        spec = ReplaySpec(decode_per_token=d, nodes=args.nodes, router=router, engine="batching", cache=cache)
        rep = replay_replicated(
            inst, wl, None, spec, intensity=lam, replications=args.replications, seed=args.seed, engine={"blocks": blocks, "step": step}
        )
        rows = [r.summary() for r in rep.results]
        cov = np.array([r["coverage_replayed"] for r in rows])
        out.append(
            {
                "workload": f"Mooncake trace ({n} requests)",
                "intensity": lam,
                "row": name,
                "coverage": float(cov.mean()),
                "se": float(cov.std(ddof=1) / np.sqrt(cov.size)),
                **{k: float(np.mean([r[k] for r in rows])) for k in KEYS},
            }
        )
    return out


DELAYS = (0.0, 1.0, 5.0, 20.0)
DELAY_ROUTERS = ("online", "dynamo", "llm-d", "vllm-kv")


def telemetry_rows(args: argparse.Namespace, lam: float = 0.04) -> str:
    """Coverage vs telemetry delay on the Mooncake trace, LRU caches: the routers that read the nodes'
    loads or KV events through telemetry (a markdown table)."""
    inst, wl, blocks, n, step, d = _trace_inputs(args)
    lines = ["| router | " + " | ".join(f"delay {x:g} s" for x in DELAYS) + " |", "|---|" + "---|" * len(DELAYS)]
    for router in DELAY_ROUTERS:
        cells = []
        for delay in DELAYS:
            spec = ReplaySpec(
                decode_per_token=d, nodes=args.nodes, router=router, engine="batching", cache="lru", telemetry=Telemetry(delay=delay)
            )
            rep = replay_replicated(
                inst, wl, None, spec, intensity=lam, replications=args.replications, seed=args.seed, engine={"blocks": blocks, "step": step}
            )
            cov = np.array([r.coverage() for r in rep.results])
            cells.append(f"{cov.mean():.3f} ± {cov.std(ddof=1) / np.sqrt(cov.size):.3f}")
        lines.append(f"| lru + {router} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _model_rows(path: Path, args: argparse.Namespace, share: float) -> list[dict[str, Any]]:
    """The model workload's rows of instance ``path`` at ``share`` of its own Λ (one grid cell)."""
    base = load_instance(path)
    engine = load_instance(TRACE_INSTANCE).engine
    inst = base.replace(engine=engine)
    step = step_time_from_section(engine, SPLITWISE_TIMINGS)
    lam = share * inst.network.request_intensity
    # the plan: the package's optimum at this load (gradient search, FCFS-slot model)
    mix = solve(placement_problem(inst.with_network(request_intensity=lam)), "gradient", budget=80, seed=args.seed).x
    out = []
    for name, cache, router in ROWS:
        (r,) = engine_rows(
            inst,
            mix,
            (lam,),
            step=step,
            engine="batching",
            cache=cache,
            router=router,
            telemetry=Telemetry(),
            requests=args.model_requests,
            replications=args.replications,
            nodes=args.nodes,
            seed=args.seed,
            tau=inst.placement.target,
        )
        out.append(
            {
                "workload": f"model workload, {base.name}",
                "intensity": r["intensity"],
                "row": name,
                "coverage": r["coverage_engine"],
                "se": r["coverage_engine_se"],
                **{k: r[k] for k in KEYS},
            }
        )
    return out


def grid_cells(args: argparse.Namespace) -> list[tuple[str, str, float]]:
    """The grid's cells, one per workload and load: ``("trace", "", Λ)`` and ``("model", instance path, share)``."""
    cells = [("trace", "", lam) for lam in TRACE_LOADS]
    if not args.skip_model:
        cells += [("model", str(path), share) for path in MODEL_INSTANCES for share in MODEL_LOAD_SHARES]
    return cells


def run_cell(args: argparse.Namespace, cell: tuple[str, str, float]) -> list[dict[str, Any]]:
    """One cell's rows (every cache and router at one workload and load): a Dask task."""
    kind, path, load = cell
    return _trace_rows(args, load) if kind == "trace" else _model_rows(Path(path), args, load)


def run_grid(
    args: argparse.Namespace, cells: Sequence[tuple[str, str, float]], client: Any = None, on_done: Any = None
) -> list[dict[str, Any]]:
    """Every cell's rows in cell order: as Dask tasks on ``client`` (the sweep's machinery), else here one by one.
    Each cell seeds its own replays, so the rows are the same either way."""
    return [row for rows in map_ordered(partial(run_cell, args), cells, client, on_done) for row in rows]


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown table, the ratio against the plan's coverage at the same workload and load."""
    plan = {(r["workload"], r["intensity"]): r["coverage"] for r in rows if r["row"].startswith("plan:")}
    lines = [
        "| workload | Λ | row | coverage ± SE | vs plan | TTFT p50 [s] | TTFT p99 [s] | radio [s] | hit blocks | load CV | preemptions |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["workload"], r["intensity"])):
        ref = plan.get((r["workload"], r["intensity"]), float("nan"))
        ratio = r["coverage"] / ref if ref > 0 else float("nan")
        lines.append(
            f"| {r['workload']} | {r['intensity']:.3g} | {r['row']} | {r['coverage']:.3f} ± {r['se']:.3f} | "
            f"{ratio:.2f} | {r['ttft_p50']:.2f} | {r['ttft_p99']:.1f} | {r['radio_mean']:.2f} | {r['hit_rate_blocks']:.3f} | "
            f"{r['node_load_cv']:.2f} | {r['preemptions']:.0f} |"
        )
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from edgeprefix.placement.atomic import atomic_savefig

    workloads = sorted({r["workload"] for r in rows})
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.2 * len(workloads), 3.8), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        for name, _, _ in ROWS:
            pts = sorted((r["intensity"], r["coverage"], r["se"]) for r in rows if r["workload"] == w and r["row"] == name)
            if pts:
                x, y, e = zip(*pts)
                ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=name, linestyle="-" if "plan" in name else "--")
        ax.set_title(w, fontsize=9)
        ax.set_xlabel("request intensity Λ")
        ax.set_ylabel("TTFT coverage P(T ≤ τ)")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000, help="Mooncake requests replayed (default 2000)")
    ap.add_argument("--model-requests", type=int, default=800, help="model-workload requests per replay (default 800)")
    ap.add_argument("--replications", type=int, default=3)
    ap.add_argument("--nodes", type=float, default=12)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--skip-model", action="store_true", help="the trace only")
    ap.add_argument("--telemetry", action="store_true", help="only the telemetry-delay table (Mooncake, Λ = 0.04)")
    ap.add_argument(
        "--dask", default=None, metavar="ADDRESS", help="run the grid's cells as tasks on this Dask scheduler (default: serially here)"
    )
    args = ap.parse_args(argv)
    if args.replications < 2:
        raise SystemExit("--replications: at least 2 for a standard error")
    if args.telemetry:
        print(telemetry_rows(args))
        return
    t0 = time.perf_counter()
    cells = grid_cells(args)
    with progress_bar(total=len(cells) * len(ROWS), desc="engine comparison", unit="cell") as bar:

        def tick() -> None:
            bar.update(len(ROWS))

        if args.dask is None:
            rows = run_grid(args, cells, on_done=tick)
        else:
            try:
                with dask_client(args.dask) as client:
                    rows = run_grid(args, cells, client, on_done=tick)
            except ValueError as exc:  # an unreachable or malformed scheduler address: one line
                raise SystemExit(str(exc)) from None
    print(
        f"batching engine (Llama-2-70B A100 TP4, step time fitted to the Splitwise timings), {args.nodes:g} nodes, "
        f"{args.replications} replications, seed {args.seed}"
    )
    print(table(rows))
    print(f"wall time {time.perf_counter() - t0:.0f} s")
    plot(rows, Path(__file__).resolve().parent / "engine_comparison.png")


if __name__ == "__main__":
    main()
