"""Fig. 9: a growing long-request probability at a fixed mix.

The longest type's probability ``p_long`` grows (the others are rescaled in proportion) while
the mix stays the instance's default.  Reported: the association of the long type per profile,
the load-aware fallback use (share of all requests served by the uncached profile), the
offloading ratio ``η_off`` (eq. (45)) and the mean serving distance ``R̄``.  Paper: the router uses
the high-concurrency fallback more, ``η_off`` falls (deep capacity does not scale with demand)
and ``R̄`` shifts with the association balance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.calibration.targets import FIG10_LOADS, TARGET
from edgeprefix.benchmarks.figures._common import (
    finish,
    point,
    resolve_instance,
    result,
    series_xy,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance

FIGURE = 9
PROBABILITIES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
QUICK_PROBABILITIES = (0.3, 0.6, 0.9)


def with_long_probability(instance: Instance, p_long: float) -> Instance:
    """The instance with ``p`` of the longest type set to ``p_long`` and the rest rescaled."""
    q_long = int(np.argmax(instance.lengths))
    rest = 1.0 - instance.probabilities[q_long]
    probs = {qid: (p_long if q == q_long else (1.0 - p_long) * float(instance.probabilities[q]) / rest)
             for q, qid in enumerate(instance.request_ids)}
    return instance.with_probabilities(probs)


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None,
        *, load: float | None = None, echo: bool = True) -> dict[str, Any]:
    inst = resolve_instance(instance)
    load = FIG10_LOADS["moderate"] if load is None else load
    base = inst.with_network(request_intensity=load)
    q_long = int(np.argmax(inst.lengths))
    fallback = inst.fallback_index if inst.fallback_index is not None else int(np.argmin(inst.memory))
    points, warm = [], None
    for p in QUICK_PROBABILITIES if quick else PROBABILITIES:
        ev = evaluate(with_long_probability(base, p), None, "load_aware", warm_start=warm)
        warm = np.where(ev.active, ev.advertised_wait, 0.0)
        for s, sid in enumerate(inst.profile_ids):
            points.append(point(f"A[{sid}, long]", p, float(ev.association[s, q_long])))
        served = float(ev.instance.probabilities @ ev.association[fallback])
        points += [
            point("fallback share", p, served),
            point("offload ratio", p, ev.offload_ratio),
            point("mean distance", p, ev.mean_distance),
            point("coverage", p, float(ev.coverage(TARGET))),
        ]
    payload = result(FIGURE, f"growing long-request probability at a fixed mix (Λ = {load:g})", points,
                     instance=inst.name, load=load)

    def draw(fig) -> None:
        axes = [fig.add_subplot(1, 3, i + 1) for i in range(3)]
        for sid in inst.profile_ids:
            axes[0].plot(*series_xy(points, f"A[{sid}, long]"), marker="o", label=sid)
        axes[0].plot(*series_xy(points, "fallback share"), "k--", label="fallback share (all)")
        axes[0].set_title("association of the long type")
        axes[1].plot(*series_xy(points, "offload ratio"), marker="o")
        axes[1].set_title("offloading ratio η_off")
        axes[2].plot(*series_xy(points, "mean distance"), marker="o")
        axes[2].set_title("mean serving distance R̄")
        for ax in axes:
            ax.set_xlabel("long-request probability")
        axes[0].legend(fontsize=7)

    return finish(payload, out, draw, echo=echo, size=(12.0, 4.0))
