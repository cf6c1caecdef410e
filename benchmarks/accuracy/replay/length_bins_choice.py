"""Choosing the number of length sub-types ``K`` out of sample (docs/model.md §2.3).

Run ``python -m edgeprefix.benchmarks.accuracy.replay.length_bins_choice [--bins 1,2,4,8,16,32] [--slack 0.01]``.  The
shipped Mooncake conversation trace is cut as ``profiles --split 0.5`` and ``replay --split 0.5`` cut it:
the *training half* (first 50 % of the requests) and the *test half*.  ``K`` is chosen on the training
half alone, itself cut in two: the instance ``profiles --length-bins K`` builds from its first part
(*fit*) is compared with the requests of its second part (*check*); the test half is read only for the
last table, which reports the chosen ``K`` (and the others) with the instance built from the whole
training half, as ``profiles --split 0.5`` builds it.

Each row compares the instance's prefill distribution — sub-type ``(q, k)`` with probability ``p_{q,k}``
at ``g(L_{q,k})``, the time to first token with no cache, queue or radio — with the requests' own
``g(L_i)``: ``Σ p g(L) / E g(L_i)`` (the queues' work, docs/model.md (2.8)) and the Kolmogorov distance
``sup_t |Σ p 1[g(L_{q,k}) ≤ t] − share of requests with g(L_i) ≤ t|`` (coverage is a step in ``g``:
a distance ``d`` moves coverage at no cache by at most ``d``), and the coverage error at the instance's
target ``τ_0``: ``Σ p P(ξ R^α ≤ τ_0 − g(L_{q,k}))`` minus the requests' mean of ``P(ξ R^α ≤ τ_0 − g(L_i))``,
``R`` the distance to the nearest node (``P(R > r) = e^{−π λ_b r²}``), i.e. the coverage of an
uncached, unqueued network, the part of coverage the lengths decide.  Rule: the smallest ``K`` whose
coverage error on the check part is within ``--slack`` (default 0.01, about one standard error of a
3,000-request share) of the best ``K``'s.  ``--bins 8t`` splits the bins at the target's threshold lengths
(docs/model.md (2.10)); two further in-sample tables (the whole training half, and its recent half as
``profiles --recent 0.5`` builds from it) measure the representation where it is the only error.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgeprefix.benchmarks.accuracy.replay.length_bins import trace_instance, variant
from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.pipeline.calibration import DEFAULT_PREFILL
from edgeprefix.placement.pipeline.trace_workload import split_index
from edgeprefix.placement.pipeline.traces import TraceRecord, read_trace


@dataclass(frozen=True)
class Fit:
    k: int
    columns: int
    mean_ratio: float  # Σ p g(L) / E g(L_i)
    distance: float  # Kolmogorov distance of the g(L) distributions
    coverage_error: float  # model − requests: coverage at τ_0 with the radio delay, no cache, no queue
    edges: bool = False  # bins split at the target's threshold lengths (docs/model.md (2.10))

    @property
    def label(self) -> str:
        return f"{self.k}{'t' if self.edges else ''}"


def compare(instance: Instance, requests: Sequence[TraceRecord], k: int, edges: bool = False) -> Fit:
    """The instance's no-cache prefill distribution against the requests' own."""
    g = DEFAULT_PREFILL
    own = np.sort(np.asarray(g(np.array([r.input_length for r in requests], dtype=float)), dtype=float))
    model = np.asarray(instance.full_prefill, dtype=float)
    p = np.asarray(instance.probabilities, dtype=float)
    order = np.argsort(model, kind="stable")
    model, cdf_model = model[order], np.cumsum(p[order])
    points = np.union1d(own, model)  # both step functions jump only here: the sup is attained at one of them
    f_own = np.searchsorted(own, points, side="right") / own.size
    at = np.searchsorted(model, points, side="right")
    f_model = np.where(at > 0, cdf_model[np.maximum(at - 1, 0)], 0.0)
    net = instance.network
    tau = instance.placement.target

    def radio_coverage(prefill: np.ndarray) -> np.ndarray:  # P(ξ R^α ≤ τ − g), R the nearest node's distance
        slack = np.maximum(tau - prefill, 0.0) / net.radio_scale
        return 1.0 - np.exp(-np.pi * net.edge_density * slack ** (2.0 / net.radio_exponent))

    error = float(p @ radio_coverage(np.asarray(instance.full_prefill, dtype=float)) - radio_coverage(own).mean())
    return Fit(
        k,
        len(instance.requests),
        float(p @ instance.full_prefill) / float(own.mean()),
        float(np.max(np.abs(f_model - f_own))),
        error,
        edges,
    )


def choose(fits: Sequence[Fit], slack: float) -> int:
    """The smallest ``K`` whose coverage error is within ``slack`` of the best ``K``'s."""
    best = min(abs(f.coverage_error) for f in fits)
    return min(f.k for f in fits if abs(f.coverage_error) <= best + slack)


def table(title: str, fits: Sequence[Fit], chosen: int) -> str:
    lines = [title, "| `K` | columns | `Σ p g(L)` / `E g(L_i)` | Kolmogorov distance | coverage error at τ₀ |", "|---|---|---|---|---|"]
    for f in fits:
        mark = " (chosen)" if f.k == chosen else ""
        lines.append(f"| {f.label}{mark} | {f.columns} | {f.mean_ratio:.3f} | {f.distance:.3f} | {f.coverage_error:+.4f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bins", default="1,2,4,8,16,32", help="K values; Kt splits the bins at the target (docs/model.md (2.10)); default: 1,2,4,8,16,32"
    )
    parser.add_argument("--slack", type=float, default=0.01, help="tolerance of the rule in coverage (default: 0.01)")
    args = parser.parse_args(argv)
    try:
        ks = [variant(k) for k in args.bins.split(",")]
    except ValueError as err:
        parser.error(str(err).replace("--variants", "--bins"))
    records = list(read_trace(MOONCAKE_TRACE))
    train, test = records[: split_index(len(records), 0.5)], records[split_index(len(records), 0.5) :]
    cut = split_index(len(train), 0.5)
    fit_part, check_part = train[:cut], train[cut:]
    recent = train[cut:]
    inside = [compare(trace_instance(fit_part, k, e), fit_part, k, e) for k, e in ks]
    check = [compare(trace_instance(fit_part, k, e), check_part, k, e) for k, e in ks]
    chosen = choose(check, args.slack)
    print(f"requests: fit {len(fit_part)}, check {len(check_part)} (the training half's two parts), test {len(test)}")
    print(table("\nfit part (in sample; not used by the rule)", inside, chosen))
    print(table("\ncheck part (chooses K)", check, chosen))
    whole = [compare(trace_instance(train, k, e), train, k, e) for k, e in ks]
    print(table("\nwhole training half, in sample (F = 1, docs/model.md (2.10))", whole, chosen))
    window = [compare(trace_instance(recent, k, e), recent, k, e) for k, e in ks]
    print(table("\nits recent half, in sample (F = 0.5, docs/model.md §17.11)", window, chosen))
    report = [compare(trace_instance(train, k, e), test, k, e) for k, e in ks]
    print(table("\ntest half, instance from the whole training half (reported, not used)", report, chosen))
    print(f"\nchosen K = {chosen} (rule: smallest K within {args.slack} of the best on the check part)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
