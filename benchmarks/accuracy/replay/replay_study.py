"""From a real trace to a plan the trace confirms: replayed vs predicted, generalisation, ablation, epochs.

Run ``python -m edgeprefix.benchmarks.accuracy.replay.replay_study [--quick] [--replications R] [--nodes N] [--parts ...] [--out DIR]``.
Every instance is built from the *first half* of a trace with the defaults of ``edgeprefix
profiles`` (Llama-2-70B on 4 × A100, embedded Splitwise prefill fit, 25 % memory cap, k_min = 2,
Λ at 60 % load of an all-fallback network) but one length per request type (``--length-bins 1``) and the *second half* is replayed
(:mod:`edgeprefix.placement.simulation.replay`, docs/model.md §17).  Parts:

- ``loads``: the Mooncake conversation trace at ``Λ`` and ``Λ / 2``, both routers, the mix the
  planner picks (grid ``1/K``) — predicted vs replayed coverage, mean TTFT, hit depth, offload;
- ``generalisation``: in-sample (first half) vs out-of-sample (second half) replay for the
  Mooncake trace, its time-shifted halves (train on the second, replay the first), a
  stationary synthetic trace and a drifting one;
- ``ablation``: one trace feature at a time replaced by the model's assumption, and the
  arrival burstiness of the trace and of one node;
- ``epochs``: ``edgeprefix epochs`` windows of the replayed half, the migration plan vs the
  best static mix, both replayed;
- ``perf``: wall time and peak memory of replaying 10⁵ requests (a child process).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.accuracy.replay.epoch_replay import epoch_replay
from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE
from edgeprefix.formulations.migration import Epoch, MigrationProblem
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.jsonable import json_ready
from edgeprefix.placement.model.cell import QUEUE_MODELS
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Gpu, Instance
from edgeprefix.placement.model.router import PREDICTION_ROUTERS
from edgeprefix.placement.pipeline.calibration import DEFAULT_DECODE_PER_TOKEN, DEFAULT_PREFILL, LLAMA2_70B, Deployment
from edgeprefix.placement.pipeline.epochs import cut_epochs
from edgeprefix.placement.pipeline.forest import build_forest
from edgeprefix.placement.pipeline.profile_generation import generate_profiles
from edgeprefix.placement.pipeline.trace_instance import instance_from_profiles
from edgeprefix.placement.pipeline.trace_workload import (
    TraceWorkload,
    block_catalogue,
    decode_per_token,
    split_index,
    trace_workload,
)
from edgeprefix.placement.pipeline.traces import TraceRecord, read_trace, synthetic_records
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.replay import ReplaySpec
from edgeprefix.placement.simulation.replay_analysis import (
    ablation,
    burstiness,
    generalisation,
    node_dispersion,
    replay_replicated,
)
from edgeprefix.solvers.api import solve

PARTS = ("loads", "generalisation", "ablation", "epochs", "perf")
CAP_SHARE = 0.25  # edgeprefix profiles --memory-cap 25%


# ------------------------------------------------------------------------------------------
# Traces and instances
# ------------------------------------------------------------------------------------------
def trace_instance(records: Sequence[TraceRecord], name: str) -> Instance:
    """The instance ``edgeprefix profiles --length-bins 1`` builds from ``records`` (its other defaults; one
    length per request type, as before length sub-types, docs/model.md §2.3)."""
    gpu = Gpu(**Deployment(gpu_bytes=320e9, model=LLAMA2_70B, sequence_tokens=16384.0).normalised())
    profile_set = generate_profiles(
        build_forest(records),
        DEFAULT_PREFILL,
        kappa=gpu.kv_per_token,
        gpu_memory=gpu.memory,
        cap=CAP_SHARE * gpu.memory,
        decode_per_token=DEFAULT_DECODE_PER_TOKEN,
    )
    return instance_from_profiles(profile_set, DEFAULT_PREFILL, gpu, name=name)


def phased_records(
    n: int, *, phases: int = 4, n_families: int = 30, seed: int = 0, rate: float = 4.0, rates: Sequence[float] = (1.0, 1.5, 0.6, 1.2)
) -> Iterator[TraceRecord]:
    """A drifting synthetic trace: shared system prompt → family prefix → private tail (as
    :func:`~edgeprefix.placement.pipeline.traces.synthetic_records`), in ``phases`` equal runs of
    requests; each phase reshuffles which families are popular (Zipf 1.1) and scales the
    arrival rate by ``rates[k]``."""
    rng = np.random.default_rng(seed)
    size = 512
    fam_len = rng.integers(1, 9, size=n_families)
    fam_start = 2 + np.concatenate(([0], np.cumsum(fam_len)[:-1]))
    next_id = int(2 + fam_len.sum())
    zipf = 1.0 / np.arange(1, n_families + 1) ** 1.1
    t = 0.0
    per = -(-n // phases)
    for i in range(n):
        k = i // per
        if i % per == 0:
            weights = zipf[np.argsort(rng.permutation(n_families))] if k else zipf
            weights = weights / weights.sum()
        f = int(rng.choice(n_families, p=weights))
        tail = int(rng.integers(1, 13))
        blocks = (0, 1) + tuple(range(int(fam_start[f]), int(fam_start[f] + fam_len[f]))) + tuple(range(next_id, next_id + tail))
        next_id += tail
        t += float(rng.exponential(1.0 / (rate * rates[k % len(rates)])))
        yield TraceRecord(i + 1, t, (len(blocks) - 1) * size + int(rng.integers(1, size + 1)), int(rng.poisson(300.0)), blocks)


def _halves(records: list[TraceRecord], name: str, *, reverse: bool = False) -> tuple[Instance, TraceWorkload, TraceWorkload, float]:
    """Instance from one half, the workloads of both halves (train, test) and the decode rate."""
    cut = split_index(len(records), 0.5)
    first, second = records[:cut], records[cut:]
    train, test = (second, first) if reverse else (first, second)
    instance = trace_instance(train, name)
    catalogue = block_catalogue(instance)
    train_w, test_w = trace_workload(train, catalogue, desc=f"{name} train"), trace_workload(test, catalogue, desc=f"{name} test")
    return instance, train_w, test_w, decode_per_token(instance, float(train_w.output.mean()))


def best_mix(instance: Instance, resolution: int, policy: str = "load_aware") -> np.ndarray:
    """The planner's mix: the ``1/K`` grid optimum of docs/model.md §10.1."""
    return np.asarray(solve(placement_problem(instance, policy=policy), "grid", budget=None, resolution=resolution).x)


