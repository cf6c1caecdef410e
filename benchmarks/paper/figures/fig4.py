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

from edgeprefix.benchmarks.paper.calibration import checks
from edgeprefix.benchmarks.paper.figures._common import (
    add_check_fields,
    check_point,
    finish,
    point,
    resolve_instance,
    result,
    subtitle,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.simulation import simulate_instance_association

FIGURE = 4
SAMPLES = 200_000
QUICK_SAMPLES = 50_000
PAPER_MAX_ERROR = 1e-3


def run(
    quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None, *, seed: int = 4, echo: bool = True
) -> dict[str, Any]:
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
    points.append(
        add_check_fields(
            point("max_abs_error", "all", error, PAPER_MAX_ERROR), checks.Check(FIGURE, "max |A − Â|", "all", error, PAPER_MAX_ERROR, "≤")
        )
    )
    q_long, q_short = int(np.argmax(inst.lengths)), int(np.argmin(inst.lengths))
    deepest = int(np.argmax(inst.hit_depth[:, q_long]))
    a = ev.association
    others = [s for s in range(len(inst.profile_ids)) if s != deepest]
    points += [
        check_point(
            checks.Check(
                FIGURE,
                "longest type: share of the deepest profile (strong preference)",
                inst.request_ids[q_long],
                float(a[deepest, q_long]),
                checks.STRONG_PREFERENCE,
                ">",
            )
        ),
        check_point(
            checks.Check(
                FIGURE,
                "shortest − longest type: share of the other profiles",
                "spread",
                float(a[others, q_short].sum() - a[others, q_long].sum()),
                0.0,
                ">",
            )
        ),
    ]
    payload = result(
        FIGURE,
        "association A_{s,q}: Theorem 1 vs Monte Carlo",
        points,
        instance=inst.name,
        samples=samples,
        max_abs_error=error,
        intensity=inst.network.request_intensity,
        preferred_profile={qid: inst.profile_ids[int(np.argmax(ev.association[:, q]))] for q, qid in enumerate(inst.request_ids)},
    )

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        width = 0.8 / (2 * len(inst.request_ids))
        x = np.arange(len(inst.profile_ids))
        for q, qid in enumerate(inst.request_ids):
            off = (2 * q - len(inst.request_ids)) * width
            ax.bar(x + off, ev.association[:, q], width, label=f"{qid}: analysis")
            ax.bar(x + off + width, mc.association[:, q], width, label=f"{qid}: Monte Carlo", alpha=0.6)
        ax.set_xticks(x, inst.profile_ids)
        ax.set_xlabel("cache profile s")
        ax.set_ylabel("association probability $A_{s,q}$")
        ax.set_title(
            f"Fig. 4: analytical association vs Monte Carlo, max |error| = {error:.1e} ({samples} samples)\n"
            f"{subtitle(inst, f'load-aware, Λ = {inst.network.request_intensity:g}, default mix')}",
            fontsize=9,
        )
        ax.legend(fontsize=8)

    return finish(payload, out, draw, echo=echo)
