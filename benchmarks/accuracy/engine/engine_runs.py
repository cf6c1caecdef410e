"""Shared pieces of the model-against-the-batching-engine benchmarks (docs/model.md §17.9).

Used by :mod:`.engine_gap`, :mod:`.engine_depth` and :mod:`.engine_decisions`:

- the queue law of the prediction (``--queue-law slots|engine``): ``slots`` is the model's
  ``c_s`` FCFS slots (Erlang C, or the M/G/c law); ``engine`` is passed to the model as
  ``queue_law="engine"`` and only where the model takes that keyword — on a tree without the
  engine law it is refused with one line, never silently replaced by ``slots``;
- an instance with an engine section (the trace-built instance's Llama-2-70B A100 TP 4 engine
  when the instance has none) and its step time fitted to the shipped Splitwise timings;
- the batching-engine network simulation of the model workload (:func:`simulate`, the step time
  defaulted; the simulation itself is :mod:`edgeprefix.placement.simulation.engine.model_network`): replication
  ``r`` draws its requests, network and arrivals from the ``r``-th child of ``SeedSequence(seed)``
  whatever the load, mix or router (common random numbers);
- the engine's stability edge (:func:`stability_edge`): the load at which the waits of the
  simulated network grow through the run.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from edgeprefix.benchmarks.datasets import SPLITWISE_TIMINGS
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.evaluation import Evaluation, evaluate
from edgeprefix.placement.model.instance import Instance, load_instance
from edgeprefix.placement.simulation.engine.model_network import SimSize
from edgeprefix.placement.simulation.engine.model_network import simulate as simulate_network
from edgeprefix.placement.simulation.engine.step_time import StepTime, step_time_from_section
from edgeprefix.placement.simulation.replay import ReplayResult

ROOT = Path(__file__).resolve().parents[3]
INSTANCES = ROOT / "benchmarks" / "instances"
TRACE_INSTANCE = INSTANCES / "mooncake_engine.toml"
QUEUE_LAWS = ("slots", "engine")
NOT_AVAILABLE = "n/a (no engine law in this tree)"


def add_queue_law_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--queue-law",
        choices=QUEUE_LAWS,
        default="slots",
        help="the prediction's node law: slots (the model's c_s FCFS slots) or engine (the law fitted "
        "to the batching engine, where the model has it)",
    )


QUEUE_MODELS = ("meanfield", "cell")


def add_queue_model_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--queue-model",
        choices=QUEUE_MODELS,
        default="meanfield",
        help=f"the queue model of {what} (default meanfield; cell is the engine law's pairing, docs/model.md §17.10.1)",
    )


def takes_law(entry: Callable[..., Any]) -> bool:
    """Whether the model's ``entry`` (``evaluate``, ``placement_problem``, ``density_problem``) takes ``queue_law``."""
    return "queue_law" in inspect.signature(entry).parameters


def engine_law_available() -> bool:
    """Whether this tree's model has the engine law: ``evaluate`` takes ``queue_law``."""
    return takes_law(evaluate)


class LawKeywords(TypedDict, total=False):
    """What :func:`law_keywords` gives: ``queue_law`` or nothing."""

    queue_law: str


def law_keywords(law: str, entry: Callable[..., Any] | None = None) -> LawKeywords:
    """The keywords that select ``law`` in the model's ``entry`` (default ``evaluate``): none for ``slots``;
    ``queue_law=law`` otherwise.

    Raises ValueError (one line) for an unknown law, for ``engine`` where the model has no such law, or where
    ``entry`` does not take it.
    """
    if law not in QUEUE_LAWS:
        raise ValueError(f"--queue-law: one of {', '.join(QUEUE_LAWS)}, got {law!r}")
    if law == "slots":
        return {}
    if not engine_law_available():
        raise ValueError(
            "--queue-law engine: this tree's model has no engine queue law yet (evaluate takes no queue_law); run with --queue-law slots"
        )
    if entry is not None and not takes_law(entry):
        raise ValueError(f"--queue-law engine: {entry.__name__} takes no queue_law in this tree; run with --queue-law slots")
    return {"queue_law": law}


def checked_law(law: str) -> LawKeywords:
    """:func:`law_keywords` for a command line: a bad law exits with one line on stderr (code 2)."""
    try:
        return law_keywords(law)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def with_engine(instance: Instance) -> Instance:
    """``instance`` with an engine section: its own, else the trace-built instance's (Llama-2-70B, A100, TP 4)."""
    if instance.engine is not None:
        return instance
    return instance.replace(engine=load_instance(TRACE_INSTANCE).engine)