# ------------------------------------------------------------------------------------------
# Parts
# ------------------------------------------------------------------------------------------
def part_loads(mooncake, args) -> list[dict[str, Any]]:
    instance, _, test, decode = mooncake
    lam0 = instance.network.request_intensity
    rows = []
    for lam in (0.5 * lam0, lam0):
        inst = instance.with_network(request_intensity=lam)
        mix = best_mix(inst, args.resolution)
        for router in PREDICTION_ROUTERS:
            spec = ReplaySpec(decode_per_token=decode, router=router, nodes=args.nodes)
            s = replay_replicated(inst, test, mix, spec, replications=args.replications, seed=args.seed).summary()
            both = {f"coverage_{m}": evaluate(inst, mix, spec.policy, queue_model=m).coverage() for m in QUEUE_MODELS}
            rows.append(
                {
                    "intensity": lam,
                    "load": lam / lam0,
                    "router": router,
                    "mix": dict(zip(inst.profile_ids, mix.tolist())),
                    "queue_model": spec.prediction_model,
                    **both,
                    **{
                        k: s[k]
                        for k in (
                            "coverage_predicted",
                            "coverage_replayed",
                            "coverage_se",
                            "mean_ttft_predicted",
                            "mean_ttft_replayed",
                            "hit_depth_predicted",
                            "hit_depth_replayed",
                            "offload_ratio_predicted",
                            "offload_ratio_replayed",
                            "requests",
                        )
                    },
                }
            )
    return rows


def part_generalisation(traces, args) -> list[dict[str, Any]]:
    rows = []
    for name, (instance, train, test, decode) in traces.items():
        spec = ReplaySpec(decode_per_token=decode, nodes=args.nodes)
        gen = generalisation(instance, train, test, None, spec, replications=args.replications, seed=args.seed)
        rows.append({"trace": name, "types": len(instance.requests), **gen})
    return rows


def part_ablation(mooncake, args) -> dict[str, Any]:
    instance, _, test, decode = mooncake
    lam0 = instance.network.request_intensity
    out: dict[str, Any] = {"burstiness_trace": burstiness(test.time), "loads": []}
    for lam in (0.5 * lam0, lam0):
        inst = instance.with_network(request_intensity=lam)
        mix = best_mix(inst, args.resolution)
        spec = ReplaySpec(decode_per_token=decode, nodes=args.nodes)
        rows = ablation(inst, test, mix, spec, replications=args.replications, seed=args.seed)
        one = replay_replicated(inst, test, mix, spec, seed=args.seed).results[0]
        out["loads"].append(
            {
                "intensity": lam,
                "load": lam / lam0,
                "rows": rows,
                "poisson_des": poisson_des(inst, mix, test.requests, args),
                "node_dispersion": {m: node_dispersion(one, m) for m in (5.0, 20.0)},
            }
        )
    g = instance.prefill
    out["prefill_jensen"] = {
        "mean_g_of_requests": float(np.mean(g(test.length))),
        "type_weighted_g_of_means": float(instance.probabilities @ instance.full_prefill),
        "median_input": float(np.median(test.length)),
        "mean_input": float(test.length.mean()),
    }
    return out


