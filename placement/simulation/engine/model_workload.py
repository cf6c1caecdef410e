"""The model's own workload, drawn as requests with block ids, for the engine room (docs/model.md §17).

``n`` requests of the instance's types (``q ~ p_q``), Poisson arrivals (the replay's
``arrivals="poisson"``), each of type length ``L_q`` and hit depth ``h_{s,q}`` per profile, and
``round(D_q / d)`` output tokens (``d`` seconds per decode step: the type's decode time becomes
a token count for the batching engine).  Block ids come from
:func:`~.blocks.synthetic_block_trace`: a type's prefix path shares its ids with every request
through it, the rest of each prompt is its own.

:func:`engine_rows` replays that workload on engine nodes at several intensities beside the
analytical coverage (``validate --engine``, the benchmarks).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.pipeline.trace_workload import TraceWorkload
from edgeprefix.placement.simulation.engine.blocks import BlockTrace, synthetic_block_trace
from edgeprefix.placement.simulation.engine.cluster import engine_replay
from edgeprefix.placement.simulation.engine.step_time import StepTime
from edgeprefix.placement.simulation.replay import ReplaySpec

MODEL_BLOCK = 16  # tokens per synthetic block (the engine's default block: hit depths exact to 16 tokens)


def model_workload(
    instance: Instance, n: int, seconds_per_token: float, seed: int | np.random.Generator | None = None, block_size: int = MODEL_BLOCK
) -> tuple[TraceWorkload, BlockTrace]:
    """``n`` requests of the instance's types with their block ids (see the module docstring)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"--requests must be an integer >= 2, got {n!r}")
    if not (np.isfinite(seconds_per_token) and seconds_per_token > 0):
        raise ValueError(f"seconds per decode token must be > 0, got {seconds_per_token!r}")
    rng = np.random.default_rng(seed)
    p = np.asarray(instance.probabilities, dtype=float)
    kind = rng.choice(p.size, size=n, p=p / p.sum()).astype(np.int64)
    length = np.asarray(instance.lengths, dtype=float)[kind]
    output = np.maximum(np.round(np.asarray(instance.decodes, dtype=float)[kind] / seconds_per_token), 1.0)
    hit = np.minimum(np.asarray(instance.hit_depth, dtype=float)[:, kind], length[None, :])
    workload = TraceWorkload(np.arange(n, dtype=float), length, output, hit, kind, np.ones(n, dtype=bool))
    return workload, synthetic_block_trace(instance, kind, length, block_size)


def engine_rows(
    instance: Instance,
    mix: Any,
    intensities: tuple[float, ...],
    *,
    step: StepTime | None,
    engine: str,
    cache: str,
    router: str,
    telemetry: Any,
    requests: int,
    replications: int,
    nodes: float,
    seed: int,
    tau: float,
) -> list[dict[str, Any]]:
    """Per intensity: coverage on engine nodes (mean ± SE over replications) beside the analytical one."""
    d = step.decode_run(1, 1, 0.0) if step is not None else float(np.min(instance.decodes) / 100.0)
    out = []
    for lam in intensities:
        inst = instance.with_network(request_intensity=lam)
        covs, rows = [], []
        for r, s in enumerate(np.random.SeedSequence(seed).spawn(replications)):
            wl, blocks = model_workload(inst, requests, d, seed=np.random.default_rng(s))
            spec = ReplaySpec(
                decode_per_token=d,
                nodes=nodes,
                router=router,
                engine=engine,
                cache=cache,
                telemetry=telemetry,
                target=tau,
                arrivals="poisson",
                hits="type",
                lengths="type",
            )
            res = engine_replay(inst, wl, mix, spec, blocks=blocks, step=step, seed=np.random.default_rng(s))
            covs.append(res.coverage())
            rows.append(res.engine_summary())
        ev = evaluate(inst, mix, "load_aware", target=tau)
        c = np.asarray(covs)
        out.append(
            {
                "intensity": lam,
                "coverage_engine": float(c.mean()),
                "coverage_engine_se": float(c.std(ddof=1) / np.sqrt(c.size)) if c.size > 1 else float("nan"),
                "coverage_analytical": float(ev.coverage(tau)),
                **{
                    k: float(np.mean([row[k] for row in rows]))
                    for k in ("hit_rate_blocks", "ttft_p50", "ttft_p90", "ttft_p99", "preemptions", "node_load_cv", "radio_mean")
                },
            }
        )
    return out
