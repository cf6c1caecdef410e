"""Cost of Erlang B against the number of servers: the recursion vs the O(1) ratio (docs/model.md §16).

Run ``python -m edgeprefix.benchmarks.speed.erlang_speed [--quick | --smoke] [--out DIR]``.  Two tables,
every ratio measured in the same run:

* one queue at ``ρ = 0.99``: the median time of one call of the recursion
  ``E_k = a E_{k−1} / (k + a E_{k−1})`` (``c`` steps on Python floats) and of
  :func:`edgeprefix.placement.model.erlang.erlang_b_large_scalar`, and their relative difference
  (absolute below 1e-290, where a subnormal result has no relative precision);
* one evaluation (fixed point + ``P_cov(τ_0)``) of ``paper_baseline`` and of the same instance with
  ``gpu.memory`` raised so that ``c_s`` reaches ``10³ … 10⁸``: with the package's Erlang B, and with
  the recursion forced for every ``c`` (:data:`edgeprefix.placement.model.queueing.LARGE_SERVERS`
  raised), where that takes at most ``--recursion-limit`` servers (default ``10⁶``; the recursion's
  time grows linearly, ~1 s per ``10⁷`` servers and queue on this machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.model import queueing
from edgeprefix.placement.model.erlang import erlang_b_large_scalar
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance, default_instance


@dataclass(frozen=True)
class QueueRow:
    servers: int
    recursion_us: float
    closed_form_us: float
    relative_difference: float


@dataclass(frozen=True)
class EvaluationRow:
    gpu_memory: float
    max_servers: int
    package_ms: float
    recursion_ms: float | None  # None: not run (beyond the recursion limit)
    coverage: float
    coverage_difference: float | None


def _median_seconds(fn: Callable[[], object], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _recursion(a: float, c: int) -> float:
    e = 1.0
    for k in range(1, c + 1):
        e = a * e / (k + a * e)
    return e


def queue_rows(servers: list[int], reps: int) -> list[QueueRow]:
    rows = []
    for c in servers:
        a = 0.99 * c
        slow = _median_seconds(lambda: _recursion(a, c), max(1, min(reps, int(2e6 // c))))
        fast = _median_seconds(lambda: erlang_b_large_scalar(a, c), reps)
        exact = _recursion(a, c)
        error = abs(erlang_b_large_scalar(a, c) - exact)
        rows.append(QueueRow(c, 1e6 * slow, 1e6 * fast, error / exact if exact > 1e-290 else error))
    return rows


def _with_memory(instance: Instance, memory: float) -> Instance:
    return instance.replace(gpu=dataclasses.replace(instance.gpu, memory=memory))


def evaluation_rows(memories: list[float], reps: int, recursion_limit: int) -> list[EvaluationRow]:
    base = default_instance()
    rows = []
    for memory in memories:
        inst = base if memory == base.gpu.memory else _with_memory(base, memory)
        tau = inst.placement.target
        coverage = float(evaluate(inst).coverage(tau))
        package = _median_seconds(lambda: evaluate(inst).coverage(tau), reps)
        recursion_ms: float | None = None
        difference: float | None = None
        if int(inst.concurrency.max()) <= recursion_limit:
            saved = queueing.LARGE_SERVERS
            queueing.LARGE_SERVERS = 1 << 62  # the recursion for every c
            try:
                slow = evaluate(inst)
                recursion_ms = 1e3 * _median_seconds(
                    lambda: evaluate(inst).coverage(tau), max(1, reps if inst.concurrency.max() < 1e4 else 1)
                )
                difference = abs(float(slow.coverage(tau)) - coverage)
            finally:
                queueing.LARGE_SERVERS = saved
        rows.append(EvaluationRow(memory, int(inst.concurrency.max()), 1e3 * package, recursion_ms, coverage, difference))
    return rows


def render(queues: list[QueueRow], evaluations: list[EvaluationRow]) -> str:
    lines = [
        f"load average {[round(v, 2) for v in os.getloadavg()]}",
        f"{'c (ρ = 0.99)':>12}{'recursion µs':>14}{'O(1) µs':>10}{'ratio':>9}{'rel. diff':>11}",
    ]
    for r in queues:
        lines.append(
            f"{r.servers:>12}{r.recursion_us:>14.1f}{r.closed_form_us:>10.2f}{r.recursion_us / r.closed_form_us:>9.0f}{r.relative_difference:>11.1e}"
        )
    lines += ["", f"{'gpu.memory':>12}{'max c_s':>11}{'package ms':>12}{'recursion ms':>14}{'ratio':>8}{'P_cov':>9}{'|ΔP_cov|':>10}"]
    for e in evaluations:
        slow = "" if e.recursion_ms is None else f"{e.recursion_ms:.1f}"
        ratio = "" if e.recursion_ms is None else f"{e.recursion_ms / e.package_ms:.0f}"
        diff = "" if e.coverage_difference is None else f"{e.coverage_difference:.1e}"
        lines.append(f"{e.gpu_memory:>12.3g}{e.max_servers:>11}{e.package_ms:>12.2f}{slow:>14}{ratio:>8}{e.coverage:>9.4f}{diff:>10}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.speed.erlang_speed", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and sizes")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (for the tests)")
    parser.add_argument(
        "--recursion-limit", type=int, default=10**6, metavar="C", help="largest c for which the forced recursion is timed (default 10^6)"
    )
    parser.add_argument("--out", default=None, help="folder for erlang_speed.json")
    args = parser.parse_args(argv)
    if args.smoke:
        servers, memories, reps = [64, 1000], [12.5, 1e3], 3
    elif args.quick:
        servers, memories, reps = [64, 10**3, 10**5], [12.5, 1e3, 1e5, 1e8], 20
    else:
        servers, memories, reps = [64, 10**3, 10**4, 10**5, 10**6], [12.5, 1e3, 1e4, 1e5, 1e6, 1e8], 50
    queues = queue_rows(servers, reps)
    evaluations = evaluation_rows(memories, reps, args.recursion_limit)
    print(render(queues, evaluations))
    if args.out is not None:
        payload = {"load_average": os.getloadavg(), "queues": [asdict(r) for r in queues], "evaluations": [asdict(r) for r in evaluations]}
        atomic_write_text(os.path.join(args.out, "erlang_speed.json"), json.dumps(payload, indent=2) + "\n")
        print(f"wrote {os.path.join(args.out, 'erlang_speed.json')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
