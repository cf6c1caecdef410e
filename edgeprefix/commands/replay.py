"""``edgeprefix replay``: replay a real trace on a sampled network and compare with the prediction.

Each request of the trace (after the ``--split`` training part) arrives at its own timestamp,
rescaled so the mean rate is ``Λ`` per unit area, at a uniform location of a torus of ``N``
nodes; it is routed by Theorem 1's tier rule (``--router tier``) or the online router
(``--router online``); its hit depth is the longest prefix of its own blocks held by the chosen
node; its prefill ``g(L − h)`` uses its real input length, its decode its real output length at
the instance's decode rate.  Replayed coverage, mean TTFT, hit depth and offload ratio are
printed beside the instance's prediction for the same mix (docs/model.md §17).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Set as AbstractSet
from typing import Any

from edgeprefix.commands._common import add_mix_arguments
from edgeprefix.placement.model.router import PREDICTION_ROUTERS

# edgeprefix.placement.simulation.engine.names (kept light: no numpy at start-up; tests/test_engine_cli.py compares)
PRODUCTION_ROUTERS = ("sglang", "dynamo", "llm-d", "vllm-prefix", "vllm-kv")
ENGINES = ("slots", "batching")
CACHES = ("planned", "lru", "planned+lru")
ROUTERS = (*PREDICTION_ROUTERS, *PRODUCTION_ROUTERS)  # edgeprefix.placement.simulation.replay.ROUTERS
POLICIES = ("load_aware", "prefix", "nearest")  # edgeprefix.placement.model.policies.POLICIES (light copy; a test compares)
WARM_STARTS = ("auto", "train", "resample", "none")  # replay.WARM_STARTS and auto


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "replay",
        help="replay a trace on a sampled network: replayed vs predicted coverage",
        description="Trace-driven network replay of an instance built from the trace (docs/model.md §17): replayed TTFT "
        "coverage, mean TTFT, hit depth and offload ratio beside the analytical prediction; with --split, the instance's "
        "training part is replayed too (generalisation gap); --ablation replaces one trace feature at a time by the "
        "model's assumption; --epochs replays the windows of an epochs file under the migration plan vs the best static mix. "
        "Exit code 2 on bad input.",
    )
    parser.add_argument("trace", metavar="TRACE", help="JSONL trace (.gz allowed), in time order")
    parser.add_argument("--instance", required=True, metavar="INST", help="instance built from the trace (edgeprefix profiles)")
    add_mix_arguments(parser, "profile mix π as id=share,... (default: the instance's mix)")
    parser.add_argument("--policy", choices=POLICIES, default="load_aware", help="routing policy (default: load_aware)")
    parser.add_argument(
        "--router",
        choices=ROUTERS,
        default=None,
        help="tier: Theorem 1's rule with the instance's biases; online: per-node telemetry; sglang, dynamo, "
        "llm-d, vllm-prefix, vllm-kv: production routers on the nodes' live caches, radio ignored "
        "(docs/model.md §17) (default: the instance's network.router, else tier); the prediction is the "
        "router's own (docs/model.md §14)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="slots",
        help="slots: c_s FCFS slots per node; batching: the instance's [engine], a continuous-batching engine "
        "(docs/model.md §17) (default: slots)",
    )
    parser.add_argument(
        "--cache",
        choices=CACHES,
        default="planned",
        help="planned: the profile pinned; lru: a dynamic LRU prefix cache in the same memory; planned+lru: "
        "the profile pinned and an LRU over the free KV blocks (default: planned)",
    )
    parser.add_argument(
        "--split",
        type=float,
        default=0.0,
        metavar="F",
        help="the first F of the requests trained the instance: replay the rest (default: 0, replay all)",
    )
    parser.add_argument(
        "--intensity", type=float, default=None, metavar="Λ", help="requests per unit area per second (default: the instance's)"
    )
    parser.add_argument("--nodes", type=float, default=50.0, metavar="N", help="nodes of the sampled torus (default: 50)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default: 0)")
    parser.add_argument("--replications", type=int, default=1, metavar="R", help="independent network draws, averaged (default: 1)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=0.1,
        metavar="F",
        help="with --warm-start none: share of the replayed requests that only fill the queues (default: 0.1)",
    )
    parser.add_argument(
        "--warm-start",
        choices=WARM_STARTS,
        default="auto",
        help="fill the queues before measuring: train (replay the training part first), resample (a "
        "bootstrap of the replayed part first), none (start empty, discard --warmup); auto: train with "
        "--split, else resample (docs/model.md §17.7)",
    )
    parser.add_argument(
        "--candidates", type=int, default=2, metavar="K", help="nearest nodes per profile the online router compares (default: 2)"
    )
    parser.add_argument("--target", type=float, default=None, metavar="SECONDS", help="TTFT target τ (default: the instance's)")
    parser.add_argument(
        "--decode-per-token",
        type=float,
        default=None,
        metavar="SECONDS",
        help="decode seconds per output token (default: the instance's, Σ p_q D_q over the training part's mean output)",
    )
    trace = parser.add_argument_group("trace format")
    trace.add_argument("--format", default="mooncake", help="trace format: mooncake (default) or tokens")
    trace.add_argument("--block-size", type=int, default=512, help="tokens per block (default: 512)")
    trace.add_argument("--skip-invalid", action="store_true", help="skip malformed lines and count them")
    study = parser.add_argument_group("analysis")
    study.add_argument("--ablation", action="store_true", help="also replay with Poisson arrivals, per-type hits, per-type lengths")
    study.add_argument(
        "--epochs", default=None, metavar="EPOCHS_FILE", help="epochs file with windows (edgeprefix epochs): plan and replay"
    )
    study.add_argument("--method", default="grid", help="search method of the epoch plan and the static mix (default: grid)")
    study.add_argument("--budget", type=int, default=None, metavar="N", help="evaluations per search (needed unless --method grid)")
    study.add_argument("--resolution", type=int, default=None, metavar="K", help="grid step 1/K (with --method grid)")
    parser.add_argument(
        "--queue-model",
        default=None,
        metavar="MODEL",
        help="queue model of the prediction: meanfield or cell (default: the router's own — cell for "
        "the tier rule, meanfield for the online router; docs/model.md §14). Unlike the planning "
        "commands, replay allows a queue model that is not the router's: the replayed router is "
        "compared with the other router's prediction",
    )
    from edgeprefix.commands._common import add_queue_law_argument

    add_queue_law_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--out", default=None, metavar="DIR", help="write replay.json and requests.csv (first replication)")
    from edgeprefix.commands._telemetry import add_telemetry_options

    add_telemetry_options(parser, prediction=False)  # replay simulates the telemetry; it predicts no online router
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from edgeprefix.commands._common import mix_from_args, print_json
    from edgeprefix.placement.model.instance import load_instance
    from edgeprefix.placement.model.policies import check_policy
    from edgeprefix.placement.pipeline.trace_workload import decode_per_token, load_trace_workload, split_index
    from edgeprefix.placement.pipeline.traces import SkipLog
    from edgeprefix.placement.simulation.replay import ReplaySpec
    from edgeprefix.placement.simulation.replay_analysis import ablation, burstiness, generalisation, replay_replicated

    check_policy(args.policy)
    log = SkipLog()
    instance, workload = load_trace_workload(
        args.trace, load_instance(args.instance), fmt=args.format, block_size=args.block_size, skip_invalid=args.skip_invalid, log=log
    )
    from edgeprefix.commands._common import queue_law_from_args

    queue_law = queue_law_from_args(args, instance)
    if queue_law != "slots" and args.epochs is not None:
        raise ValueError("--queue-law engine: the epochs' plans are made on the slot law; drop --epochs or --queue-law")
    cut = split_index(workload.requests, args.split)
    train, test = workload.part(slice(0, cut)), workload.part(slice(cut, None))
    decode = args.decode_per_token
    if decode is None:
        decode = decode_per_token(instance, float((train if cut else workload).output.mean()))
    from edgeprefix.commands._telemetry import telemetry_from_args

    router = args.router or instance.network.router or "tier"
    warm_start = args.warm_start if args.warm_start != "auto" else ("train" if cut >= 2 else "resample")
    engine_room = args.engine != "slots" or args.cache != "planned" or router in PRODUCTION_ROUTERS
    if args.warm_start == "auto" and (args.epochs is not None or engine_room):
        warm_start = "none"  # the epochs' windows start the replay; the engine room replays from empty nodes
    spec = ReplaySpec(
        decode_per_token=decode,
        router=router,
        policy=args.policy,
        nodes=args.nodes,
        warmup=args.warmup,
        candidates=args.candidates,
        target=args.target,
        queue_model=args.queue_model,
        engine=args.engine,
        cache=args.cache,
        telemetry=telemetry_from_args(args),
        warm_start=warm_start,
    )
    mix = mix_from_args(args)
    common: dict[str, Any] = {"replications": args.replications, "seed": args.seed}
    warm: dict[str, Any] = {"warm": train} if cut else {}
    engine = _engine_inputs(args, instance, spec, cut)
    if engine is not None:
        common["engine"] = engine
    if args.epochs is not None:
        report, first = _epochs(args, instance, test, spec, common)
    else:
        replayed = replay_replicated(instance, test, mix, spec, intensity=args.intensity, **common, **warm)
        report, first = replayed.summary(), replayed.results[0]
        if cut:
            report["generalisation"] = generalisation(instance, train, test, mix, spec, intensity=args.intensity, **common)
        if args.ablation:
            report["ablation"] = ablation(instance, test, mix, spec, intensity=args.intensity, **common, **warm)
    if args.epochs is None:
        report["mix"] = dict(zip(first.prediction.instance.profile_ids, first.prediction.mix.tolist()))
        other = _other_router(first.prediction, report, args.queue_model)
        if other is not None:
            report["other_router"] = other
        if queue_law == "engine":  # the engine law's prediction of the replayed mix (docs/model.md §17.10)
            from edgeprefix.placement.model.evaluation import evaluate

            pred = first.prediction
            law = evaluate(pred.instance, pred.mix, pred.policy, target=pred.target, queue_law="engine")
            report["engine_law"] = {
                "coverage": float(law.coverage()),
                "mean_ttft": float(law.mean_ttft) if float(law.mean_ttft) < float("inf") else None,
            }
    report["queue_law"] = queue_law
    report.update(
        {
            "split": args.split,
            "trace": args.trace,
            "instance": args.instance,
            "requests_trace": workload.requests,
            "requests_train": train.requests,
            "unmatched": float((~test.matched).mean()) if test.requests else 0.0,
            "skipped_lines": log.skipped,
            "burstiness": burstiness(test.time),
        }
    )
    if args.out is not None:
        _write(Path(args.out), report, first)
    if args.json:
        print_json(report)
    else:
        print(render(report, overridden={flag for flag in ("intensity", "target") if getattr(args, flag) is not None}))
    for warning in report.get("warnings", []):
        print(f"edgeprefix replay: warning: {warning}", file=sys.stderr)
    from edgeprefix.commands._common import print_router_note

    print_router_note(report.get("other_router"))
    return 0


def _other_router(prediction: Any, report: dict[str, Any], queue_model: str | None) -> dict[str, Any] | None:
    """The other router's prediction of the replayed mix (a note when it differs by more than 0.05)."""
    from edgeprefix.commands._common import router_note
    from edgeprefix.placement.model.evaluation import evaluate
    from edgeprefix.placement.model.router import QUEUE_MODEL_OF_ROUTER, ROUTER_OF_QUEUE_MODEL, other_router

    if queue_model is not None:  # an explicit prediction model: compare with the other model's router
        router = ROUTER_OF_QUEUE_MODEL[report["queue_model"]]
    else:
        router = report["router"]
    if router not in QUEUE_MODEL_OF_ROUTER:  # a production router: no prediction of its own to compare
        return None
    other = evaluate(
        prediction.instance,
        prediction.mix,
        prediction.policy,
        target=prediction.target,
        queue_model=QUEUE_MODEL_OF_ROUTER[other_router(router)],
    )
    return router_note(router, float(report["coverage_predicted"]), float(other.coverage()))


