"""Fig. 11: adaptive vs fixed mix across load.

``adaptive`` re-selects the best candidate mix (Fig. 10's grid) at every load; ``fixed`` keeps
the light-load choice.  Paper: adapting the mix prevents the sharp degradation of a fixed
placement near heavy load.

The same comparison runs on Fig. 10's decode-heavy unconstrained variant, where the best mix
does move with load (``benchmarks/calibration/README.md`` §4).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgeprefix.benchmarks.calibration.targets import TARGET
from edgeprefix.benchmarks.figures._common import (
    finish,
    point,
    resolve_instance,
    result,
    series_xy,
)
from edgeprefix.benchmarks.figures.fig7 import decode_heavy
from edgeprefix.benchmarks.figures.fig10 import RESOLUTION, best_mix, unconstrained
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance

FIGURE = 11
LOADS = (1.0, 2.0, 3.0, 3.5, 4.0, 4.5, 5.0)
QUICK_LOADS = (1.0, 3.0, 4.0, 5.0)
VARIANT_LOADS = (1.0, 2.0, 2.5, 3.0, 3.5, 4.0)
QUICK_VARIANT_LOADS = (1.0, 3.0, 4.0)


def compare(instance: Instance, loads: tuple[float, ...], k: int) -> tuple[dict[str, float], dict, dict, dict]:
    """Fixed (light-load best) vs adaptive coverage along ``loads``: (fixed mix, adaptive, held, mixes)."""
    fixed, _, _ = best_mix(instance, loads[0], k)
    adaptive, held, mixes = {}, {}, {}
    for load in loads:
        mix, cov, _ = best_mix(instance, load, k)
        ev = evaluate(instance.with_network(request_intensity=load), fixed, "load_aware")
        adaptive[load], held[load], mixes[load] = cov, float(ev.coverage(TARGET)), mix
    return fixed, adaptive, held, mixes


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None,
        *, echo: bool = True) -> dict[str, Any]:
    """Coverage of the adaptive and the fixed (light-load) mix; ``gain`` is adaptive − fixed per load."""
    inst = resolve_instance(instance)
    k = RESOLUTION
    loads = QUICK_LOADS if quick else LOADS
    fixed, adaptive, held, mixes = compare(inst, loads, k)
    variant_loads = QUICK_VARIANT_LOADS if quick else VARIANT_LOADS
    v_fixed, v_adaptive, v_held, v_mixes = compare(unconstrained(decode_heavy(inst)), variant_loads, k)
    points = []
    for prefix, (ad, he) in (("", (adaptive, held)), ("decode-heavy ", (v_adaptive, v_held))):
        for load in ad:
            points.append(point(f"{prefix}adaptive", load, ad[load]))
            points.append(point(f"{prefix}fixed", load, he[load]))
    gain = {load: adaptive[load] - held[load] for load in loads}
    payload = result(FIGURE, "adaptive vs fixed (light-load) mix across load", points, instance=inst.name,
                     fixed_mix=fixed, adaptive_mix=mixes, gain=gain, resolution=k,
                     decode_heavy={"fixed_mix": v_fixed, "adaptive_mix": v_mixes,
                                   "gain": {load: v_adaptive[load] - v_held[load] for load in variant_loads}})

    def draw(fig) -> None:
        panels = (("calibrated", "", fixed), ("decode-heavy, unconstrained", "decode-heavy ", v_fixed))
        for i, (name, prefix, mix) in enumerate(panels):
            ax = fig.add_subplot(1, 2, i + 1)
            for series in ("adaptive", "fixed"):
                ax.plot(*series_xy(points, prefix + series), marker="o", label=series)
            ax.set_xlabel("request intensity Λ")
            ax.set_ylabel(f"TTFT coverage $P_{{cov}}({TARGET}\\,s)$")
            ax.set_title(f"Fig. 11, {name}: fixed = " + ", ".join(f"{k}={v:.2f}" for k, v in mix.items()), fontsize=8)
            ax.set_ylim(0, 1)
            ax.legend()

    return finish(payload, out, draw, echo=echo, size=(11.0, 4.2))
