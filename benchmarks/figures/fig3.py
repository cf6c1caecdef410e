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

from edgeprefix.benchmarks.figures._common import (
    finish,
    point,
    resolve_instance,
    result,
    series_xy,
)
from edgeprefix.placement.model.instance import Instance

FIGURE = 3
DEEP_WAITS = (0.0, 0.1, 0.2, 0.3, 0.4)  # W̄_t at the deep node, seconds (W̄_s = 0)


def boundary(instance: Instance, r_s: np.ndarray, wait_t: float, wait_s: float = 0.0) -> np.ndarray:
    """``r_t*(r_s)`` of eq. (46) for the longest type, deepest vs fallback profile (0 where never preferred)."""
    q = int(np.argmax(instance.lengths))
    deep = int(np.argmax(instance.hit_depth[:, q]))
    fall = instance.fallback_index if instance.fallback_index is not None else int(np.argmin(instance.hit_depth[:, q]))
    xi, alpha = instance.network.radio_scale, instance.network.radio_exponent
    gain = instance.residual_prefill[fall, q] - instance.residual_prefill[deep, q] + wait_s - wait_t
    return np.maximum(r_s**alpha + gain / xi, 0.0) ** (1.0 / alpha)


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None,
        *, echo: bool = True) -> dict[str, Any]:
    inst = resolve_instance(instance)
    r_s = np.linspace(0.0, 2.0, 5 if quick else 21)
    points = []
    for w in DEEP_WAITS:
        for r, rt in zip(r_s, boundary(inst, r_s, w)):
            points.append(point(f"W_deep={w:g}s", float(r), float(rt)))
    advantage = {w: float(boundary(inst, np.array([0.0]), w)[0]) for w in DEEP_WAITS}
    payload = result(FIGURE, "eq. (46) boundary: farthest preferred deep node r_t* vs fallback node distance r_s",
                     points, instance=inst.name, advantage_at_zero=advantage)

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        for w in DEEP_WAITS:
            ax.plot(*series_xy(points, f"W_deep={w:g}s"), label=f"$\\bar W_t$ = {w:g} s")
        ax.plot(r_s, r_s, "k:", lw=0.8, label="equal distance")
        ax.set_xlabel("distance to the uncached node r_s")
        ax.set_ylabel("farthest preferred deep node r_t*")
        ax.set_title("Fig. 3: deep preferred below each curve")
        ax.legend(fontsize=8)

    return finish(payload, out, draw, echo=echo)
