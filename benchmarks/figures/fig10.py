"""Fig. 10: the best profile mix among the feasible candidates vs load.

The candidate set is the 1/K simplex lattice (K = 20, 5 % steps) under the instance's linear
constraints of MODEL.md §10.1 (memory budget ``B̄``, fallback share ``π_min``, caps
``π_s^max``); the package's ``grid`` solver scores every candidate at its load-aware fixed
point and keeps the best stable one.  Paper: 20 % deep at light and moderate load; 15 % deep
and 50 % shallow at high load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.calibration.targets import FIG10_LOADS, FIG10_PAPER, TARGET
from benchmarks.figures._common import finish, point, resolve_instance, result
from formulations.placement import placement_problem
from placement.instance import Instance
from solvers import solve

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
    payload = result(FIGURE, f"best mix among the 1/{k} candidates vs load", points, instance=inst.name, best=best,
                     resolution=k)

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        labels = list(best)
        bottom = np.zeros(len(labels))
        for sid in inst.profile_ids:
            shares = np.array([best[lab]["mix"][sid] for lab in labels])
            ax.bar(labels, shares, bottom=bottom, label=sid)
            bottom += shares
        for i, lab in enumerate(labels):
            ax.text(i, 1.01, f"P_cov={best[lab]['coverage']:.3f}", ha="center", fontsize=8)
        ax.set_ylabel("profile share π_s")
        ax.set_ylim(0, 1.1)
        ax.set_title("Fig. 10: best candidate mix (paper: 20 % deep; high load 15 % deep, 50 % shallow)", fontsize=9)
        ax.legend(fontsize=8)

    return finish(payload, out, draw, echo=echo)
