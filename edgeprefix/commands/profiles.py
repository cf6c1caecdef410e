"""``edgeprefix profiles``: from a request trace to cache profiles and a calibrated instance.

Reads a Mooncake-style or token-id JSONL trace (streaming), builds the compressed radix
forest, generates profiles (tree knapsack ladder, greedy on Γ, one per top family, the empty
fallback), prunes dominated ones and writes an instance that ``evaluate`` and ``solve`` load.

Defaults (documented choices; each has a flag):

- model Llama-2-70B (κ = 2·80·8·128·2 B = 320 KiB per token, 140 GB of weights) on
  4 × A100-80GB (tensor parallel 4); prefill ``g(n) = g_0 + a n + b n²`` and the decode time
  per token fitted on the Splitwise profile of that model/GPU/TP at batch size 1
  (:data:`edgeprefix.placement.pipeline.calibration.DEFAULT_PREFILL`); ``--calibration`` refits from a CSV;
- per-sequence KV budget ``m_run`` = 16,384 tokens; memory is normalised so ``m_run = 1``;
- memory cap for a profile: 25 % of the free GPU memory ``M``; minimum support k_min = 2;
- network numbers as in :mod:`edgeprefix.placement.pipeline.trace_instance` (λ_b = 1, τ_0 = g(L̄), ξ for a 10 %
  radio share of τ_0, Λ for 60 % utilisation of an all-fallback network).

Without TRACE the embedded sample ``placement/data/sample_trace.jsonl`` is used.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from array import array
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.commands._common import at_least, print_json, wrote
from edgeprefix.formulations.tree_knapsack import solve_knapsack
from edgeprefix.placement.heap import map_large_blocks
from edgeprefix.placement.model.costs import PrefillModel
from edgeprefix.placement.model.instance import Gpu, load_instance, write_instance
from edgeprefix.placement.model.lengths import requests_entries, type_groups
from edgeprefix.placement.pipeline.calibration import (
    DEFAULT_CALIBRATION,
    DEFAULT_DECODE_PER_TOKEN,
    DEFAULT_PREFILL,
    LLAMA2_70B,
    CalibrationError,
    Deployment,
    ModelSpec,
    fit_prefill,
    model_spec_from_config,
    piecewise_prefill,
    read_measurements,
)
from edgeprefix.placement.pipeline.forest_stream import stream_forest
from edgeprefix.placement.pipeline.profile_generation import (  # the defaults of docs/model.md (2.10)
    DEFAULT_BIN_EDGES_AT_TARGET,
    DEFAULT_LENGTH_BINS,
    generate_profiles,
)
from edgeprefix.placement.pipeline.recent_window import choose_window
from edgeprefix.placement.pipeline.trace_clock import TraceClock
from edgeprefix.placement.pipeline.trace_instance import (
    DEFAULT_UTILISATION,
    instance_from_profiles,
    target_length,
)
from edgeprefix.placement.pipeline.trace_workload import split_index
from edgeprefix.placement.pipeline.traces import (
    DEFAULT_BLOCK_SIZE,
    FORMATS,
    SkipLog,
    read_trace,
    with_progress,
)

SAMPLE = "sample_trace.jsonl"
TRACE_FIELDS = (
    "Trace fields (one JSON object per line, in time order; docs/model.md §9.1): --format mooncake: timestamp "
    "(milliseconds >= 0, default 0), input_length (tokens >= 1), output_length (tokens >= 0), hash_ids "
    "(one integer block id per --block-size tokens of the input: ceil(input_length / block_size) of them; equal ids "
    "mean equal prefixes). --format tokens: tokens (the input's token ids), output_length (default 0), timestamp "
    "(seconds >= 0, default 0). The output prints the span read and the unit the format assumes."
)
DEFAULT_CAP = "25%"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "profiles",
        help="build cache profiles and an instance from a request trace",
        description="Trace → prefix forest → cache profiles → calibrated instance (docs/model.md §9). "
        "Exit code 2 on bad input (a malformed line names its number).",
        epilog=TRACE_FIELDS,
    )
    parser.add_argument(
        "trace", nargs="?", default=None, metavar="TRACE", help="JSONL trace (.gz allowed); default: the embedded 200-request sample"
    )
    parser.add_argument("--format", choices=FORMATS, default="mooncake", help="trace format (default: mooncake)")
    parser.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, help="tokens per block (default: 512)")
    parser.add_argument("--skip-invalid", action="store_true", help="skip malformed lines and count them")
    parser.add_argument("--max-profiles", type=int, default=6, metavar="K", help="profiles kept, fallback included (default: 6)")
    parser.add_argument(
        "--memory-cap",
        default=DEFAULT_CAP,
        metavar="B_cap",
        help="profile memory cap: normalised units or a percentage of M (default: 25%%)",
    )
    parser.add_argument("--min-support", type=int, default=2, metavar="k", help="k_min: fewest requests per placed prefix (default: 2)")
    parser.add_argument("--families", type=int, default=2, help="profiles for the most requested families (default: 2)")
    parser.add_argument("--length-quantile", type=float, default=None, metavar="Q", help="L_q as this quantile instead of the mean")
    parser.add_argument(
        "--length-bins",
        type=int,
        default=DEFAULT_LENGTH_BINS,
        metavar="K",
        help="length sub-types per request type: K bins of its input lengths, each at its "
        f"conditional mean (docs/model.md §2.3); 1 = one mean length per type (default: {DEFAULT_LENGTH_BINS})",
    )
    parser.add_argument(
        "--bin-edges-at-target",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also split each type's length bins at its threshold lengths L* + h, g(L*) = τ_0 and h a hit depth a "
        "profile can give it, so no bin straddles the target (docs/model.md (2.10); default: on when binned)",
    )
    cal = parser.add_argument_group("calibration")
    cal.add_argument("--calibration", default=None, metavar="FILE", help="CSV of prefill timings (tokens,seconds or a Splitwise profile)")
    cal.add_argument("--model", default=DEFAULT_CALIBRATION[0], help="Splitwise model filter (default: llama2-70b)")
    cal.add_argument("--hardware", default=DEFAULT_CALIBRATION[1], help="Splitwise hardware filter (default: a100-80gb)")
    cal.add_argument("--tensor-parallel", type=int, default=DEFAULT_CALIBRATION[2], help="GPUs per replica (default: 4)")
    cal.add_argument(
        "--prefill-law",
        choices=("quadratic", "intercept", "table"),
        default="intercept",
        help="fitted g: a n + b n², with g_0, or a piecewise-linear table (default: intercept)",
    )
    cal.add_argument("--decode-per-token", type=float, default=None, metavar="SECONDS", help="decode seconds per output token")
    cal.add_argument("--config", default=None, metavar="CONFIG_JSON", help="Hugging Face config.json for κ (needs --weights-gb)")
    cal.add_argument("--weights-gb", type=float, default=None, help="model weights in GB (default: 140 for Llama-2-70B)")
    cal.add_argument("--gpu-memory-gb", type=float, default=None, help="GPU memory per replica in GB (default: 80 × TP)")
    cal.add_argument("--sequence-tokens", type=float, default=16384.0, help="per-sequence KV budget m_run in tokens (default: 16384)")
    net = parser.add_argument_group("network")
    net.add_argument(
        "--target",
        default=None,
        metavar="SECONDS|pNN",
        help="τ_0 in seconds, or pNN: the NN-th percentile of the training requests' no-cache prefill g(L_i) "
        "(e.g. p50); default: g of the mean input length",
    )
    net.add_argument("--utilisation", type=float, default=DEFAULT_UTILISATION, help="load of an all-fallback network (default: 0.6)")
    net.add_argument("--edge-density", type=float, default=1.0, help="λ_b (default: 1)")
    parser.add_argument(
        "--split",
        type=float,
        default=1.0,
        metavar="F",
        help="build from the first F of the requests only, e.g. 0.5 to replay the rest (default: 1, all)",
    )
    parser.add_argument(
        "--recent",
        default=None,
        metavar="F|auto",
        help="build from the last F of those requests only: a recent-window forecast of the workload (docs/model.md "
        "§17.11); auto chooses F on the training part alone by (17.24) (default: auto with --split, else 1, all)",
    )
    parser.add_argument("--name", default=None, help="instance name (default: the trace's file stem)")
    parser.add_argument("--out", default=None, metavar="FILE", help="write the instance (.toml or .json)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.set_defaults(handler=run)


def _trace_path(arg: str | None) -> Any:
    if arg is None or arg == "sample":
        return resources.files("edgeprefix.placement").joinpath("data", SAMPLE)
    return arg


def _training_count(total: int, split: float) -> int:
    """Requests in the first part: ``⌊F n⌋``, the cut of ``edgeprefix replay --split F``."""
    return total if split == 1.0 else split_index(total, split)


def _memory_cap(text: str, memory: float) -> float:
    raw = text.strip()
    try:
        cap = float(raw[:-1]) / 100 * memory if raw.endswith("%") else float(raw)
    except ValueError:
        raise ValueError(f"--memory-cap must be a number or a percentage like 25%, got {text!r}") from None
    if not (math.isfinite(cap) and 0 <= cap < memory):
        raise ValueError(f"--memory-cap must lie in [0, M = {memory:.4g}) memory units, got {text!r} = {cap:.4g}")
    return cap


def _calibration(args: argparse.Namespace) -> tuple[PrefillModel, float, dict[str, Any]]:
    g: PrefillModel
    if args.calibration is None:
        info: dict[str, Any] = {"source": "embedded fit of splitwise llama2-70b/a100-80gb/TP4", "law": "intercept"}
        g, decode = DEFAULT_PREFILL, DEFAULT_DECODE_PER_TOKEN
    else:
        m = read_measurements(args.calibration, model=args.model, hardware=args.hardware, tensor_parallel=args.tensor_parallel)
        if args.prefill_law == "table":
            g = piecewise_prefill(m.tokens, m.seconds)
            rel = (np.asarray(g(m.tokens)) - m.seconds) / m.seconds
            err = float(np.sqrt(np.mean(rel**2)))
        else:
            fit = fit_prefill(m.tokens, m.seconds, intercept=args.prefill_law == "intercept")
            g, err = fit.model, fit.rms_relative
        decode = m.decode_per_token if m.decode_per_token is not None else DEFAULT_DECODE_PER_TOKEN
        info = {"source": m.source, "law": args.prefill_law, "points": int(m.tokens.size), "rms_relative": err}
    if args.decode_per_token is not None:
        if not (math.isfinite(args.decode_per_token) and args.decode_per_token >= 0):
            raise ValueError(f"--decode-per-token must be >= 0 seconds, got {args.decode_per_token!r}")
        decode = args.decode_per_token
    info["decode_per_token"] = decode
    return g, decode, info


def _deployment(args: argparse.Namespace) -> Deployment:
    if args.tensor_parallel < 1:
        raise ValueError(f"--tensor-parallel must be >= 1, got {args.tensor_parallel!r}")
    spec: ModelSpec = LLAMA2_70B
    if args.config is not None:
        if args.weights_gb is None:
            raise CalibrationError("--config needs --weights-gb (a config.json does not state the weight size)")
        spec = model_spec_from_config(args.config)
    if args.weights_gb is not None:
        if not args.weights_gb >= 0:
            raise ValueError(f"--weights-gb must be >= 0, got {args.weights_gb!r}")
        spec = ModelSpec(
            spec.layers,
            spec.kv_heads,
            spec.head_dim,
            spec.dtype_bytes,
            parameters=args.weights_gb * 1e9 / spec.dtype_bytes or None,
            name=spec.name,
        )
    gpu_gb = args.gpu_memory_gb if args.gpu_memory_gb is not None else 80.0 * args.tensor_parallel
    return Deployment(gpu_bytes=gpu_gb * 1e9, model=spec, sequence_tokens=args.sequence_tokens)


def run(args: argparse.Namespace) -> int:
    at_least(args, 0, "--families")
    at_least(args, 1, "--length-bins")
    if args.length_quantile is not None and args.length_bins not in (1, DEFAULT_LENGTH_BINS):
        raise ValueError("--length-quantile gives one length per type: drop --length-bins (or give --length-bins 1)")
    if args.out is not None and Path(args.out).is_dir():
        raise ValueError(f"--out {args.out!r} is a folder; name the instance file to write (e.g. {Path(args.out) / 'instance.toml'})")
    map_large_blocks()  # freed chunk temporaries go back to the system: the peak is what is held (placement/heap.py)
    start = time.perf_counter()
    log = SkipLog()
    path = _trace_path(args.trace)
    clock = TraceClock(args.format)
    records = read_trace(path, fmt=args.format, block_size=args.block_size, skip_invalid=args.skip_invalid, log=log)
    if not 0.0 < args.split <= 1.0:
        raise ValueError(f"--split must lie in (0, 1], got {args.split!r}")
    recent = _recent(args.recent, args.split)
    g, decode, cal_info = _calibration(args)
    count = None
    window_info: dict[str, Any] | None = None
    if args.split < 1.0 or recent != 1.0:  # train on the first part only (trace replay, docs/model.md §17)
        lengths = array("i")
        for record in read_trace(path, fmt=args.format, block_size=args.block_size, skip_invalid=args.skip_invalid):
            lengths.append(record.input_length)
        count = _training_count(len(lengths), args.split)
        if isinstance(recent, str):  # auto, (17.24): on the training part's input lengths alone
            choice = choose_window(_prefill(g, np.frombuffer(lengths, dtype=np.intc)[:count]))
            fraction, window_info = choice.fraction, choice.to_dict()
        else:
            fraction, window_info = recent, {"rule": "given (--recent)", "fraction": recent}
        del lengths
        first = count - max(1, int(round(fraction * count)))  # the recent window (docs/model.md §17.11)
        records = itertools.islice(records, first, count)
        count -= first
    records = clock.watch(records)
    records = with_progress(records, total=count, desc="profiles: reading the trace")
    seen = _Seen()
    forest = stream_forest(seen.watch(records), block_size=args.block_size, skip_invalid=args.skip_invalid, log=log)
    ingest = time.perf_counter() - start
    deployment = _deployment(args)
    gpu_numbers = deployment.normalised()
    gpu = Gpu(**gpu_numbers)
    cap = _memory_cap(args.memory_cap, gpu.memory)
    binned = args.length_quantile is None and args.length_bins > 1
    if args.bin_edges_at_target and not binned:
        raise ValueError("--bin-edges-at-target splits length bins: give --length-bins K with K > 1 (and no --length-quantile)")
    edges = binned and (DEFAULT_BIN_EDGES_AT_TARGET if args.bin_edges_at_target is None else args.bin_edges_at_target)
    target, target_info = _target(args.target, g, seen)
    threshold = None
    if edges:  # τ_0 as instance_from_profiles sets it: given, or g(mean input length)
        tau = target if target is not None else float(np.asarray(g(forest.end_input_sum.sum() / max(forest.n_requests, 1))))
        threshold = target_length(g, tau)
    profile_set = generate_profiles(
        forest,
        g,
        kappa=gpu.kv_per_token,
        gpu_memory=gpu.memory,
        cap=cap,
        decode_per_token=decode,
        max_profiles=args.max_profiles,
        k_min=args.min_support,
        n_families=args.families,
        length_quantile=args.length_quantile,
        knapsack=solve_knapsack,
        length_bins=args.length_bins if binned else None,
        length_threshold=threshold,
    )
    name = args.name or Path(str(path)).name.split(".")[0]
    instance = instance_from_profiles(
        profile_set, g, gpu, name=name, target=target, utilisation=args.utilisation, edge_density=args.edge_density
    )
    target_info |= _target_placement(instance.placement.target, g, seen)
    intensity_info = _intensity(instance, profile_set, args, seen)
    window_meta = {} if window_info is None else {"recent_window": window_info}
    instance = instance.replace(metadata={**instance.metadata, "target": target_info, "intensity": intensity_info, **window_meta})
    if args.out is not None:
        write_instance(instance, args.out)
        load_instance(args.out)  # the written file must load back
    report = _report(forest, log, profile_set, instance, cap, cal_info, deployment, ingest, time.perf_counter() - start, args)
    report["time"] = clock.summary()
    report |= {"target": target_info, "intensity": intensity_info, **window_meta}
    if args.json:
        print_json(report)
    else:
        print(_render(report))
    if args.out is not None:
        wrote(args.out)
    return 0


NAMES = (
    "q_h<b> is the request type whose prefix path ends at the forest vertex whose last trace block id is <b>, "
    "family_h<b> the profile of the family below that vertex; a type's blocks are its trace block ids from the root "
    "(JSON: first_blocks, last_block); the same trace gives the same ids"
)
FIRST_BLOCKS = 4


def _path_blocks(instance, path) -> list[int]:
    """The trace block ids of a prefix path (the blocks of its prefixes, root first)."""
    blocks = {p.id: p.blocks for p in instance.prefixes}
    return [b for pid in path for b in blocks.get(pid, ())]


def _blocks_entry(seq: list[int]) -> dict[str, Any]:
    return {"first_blocks": seq[:FIRST_BLOCKS], "last_block": seq[-1] if seq else None, "blocks": len(seq)}


def _blocks_text(first: list[int], last: int | None, count: int) -> str:
    if last is None:
        return "(none)"
    if count <= FIRST_BLOCKS:
        return ",".join(str(b) for b in first)
    return ",".join(str(b) for b in first[:3]) + f",…,{last} ({count} blocks)"


class _Seen:
    """Input lengths (4 bytes each: at most 10⁹ tokens, docs/model.md §20) and the first and last arrival
    time of the requests the forest is built from (read as they stream by)."""

    def __init__(self) -> None:
        self.lengths = array("i")
        self.count = 0
        self.first = self.last = 0.0

    def watch(self, records: Any) -> Any:
        for record in records:
            if not self.count:
                self.first = record.timestamp
            self.last = record.timestamp
            self.count += 1
            self.lengths.append(record.input_length)
            yield record

    def prefill(self, g: Any) -> np.ndarray:
        """``g(L_i)`` of every request: its time to first token with no cache, no queue and no radio."""
        return _prefill(g, np.frombuffer(self.lengths, dtype=np.intc))


def _prefill(g: Any, lengths: np.ndarray) -> np.ndarray:
    """``g(L_i)`` of the input lengths ``lengths``, elementwise in chunks (bounded memory)."""
    out = np.empty(lengths.size)
    for lo in range(0, lengths.size, PREFILL_CHUNK):
        out[lo : lo + PREFILL_CHUNK] = np.asarray(g(lengths[lo : lo + PREFILL_CHUNK].astype(float)), dtype=float)
    return out


def _recent(text: str | None, split: float) -> float | str:
    """``--recent``: a fraction in (0, 1] or ``auto``; by default ``auto`` with ``--split``, else 1."""
    if text is None:
        return "auto" if split < 1.0 else 1.0
    if text.strip().lower() == "auto":
        return "auto"
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--recent must be a fraction in (0, 1] or auto, got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise ValueError(f"--recent must lie in (0, 1] (or be auto), got {text!r}")
    return value


PREFILL_CHUNK = 1 << 18  # requests whose g(L_i) is computed at once


PERCENTILES = (10, 25, 50, 75, 90, 99)


def _target(text: str | None, g: Any, seen: _Seen) -> tuple[float | None, dict[str, Any]]:
    """``τ_0`` from ``--target`` (seconds or ``pNN``) and how it was chosen."""
    if text is None:
        return None, {"rule": "g(mean input length) (default; docs/model.md §9.7)"}
    raw = text.strip()
    if raw.lower().startswith("p"):
        try:
            pct = float(raw[1:])
        except ValueError:
            pct = float("nan")
        if not 0 < pct < 100:
            raise ValueError(f"--target {text!r}: a percentile is pNN with 0 < NN < 100, e.g. p50")
        if not len(seen.lengths):
            raise ValueError("--target pNN needs the trace's requests; the trace is empty")
        value = float(np.percentile(seen.prefill(g), pct))
        return value, {"rule": f"p{pct:g} of the training requests' no-cache prefill g(L_i)", "percentile": pct}
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"--target must be seconds (e.g. 5) or a percentile pNN (e.g. p50), got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"--target must be > 0 seconds, got {text!r}")
    return value, {"rule": "given in seconds (--target)"}


def _target_placement(tau: float, g: Any, seen: _Seen) -> dict[str, Any]:
    """Where the workload's no-cache prefill times sit against ``τ_0``."""
    prefill = seen.prefill(g)
    out: dict[str, Any] = {"seconds": tau}
    if prefill.size:
        out["prefill_quantiles"] = {f"p{p}": float(np.percentile(prefill, p)) for p in PERCENTILES}
        out["share_prefill_within_target"] = float(np.mean(prefill <= tau))
    return out


