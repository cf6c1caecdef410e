"""Fig. 10: the best profile mix among the feasible candidates vs load.

The candidate set is the 1/K simplex lattice (K = 20, 5 % steps) under the instance's linear
constraints of docs/model.md §10.1 (memory budget ``B̄``, fallback share ``π_min``, caps
``π_s^max``); the package's ``grid`` solver scores every candidate at its load-aware fixed
point and keeps the best stable one.  Paper: 20 % deep at light and moderate load; 15 % deep
and 50 % shallow at high load.

The light, moderate and high loads are the instance's calibrated ``FigureLoads.fig10`` (the
paper does not state them).  The *decode-heavy* series of earlier versions (Fig. 7's variant
with the budget and the deep cap lifted) is still reported in the JSON.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.paper.calibration import checks
from edgeprefix.benchmarks.paper.calibration.targets import FIG10_PAPER, TARGET
from edgeprefix.benchmarks.paper.figures._common import (
    add_check_fields,
    check_point,
    finish,
    loads_of,
    point,
    resolve_instance,
    result,
    subtitle,
)
from edgeprefix.benchmarks.paper.figures.fig7 import DECODE_HEAVY_LOADS, decode_heavy
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


def run(
    quick: bool = False,
    out: Path | str | None = None,
    instance: Instance | str | None = None,
    *,
    resolution: int | None = None,
    echo: bool = True,
) -> dict[str, Any]:
    """Best mix per load label (``light``/``moderate``/``high``); ``best`` maps label → mix.

    The loads are the instance's calibrated ``FigureLoads.fig10``.  Checked claims: each share
    the paper states within ``±checks.MIX_TOLERANCE``, and from light to high load the deep share
    falls while the shallow share grows.  The decode-heavy variant of earlier versions is still
    computed and reported (``best_decode_heavy``) but no longer drawn.
    """
    inst = resolve_instance(instance)
    k = resolution or RESOLUTION  # the candidate set is small (≤ 231 mixes): quick mode keeps it
    loads = loads_of(inst).fig10_labels
    points: list[Any] = []
    best: dict[str, dict[str, Any]] = {}
    for label, load in loads.items():
        mix, coverage, scored = best_mix(inst, load, k)
        best[label] = {"load": load, "mix": mix, "coverage": coverage, "candidates": scored}
        for sid, share in mix.items():
            row = point(f"{sid} share", f"{label} (Λ={load:g})", share, FIG10_PAPER.get(label, {}).get(sid))
            if row["paper"] is not None:
                add_check_fields(row, checks.approx(FIGURE, f"{label}: {sid} share", row["x"], share, row["paper"], checks.MIX_TOLERANCE))
            points.append(row)
        points.append(point("coverage", f"{label} (Λ={load:g})", coverage))
    for sid, relation, claim in (
        ("deep", "<", "deep share: high − light (falls)"),
        ("shallow", ">", "shallow share: high − light (expands)"),
    ):
        if sid in inst.profile_ids:
            points.append(
                check_point(
                    checks.Check(FIGURE, claim, "high vs light", best["high"]["mix"][sid] - best["light"]["mix"][sid], 0.0, relation)
                )
            )
    variant = unconstrained(decode_heavy(inst))
    best_variant: dict[str, dict[str, Any] | None] = {}
    for label, load in DECODE_HEAVY_LOADS.items():
        try:
            mix, coverage, scored = best_mix(variant, load, k)
        except ValueError:  # the variant can be overloaded at every candidate: reported as None
            best_variant[label] = None
            continue
        best_variant[label] = {"load": load, "mix": mix, "coverage": coverage, "candidates": scored}
        for sid, share in mix.items():
            points.append(point(f"decode-heavy {sid} share", f"{label} (Λ={load:g})", share))
    payload = result(
        FIGURE,
        f"best mix among the 1/{k} candidates vs load",
        points,
        instance=inst.name,
        best=best,
        best_decode_heavy=best_variant,
        resolution=k,
        loads=loads,
    )

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        labels = [f"{lab}\nΛ = {best[lab]['load']:g}" for lab in best]
        x = np.arange(len(labels))
        bottom = np.zeros(len(labels))
        colors = {"none": "0.7", "shallow": "tab:blue", "deep": "tab:red"}
        for sid in inst.profile_ids:
            shares = np.array([best[lab]["mix"][sid] for lab in best])
            ax.bar(x, shares, 0.55, bottom=bottom, label=f"{sid} (ours)", color=colors.get(sid), edgecolor="k")
            for j, (b, h) in enumerate(zip(bottom, shares)):
                if h >= 0.05:
                    ax.text(j, b + h / 2, f"{h:.2f}", ha="center", va="center", fontsize=8)
            bottom += shares
        for j, lab in enumerate(best):  # the paper's stated shares, as dashes beside the bars
            paper = FIG10_PAPER.get(lab, {})
            text = ", ".join(f"{sid} {v:.2f}" for sid, v in paper.items())
            ax.text(j, 1.02, f"P_cov = {best[lab]['coverage']:.3f}\npaper: {text}", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x, labels)
        ax.set_xlabel("load (request intensity Λ)")
        ax.set_ylabel("profile share $\\pi_s$ of the best candidate")
        ax.set_ylim(0, 1.25)
        plc = inst.placement
        caps = ", ".join(f"π_{sid} ≤ {cap:.3g}" for sid, cap in plc.max_share)
        budget = "no budget" if plc.memory_budget is None else f"B̄ = {plc.memory_budget:.3g}"
        constraints = f"{budget}, π_min = {plc.fallback_min:.3g}" + (f", {caps}" if caps else "")
        ax.set_title(f"Fig. 10: best mix among the 1/{k} candidates\n{subtitle(inst, 'loads on the x-axis; ' + constraints)}", fontsize=9)
        ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5))

    return finish(payload, out, draw, echo=echo, size=(8.5, 5.0))