def engine_instance(name: str) -> Instance:
    """A shipped benchmark instance by name (``benchmarks/instances/NAME.toml``), with an engine section."""
    path = INSTANCES / f"{name}.toml"
    if not path.is_file():
        raise ValueError(f"--instances: no benchmark instance {name!r} (benchmarks/instances/{name}.toml)")
    return with_engine(load_instance(path))


def step_time(instance: Instance) -> StepTime:
    """The engine's step time fitted to the shipped Splitwise timings."""
    return step_time_from_section(instance.engine, SPLITWISE_TIMINGS)


def add_size_arguments(parser: argparse.ArgumentParser, requests: int = 800, replications: int = 3, nodes: float = 12.0) -> None:
    parser.add_argument("--requests", type=int, default=requests, help=f"model-workload requests per replay (default {requests})")
    parser.add_argument("--replications", type=int, default=replications, help=f"replications (default {replications})")
    parser.add_argument("--nodes", type=float, default=nodes, help=f"expected nodes in the window (default {nodes:g})")
    parser.add_argument("--seed", type=int, default=7, help="seed of the common random numbers (default 7)")


def size_from_args(args: argparse.Namespace) -> SimSize:
    try:
        return SimSize(args.requests, args.replications, args.nodes, args.seed)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error over replications (``inf`` stays ``inf``; SE NaN when any value is infinite)."""
    x = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(x)):
        return (float("inf") if np.any(np.isposinf(x)) else float("nan")), float("nan")
    return float(x.mean()), float(x.std(ddof=1) / np.sqrt(x.size))


def simulate(
    instance: Instance,
    mix: Any,
    intensity: float,
    size: SimSize,
    *,
    router: str = "tier",
    cache: str = "planned",
    step: StepTime | None = None,
    route_law: str = "slots",
) -> list[ReplayResult]:
    """:func:`edgeprefix.placement.simulation.engine.model_network.simulate` with the step time fitted to the shipped
    Splitwise timings when ``step`` is not given (the module docstring's common random numbers)."""
    step = step_time(instance) if step is None else step
    return simulate_network(instance, mix, intensity, size, step=step, router=router, cache=cache, route_law=route_law)


def wait_growth(result: ReplayResult) -> float:
    """Mean wait (arrival to admission) of the last quarter of the measured requests minus that of the
    second quarter, in seconds: near 0 on a stable network, growing with the run on a saturated one.
    A rejected request counts as an infinite wait: rejections in the last quarter give ``inf`` (an overloaded network)."""
    wait = np.where(result.node >= 0, result.wait, np.inf)
    q = np.array_split(wait, 4)
    last, second = float(np.mean(q[3])), float(np.mean(q[1]))
    return float("inf") if math.isinf(last) else last - second


def saturated(results: Sequence[ReplayResult], tau: float) -> bool:
    """The network saturates when, in at least half the replications, the waits of the last quarter exceed
    those of the second quarter by more than ``τ/2`` (a queue that grows through the run)."""
    grows = [wait_growth(r) > 0.5 * tau for r in results]
    return 2 * sum(grows) >= len(grows)


@dataclass(frozen=True)
class Edge:
    """The engine's stability edge: ``stable < edge``, ``edge`` the lowest saturated load found,
    ``edge / stable ≤ 1 + rtol`` unless ``probes`` ran out."""

    stable: float
    edge: float
    probes: int


def stability_edge(
    instance: Instance,
    mix: Any,
    size: SimSize,
    *,
    start: float,
    router: str = "tier",
    rtol: float = 0.1,
    max_probes: int = 24,
    step: StepTime | None = None,
    on_probe: Callable[[float, bool], None] | None = None,
    route_law: str = "slots",
) -> Edge:
    """Bracket (doubling or halving from ``start``) then bisect geometrically the load at which the
    batching-engine network saturates (:func:`saturated`)."""
    if not (math.isfinite(start) and start > 0):
        raise ValueError(f"start: a load > 0, got {start!r}")
    step = step_time(instance) if step is None else step
    tau = float(instance.placement.target)
    probes = 0

    def sat(lam: float) -> bool:
        nonlocal probes
        probes += 1
        out = saturated(simulate(instance, mix, lam, size, router=router, step=step, route_law=route_law), tau)
        if on_probe is not None:
            on_probe(lam, out)
        return out

    lo, hi = None, None
    lam = float(start)
    while probes < max_probes and (lo is None or hi is None):
        if sat(lam):
            hi = lam
            lam /= 2.0
        else:
            lo = lam
            lam *= 2.0
    if lo is None or hi is None:
        raise ValueError(f"stability edge: no bracket within {max_probes} probes from Λ = {start:g}")
    while hi / lo > 1.0 + rtol and probes < max_probes:
        mid = math.sqrt(lo * hi)
        if sat(mid):
            hi = mid
        else:
            lo = mid
    return Edge(lo, hi, probes)


def predict(instance: Instance, mix: Any, intensity: float, queue_model: str, law: str) -> Evaluation:
    """The model's evaluation at ``Λ = intensity`` with ``queue_model`` (meanfield or cell) and the queue ``law``."""
    inst = instance.with_network(request_intensity=float(intensity))
    return evaluate(inst, mix, "load_aware", target=inst.placement.target, queue_model=queue_model, **law_keywords(law))


def model_point(ev: Evaluation) -> dict[str, float]:
    """Coverage at the instance's target, its queue-free part (no waiting), mean TTFT and the 0.9 quantile of a prediction."""
    return {
        "coverage": float(ev.coverage_at_target),
        "no_wait": float(ev.coverage_queue_free(ev.target)),
        "mean_ttft": float(ev.mean_ttft),
        "p90": float(ev.ttft_quantile(0.9)),
    }


def solo_prefill(step: StepTime, uncached: np.ndarray, hit: np.ndarray, budget: int, chunked: bool = True) -> np.ndarray:
    """Seconds from admission to the first token of a request alone on an idle engine: its ``uncached`` prompt tokens
    in chunks of ``budget`` (one chunk without chunked prefill), each a step with no decodes, the context starting at
    its ``hit``."""
    rem = np.asarray(uncached, dtype=float).copy()
    ctx = np.asarray(hit, dtype=float).copy()
    total = np.zeros_like(rem)
    while np.any(rem > 0):
        c = np.where(rem > 0, np.minimum(rem, budget) if chunked else rem, 0.0)
        busy = c > 0
        total += np.where(busy, step.base + step.per_prefill_token * c + step.per_attention * c * (ctx + c), 0.0)
        ctx += c
        rem -= c
    return total


def solo_coverage(result: ReplayResult, instance: Instance, step: StepTime) -> float:
    """The share of the measured requests whose radio term plus :func:`solo_prefill` is within the target: the
    engine's coverage without waiting or batching (rejected requests count as misses)."""
    eng = instance.engine
    assert eng is not None  # an engine replay ran on the instance's [engine] section
    served = result.node >= 0
    radio = instance.network.radio_scale * np.nan_to_num(result.distance) ** instance.network.radio_exponent
    alone = radio + solo_prefill(step, np.maximum(result.length - result.hit, 0.0), result.hit, eng.token_budget, eng.chunked_prefill)
    return float(np.mean(served & (alone <= result.target)))


def sim_point(results: Sequence[ReplayResult], instance: Instance | None = None, step: StepTime | None = None) -> dict[str, float]:
    """Coverage, mean TTFT of the served requests, TTFT p90 (rejected = infinite) and the served share:
    mean ± SE over the replications; with ``instance`` and ``step`` also ``no_wait`` (:func:`solo_coverage`)."""
    cov = mean_se([r.coverage() for r in results])
    extra = {} if instance is None or step is None else {"no_wait": mean_se([solo_coverage(r, instance, step) for r in results])[0]}
    mean = mean_se([r.mean_ttft for r in results])
    p90 = mean_se([float(np.quantile(r.ttft, 0.9, method="inverted_cdf")) for r in results])
    served = float(np.mean([np.mean(r.node >= 0) for r in results]))
    return {
        "coverage": cov[0],
        "coverage_se": cov[1],
        "mean_ttft": mean[0],
        "mean_ttft_se": mean[1],
        "p90": p90[0],
        "p90_se": p90[1],
        "served": served,
        **extra,
    }


def solved_mix(
    instance: Instance, intensity: float, law: str, *, budget: int = 60, seed: int = 0, queue_model: str = "meanfield"
) -> np.ndarray:
    """The package's optimum (gradient search) at ``Λ = intensity`` with the queue ``law`` and ``queue_model``."""
    from edgeprefix.solvers.api import solve

    inst = instance.with_network(request_intensity=float(intensity))
    problem = placement_problem(inst, queue_model=queue_model, **law_keywords(law, placement_problem))
    return np.asarray(solve(problem, "gradient", budget=budget, seed=seed).x, dtype=float)


def reference_mix(instance: Instance, *, budget: int = 60, seed: int = 0) -> np.ndarray:
    """The instance's own mix (``placement.mix``), or, when it has none, the slot law's optimum at its own Λ."""
    if instance.placement.mix is not None:
        return np.asarray(instance.mix_vector(None), dtype=float)
    return solved_mix(instance, float(instance.network.request_intensity), "slots", budget=budget, seed=seed)


def fmt(x: float, digits: int = 3) -> str:
    """A table cell: ``inf``, ``n/a`` for NaN, else ``digits`` decimals."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if math.isinf(x):
        return "∞"
    return f"{x:.{digits}f}"
