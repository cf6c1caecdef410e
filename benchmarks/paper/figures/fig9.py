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
from edgeprefix.placement.model.instance import Instance

FIGURE = 9
PROBABILITIES = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
QUICK_PROBABILITIES = (0.3, 0.6, 0.9)


def with_long_probability(instance: Instance, p_long: float) -> Instance:
    """The instance with ``p`` of the longest type set to ``p_long`` and the rest rescaled."""
    q_long = int(np.argmax(instance.lengths))
    rest = 1.0 - instance.probabilities[q_long]
    probs = {
        qid: (p_long if q == q_long else (1.0 - p_long) * float(instance.probabilities[q]) / rest)
        for q, qid in enumerate(instance.request_ids)
    }
    return instance.with_probabilities(probs)


def run(
    quick: bool = False,
    out: Path | str | None = None,
    instance: Instance | str | None = None,
    *,
    load: float | None = None,
    echo: bool = True,
) -> dict[str, Any]:
    """The sweep at ``Λ = load`` (default: the instance's calibrated ``FigureLoads.fig9``).

    Checked claims: the share of all requests served by the fallback rises with ``p_long``
    (smallest step > 0) and the offloading ratio falls (largest step < 0).
    """
    inst = resolve_instance(instance)
    load = loads_of(inst).fig9 if load is None else load
    base = inst.with_network(request_intensity=load)
    q_long = int(np.argmax(inst.lengths))
    fallback = inst.fallback_index if inst.fallback_index is not None else int(np.argmin(inst.memory))
    probabilities = QUICK_PROBABILITIES if quick else PROBABILITIES
    points, warm = [], None
    for p in probabilities:
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
    share = series_xy(points, "fallback share")[1]
    offload = series_xy(points, "offload ratio")[1]
    points += [
        check_point(
            checks.Check(FIGURE, "fallback share rises with p_long (smallest step)", "all", float(np.min(np.diff(share))), 0.0, ">")
        ),
        check_point(
            checks.Check(FIGURE, "offloading ratio falls with p_long (largest step)", "all", float(np.max(np.diff(offload))), 0.0, "<")
        ),
    ]
    fallback_id = inst.profile_ids[fallback]
    payload = result(
        FIGURE,
        f"growing long-request probability at a fixed mix (Λ = {load:g})",
        points,
        instance=inst.name,
        load=load,
        fallback=fallback_id,
    )

    def draw(fig) -> None:
        axes = [fig.add_subplot(2, 2, i + 1) for i in range(4)]
        for sid, style in zip(inst.profile_ids, ("-o", "--s", ":^", "-.v")):
            axes[0].plot(*series_xy(points, f"A[{sid}, long]"), style, label=sid)
        axes[0].set_ylabel("$A_{s,\\mathrm{long}}$")
        axes[0].set_title("(a) association of the long type", fontsize=9)
        axes[0].legend(fontsize=7)
        axes[1].plot(*series_xy(points, "fallback share"), "-o", color="tab:gray")
        axes[1].set_ylabel(f"share served by '{fallback_id}'")
        axes[1].set_title("(b) fallback use, all requests", fontsize=9)
        axes[2].plot(*series_xy(points, "offload ratio"), "-o", color="tab:green")
        axes[2].set_ylabel("$\\eta_{off}$")
        axes[2].set_title("(c) offloading ratio", fontsize=9)
        axes[3].plot(*series_xy(points, "mean distance"), "-o", color="tab:purple")
        axes[3].set_ylabel("$\\bar R$ [distance units]")
        axes[3].set_title("(d) mean serving distance", fontsize=9)
        for ax in axes:
            ax.set_xlabel("long-request probability $p_{long}$")
            ax.grid(alpha=0.3)
        mix = ", ".join(f"{k}={v:.2f}" for k, v in zip(inst.profile_ids, inst.mix_vector(None)))
        fig.suptitle(f"Fig. 9: growing long-request probability at a fixed mix\n{subtitle(inst, f'Λ = {load:g}, mix {mix}')}", fontsize=10)

    return finish(payload, out, draw, echo=echo, size=(10.0, 7.0))
