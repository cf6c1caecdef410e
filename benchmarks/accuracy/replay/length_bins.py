"""Length-resolved request types: evaluation time and accuracy against the number of length bins K.

Run ``python -m edgeprefix.benchmarks.accuracy.replay.length_bins [--bins 1,2,4,8,16] [--repeats 5]``.  On the shipped
Mooncake conversation trace, the instance ``edgeprefix profiles --split 0.5 --length-bins K`` builds
from the first half is evaluated at its default mix (docs/model.md §2.3):

- ``CPU ms``: least CPU time (of ``--repeats``) of one ``evaluate`` (load-aware fixed point, cell model, coverage at the
  target); ``ratio``: against ``K = 1`` (one mean length per type) measured in the same run; ``maps``: the
  fixed point's evaluations of the queue map (the ratio moves with them);
- ``E g(L) / g``: the instance's ``Σ_q p_q g(L_q)`` against the requests' own mean prefill time
  ``E g(L_i)`` over the *second* half (fit on the first, report on the second);
- ``coverage`` and ``mean TTFT`` of the evaluation.

The evidence line prints ``E g(L)`` against ``g(L̄)`` on both halves.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import numpy as np

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Gpu, Instance
from edgeprefix.placement.pipeline.calibration import DEFAULT_DECODE_PER_TOKEN, DEFAULT_PREFILL, LLAMA2_70B, Deployment
from edgeprefix.placement.pipeline.forest import build_forest
from edgeprefix.placement.pipeline.profile_generation import generate_profiles
from edgeprefix.placement.pipeline.trace_instance import instance_from_profiles, target_length
from edgeprefix.placement.pipeline.trace_workload import split_index
from edgeprefix.placement.pipeline.traces import TraceRecord, read_trace

CAP_SHARE = 0.25  # edgeprefix profiles --memory-cap 25%


def trace_instance(records: Sequence[TraceRecord], bins: int, edges_at_target: bool = False) -> Instance:
    """What ``edgeprefix profiles --length-bins K --no-bin-edges-at-target`` builds from ``records`` with its
    other defaults (``edges_at_target``: ``--bin-edges-at-target``, the default of ``profiles``: bins split at
    the target's threshold lengths, docs/model.md (2.10))."""
    gpu = Gpu(**Deployment(gpu_bytes=320e9, model=LLAMA2_70B, sequence_tokens=16384.0).normalised())
    threshold = None
    if edges_at_target and bins > 1:  # the default τ_0 = g(L̄) of instance_from_profiles
        mean_length = float(np.mean([r.input_length for r in records]))
        threshold = target_length(DEFAULT_PREFILL, float(DEFAULT_PREFILL(mean_length)))
    profile_set = generate_profiles(
        build_forest(records),
        DEFAULT_PREFILL,
        kappa=gpu.kv_per_token,
        gpu_memory=gpu.memory,
        cap=CAP_SHARE * gpu.memory,
        decode_per_token=DEFAULT_DECODE_PER_TOKEN,
        length_bins=None if bins == 1 else bins,
        length_threshold=threshold,
    )
    return instance_from_profiles(profile_set, DEFAULT_PREFILL, gpu, name=f"mooncake_K{bins}{'t' if threshold is not None else ''}")


def variant(text: str) -> tuple[int, bool]:
    """``"8"`` → (8, False), ``"8t"`` → (8, True): bins per type and whether they split at the target."""
    raw = text.strip().lower()
    edges = raw.endswith("t")
    try:
        k = int(raw[:-1] if edges else raw)
    except ValueError:
        k = 0
    if k < 1:
        raise ValueError(f"--variants: {text!r} is not K or Kt with K >= 1 (e.g. 8,8t,16t)")
    return k, edges


def timed(instance: Instance, repeats: int) -> tuple[float, float, float, int]:
    """Least CPU ms of one evaluation over ``repeats`` (CPU time of this process: the least disturbed by the
    other work on a shared machine), its coverage, mean TTFT and the fixed point's map evaluations."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        ev = evaluate(instance, queue_model="cell")
        cov = ev.coverage_at_target
        times.append(time.process_time() - start)
    return 1e3 * float(np.min(times)), cov, ev.mean_ttft, 0 if ev.fixed_point is None else ev.fixed_point.evaluations


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bins", default="1,2,4,8,16", help="K values; Kt splits the bins at the target (default: 1,2,4,8,16)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        ks = [variant(k) for k in args.bins.split(",")]
    except ValueError as err:
        parser.error(str(err).replace("--variants", "--bins"))
    records = list(read_trace(MOONCAKE_TRACE))
    cut = split_index(len(records), 0.5)
    first, second = records[:cut], records[cut:]
    g = DEFAULT_PREFILL
    for name, part in (("first half", first), ("second half", second)):
        lengths = np.array([r.input_length for r in part], dtype=float)
        print(
            f"{name}: {lengths.size} requests, mean input {lengths.mean():.0f}, median {np.median(lengths):.0f} tokens; "
            f"E g(L) = {float(np.mean(g(lengths))):.3f} s against g(L̄) = {float(g(lengths.mean())):.3f} s"
        )
    fit = float(np.mean(g(np.array([r.input_length for r in first], dtype=float))))
    truth = float(np.mean(g(np.array([r.input_length for r in second], dtype=float))))
    print(
        f"\n{'K':>3}{'types':>7}{'columns':>9}{'CPU ms':>9}{'ratio':>7}{'maps':>6}{'Σ p g(L) [s]':>14}{'/ E g(L) train':>16}{'/ test':>8}"
        f"{'coverage':>10}{'mean TTFT [s]':>15}"
    )
    base = None
    for k, edges in ks:
        inst = trace_instance(first, k, edges)
        declared = len({q.group or q.id for q in inst.requests})
        ms, cov, ttft, maps = timed(inst, args.repeats)
        base = ms if base is None else base
        mean_g = float(inst.probabilities @ inst.full_prefill)
        print(
            f"{str(k) + ('t' if edges else ''):>3}{declared:>7}{len(inst.requests):>9}{ms:>9.1f}{ms / base:>7.2f}{maps:>6}{mean_g:>14.3f}{mean_g / fit:>16.3f}"
            f"{mean_g / truth:>8.3f}"
            f"{cov:>10.3f}{ttft:>15.3f}"
        )


if __name__ == "__main__":
    main()
