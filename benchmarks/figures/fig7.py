"""Fig. 7: coverage vs a uniform cached-prefix depth at light, moderate and heavy load.

Every node caches the first ``d`` tokens of the deepest shared path (a single tier, so all
routing policies coincide); persistent memory ``B = κ d`` lowers the concurrency
``c = floor((M − κ d)/m_run)`` (docs/model.md §3).  A type ``q`` then hits
``h_q = min(d, its shared depth with that path)``.  Paper: at light load deeper reuse helps;
at moderate and heavy load the optimum moves shallower (concurrency becomes the bottleneck)
and past it extra static cache raises the queue delay or makes the tier unstable.

Two variants are drawn: the calibrated instance itself, where occupancy is dominated by the
prefill that deep caching removes (so deeper is better at every stable load), and a
*decode-heavy* variant (``D_short = 2.5 s``, ``D_long = 1.5 s``) where the saving is small against
the occupancy and the concurrency cost shows (``benchmarks/calibration/README.md`` explains why
the two cannot hold together with Fig. 8).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.calibration.targets import FIG7_LOADS, TARGET
from edgeprefix.benchmarks.figures._common import (
    finish,
    point,
    resolve_instance,
    result,
    series_xy,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance, PlacementSpec
from edgeprefix.placement.model.profiles import Profile
from edgeprefix.placement.model.workload import Prefix

FIGURE = 7
DECODE_HEAVY = {"short": 2.5, "long": 1.5}  # D_q of the decode-heavy variant, seconds
DECODE_HEAVY_LOADS = {"light": 1.0, "moderate": 3.0, "heavy": 3.5}
STEPS = 31
QUICK_STEPS = 13


def shared_depths(instance: Instance) -> tuple[float, dict[str, float]]:
    """The deepest cached path's depth and each type's shared depth with it (tokens)."""
    depth = {p.id: float(p.depth) for p in instance.prefixes}
    deepest = max(instance.profiles, key=lambda s: max((depth[v] for v in s.prefixes), default=0.0))
    chain = set(deepest.prefixes)
    shared = {q.id: max((depth[v] for v in q.path if v in chain), default=0.0) for q in instance.requests}
    return max(shared.values()), shared


def uniform_instance(instance: Instance, cached: float) -> Instance:
    """A single-profile instance whose every node caches ``d = cached`` tokens of the deepest path."""
    _, shared = shared_depths(instance)
    hits = {q: min(cached, s) for q, s in shared.items()}
    levels = sorted({h for h in hits.values() if h > 0})
    prefixes = tuple(Prefix(f"u{i}", h, None if i == 0 else f"u{i - 1}") for i, h in enumerate(levels))
    ids = {h: p.id for h, p in zip(levels, prefixes)}
    requests = tuple(dataclasses.replace(q, path=tuple(ids[h] for h in levels if h <= hits[q.id])) for q in instance.requests)
    profile = Profile("uniform", tuple(p.id for p in prefixes))
    placement = PlacementSpec(target=instance.placement.target, mix=(("uniform", 1.0),))
    return instance.replace(name=f"{instance.name}@uniform{cached:g}", prefixes=prefixes, requests=requests,
                            profiles=(profile,), placement=placement)


def decode_heavy(instance: Instance, decodes: dict[str, float] = DECODE_HEAVY) -> Instance:
    """The instance with the decode occupancies ``D_q`` replaced (types not named keep theirs)."""
    requests = tuple(dataclasses.replace(q, decode=float(decodes.get(q.id, q.decode))) for q in instance.requests)
    return instance.replace(name=f"{instance.name}@decode-heavy", requests=requests)


def depth_curve(instance: Instance, depths: np.ndarray, load: float, target: float = TARGET) -> list[dict[str, float]]:
    """Coverage, concurrency, utilisation and mean wait along the cached depth at ``Λ = load``."""
    rows = []
    for d in depths:
        inst = uniform_instance(instance.with_network(request_intensity=load), float(d))
        c = int(inst.concurrency[0])
        if c < 1:
            rows.append({"depth": float(d), "coverage": 0.0, "concurrency": c, "utilization": float("inf"), "mean_wait": float("inf")})
            continue
        ev = evaluate(inst, None, "nearest", target=target)
        rows.append({"depth": float(d), "coverage": float(ev.coverage(target)), "concurrency": c,
                     "utilization": float(ev.utilization[0]), "mean_wait": float(ev.mean_wait[0])})
    return rows


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None,
        *, echo: bool = True) -> dict[str, Any]:
    """Coverage vs uniform depth per load and variant; ``optimum[variant][label]`` is each best depth."""
    inst = resolve_instance(instance)
    top, _ = shared_depths(inst)
    depths = np.linspace(0.0, top, QUICK_STEPS if quick else STEPS)
    variants = {"calibrated": (inst, FIG7_LOADS), "decode-heavy": (decode_heavy(inst), DECODE_HEAVY_LOADS)}
    points: list[dict[str, Any]] = []
    optimum: dict[str, dict[str, Any]] = {}
    past: dict[str, dict[str, Any]] = {}
    for variant, (model, loads) in variants.items():
        optimum[variant], past[variant] = {}, {}
        for label, load in loads.items():
            rows = depth_curve(model, depths, load)
            best = max(rows, key=lambda r: r["coverage"])
            optimum[variant][label] = {"load": load, "depth": best["depth"], "coverage": best["coverage"],
                                       "concurrency": best["concurrency"]}
            past[variant][label] = min((r["coverage"] for r in rows if r["depth"] > best["depth"]), default=None)
            for r in rows:
                points.append(point(f"{variant} {label} (Λ={load:g})", r["depth"], r["coverage"], None,
                                    concurrency=r["concurrency"], utilization=r["utilization"], mean_wait=r["mean_wait"]))
    payload = result(FIGURE, "coverage vs uniform cached depth d", points, instance=inst.name, optimum=optimum,
                     worst_past_optimum=past, decode_heavy=DECODE_HEAVY)

    def draw(fig) -> None:
        for i, (variant, (_, loads)) in enumerate(variants.items()):
            ax = fig.add_subplot(1, 2, i + 1)
            for label, load in loads.items():
                xs, ys = series_xy(points, f"{variant} {label} (Λ={load:g})")
                ax.plot(xs, ys, marker=".", label=f"{label} Λ={load:g}")
                ax.plot([optimum[variant][label]["depth"]], [optimum[variant][label]["coverage"]], "k*")
            ax.set_xlabel("uniform cached depth d [tokens]")
            ax.set_ylabel(f"TTFT coverage $P_{{cov}}({TARGET}\\,s)$")
            ax.set_title(f"Fig. 7, {variant} (★ = optimum)", fontsize=9)
            ax.legend(fontsize=8)

    return finish(payload, out, draw, echo=echo, size=(11.0, 4.2))
