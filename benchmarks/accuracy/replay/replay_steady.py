"""Does a real trace confirm the plan?  Plan on one half of the Mooncake trace, replay the other warm.

Run ``python -m edgeprefix.benchmarks.accuracy.replay.replay_steady [--replications 3] [--nodes 50] [--requests N] [--budget 60] [--length-bins 16] [--trace PATH] [--recent F|auto] [--[no-]bin-edges-at-target]``.
The instance is what ``edgeprefix profiles --split 0.5`` builds from the shipped Mooncake conversation trace (its recent
window chosen on the training half, ``--recent auto``, docs/model.md (17.24))
(length sub-types, 16 per type split at the target's threshold lengths, the default of ``profiles``, docs/model.md (2.10)); at ``Λ₀/2`` and ``Λ₀`` and for both routers the mix
is solved (``solve --method gradient --budget B`` with the router's own queue model: the cell model for the tier
rule, eq. (39) for the online router) and the second half is replayed warm (``replay --split 0.5``: the training
half fills the queues first, every replayed request is measured; docs/model.md §17.7).  Printed per case:

- coverage predicted, replayed (± SE over replications), the prediction with the replayed half's own type mix and
  lengths (``coverage_predicted_replayed_stats``), and whether ``|predicted − replayed| ≤ max(0.02, 3 SE)``;
- mean TTFT predicted / replayed and their ratio, and the prediction over the replay's own horizon (the overloaded
  nodes' growing queues added, docs/model.md (14.17)); whether the planner reports the plan stable (tiers, and under
  the cell model overloaded nodes that do not move the mean TTFT, (14.18)) and the overloaded node shares
  predicted / replayed;
- whether the replay is stationary (Kendall trend test on per-window waits, every replication).

``--requests N`` keeps only the first N requests of the trace (a quick version; the test of this table uses it).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.accuracy.replay.length_bins import trace_instance
from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.pipeline.calibration import DEFAULT_PREFILL
from edgeprefix.placement.pipeline.profile_generation import DEFAULT_BIN_EDGES_AT_TARGET, DEFAULT_LENGTH_BINS
from edgeprefix.placement.pipeline.recent_window import choose_window
from edgeprefix.placement.pipeline.trace_workload import block_catalogue, decode_per_token, split_index, trace_workload
from edgeprefix.placement.pipeline.traces import TraceRecord, read_trace
from edgeprefix.placement.simulation.replay import ReplaySpec
from edgeprefix.placement.simulation.replay_analysis import replay_replicated
from edgeprefix.solvers.api import solve

ROUTER_MODEL = {"tier": "cell", "online": "meanfield"}


def cases(
    requests: int | None = None,
    nodes: float = 50.0,
    replications: int = 3,
    budget: int = 60,
    loads: Sequence[float] = (0.5, 1.0),
    routers: Sequence[str] = ("tier", "online"),
    seed: int = 0,
    bins: int = DEFAULT_LENGTH_BINS,
    trace: str | Path | Sequence[TraceRecord] = MOONCAKE_TRACE,
    recent: float | str = "auto",
    edges_at_target: bool = DEFAULT_BIN_EDGES_AT_TARGET,
) -> list[dict[str, Any]]:
    """One row per (load, router): the numbers the module docstring lists.  ``recent < 1`` builds the
    instance from the last ``recent`` of the training half only (a recent-window forecast of the workload);
    the whole training half still warms the replay; ``"auto"`` (the default, as ``profiles --split``) chooses it on
    the training half alone by docs/model.md (17.24).  ``trace`` is a path or the records themselves;
    ``edges_at_target``: the bins split at the target's threshold lengths (``profiles --bin-edges-at-target``,
    docs/model.md (2.10))."""
    if recent != "auto" and not (isinstance(recent, (int, float)) and 0.0 < recent <= 1.0):
        raise ValueError(f"recent must be in (0, 1] or 'auto', got {recent!r}")
    records = list(read_trace(trace) if isinstance(trace, (str, Path)) else trace)
    if requests is not None:
        records = records[:requests]
    cut = split_index(len(records), 0.5)
    if recent == "auto":
        recent = choose_window(DEFAULT_PREFILL(np.array([r.input_length for r in records[:cut]], dtype=float))).fraction
    start = cut - max(1, int(round(float(recent) * cut)))
    instance = trace_instance(records[start:cut], bins, edges_at_target)
    catalogue = block_catalogue(instance)
    train, test = trace_workload(records[:cut], catalogue, desc="train"), trace_workload(records[cut:], catalogue, desc="test")
    decode = decode_per_token(instance, float(train.output.mean()))
    lam0 = instance.network.request_intensity
    rows = []
    for load in loads:
        inst = instance.with_network(request_intensity=load * lam0)
        for router in routers:
            model = ROUTER_MODEL[router]
            result = solve(placement_problem(inst, queue_model=model), "gradient", budget=budget, seed=seed)
            spec = ReplaySpec(decode_per_token=decode, router=router, nodes=nodes, warm_start="train")
            s = replay_replicated(inst, test, dict(result.mix), spec, replications=replications, seed=seed, warm=train).summary()
            se = s["coverage_se"]
            stats = s["prediction_replayed_stats"]
            rows.append(
                {
                    "load": load,
                    "intensity": load * lam0,
                    "router": router,
                    "queue_model": model,
                    "mix": dict(result.mix),
                    "coverage_predicted": s["coverage_predicted"],
                    "coverage_replayed": s["coverage_replayed"],
                    "coverage_se": se,
                    "coverage_predicted_replayed_stats": s["coverage_predicted_replayed_stats"],
                    "coverage_ok": bool(abs(s["coverage_predicted"] - s["coverage_replayed"]) <= max(0.02, 3 * se)),
                    "coverage_ok_replayed_stats": bool(
                        abs(s["coverage_predicted_replayed_stats"] - s["coverage_replayed"]) <= max(0.02, 3 * se)
                    ),
                    "mean_ttft_predicted": s["mean_ttft_predicted"],
                    "mean_ttft_replayed": s["mean_ttft_replayed"],
                    "mean_ttft_predicted_replayed_stats": stats["mean_ttft"],
                    "mean_ttft_predicted_horizon": s["mean_ttft_predicted_horizon"],
                    "stable_planned": bool(s["stable_predicted"]),
                    "overloaded_node_share_predicted": s["overloaded_node_share_predicted"],
                    "overloaded_node_share_replayed": s["overloaded_node_share_replayed"],
                    "stationary": bool(s["stationary"]),
                    "stationary_replications": s["stationary_replications"],
                    "measured_service_times": s["measured_service_times"],
                    "requests": s["requests"],
                    "replications": replications,
                    "recent": recent,
                }
            )
    return rows


def _num(value: float | None) -> str:
    return "—" if value is None or not np.isfinite(value) else f"{value:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| Λ | router | coverage predicted / replayed (± SE) | with replayed stats | within max(0.02, 3 SE) | "
        "mean TTFT [s] predicted / replayed (ratio) | with replayed stats | over the replay's horizon (14.17) | planner: stable | "
        "overloaded nodes predicted / replayed | replay stationary |"
    )
    lines = [head, "|" + "---|" * 11]
    for r in rows:
        ttft = r["mean_ttft_predicted"]
        ratio = r["mean_ttft_replayed"] / ttft if ttft and np.isfinite(ttft) else float("nan")
        lines.append(
            f"| {r['load']:g} Λ₀ | {r['router']} | {r['coverage_predicted']:.3f} / {r['coverage_replayed']:.3f} ± {r['coverage_se']:.3f} | "
            f"{r['coverage_predicted_replayed_stats']:.3f} | {'yes' if r['coverage_ok'] else 'no'} / "
            f"{'yes' if r['coverage_ok_replayed_stats'] else 'no'} | {ttft:.2f} / {r['mean_ttft_replayed']:.2f} ({ratio:.2f}) | "
            f"{_num(r['mean_ttft_predicted_replayed_stats'])} | {_num(r['mean_ttft_predicted_horizon'])} | "
            f"{'yes' if r['stable_planned'] else 'no'} | {r['overloaded_node_share_predicted']:.3f} / "
            f"{r['overloaded_node_share_replayed']:.3f} | {r['stationary_replications']}/{r['replications']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replications", type=int, default=3)
    parser.add_argument("--nodes", type=float, default=50.0)
    parser.add_argument("--requests", type=int, default=None)
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--length-bins", type=int, default=DEFAULT_LENGTH_BINS, help="length sub-types per type (profiles --length-bins)")
    parser.add_argument("--trace", default=str(MOONCAKE_TRACE), help="a Mooncake-format trace (default: the shipped one)")
    parser.add_argument(
        "--recent",
        default="auto",
        help="build the instance from the last F of the training half only; auto (default, as profiles --split): "
        "F chosen on the training half by docs/model.md (17.24)",
    )
    parser.add_argument(
        "--bin-edges-at-target",
        action=argparse.BooleanOptionalAction,
        default=DEFAULT_BIN_EDGES_AT_TARGET,
        help="split the bins at the target's threshold lengths (profiles --bin-edges-at-target, docs/model.md (2.10))",
    )
    args = parser.parse_args(argv)
    rows = cases(
        args.requests,
        args.nodes,
        args.replications,
        args.budget,
        bins=args.length_bins,
        trace=args.trace,
        recent=args.recent if args.recent == "auto" else float(args.recent),
        edges_at_target=args.bin_edges_at_target,
    )
    print(f"recent window F = {rows[0]['recent']:g}" + (" (auto, docs/model.md (17.24))" if args.recent == "auto" else ""))
    print(table(rows))


if __name__ == "__main__":
    main()
