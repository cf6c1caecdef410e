"""Fig. 7: coverage vs a uniform cached-prefix depth at light, moderate and heavy load.

Every node caches the first ``d`` tokens of the deepest shared path (a single tier, so all
routing policies coincide); persistent memory ``B = κ d`` lowers the concurrency
``c = floor((M − κ d)/m_run)`` (docs/model.md §3).  A type ``q`` then hits
``h_q = min(d, its shared depth with that path)``.  Paper: at light load deeper reuse helps;
at moderate and heavy load the optimum moves shallower (concurrency becomes the bottleneck)
and past it extra static cache raises the queue delay or makes the tier unstable.

The loads are the instance's calibrated ``FigureLoads.fig7`` (the paper does not state them).
A *decode-heavy* variant (``D_short = 2.5 s``, ``D_long = 1.5 s``), drawn by earlier versions to
show the concurrency cost on ``paper_calibrated``, is still reported in the JSON.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.paper.calibration import checks
from edgeprefix.benchmarks.paper.calibration.targets import TARGET
from edgeprefix.benchmarks.paper.figures._common import (
    check_point,
    finish,
    loads_of,
    point,
    resolve_instance,
    result,
    series_xy,
    subtitle,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance, PlacementSpec
from edgeprefix.placement.model.profiles import Profile
from edgeprefix.placement.model.workload import Prefix

FIGURE = 7
DECODE_HEAVY = {"short": 2.5, "long": 1.5}  # D_q of the decode-heavy variant, seconds
DECODE_HEAVY_LOADS = {"light": 1.0, "moderate": 3.0, "heavy": 3.5}
STEPS = 25
QUICK_STEPS = 13  # every other depth of the full grid


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
    return instance.replace(
        name=f"{instance.name}@uniform{cached:g}", prefixes=prefixes, requests=requests, profiles=(profile,), placement=placement
    )


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
        rows.append(
            {
                "depth": float(d),
                "coverage": float(ev.coverage(target)),
                "concurrency": c,
                "utilization": float(ev.utilization[0]),
                "mean_wait": float(ev.mean_wait[0]),
            }
        )
    return rows


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None, *, echo: bool = True) -> dict[str, Any]:
    """Coverage vs uniform depth per load; ``optimum[variant][label]`` is each best depth.

    The checked claims: the heavy-load optimum is strictly shallower than the light-load one,
    the moderate-load optimum is not deeper, and past the heavy-load optimum coverage collapses
    (falls by at least ``checks.COLLAPSE_DROP``).  The decode-heavy variant of earlier versions
    is still computed and reported under its keys but no longer drawn.
    """
    inst = resolve_instance(instance)
    top, _ = shared_depths(inst)
    depths = np.linspace(0.0, top, QUICK_STEPS if quick else STEPS)
    loads = loads_of(inst).fig7_labels
    variants = {"calibrated": (inst, loads), "decode-heavy": (decode_heavy(inst), DECODE_HEAVY_LOADS)}
    points: list[dict[str, Any]] = []
    optimum: dict[str, dict[str, Any]] = {}
    past: dict[str, dict[str, Any]] = {}
    for variant, (model, variant_loads) in variants.items():
        optimum[variant], past[variant] = {}, {}
        for label, load in variant_loads.items():
            rows = depth_curve(model, depths, load)
            best = max(rows, key=lambda r: r["coverage"])
            optimum[variant][label] = {
                "load": load,
                "depth": best["depth"],
                "coverage": best["coverage"],
                "concurrency": best["concurrency"],
            }
            past[variant][label] = min((r["coverage"] for r in rows if r["depth"] > best["depth"]), default=None)
            for r in rows:
                points.append(
                    point(
                        f"{variant} {label} (Λ={load:g})",
                        r["depth"],
                        r["coverage"],
                        None,
                        concurrency=r["concurrency"],
                        utilization=r["utilization"],
                        mean_wait=r["mean_wait"],
                    )
                )
    opt = optimum["calibrated"]
    drop = opt["heavy"]["coverage"] - past["calibrated"]["heavy"] if past["calibrated"]["heavy"] is not None else 0.0
    points += [
        check_point(
            checks.Check(
                FIGURE,
                "optimum depth: heavy − light",
                f"Λ={loads['heavy']:g} vs {loads['light']:g}",
                opt["heavy"]["depth"] - opt["light"]["depth"],
                0.0,
                "<",
            )
        ),
        check_point(
            checks.Check(
                FIGURE,
                "optimum depth: moderate − light",
                f"Λ={loads['moderate']:g} vs {loads['light']:g}",
                opt["moderate"]["depth"] - opt["light"]["depth"],
                0.0,
                "≤",
            )
        ),
        check_point(checks.Check(FIGURE, "collapse past the heavy-load optimum", f"Λ={loads['heavy']:g}", drop, checks.COLLAPSE_DROP, "≥")),
    ]
    payload = result(
        FIGURE,
        "coverage vs uniform cached depth d",
        points,
        instance=inst.name,
        optimum=optimum,
        worst_past_optimum=past,
        decode_heavy=DECODE_HEAVY,
        loads=loads,
    )

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        styles = {"light": ("tab:blue", "-", "o"), "moderate": ("tab:orange", "--", "s"), "heavy": ("tab:red", ":", "^")}
        for label, load in loads.items():
            color, ls, marker = styles[label]
            xs, ys = series_xy(points, f"calibrated {label} (Λ={load:g})")
            ax.plot(xs, ys, color=color, ls=ls, marker=marker, ms=4, label=f"{label}, Λ = {load:g}")
            o = opt[label]
            ax.plot([o["depth"]], [o["coverage"]], marker="*", ms=16, color=color, mec="k", zorder=5)
            ax.axvline(o["depth"], color=color, lw=0.8, ls=ls, alpha=0.6)
        slots = [p["concurrency"] for p in points if p["series"] == f"calibrated light (Λ={loads['light']:g})"]
        starts = [0] + [i for i in range(1, len(slots)) if slots[i] != slots[i - 1]]
        for a, b in zip(starts, [*starts[1:], len(slots)]):  # label each concurrency plateau wide enough to read
            lo, hi = depths[a], depths[b - 1]
            if hi - lo >= 0.06 * depths[-1]:
                ax.text(0.5 * (lo + hi), 1.03, f"c = {slots[a]}", ha="center", fontsize=7, color="gray")
        ax.set_xlabel("uniform cached depth d [tokens] (c = concurrency per node)")
        ax.set_ylabel(f"TTFT coverage $P_{{cov}}({TARGET}\\,s)$")
        ax.set_ylim(0, 1.08)
        ax.grid(alpha=0.3)
        ax.set_title(
            f"Fig. 7: coverage vs uniform cached depth (★ = optimum)\n{subtitle(inst, 'nearest routing, one tier; loads in legend')}",
            fontsize=10,
        )
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="load", title_fontsize=8)

    return finish(payload, out, draw, echo=echo, size=(9.0, 5.0))