def poisson_des(instance: Instance, mix: np.ndarray, requests: int, args) -> dict[str, float]:
    """What a user would run instead of a replay: the network simulator of (11.7) with Poisson
    arrivals and types drawn from ``p_q`` (same router, network size and request count)."""
    ev = evaluate(instance, mix, "load_aware")
    duration = requests / (instance.network.request_intensity * args.nodes / instance.network.edge_density)
    spec = SimulationSpec(horizon=0.9 * duration, warmup=0.1 * duration, layout=LayoutSpec(mean_nodes=args.nodes, counts="exact"))
    seeds = np.random.SeedSequence(args.seed).spawn(args.replications)
    runs = [simulate_network(instance, mix, analytical_router(ev), spec, seed=np.random.default_rng(q)) for q in seeds]
    covs = np.array([r.coverage(ev.target) for r in runs])
    return {
        "coverage": float(covs.mean()),
        "coverage_se": float(covs.std(ddof=1) / np.sqrt(covs.size)) if covs.size > 1 else float("nan"),
        "mean_ttft": float(np.mean([np.mean(r.ttft[np.isfinite(r.ttft)]) for r in runs])),
    }


def _problem(instance: Instance, cut, mix: np.ndarray, change_budget: float) -> MigrationProblem:
    epochs = tuple(
        Epoch(
            name=e.name,
            probabilities=tuple(e.mix_of_types.items()),
            request_intensity=e.intensity,
            weight=e.weight,
            start=e.start,
            end=e.end,
        )
        for e in cut.epochs
    )
    return MigrationProblem(instance, epochs, mix, change_budget=change_budget)


def part_epochs(traces, args) -> list[dict[str, Any]]:
    rows = []
    for name, window in (("mooncake", 300.0), ("synthetic drifting", None)):
        instance, _, test, decode = traces[name]
        if window is None:  # two windows per phase of the replayed half
            window = float(test.time[-1] - test.time[0]) / 4
        cut = cut_epochs(test, instance, window)
        start = best_mix(instance, args.resolution)
        problem = _problem(instance, cut, start, args.change_budget)
        spec = ReplaySpec(decode_per_token=decode, nodes=args.nodes)
        plan = epoch_replay(problem, test, spec, method="grid", resolution=args.resolution, replications=args.replications, seed=args.seed)
        rows.append({"trace": name, "window": window, "current_mix": dict(zip(instance.profile_ids, start.tolist())), **plan.summary()})
    return rows


def perf_child(n: int, nodes: float) -> dict[str, Any]:
    """Replay ``n`` synthetic requests (instance from the same trace) with both routers; time and peak RSS."""
    start = time.perf_counter()
    instance = trace_instance(list(synthetic_records(n, seed=0)), "synthetic")
    built = time.perf_counter()
    workload = trace_workload(synthetic_records(n, seed=0), block_catalogue(instance), total=n)
    read = time.perf_counter()
    out: dict[str, Any] = {"requests": n, "instance_seconds": built - start, "workload_seconds": read - built}
    decode = decode_per_token(instance, float(workload.output.mean()))
    for router in PREDICTION_ROUTERS:
        t0 = time.perf_counter()
        r = replay_replicated(instance, workload, None, ReplaySpec(decode_per_token=decode, router=router, nodes=nodes)).results[0]
        out[f"{router}_seconds"] = time.perf_counter() - t0
        out[f"{router}_coverage"] = r.coverage()
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def part_perf(args) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "edgeprefix.benchmarks.accuracy.replay.replay_study",
        "--perf-child",
        str(args.perf_requests),
        "--nodes",
        str(max(args.nodes, 200.0)),
    ]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


# ------------------------------------------------------------------------------------------
# Tables
# ------------------------------------------------------------------------------------------
def _f(x: float, d: int = 3) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:.{d}f}"


