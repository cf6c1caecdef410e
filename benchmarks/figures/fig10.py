"""Fig. 10: the best profile mix among the feasible candidates vs load.

The candidate set is the 1/K simplex lattice (K = 20, 5 % steps) under the instance's linear
constraints of docs/model.md §10.1 (memory budget ``B̄``, fallback share ``π_min``, caps
``π_s^max``); the package's ``grid`` solver scores every candidate at its load-aware fixed
point and keeps the best stable one.  Paper: 20 % deep at light and moderate load; 15 % deep
and 50 % shallow at high load.

A second, *decode-heavy* series (Fig. 7's variant, ``D_short = 2.5 s``, ``D_long = 1.5 s``, with
the budget and the deep cap lifted, fallback ``π_min`` kept) shows the concurrency trade-off
the calibrated instance cannot show together with Fig. 8 (``benchmarks/calibration/README.md``
§4): there the best deep share falls and the shallow share grows with load.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.calibration.targets import FIG10_LOADS, FIG10_PAPER, TARGET
from edgeprefix.benchmarks.figures._common import (
    finish,
    point,
    resolve_instance,
    result,
)
from edgeprefix.benchmarks.figures.fig7 import DECODE_HEAVY_LOADS, decode_heavy
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.instance import Instance
from edgeprefix.solvers import solve

FIGURE = 10
RESOLUTION = 20  # K of the candidate lattice


def best_mix(instance: Instance, load: float, resolution: int = RESOLUTION) -> tuple[dict[str, float], float, int]:
    """Best candidate mix at ``Λ = load``: (mix by profile id, its coverage, candidates scored)."""
    problem = placement_problem(instance.with_network(request_intensity=load), target=TARGET)
    res = solve(problem, "grid", budget=None, resolution=resolution)
    if not res.success:
        raise ValueError(f"load Λ = {load:g}: no candidate mix is stable ({res.message})")
    mix = {k: round(float(v), 10) for k, v in res.mix.items()}
    return mix, float(res.coverage), int(res.extras.get("grid_points", res.nfev))


def unconstrained(instance: Instance) -> Instance:
    """The instance without the memory budget ``B̄`` and the share caps (``π_min`` kept)."""
    return instance.replace(placement=dataclasses.replace(instance.placement, memory_budget=None, max_share=()))


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None,
        *, resolution: int | None = None, echo: bool = True) -> dict[str, Any]:
    """Best mix per load label (``light``/``moderate``/``high``); ``best`` maps label → mix."""
    inst = resolve_instance(instance)
    k = resolution or RESOLUTION  # the candidate set is small (69 mixes): quick mode keeps it
    points, best = [], {}
    for label, load in FIG10_LOADS.items():
        mix, coverage, scored = best_mix(inst, load, k)
        best[label] = {"load": load, "mix": mix, "coverage": coverage, "candidates": scored}
        for sid, share in mix.items():
            points.append(point(f"{sid} share", f"{label} (Λ={load:g})", share, FIG10_PAPER.get(label, {}).get(sid)))
        points.append(point("coverage", f"{label} (Λ={load:g})", coverage))
    variant = unconstrained(decode_heavy(inst))
    best_variant = {}
    for label, load in DECODE_HEAVY_LOADS.items():
        mix, coverage, scored = best_mix(variant, load, k)
        best_variant[label] = {"load": load, "mix": mix, "coverage": coverage, "candidates": scored}
        for sid, share in mix.items():
            points.append(point(f"decode-heavy {sid} share", f"{label} (Λ={load:g})", share))
    payload = result(FIGURE, f"best mix among the 1/{k} candidates vs load", points, instance=inst.name, best=best,
                     best_decode_heavy=best_variant, resolution=k)

    def draw(fig) -> None:
        panels = (("calibrated (budget, cap 0.2)", best), ("decode-heavy, unconstrained", best_variant))
        for i, (name, table) in enumerate(panels):
            ax = fig.add_subplot(1, 2, i + 1)
            labels = [f"{lab} Λ={table[lab]['load']:g}" for lab in table]
            bottom = np.zeros(len(labels))
            for sid in inst.profile_ids:
                shares = np.array([table[lab]["mix"][sid] for lab in table])
                ax.bar(labels, shares, bottom=bottom, label=sid)
                bottom += shares
            for j, lab in enumerate(table):
                ax.text(j, 1.01, f"P_cov={table[lab]['coverage']:.3f}", ha="center", fontsize=8)
            ax.set_ylabel("profile share π_s")
            ax.set_ylim(0, 1.1)
            ax.set_title(f"Fig. 10, {name}", fontsize=9)
            ax.legend(fontsize=8)

    return finish(payload, out, draw, echo=echo, size=(11.0, 4.2))