def _engine_inputs(args: argparse.Namespace, instance: Any, spec: Any, cut: int) -> dict[str, Any] | None:
    """Block ids and the fitted step time when the replay runs in the engine room (docs/model.md §17)."""
    from edgeprefix.placement.simulation.engine.blocks import read_block_trace
    from edgeprefix.placement.simulation.engine.cluster import needs_engine
    from edgeprefix.placement.simulation.engine.step_time import step_time_from_section

    if not needs_engine(spec):
        return None
    for flag, used in (("--epochs", args.epochs is not None), ("--ablation", args.ablation), ("--split", cut > 0)):
        if used:
            raise ValueError(
                f"{flag}: not available with --engine {spec.engine} --cache {spec.cache} --router {spec.router} "
                "(the engine room replays one part of one trace)"
            )
    out: dict[str, Any] = {
        "blocks": read_block_trace(args.trace, instance, fmt=args.format, block_size=args.block_size, skip_invalid=args.skip_invalid)
    }
    if spec.engine == "batching":
        if instance.engine is None:
            raise ValueError(
                "--engine batching: the instance has no [engine] section with timings "
                "(add [engine.timings] model, hardware, tensor_parallel; docs/instances.md)"
            )
        from edgeprefix.benchmarks.datasets import SPLITWISE_TIMINGS

        out["step"] = step_time_from_section(instance.engine, SPLITWISE_TIMINGS)
        out["blocks"].check_engine_block(instance.engine.block_size)
    return out


