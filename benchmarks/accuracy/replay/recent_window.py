"""Can the planner see the drift from its training half alone?  A recent-window forecast, chosen out of sample.

Run ``python -m edgeprefix.benchmarks.accuracy.replay.recent_window [--traces mooncake,phased,stationary]
[--windows 1,0.5,0.25,0.125] [--variants 16t] [--replications 3] [--nodes 50] [--budget 60] [--auto-only]``.

The pipeline is that of :mod:`edgeprefix.benchmarks.accuracy.replay.replay_steady` (``profiles --split 0.5`` with
its length sub-types, ``solve --method gradient`` at ``Λ₀/2`` and ``Λ₀`` for the tier and online routers, the second
half replayed warm); the forecast is a *recent window*: the instance is built from the last ``F`` of the
training requests only (``F = 1``: all of them, no forecast).  Per trace (docs/model.md (17.19)):

1. ``E g(L_i)`` forecasts, model-free: the mean no-cache prefill of the next part from no forecast, a recent
   window ``F`` or a linear trend of ``g(L_i)`` in time (least squares, extrapolated to the middle of the next
   part), as ratios actual / forecast on the *check* part (the training half's second half, forecast from its
   first half) and on the *test* half (forecast from the whole training half; reported only);
2. ``F`` chosen on the training half alone: for each ``F``, the pipeline on the training half (instance from the
   last ``F`` of its first half, its second half replayed warm); score = cases with coverage within
   ``max(0.02, 3 SE)`` + stable cases with mean TTFT within 10 %; the largest ``F`` of the best score is chosen;
3. the test half at the chosen ``F`` and at ``F = 1`` (reported only, never used to choose).

Alongside, the cheap rule that ``profiles --recent auto`` applies (docs/model.md (17.24): the largest ``F``
whose forecast of the check part's ``E g(L_i)`` is within 1.96 batch-means SE; no replay), so the two choices
can be compared; ``--auto-only`` prints only the forecasts and that choice.

``--variants`` adds the length sub-types to the choice: ``K`` quantile bins (``8``) or ``K`` bins split at the
target's threshold lengths (``8t``, ``profiles --bin-edges-at-target``, docs/model.md (2.10)); every
(variant, ``F``) pair is scored on the training half alone and the best is chosen (ties: the larger ``F``, then
the variant listed first), then the test half is replayed at it and at the first variant with ``F = 1``.

Traces: ``mooncake`` (the shipped conversation trace), ``phased`` (a drifting synthetic trace: four phases,
each reshuffling which prefix families are popular and scaling the rate, 12,000 requests, seed 0) and
``stationary`` (:func:`~edgeprefix.placement.pipeline.traces.synthetic_records`, 12,000 requests, seed 3).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np

from edgeprefix.benchmarks.accuracy.replay.length_bins import variant
from edgeprefix.benchmarks.accuracy.replay.replay_steady import cases, table
from edgeprefix.benchmarks.accuracy.replay.replay_study import phased_records
from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE
from edgeprefix.placement.pipeline.calibration import DEFAULT_PREFILL
from edgeprefix.placement.pipeline.recent_window import choose_window
from edgeprefix.placement.pipeline.trace_workload import split_index
from edgeprefix.placement.pipeline.traces import TraceRecord, read_trace, synthetic_records

TRACES = ("mooncake", "phased", "stationary")


def trace_records(name: str) -> list[TraceRecord]:
    """The records of one of :data:`TRACES`."""
    if name == "mooncake":
        return list(read_trace(MOONCAKE_TRACE))
    if name == "phased":
        return list(phased_records(12000, seed=0))
    if name == "stationary":
        return list(synthetic_records(12000, seed=3))
    raise ValueError(f"--traces: unknown trace {name!r}; use one of {', '.join(TRACES)}")


def prefill_forecasts(time: np.ndarray, prefill: np.ndarray, until: float, windows: Sequence[float]) -> dict[str, float]:
    """Forecasts of the next part's mean prefill from one part: no forecast, recent windows, linear trend to ``until``."""
    out = {}
    for f in windows:
        keep = max(1, int(round(f * prefill.size)))
        out["none" if f == 1 else f"recent {f:g}"] = float(prefill[-keep:].mean())
    slope, intercept = np.polyfit(time, prefill, 1)
    out["linear trend"] = float(intercept + slope * until)
    return out


