"""Fig. 11: adaptive vs fixed mix across load.

``adaptive`` re-selects the best candidate mix (Fig. 10's grid) at every load; ``fixed`` keeps
the light-load choice.  Paper: adapting the mix prevents the sharp degradation of a fixed
placement near heavy load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.calibration.targets import FIG10_LOADS, TARGET
from benchmarks.figures._common import (
    finish,
    point,
    resolve_instance,
    result,
    series_xy,
)
from benchmarks.figures.fig10 import RESOLUTION, best_mix
from placement.evaluation import evaluate
from placement.instance import Instance

FIGURE = 11
LOADS = (1.0, 2.0, 3.0, 3.5, 4.0, 4.5, 5.0)
QUICK_LOADS = (1.0, 3.0, 4.0, 5.0)


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None,
        *, echo: bool = True) -> dict[str, Any]:
    """Coverage of the adaptive and the fixed (light-load) mix; ``gain`` is adaptive − fixed per load."""
    inst = resolve_instance(instance)
    k = RESOLUTION
    fixed, _, _ = best_mix(inst, FIG10_LOADS["light"], k)
    points, gain, mixes = [], {}, {}
    for load in QUICK_LOADS if quick else LOADS:
        mix, adaptive, _ = best_mix(inst, load, k)
        ev = evaluate(inst.with_network(request_intensity=load), fixed, "load_aware")
        held = float(ev.coverage(TARGET))
        points.append(point("adaptive", load, adaptive))
        points.append(point("fixed", load, held, None, stable=ev.stable))
        gain[load] = adaptive - held
        mixes[load] = mix
    payload = result(FIGURE, "adaptive vs fixed (light-load) mix across load", points, instance=inst.name,
                     fixed_mix=fixed, adaptive_mix=mixes, gain=gain, resolution=k)

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        for series in ("adaptive", "fixed"):
            ax.plot(*series_xy(points, series), marker="o", label=series)
        ax.set_xlabel("request intensity Λ")
        ax.set_ylabel(f"TTFT coverage $P_{{cov}}({TARGET}\\,s)$")
        ax.set_title("Fig. 11: fixed mix = light-load best " + ", ".join(f"{k}={v:.2f}" for k, v in fixed.items()), fontsize=9)
        ax.set_ylim(0, 1)
        ax.legend()

    return finish(payload, out, draw, echo=echo)