def _epochs(args: argparse.Namespace, instance: Any, test: Any, spec: Any, common: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    from edgeprefix.benchmarks.accuracy.replay.epoch_replay import epoch_replay
    from edgeprefix.formulations.migration import load_migration

    if args.intensity is not None:
        raise ValueError("--intensity does not apply with --epochs: the epochs file sets each epoch's Λ^e")
    if args.mix is not None or args.mix_from is not None:
        raise ValueError("--mix/--mix-from do not apply with --epochs: the plan sets the mixes (current_mix in the epochs file)")
    problem = load_migration(args.epochs, policy=args.policy)
    if problem.instance.request_ids != instance.request_ids or problem.instance.profile_ids != instance.profile_ids:
        raise ValueError(f"--epochs: the epochs file's instance does not have the request types and profiles of --instance {args.instance}")
    if args.method != "grid" and args.budget is None:
        raise ValueError(f"--method {args.method} needs --budget N (evaluations per search)")
    if args.resolution is not None and args.method != "grid":
        raise ValueError(f"--resolution applies to --method grid only, got --method {args.method}")
    options = {} if args.resolution is None else {"resolution": args.resolution}
    plan = epoch_replay(problem, test, spec, method=args.method, budget=args.budget, **common, **options)
    report = dict(plan.migrated)
    report["epoch_plan"] = plan.summary()
    return report, plan.migrated_report.results[0]


def _write(folder: Any, report: dict[str, Any], result: Any) -> None:
    import csv
    import io
    import json

    from edgeprefix.commands._common import wrote
    from edgeprefix.placement.atomic import atomic_write_text
    from edgeprefix.placement.jsonable import json_ready

    atomic_write_text(folder / "replay.json", json.dumps(json_ready(report), indent=2, allow_nan=False) + "\n")
    wrote(folder / "replay.json")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    names = ("time", "epoch", "kind", "node", "profile", "distance", "hit", "length", "prefill", "wait", "service", "ttft")
    writer.writerow(names)
    ids = result.prediction.instance.request_ids
    profiles = result.prediction.instance.profile_ids
    for row in zip(*(getattr(result, name).tolist() for name in names)):
        values = dict(zip(names, row))
        values["kind"] = ids[values["kind"]]
        values["profile"] = profiles[values["profile"]] if values["profile"] >= 0 else ""
        writer.writerow([values[name] for name in names])
    atomic_write_text(folder / "requests.csv", buffer.getvalue())
    wrote(folder / "requests.csv")


def _f(value: Any, digits: int = 4) -> str:
    from edgeprefix.commands._common import fmt

    return fmt(value, digits)


def render(r: dict[str, Any], overridden: AbstractSet[str] = frozenset()) -> str:
    lam = f"Λ = {r['intensity']:.4g}" + (" (--intensity)" if "intensity" in overridden else "")
    tau = f"τ = {r['target']:.3f} s" + (" (--target)" if "target" in overridden else "")
    lines = [
        f"trace {r['trace']}: {r['requests_trace']} requests, {r['requests_train']} in the training part (split {r['split']:g}); "
        f"replayed {r['requests']} after warm-up on {r['nodes']} nodes, {r['replications']} replication(s)",
        f"router {r['router']} ({r['policy']}), predicted with queue model {r.get('queue_model', 'meanfield')}, {lam}, {tau}, decode "
        f"{1e3 * r['decode_per_token']:.1f} ms/token, time scale {r['time_scale']:.4g} replay s per trace s",
        *(["mix      " + "  ".join(f"{k}={v:.4f}" for k, v in r["mix"].items())] if r.get("mix") else []),
        "",
        f"{'metric':<18}{'replayed':>11}{'predicted':>11}",
        f"{'coverage':<18}{_f(r['coverage_replayed']):>11}{_f(r['coverage_predicted']):>11}   (replayed ± {_f(r['coverage_se'])} SE)",
        f"{'mean TTFT [s]':<18}{_f(r['mean_ttft_replayed'], 3):>11}{_f(r['mean_ttft_predicted'], 3):>11}",
        f"{'hit depth [tok]':<18}{_f(r['hit_depth_replayed'], 1):>11}{_f(r['hit_depth_predicted'], 1):>11}",
        f"{'offload ratio':<18}{_f(r['offload_ratio_replayed']):>11}{_f(r['offload_ratio_predicted']):>11}",
    ]
    if r.get("engine", "slots") != "slots" or r.get("cache", "planned") != "planned" or r["router"] in PRODUCTION_ROUTERS:
        lines += [
            "",
            f"engine {r['engine']}, cache {r['cache']} (docs/model.md §17.9): block hit rate {_f(r['hit_rate_blocks'])}, "
            f"TTFT p50/p90/p99 {_f(r['ttft_p50'], 2)} / {_f(r['ttft_p90'], 2)} / {_f(r['ttft_p99'], 2)} s, "
            f"preemptions {r['preemptions']:.0f}, node load CV {_f(r['node_load_cv'], 3)}",
        ]
    if "stationary" in r and r.get("prediction_replayed_stats") is not None:
        stats = r["prediction_replayed_stats"]
        lines += [
            f"{'overloaded nodes':<18}{_f(r['overloaded_node_share_replayed'], 3):>11}{_f(r['overloaded_node_share_predicted'], 3):>11}"
            "   (share of nodes with load >= 1)",
            f"prediction with the replayed part's type mix and lengths: coverage {_f(r['coverage_predicted_replayed_stats'])}, "
            f"mean TTFT {_f(stats.get('mean_ttft'), 3)} s, hit depth {_f(stats.get('hit_depth'), 1)}",
            *(
                [
                    f"mean TTFT over this replay's horizon {_f(r['mean_ttft_predicted_horizon'], 3)} s predicted: the steady state plus "
                    f"the overloaded nodes' queues growing by {_f(r['mean_wait_growth_predicted'], 4)} s per s (docs/model.md (14.17))"
                ]
                if r.get("mean_wait_growth_predicted")
                else []
            ),
            f"warm start {r['warm_start']}; measured span {_f(r['measured_service_times'], 1)} mean service times; "
            f"stationary {r['stationary']} (Kendall trend test of the waits over {r['stationarity']['windows']} windows"
            + (f", p = {r['stationarity']['p_value']:.3f})" if r["stationarity"]["p_value"] is not None else ")"),
        ]
    if r["burstiness"]:
        lines.append("")
        lines.append(
            "arrival burstiness (index of dispersion; Poisson: 1 ± sd): "
            + ", ".join(
                f"{b['window_requests']:.0f} req/window {b['index_of_dispersion']:.2f} (± {b['poisson_sd']:.2f})" for b in r["burstiness"]
            )
        )
    gen = r.get("generalisation")
    if gen:
        lines += [
            "",
            f"{'generalisation':<18}{'predicted':>11}{'train':>11}{'test':>11}{'gap':>11}",
            f"{'hit depth [tok]':<18}{gen['hit_depth_predicted']:>11.1f}{gen['hit_depth_train']:>11.1f}"
            f"{gen['hit_depth_test']:>11.1f}{gen['gap_hit_depth']:>11.1f}",
            f"{'coverage':<18}{gen['coverage_predicted']:>11.4f}{gen['coverage_train']:>11.4f}"
            f"{gen['coverage_test']:>11.4f}{gen['gap_coverage']:>11.4f}",
            f"type-mix drift (total variation) {gen['type_mix_drift']:.4f}; prediction with the test part's mix: coverage "
            f"{gen['prediction_test_mix']['coverage']:.4f}, hit depth {gen['prediction_test_mix']['hit_depth']:.1f}",
        ]
    if r.get("ablation"):
        lines += ["", f"{'ablation':<30}{'coverage':>10}{'mean TTFT':>11}{'wait':>9}{'hit depth':>11}"]
        for row in r["ablation"]:
            lines.append(
                f"{row['name']:<30}{_f(row['coverage_replayed']):>10}{_f(row['mean_ttft_replayed'], 3):>11}"
                f"{_f(row['mean_wait_replayed'], 3):>9}{_f(row['hit_depth_replayed'], 1):>11}"
            )
        lines.append(
            f"{'prediction':<30}{_f(r['coverage_predicted']):>10}{_f(r['mean_ttft_predicted'], 3):>11}"
            f"{'':>9}{_f(r['hit_depth_predicted'], 1):>11}"
        )
    plan = r.get("epoch_plan")
    if plan:
        lines += [
            "",
            "static mix " + "  ".join(f"{k}={v:.3f}" for k, v in plan["static_mix"].items() if v > 0),
            f"{'epoch':<16}{'requests':>9}{'intensity':>10}{'migrated':>10}{'static':>8}{'gain':>8}{'predicted gain':>15}"
            f"{'moved share':>12}{'moved bytes':>12}",
        ]
        for row in plan["epochs"]:
            lines.append(
                f"{row['name']:<16}{row['requests']:>9d}{row['intensity']:>10.3f}{_f(row['coverage_migrated']):>10}"
                f"{_f(row['coverage_static']):>8}{_f(row['gain']):>8}{_f(row['predicted_gain']):>15}"
                f"{row['moved_share']:>12.3f}{row['moved_bytes']:>12.3g}"
            )
        lines.append(
            f"{'all epochs':<16}{r['requests']:>9d}{'':>10}{_f(plan['coverage_migrated']):>10}{_f(plan['coverage_static']):>8}"
            f"{_f(plan['gain']):>8}{_f(plan['predicted_migrated'] - plan['predicted_static']):>15}{'':>12}"
            f"{plan['moved_bytes']:>12.3g}"
        )
    return "\n".join(lines)