def prefill_table(records: Sequence[TraceRecord], windows: Sequence[float]) -> str:
    """Part 1 of the module docstring: actual / forecast of ``E g(L_i)`` on the check part and the test half."""
    time = np.array([r.timestamp for r in records], dtype=float)
    prefill = DEFAULT_PREFILL(np.array([r.input_length for r in records], dtype=float))
    cut = split_index(len(records), 0.5)
    fit = split_index(cut, 0.5)
    check = prefill_forecasts(time[:fit], prefill[:fit], float(time[fit:cut].mean()), windows)
    test = prefill_forecasts(time[:cut], prefill[:cut], float(time[cut:].mean()), windows)
    quarters = " / ".join(f"{prefill[i].mean():.2f}" for i in (slice(0, fit), slice(fit, cut), slice(cut, None)))
    lines = [
        f"E g(L_i) [s], first / second quarter / second half: {quarters}",
        "",
        "| forecast | actual / forecast, check part | test half (reported only) |",
        "|---|---|---|",
    ]
    for key in check:
        lines.append(f"| {key} | {prefill[fit:cut].mean() / check[key]:.3f} | {prefill[cut:].mean() / test[key]:.3f} |")
    best = min(check, key=lambda k: abs(np.log(prefill[fit:cut].mean() / check[k])))
    lines.append(f"\nclosest on the check part: {best}")
    return "\n".join(lines)


def score(rows: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(coverage cases within max(0.02, 3 SE), stable cases with mean TTFT within 10 %, stable cases)."""
    stable = [r for r in rows if r["stable_planned"]]
    ttft = sum(abs(r["mean_ttft_replayed"] / r["mean_ttft_predicted"] - 1.0) <= 0.10 for r in stable)
    return sum(r["coverage_ok"] for r in rows), int(ttft), len(stable)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", default=",".join(TRACES), help=f"comma-separated, of {', '.join(TRACES)}")
    parser.add_argument("--windows", default="1,0.5,0.25,0.125", help="recent-window fractions F (1 = no forecast)")
    parser.add_argument(
        "--variants", default="16t", help="length sub-types: K or Kt (split at the target), e.g. 8,8t,16t (default: 16t, profiles' own)"
    )
    parser.add_argument("--replications", type=int, default=3)
    parser.add_argument("--nodes", type=float, default=50.0)
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument(
        "--auto-only", action="store_true", help="print only the forecasts and the choice of profiles --recent auto (no replays)"
    )
    args = parser.parse_args(argv)
    windows = sorted({float(f) for f in args.windows.split(",")}, reverse=True)
    if not windows or windows[0] > 1 or windows[-1] <= 0:
        parser.error("--windows: fractions in (0, 1], e.g. 1,0.5,0.25")
    try:
        variants = list(dict.fromkeys(variant(v) for v in args.variants.split(",")))
    except ValueError as err:
        parser.error(str(err))
    common = {"nodes": args.nodes, "replications": args.replications, "budget": args.budget}

    def label(v: tuple[int, bool]) -> str:
        return f"K = {v[0]}{' at the target' if v[1] else ''}"

    for name in args.traces.split(","):
        records = trace_records(name)
        cut = split_index(len(records), 0.5)
        print(f"## {name}: {len(records)} requests\n\n{prefill_table(records, windows)}\n", flush=True)
        auto = choose_window(DEFAULT_PREFILL(np.array([r.input_length for r in records[:cut]], dtype=float)), windows)
        print(f"the rule of profiles --recent auto (docs/model.md (17.24)), training half alone: {auto.reason}\n", flush=True)
        if args.auto_only:
            continue
        scores = {}
        for v in variants:
            for f in windows:
                s = score(cases(trace=records[:cut], recent=f, bins=v[0], edges_at_target=v[1], **common))
                scores[(v, f)] = s
                print(
                    f"check (training half alone), {label(v)}, F = {f:g}: coverage {s[0]}/4, mean TTFT {s[1]}/{s[2]} stable cases",
                    flush=True,
                )
        rank = {v: i for i, v in enumerate(variants)}
        chosen = max(scores, key=lambda vf: (scores[vf][0] + scores[vf][1], vf[1], -rank[vf[0]]))
        print(f"chosen {label(chosen[0])}, F = {chosen[1]:g}\n", flush=True)
        for v, f in dict.fromkeys([chosen, (variants[0], 1.0)]):
            rows = cases(trace=records, recent=f, bins=v[0], edges_at_target=v[1], **common)
            s = score(rows)
            tag = "chosen" if (v, f) == chosen else "reference"
            print(
                f"test half, {label(v)}, F = {f:g} ({tag}): coverage {s[0]}/4, mean TTFT {s[1]}/{s[2]} stable cases\n\n{table(rows)}\n",
                flush=True,
            )


if __name__ == "__main__":
    main()