def _intensity(instance: Any, ps: Any, args: argparse.Namespace, seen: _Seen) -> dict[str, Any]:
    """The arrival intensity's derivation (docs/model.md §9.7) and the trace's own rate."""
    ids = [s.id for s in ps.profiles]
    c0 = int(ps.concurrency[ids.index("none")]) if "none" in ids else int(ps.concurrency.max())
    occupancy = float(instance.probabilities @ (instance.full_prefill + instance.decodes))
    out: dict[str, Any] = {
        "rule": "Λ = u λ_b c_0 / Σ_q p_q (g(L_q) + D_q): an all-fallback network at utilisation u",
        "utilisation": float(args.utilisation),
        "edge_density": float(args.edge_density),
        "fallback_concurrency": c0,
        "mean_occupancy_s": occupancy,
        "request_intensity": float(instance.network.request_intensity),
    }
    out["trace_requests"] = seen.count
    if seen.count >= 2 and seen.last > seen.first:  # timestamps do not decrease (read_trace)
        span = float(seen.last - seen.first)
        out |= {
            "trace_span_s": span,
            "trace_rate_per_s": (seen.count - 1) / span,
            "trace_utilisation_per_node": (seen.count - 1) / span * occupancy / c0,
        }
    return out


def _report(forest, log, ps, instance, cap, cal_info, deployment, ingest, total, args) -> dict[str, Any]:
    groups = type_groups(ps.requests)
    request_ids = list(groups.ids)
    hits = groups.aggregate(ps.hits)  # sub-types share their type's path: the same h_{s,q}
    profiles = [
        {
            "id": s.id,
            "prefixes": len(s.prefixes),
            "cached_tokens": float(ps.memory[i] / instance.gpu.kv_per_token),
            "memory": float(ps.memory[i]),
            "concurrency": int(ps.concurrency[i]),
            "hit_depth": dict(zip(request_ids, hits[i].tolist())),
        }
        for i, s in enumerate(ps.profiles)
    ]
    return {
        "trace": str(args.trace or "sample"),
        "forest": forest.summary(),
        "skipped": {"lines": log.skipped, "by_field": dict(log.by_field), "examples": log.examples},
        "calibration": cal_info,
        "deployment": {
            "gpu_bytes": deployment.gpu_bytes,
            "weight_bytes": deployment.weight_bytes,
            "kv_bytes_per_token": deployment.kappa_bytes,
            "sequence_tokens": deployment.sequence_tokens,
            **deployment.normalised(),
        },
        "memory_cap": cap,
        "min_support": args.min_support,
        "profiles": profiles,
        "pruned": list(ps.pruned),
        "infeasible": list(ps.dropped),
        "requests": [
            {
                "id": q["id"],
                "probability": q["probability"],
                "length": q["length"],
                "decode": q["decode"],
                "path_length": len(q["path"]),
                **_blocks_entry(_path_blocks(instance, q["path"])),
            }
            | ({"lengths": q["lengths"]} if "lengths" in q else {})
            for q in requests_entries(ps.requests)
        ],
        "names": NAMES,
        "network": {
            "edge_density": instance.network.edge_density,
            "request_intensity": instance.network.request_intensity,
            "radio_scale": instance.network.radio_scale,
            "target": instance.placement.target,
        },
        "instance": args.out,
        "seconds": {"ingest": ingest, "total": total},
    }


