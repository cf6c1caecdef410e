"""Fig. 3-style pairwise preference boundary (eq. (46)) for two candidate nodes.

For the longest request type, a deep-prefix node at distance ``r_t`` beats a node of the
fallback (uncached) profile at ``r_s`` iff
``ξ (r_t^α − r_s^α) < g(L − h_s) − g(L − h_t) + W̄_s − W̄_t``.  The boundary
``r_t*(r_s) = (r_s^α + [Δg + W̄_s − W̄_t]/ξ)^{1/α}`` is curved (superlinear radio) and the
admissible distance advantage collapses as the queue delay ``W̄_t`` at the deep node grows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.paper.calibration import checks
from edgeprefix.benchmarks.paper.figures._common import (
    check_point,
    finish,
    point,
    resolve_instance,
    result,
    series_xy,
    subtitle,
)
from edgeprefix.placement.model.instance import Instance

FIGURE = 3
CURVES = 5  # deep-node delays W̄_t spread over [0, τ] (W̄_s = 0)


def boundary(instance: Instance, r_s: np.ndarray, wait_t: float, wait_s: float = 0.0) -> np.ndarray:
    """``r_t*(r_s)`` of eq. (46) for the longest type, deepest vs fallback profile (0 where never preferred)."""
    q = int(np.argmax(instance.lengths))
    deep = int(np.argmax(instance.hit_depth[:, q]))
    fall = instance.fallback_index if instance.fallback_index is not None else int(np.argmin(instance.hit_depth[:, q]))
    xi, alpha = instance.network.radio_scale, instance.network.radio_exponent
    gain = instance.residual_prefill[fall, q] - instance.residual_prefill[deep, q] + wait_s - wait_t
    return np.maximum(r_s**alpha + gain / xi, 0.0) ** (1.0 / alpha)


def collapse_wait(instance: Instance) -> float:
    """``W̄_t`` at which the deep node loses its advantage even at zero extra distance (``r_t*(0) = 0``)."""
    return float(boundary(instance, np.array([0.0]), 0.0)[0] ** instance.network.radio_exponent * instance.network.radio_scale)


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None, *, echo: bool = True) -> dict[str, Any]:
    """Boundaries for deep-node delays ``W̄_t`` from 0 to the TTFT target ``τ`` (five curves).

    A queue delay beyond ``τ`` misses the target wherever the node is, so ``[0, τ]`` is the range
    that matters; the distance axis runs to 1.2 times the largest admissible ``r_t*``.  Checked
    claim: the admissible distance advantage collapses (``r_t*(0) = 0``) inside the plotted
    range, i.e. at a delay ``W̄_t ≤ τ``.
    """
    inst = resolve_instance(instance)
    tau = inst.placement.target
    waits = tuple(float(w) for w in np.linspace(0.0, tau, CURVES))
    reach = float(boundary(inst, np.array([0.0]), 0.0)[0])
    r_max = max(1.0, 1.2 * reach)
    r_s = np.linspace(0.0, r_max, 5 if quick else 41)
    points = []
    for w in waits:
        for r, rt in zip(r_s, boundary(inst, r_s, w)):
            points.append(point(f"W_deep={w:g}s", float(r), float(rt)))
    advantage = {w: float(boundary(inst, np.array([0.0]), w)[0]) for w in waits}
    collapse = collapse_wait(inst)
    points.append(check_point(checks.Check(FIGURE, "deep advantage collapses at W̄_t (within [0, τ])", "r_s = 0", collapse, tau, "≤")))
    payload = result(
        FIGURE,
        "eq. (46) boundary: farthest preferred deep node r_t* vs fallback node distance r_s",
        points,
        instance=inst.name,
        advantage_at_zero=advantage,
        collapse_wait=collapse,
        waits=list(waits),
    )

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        for w in waits:
            ax.plot(*series_xy(points, f"W_deep={w:g}s"), label=f"$\\bar W_t$ = {w:.2g} s")
        ax.plot(r_s, r_s, "k:", lw=0.8, label="equal distance")
        ax.set_xlabel("distance to the uncached node $r_s$ [distance units]")
        ax.set_ylabel("farthest preferred deep node $r_t^*$")
        ax.set_xlim(0, r_max)
        ax.set_ylim(0, None)
        ax.grid(alpha=0.3)
        ax.set_title(
            f"Fig. 3: deep node preferred below each curve; advantage gone at $\\bar W_t$ = {collapse:.2f} s\n"
            f"{subtitle(inst, 'no load: deep-node delay swept, fallback delay 0')}",
            fontsize=9,
        )
        ax.legend(fontsize=8)

    return finish(payload, out, draw, echo=echo)
