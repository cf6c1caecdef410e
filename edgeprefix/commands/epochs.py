"""``edgeprefix epochs``: cut a trace into windows and write the epochs file ``migrate`` reads.

Per window of ``--window`` seconds: the arrival intensity ``Λ^e = Λ · r_e / r̄`` (``r_e`` the
window's request rate, ``r̄`` the trace's mean rate, ``Λ`` the instance's intensity) and the
request-type distribution over the instance's types; the same instance for all epochs
(docs/model.md §17, §10.5).
"""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "epochs",
        help="cut a trace into epochs (intensity, type mix) for edgeprefix migrate",
        description="Windows of a trace with their arrival intensity and request-type distribution over an instance's "
        "types, written as the epochs file edgeprefix migrate reads (each epoch keeps its window as start/end, "
        "which edgeprefix replay --epochs uses). Exit code 2 on bad input.",
    )
    parser.add_argument("trace", metavar="TRACE", help="JSONL trace (.gz allowed), in time order")
    parser.add_argument("--instance", required=True, metavar="INST", help="instance built from the trace (edgeprefix profiles)")
    parser.add_argument("--window", type=float, required=True, metavar="SECONDS", help="epoch length on the trace's clock")
    parser.add_argument("--split", type=float, default=0.0, metavar="F", help="cut only the requests after the first F (default: 0)")
    parser.add_argument(
        "--intensity", type=float, default=None, metavar="Λ", help="intensity of the trace's mean rate (default: the instance's)"
    )
    parser.add_argument("--current-mix", default=None, metavar="MIX", help="π^0 as id=share,... (default: the instance's mix)")
    parser.add_argument(
        "--change-budget", type=float, default=None, metavar="m_max", help="share of nodes that may change profile per epoch"
    )
    parser.add_argument("--byte-weight", type=float, default=0.0, metavar="γ", help="objective cost per byte moved (default: 0)")
    parser.add_argument("--target", type=float, default=None, metavar="SECONDS", help="TTFT target τ_0 (default: the instance's)")
    trace = parser.add_argument_group("trace format")
    trace.add_argument("--format", default="mooncake", help="trace format: mooncake (default) or tokens")
    trace.add_argument("--block-size", type=int, default=512, help="tokens per block (default: 512)")
    trace.add_argument("--skip-invalid", action="store_true", help="skip malformed lines and count them")
    parser.add_argument("--out", default=None, metavar="FILE", help="write the epochs file (.toml, or .json)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from edgeprefix.commands._common import parse_mix, print_json, wrote
    from edgeprefix.placement.model.instance import load_instance
    from edgeprefix.placement.pipeline.epochs import cut_epochs, epochs_mapping, instance_reference, write_epochs
    from edgeprefix.placement.pipeline.trace_workload import load_trace_workload, split_index
    from edgeprefix.placement.pipeline.traces import SkipLog

    if args.change_budget is not None and not 0.0 <= args.change_budget <= 1.0:
        raise ValueError(f"--change-budget m_max must lie in [0, 1], got {args.change_budget!r}")
    if not args.byte_weight >= 0:
        raise ValueError(f"--byte-weight γ must be >= 0, got {args.byte_weight!r}")
    log = SkipLog()
    instance, workload = load_trace_workload(
        args.trace, load_instance(args.instance), fmt=args.format, block_size=args.block_size, skip_invalid=args.skip_invalid, log=log
    )
    part = workload.part(slice(split_index(workload.requests, args.split), None))
    cut = cut_epochs(part, instance, args.window, intensity=args.intensity)
    current = parse_mix(args.current_mix, "--current-mix")
    if current is not None:
        instance.mix_vector(current, field_name="--current-mix")
    report: dict[str, Any] = {
        "epochs": [e.to_dict() for e in cut.epochs],
        "window": cut.window,
        "mean_rate": cut.mean_rate,
        "reference_intensity": cut.reference_intensity,
        "dropped_empty": cut.dropped_empty,
        "requests": part.requests,
        "split": args.split,
        "skipped_lines": log.skipped,
        "out": args.out,
    }
    if args.out is not None:
        mapping = epochs_mapping(
            cut,
            instance_reference(args.instance, args.out),
            current_mix=current,
            change_budget=args.change_budget,
            byte_weight=args.byte_weight,
            target=args.target,
        )
        write_epochs(args.out, mapping)
    if args.out is not None:
        wrote(args.out)
    if args.json:
        print_json(report)
    else:
        print(render(report, intensity_given=args.intensity is not None))
    return 0


def render(r: dict[str, Any], intensity_given: bool = False) -> str:
    lam = f"Λ = {r['reference_intensity']:.4g}" + (" (--intensity)" if intensity_given else "")
    lines = [
        f"{len(r['epochs'])} epochs of {r['window']:g} s over {r['requests']} requests (mean rate {r['mean_rate']:.4g}/s ↔ "
        f"{lam}); {r['dropped_empty']} empty windows dropped",
        "",
        f"{'epoch':<16}{'start':>9}{'end':>9}{'requests':>9}{'intensity':>10}{'mean L':>8}{'p90 L':>8}   most likely request types",
    ]
    for e in r["epochs"]:
        declared: dict[str, float] = {}  # length sub-types q~k summed into their type q (docs/model.md §2.3)
        for q, p in e["mix_of_types"].items():
            head, _, tail = q.rpartition("~")
            key = head if head and tail.isdigit() else q
            declared[key] = declared.get(key, 0.0) + p
        top = sorted(declared.items(), key=lambda kv: -kv[1])[:3]
        size = e.get("lengths", {})
        lines.append(
            f"{e['name']:<16}{e['start']:>9.0f}{e['end']:>9.0f}{e['requests']:>9d}{e['intensity']:>10.4f}"
            f"{size.get('mean_input', float('nan')):>8.0f}{size.get('p90_input', float('nan')):>8.0f}   "
            + "  ".join(f"{q}={p:.3f}" for q, p in top)
        )
    if not r["out"]:
        lines.append("epochs file not written (use --out FILE)")
    return "\n".join(lines)