def _time_line(t: dict[str, Any]) -> str:
    if t["first"] is None:
        return "time: no timestamps read"
    return f"time: span {t['span']:.6g} s, timestamps {t['first']:.6g} … {t['last']:.6g} s (the file's timestamps read as {t['unit']})"


def _render(r: dict[str, Any]) -> str:
    f = r["forest"]
    lines = [
        f"trace {r['trace']}: {f['requests']} requests, {f['vertices']} vertices ({f['leaves']} leaves, {f['roots']} roots), "
        f"{f['unique_blocks']} unique blocks of {f['block_size']} tokens",
        f"reuse: {100 * f['shared_block_fraction']:.1f} % of unique blocks and {100 * f['shared_occurrence_fraction']:.1f} % "
        f"of block occurrences are shared by >= 2 requests; {f['shared_vertices']} vertices seen twice or more "
        f"(median lifetime {f['median_shared_lifetime_s']:.0f} s)",
        _time_line(r["time"]),
        *([f"note: {r['time']['hint']}"] if r["time"].get("hint") else []),
        f"ingest {r['seconds']['ingest']:.2f} s, total {r['seconds']['total']:.2f} s"
        + (f"; skipped {r['skipped']['lines']} invalid lines" if r["skipped"]["lines"] else ""),
        "",
        "requests by leaf depth [tokens]",
    ]
    edges, counts = f["depth_histogram"]["edges"], f["depth_histogram"]["requests"]
    for lo, hi, n in zip(edges[:-1], edges[1:], counts):
        lines.append(f"  {lo:>8.0f} – {hi:<8.0f} {n:>8d}")
    cal = r["calibration"]
    lines += [
        "",
        f"calibration: {cal['source']} ({cal['law']}"
        + (f", RMS relative error {100 * cal['rms_relative']:.1f} %" if "rms_relative" in cal else "")
        + f"); decode {cal['decode_per_token'] * 1e3:.1f} ms/token",
        f"memory: M = {r['deployment']['memory']:.3f} sequences of {r['deployment']['sequence_tokens']:.0f} tokens, "
        f"KV cache κ = {r['deployment']['kv_per_token']:.3g} per token, profile memory cap {r['memory_cap']:.3f}, "
        f"minimum support {r['min_support']} requests",
        "",
    ]
    w = max(len(p["id"]) for p in r["profiles"]) + 2
    lines.append(
        f"{'profile':<{w}}{'prefixes':>9}{'tokens':>10}{'memory':>9}{'servers':>8}   cached prefix tokens of the 3 most likely request types"
    )
    top = sorted(r["requests"], key=lambda q: -q["probability"])[:3]
    for p in r["profiles"]:
        hits = "  ".join(f"{q['id']}:{p['hit_depth'][q['id']]:.0f}" for q in top)
        lines.append(f"{p['id']:<{w}}{p['prefixes']:>9d}{p['cached_tokens']:>10.0f}{p['memory']:>9.3f}{p['concurrency']:>8d}   {hits}")
    if r["pruned"] or r["infeasible"]:
        lines.append(f"pruned as dominated: {r['pruned'] or '-'}; infeasible (no room for one request): {r['infeasible'] or '-'}")
    wq = max(len(q["id"]) for q in r["requests"]) + 2
    lines += [
        "",
        f"{len(r['requests'])} request types (the 5 most likely):",
        f"{'type':<{wq}}{'share':>9}{'tokens':>10}{'decode [s]':>11}   first trace blocks",
    ]
    for q in top + sorted(r["requests"], key=lambda q: -q["probability"])[3:5]:
        head = _blocks_text(q["first_blocks"], q["last_block"], q["blocks"])
        lines.append(f"{q['id']:<{wq}}{q['probability']:>9.4f}{q['length']:>10.0f}{q['decode']:>11.2f}   {head}")
    lines.append("names: " + r["names"])
    n = r["network"]
    lines += [
        "",
        f"network: λ_b = {n['edge_density']:g}, Λ = {n['request_intensity']:.4g}, ξ = {n['radio_scale']:.4g}, τ_0 = {n['target']:.3f} s",
    ]
    t, lam = r["target"], r["intensity"]
    lines.append(f"target τ_0 = {t['seconds']:.3f} s: {t['rule']}")
    if "prefill_quantiles" in t:
        qs = "  ".join(f"{k} {v:.2f}" for k, v in t["prefill_quantiles"].items())
        lines.append(
            f"  no-cache prefill g(L_i) of the requests [s]: {qs}; "
            f"{100 * t['share_prefill_within_target']:.1f} % within τ_0 before radio and queueing"
        )
    lines.append(
        f"intensity Λ = {lam['request_intensity']:.4g} per unit area per s: {lam['rule']} "
        f"(u = {lam['utilisation']:g}, λ_b = {lam['edge_density']:g}, c_0 = {lam['fallback_concurrency']}, "
        f"Σ p (g + D) = {lam['mean_occupancy_s']:.3f} s)"
    )
    if "trace_rate_per_s" in lam:
        lines.append(
            f"  the trace: {lam['trace_requests']} requests over {lam['trace_span_s']:.0f} s = "
            f"{lam['trace_rate_per_s']:.3g} per s; one fallback node would run at {lam['trace_utilisation_per_node']:.2f} "
            "of its c_0 slots at that rate"
        )
    if "recent_window" in r:
        w = r["recent_window"]
        lines.append(f"recent window: built from the last {w['fraction']:g} of the training requests; " + w.get("reason", w["rule"]))
    if not r["instance"]:
        lines.append("instance not written (use --out FILE)")
    return "\n".join(lines)