def render(report: dict[str, Any]) -> str:
    lines = []
    if "loads" in report:
        lines += [
            "## Mooncake conversation trace: train on the first half, replay the second",
            "| Λ / Λ₀ | router | coverage predicted (its model) | meanfield | cell | replayed (± se) | mean TTFT predicted | replayed | hit depth predicted | replayed | offload predicted | replayed |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in report["loads"]:
            lines.append(
                f"| {r['load']:.1f} | {r['router']} | {_f(r['coverage_predicted'])} ({r['queue_model']}) | "
                f"{_f(r['coverage_meanfield'])} | {_f(r['coverage_cell'])} | {_f(r['coverage_replayed'])} "
                f"(± {_f(r['coverage_se'])}) | {_f(r['mean_ttft_predicted'], 2)} | {_f(r['mean_ttft_replayed'], 2)} | "
                f"{_f(r['hit_depth_predicted'], 0)} | {_f(r['hit_depth_replayed'], 0)} | "
                f"{_f(r['offload_ratio_predicted'])} | {_f(r['offload_ratio_replayed'])} |"
            )
    if "generalisation" in report:
        lines += [
            "",
            "## Generalisation (tier router, Λ₀, the instance's default mix)",
            "| trace | types | hit depth predicted | train | test | gap | coverage predicted | train | test | gap | type-mix drift (TV) | predicted with test mix: coverage / hit depth |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in report["generalisation"]:
            p = r["prediction_test_mix"]
            lines.append(
                f"| {r['trace']} | {r['types']} | {_f(r['hit_depth_predicted'], 0)} | {_f(r['hit_depth_train'], 0)} | "
                f"{_f(r['hit_depth_test'], 0)} | {_f(r['gap_hit_depth'], 0)} | {_f(r['coverage_predicted'])} | "
                f"{_f(r['coverage_train'])} | {_f(r['coverage_test'])} | {_f(r['gap_coverage'])} | "
                f"{_f(r['type_mix_drift'])} | {_f(p['coverage'])} / {_f(p['hit_depth'], 0)} |"
            )
    if "ablation" in report:
        a = report["ablation"]
        lines += ["", "## Ablation (Mooncake, second half, tier router, planner's mix)"]
        for load in a["loads"]:
            lines += [
                "",
                f"Λ / Λ₀ = {load['load']:.1f}; node-level index of dispersion (5 / 20 arrivals per window): "
                f"{_f(load['node_dispersion'][5.0], 2)} / {_f(load['node_dispersion'][20.0], 2)}",
                "| replay | arrivals | hits | lengths | service | coverage (± se) | mean TTFT | mean wait | hit depth |",
                "|---|---|---|---|---|---:|---:|---:|---:|",
            ]
            for r in load["rows"]:
                lines.append(
                    f"| {r['name']} | {r['arrivals']} | {r['hits']} | {r['lengths']} | {r['service']} | "
                    f"{_f(r['coverage_replayed'])} (± {_f(r['coverage_se'])}) | {_f(r['mean_ttft_replayed'], 2)} | "
                    f"{_f(r['mean_wait_replayed'], 2)} | {_f(r['hit_depth_replayed'], 0)} |"
                )
            r0, des = load["rows"][0], load["poisson_des"]
            lines.append(
                f"| Poisson network simulator (11.7) | Poisson | type | type | exponential | {_f(des['coverage'])} "
                f"(± {_f(des['coverage_se'])}) | {_f(des['mean_ttft'], 2)} | | |"
            )
            lines.append(
                f"| prediction | Poisson | type | type | exponential | {_f(r0['coverage_predicted'])} | "
                f"{_f(r0['mean_ttft_predicted'], 2)} | | {_f(r0['hit_depth_predicted'], 0)} |"
            )
        lines += [
            "",
            "trace burstiness (index of dispersion vs Poisson 1 ± sd): "
            + ", ".join(
                f"{b['window_requests']:.0f} req/window: {_f(b['index_of_dispersion'], 2)} (± {_f(b['poisson_sd'], 2)})"
                for b in a["burstiness_trace"]
            ),
        ]
        j = a["prefill_jensen"]
        lines.append(
            f"prefill: mean g(L_i) over requests {_f(j['mean_g_of_requests'], 2)} s vs Σ p_q g(L_q) "
            f"{_f(j['type_weighted_g_of_means'], 2)} s; input median {j['median_input']:.0f} vs mean {j['mean_input']:.0f} tokens"
        )
    if "epochs" in report:
        for r in report["epochs"]:
            lines += [
                "",
                f"## Epochs: {r['trace']} (windows of {r['window']:.0f} s of the replayed half)",
                "static mix: " + ", ".join(f"{k} {v:.2f}" for k, v in r["static_mix"].items() if v > 0),
                "| epoch | requests | Λ^e | migrated mix | coverage migrated | static | gain | predicted gain | moved share | moved bytes |",
                "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|",
            ]
            for e in r["epochs"]:
                mix = ", ".join(f"{k} {v:.2f}" for k, v in e["mix"].items() if v > 0)
                lines.append(
                    f"| {e['name']} | {e['requests']} | {_f(e['intensity'])} | {mix} | {_f(e['coverage_migrated'])} | "
                    f"{_f(e['coverage_static'])} | {_f(e['gain'])} | {_f(e['predicted_gain'])} | "
                    f"{_f(e['moved_share'])} | {_f(e['moved_bytes'])} |"
                )
            lines.append(
                f"| all | | | | {_f(r['coverage_migrated'])} | {_f(r['coverage_static'])} | {_f(r['gain'])} | "
                f"{_f(r['predicted_migrated'] - r['predicted_static'])} | | {_f(r['moved_bytes'])} |"
            )
    if "perf" in report:
        p = report["perf"]
        lines += [
            "",
            f"## Replay of {p['requests']} requests: instance {p['instance_seconds']:.1f} s, trace read "
            f"{p['workload_seconds']:.1f} s, tier router {p['tier_seconds']:.1f} s, online router "
            f"{p['online_seconds']:.1f} s, peak RSS {p['peak_rss_mb']:.0f} MB",
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgeprefix.benchmarks.accuracy.replay.replay_study", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated parts (default: all of {','.join(PARTS)})")
    parser.add_argument("--replications", type=int, default=5, help="network draws per replay (default: 5)")
    parser.add_argument("--nodes", type=float, default=50.0, help="nodes of the replayed network (default: 50)")
    parser.add_argument("--resolution", type=int, default=10, help="grid step 1/K of the planner (default: 10)")
    parser.add_argument("--change-budget", type=float, default=0.3, help="m_max of the epoch plan (default: 0.3)")
    parser.add_argument("--perf-requests", type=int, default=100_000, help="requests of the perf part (default: 1e5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="smoke run: 2000-request traces, 1 replication, 1/4 grid")
    parser.add_argument("--out", default=None, metavar="DIR", help="write replay_study.json and replay_study.md")
    parser.add_argument("--perf-child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.perf_child is not None:
        print(json.dumps(perf_child(args.perf_child, args.nodes)))
        return 0
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--parts: unknown {unknown[0]!r} (valid: {list(PARTS)})")
    if args.quick:
        args = replace_args(args, replications=1, resolution=4, perf_requests=5_000)
    limit = 2_000 if args.quick else None
    mooncake_records = list(read_trace(MOONCAKE_TRACE))[:limit]
    n_syn = len(mooncake_records)
    report: dict[str, Any] = {"replications": args.replications, "nodes": args.nodes, "resolution": args.resolution, "seed": args.seed}
    start = time.perf_counter()
    with progress_bar(total=len(parts), desc="replay study", unit="part") as bar:
        mooncake = _halves(mooncake_records, "mooncake")
        traces: dict[str, Any] = {"mooncake": mooncake}
        if {"generalisation", "epochs"} & set(parts):
            traces["mooncake, halves swapped"] = _halves(mooncake_records, "mooncake_swapped", reverse=True)
            traces["synthetic stationary"] = _halves(list(synthetic_records(n_syn, seed=args.seed)), "synthetic")
            traces["synthetic drifting"] = _halves(list(phased_records(n_syn, seed=args.seed)), "drifting")
        for part in parts:
            if part == "loads":
                report["loads"] = part_loads(mooncake, args)
            elif part == "generalisation":
                report["generalisation"] = part_generalisation(traces, args)
            elif part == "ablation":
                report["ablation"] = part_ablation(mooncake, args)
            elif part == "epochs":
                report["epochs"] = part_epochs(traces, args)
            elif part == "perf":
                report["perf"] = part_perf(args)
            bar.update(1)
    report["seconds"] = time.perf_counter() - start
    text = render(report)
    print(text)
    if args.out is not None:
        out = Path(args.out)
        atomic_write_text(out / "replay_study.json", json.dumps(json_ready(report), indent=2, allow_nan=False) + "\n")
        atomic_write_text(out / "replay_study.md", text + "\n")
    return 0


def replace_args(args: argparse.Namespace, **changes: Any) -> argparse.Namespace:
    values = vars(args).copy()
    values.update(changes)
    return argparse.Namespace(**values)


if __name__ == "__main__":
    sys.exit(main())
