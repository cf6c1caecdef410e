"""Fig. 4: association per profile, Theorem 1 against an exact nearest-distance Monte Carlo.

At the load-aware operating point of the instance's default mix, the analytical ``A_{s,q}``
(eq. (25)) of every request type is compared with ``2·10⁵`` samples of the exact nearest
distances ``R_s = sqrt(−ln U / (π λ_s))`` (eq. (52)) routed by the same biases ``β_{s,q}``.  The
paper reports a max abs error below ``10⁻³``; it also reads the bars: the longest request
prefers the deepest profile, the shortest spreads over the shallow and uncached ones.
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
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.simulation import simulate_instance_association

FIGURE = 4
SAMPLES = 200_000
QUICK_SAMPLES = 50_000
PAPER_MAX_ERROR = 1e-3


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None,
        *, seed: int = 4, echo: bool = True) -> dict[str, Any]:
    """Analysis vs Monte Carlo association bars; ``max_abs_error`` is ``max |A − Â|``."""
    inst = resolve_instance(instance)
    ev = evaluate(inst, None, "load_aware")
    samples = QUICK_SAMPLES if quick else SAMPLES
    mc = simulate_instance_association(inst, ev.mix, np.nan_to_num(ev.bias, nan=np.inf), samples=samples, seed=seed)
    error = float(np.max(np.abs(mc.association - ev.association)))
    points = []
    for q, qid in enumerate(inst.request_ids):
        length = int(inst.lengths[q])
        for s, sid in enumerate(inst.profile_ids):
            points.append(point(f"analysis/{qid} ({length} tok)", sid, float(ev.association[s, q])))
            points.append(point(f"monte_carlo/{qid} ({length} tok)", sid, float(mc.association[s, q])))
    points.append(point("max_abs_error", "all", error, PAPER_MAX_ERROR))
    payload = result(FIGURE, "association A_{s,q}: Theorem 1 vs Monte Carlo", points, instance=inst.name,
                     samples=samples, max_abs_error=error, preferred_profile={
                         qid: inst.profile_ids[int(np.argmax(ev.association[:, q]))] for q, qid in enumerate(inst.request_ids)})

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        width = 0.8 / (2 * len(inst.request_ids))
        x = np.arange(len(inst.profile_ids))
        for q, qid in enumerate(inst.request_ids):
            off = (2 * q - len(inst.request_ids)) * width
            ax.bar(x + off, ev.association[:, q], width, label=f"{qid}: analysis")
            ax.bar(x + off + width, mc.association[:, q], width, label=f"{qid}: Monte Carlo", alpha=0.6)
        ax.set_xticks(x, inst.profile_ids)
        ax.set_ylabel("association probability $A_{s,q}$")
        ax.set_title(f"Fig. 4 — max |error| = {error:.1e} ({samples} samples)")
        ax.legend(fontsize=8)

    return finish(payload, out, draw, echo=echo)
