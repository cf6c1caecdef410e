"""Fig. 1-style map: one sampled network and the region each request type sends to each node.

A PPP network is drawn on a torus (``edgeprefix.placement.simulation.sample_layout``, fixed seed) with the
instance's default mix.  For every location on a grid and every request type the router of
docs/model.md §6 picks ``argmin_x ξ r_x^α + β_{s(x),q}`` with the load-aware biases of the
operating point; the map colours each location by the chosen node's profile.  The table
reports, per type, the share of the area sent to each profile (a spatial estimate of
``A_{s,q}``, for comparison with Theorem 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.paper.figures._common import (
    finish,
    point,
    resolve_instance,
    result,
    subtitle,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.simulation import LayoutSpec, sample_layout

FIGURE = 1
NODES = 60  # mean node count of the drawn torus
GRID = 160
QUICK_GRID = 60


def served_map(instance: Instance, bias: np.ndarray, layout: Any, grid: int) -> np.ndarray:
    """Selected node index per grid location and type, ``(Q, grid, grid)`` (torus distances)."""
    xi, alpha = instance.network.radio_scale, instance.network.radio_exponent
    axis = (np.arange(grid) + 0.5) / grid * layout.side
    gx, gy = np.meshgrid(axis, axis)
    loc = np.stack([gx.ravel(), gy.ravel()], axis=1)
    delta = np.abs(loc[:, None, :] - layout.positions[None, :, :])
    delta = np.minimum(delta, layout.side - delta)
    radio = xi * np.sqrt((delta**2).sum(axis=2)) ** alpha  # (grid², N)
    out = []
    for q in range(bias.shape[1]):
        cost = radio + bias[layout.profile, q][None, :]
        out.append(np.argmin(cost, axis=1).reshape(grid, grid))
    return np.stack(out)


def run(
    quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None, *, seed: int = 1, echo: bool = True
) -> dict[str, Any]:
    inst = resolve_instance(instance)
    ev = evaluate(inst, None, "load_aware")
    layout = sample_layout(inst, ev.mix, LayoutSpec(mean_nodes=NODES, counts="exact"), seed=seed)
    bias = np.nan_to_num(ev.bias, nan=np.inf)
    grid = QUICK_GRID if quick else GRID
    chosen = served_map(inst, bias, layout, grid)
    points = []
    area: dict[str, dict[str, float]] = {}
    for q, qid in enumerate(inst.request_ids):
        prof = layout.profile[chosen[q]]
        area[qid] = {}
        for s, sid in enumerate(inst.profile_ids):
            share = float(np.mean(prof == s))
            area[qid][sid] = share
            points.append(point(f"area share/{qid}", sid, share, None, theorem1=float(ev.association[s, q])))
    payload = result(
        FIGURE,
        "sampled network: region each request type sends to each profile",
        points,
        instance=inst.name,
        nodes=layout.nodes,
        area_share=area,
        notes=["ours = share of the map routed to the profile; theorem1 = A_{s,q} (one small sample)"],
    )

    def draw(fig) -> None:
        colors = np.array([[0.6, 0.6, 0.6], [0.35, 0.6, 0.95], [0.9, 0.35, 0.3], [0.4, 0.8, 0.4], [0.8, 0.6, 0.2]])
        for q, qid in enumerate(inst.request_ids):
            ax = fig.add_subplot(1, len(inst.request_ids), q + 1)
            prof = layout.profile[chosen[q]]
            image = colors[prof % len(colors)] * 0.55 + 0.45
            edge = (chosen[q] != np.roll(chosen[q], 1, axis=0)) | (chosen[q] != np.roll(chosen[q], 1, axis=1))
            image[edge] = 0.25  # cell boundaries: where the selected node changes
            ax.imshow(image, origin="lower", extent=(0, layout.side, 0, layout.side), interpolation="nearest")
            for s, sid in enumerate(inst.profile_ids):
                pts = layout.positions[layout.profile == s]
                ax.scatter(pts[:, 0], pts[:, 1], s=18, color=colors[s % len(colors)], edgecolor="k", label=f"{sid} node")
            shares = ", ".join(f"{sid} {area[qid][sid]:.2f}" for sid in inst.profile_ids)
            ax.set_title(f"{qid} request ({int(inst.lengths[q])} tokens)\narea served by: {shares}", fontsize=9)
            ax.set_xlabel("x [distance units]")
            ax.set_ylabel("y [distance units]")
            ax.set_xticks([])
            ax.set_yticks([])
        handles, labels = fig.axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, frameon=False)
        load = f"Λ = {inst.network.request_intensity:g}, λ_b = {inst.network.edge_density:g}, {layout.nodes} nodes, seed {seed}"
        fig.suptitle(f"Fig. 1: region each request type sends to each profile (load-aware router)\n{subtitle(inst, load)}", fontsize=10)

    return finish(payload, out, draw, echo=echo, size=(10.0, 5.8))
