"""Fig. 11: adaptive vs fixed mix across load.

``adaptive`` re-selects the best candidate mix (Fig. 10's grid) at every load; ``fixed`` keeps
the light-load choice.  Paper: adapting the mix prevents the sharp degradation of a fixed
placement near heavy load.

The same comparison on Fig. 10's decode-heavy unconstrained variant (earlier versions' stand-in)
is still computed and reported in the JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgeprefix.benchmarks.paper.calibration import checks
from edgeprefix.benchmarks.paper.calibration.targets import TARGET
from edgeprefix.benchmarks.paper.figures._common import (
    check_point,
    finish,
    loads_of,
    point,
    resolve_instance,
    result,
    subtitle,
)
from edgeprefix.benchmarks.paper.figures.fig7 import decode_heavy
from edgeprefix.benchmarks.paper.figures.fig10 import RESOLUTION, best_mix, unconstrained
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance

FIGURE = 11
VARIANT_LOADS = (1.0, 2.0, 2.5, 3.0, 3.5, 4.0)
QUICK_VARIANT_LOADS = (1.0, 3.0, 4.0)


def compare(instance: Instance, loads: tuple[float, ...], k: int, light: float | None = None) -> tuple[dict[str, float], dict, dict, dict]:
    """Fixed (the best mix at ``light``, default ``loads[0]``) vs adaptive coverage along ``loads``:
    (fixed mix, adaptive, held, mixes); a load where no candidate is stable is left out."""
    fixed, _, _ = best_mix(instance, loads[0] if light is None else light, k)
    adaptive, held, mixes = {}, {}, {}
    for load in loads:
        try:
            mix, cov, _ = best_mix(instance, load, k)
        except ValueError:  # no stable candidate at this load: left out
            continue
        ev = evaluate(instance.with_network(request_intensity=load), fixed, "load_aware")
        adaptive[load], held[load], mixes[load] = cov, float(ev.coverage(TARGET)), mix
    return fixed, adaptive, held, mixes


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None, *, echo: bool = True) -> dict[str, Any]:
    """Coverage of the adaptive and the fixed (light-load) mix; ``gain`` is adaptive − fixed per load.

    The loads are the instance's calibrated ``FigureLoads.fig11`` (quick: Fig. 10's light,
    moderate and high loads and one beyond); the fixed mix is the best at Fig. 10's light load.
    Checked claims: adaptive − fixed exceeds ``checks.GAIN_THRESHOLD`` at Fig. 10's high load,
    and adaptive is never below fixed.  The decode-heavy variant of earlier versions is still
    reported (``decode_heavy``) but no longer drawn.
    """
    inst = resolve_instance(instance)
    k = RESOLUTION
    settings = loads_of(inst)
    light, moderate, high = settings.fig10
    loads = tuple(sorted({light, moderate, high, settings.fig11[-1]})) if quick else settings.fig11
    fixed, adaptive, held, mixes = compare(inst, loads, k, light)
    variant_loads = QUICK_VARIANT_LOADS if quick else VARIANT_LOADS
    try:
        v_fixed, v_adaptive, v_held, v_mixes = compare(unconstrained(decode_heavy(inst)), variant_loads, k)
    except ValueError:  # the variant is overloaded even at its light load
        v_fixed, v_adaptive, v_held, v_mixes = {}, {}, {}, {}
    points = []
    for prefix, (ad, he) in (("", (adaptive, held)), ("decode-heavy ", (v_adaptive, v_held))):
        for load in ad:
            points.append(point(f"{prefix}adaptive", load, ad[load]))
            points.append(point(f"{prefix}fixed", load, he[load]))
    gain = {load: adaptive[load] - held[load] for load in adaptive}
    points.append(check_point(checks.Check(FIGURE, "adaptive − fixed at high load", high, gain.get(high), checks.GAIN_THRESHOLD, ">")))
    points.append(check_point(checks.Check(FIGURE, "adaptive − fixed, smallest over the loads", "all", min(gain.values()), -1e-9, "≥")))
    payload = result(
        FIGURE,
        "adaptive vs fixed (light-load) mix across load",
        points,
        instance=inst.name,
        fixed_mix=fixed,
        adaptive_mix=mixes,
        gain=gain,
        resolution=k,
        high_load=high,
        decode_heavy={
            "fixed_mix": v_fixed,
            "adaptive_mix": v_mixes,
            "gain": {load: v_adaptive[load] - v_held[load] for load in v_adaptive},
        },
    )

    def draw(fig) -> None:
        left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        xs = list(adaptive)
        left.plot(xs, [adaptive[x] for x in xs], "-o", color="tab:blue", ms=7, label="adaptive (best mix per load)")
        left.plot(xs, [held[x] for x in xs], "--s", color="tab:red", ms=5, mfc="none", label="fixed (light-load best)")
        left.axvline(high, color="gray", ls=":", lw=0.8)
        left.set_xlabel("request intensity Λ")
        left.set_ylabel(f"TTFT coverage $P_{{cov}}({TARGET}\\,s)$")
        left.set_ylim(0, 1.02)
        left.grid(alpha=0.3)
        left.legend(fontsize=8)
        left.set_title("(a) coverage", fontsize=10)
        right.bar(xs, [gain[x] for x in xs], width=0.3, color="tab:purple")
        right.axhline(checks.GAIN_THRESHOLD, color="k", ls="--", lw=0.8, label=f"target > {checks.GAIN_THRESHOLD:g} at high load")
        right.axvline(high, color="gray", ls=":", lw=0.8)
        right.set_xlabel("request intensity Λ")
        right.set_ylabel("adaptive − fixed coverage")
        right.grid(alpha=0.3)
        right.legend(fontsize=8)
        right.set_title("(b) gain of adapting the mix", fontsize=10)
        fixed_text = ", ".join(f"{key}={v:.2f}" for key, v in fixed.items())
        fig.suptitle(
            f"Fig. 11: adaptive vs fixed mix\n{subtitle(inst, f'fixed = {fixed_text} (best at Λ = {light:g}); high load Λ = {high:g} dotted')}",
            fontsize=11,
        )

    return finish(payload, out, draw, echo=echo, size=(11.0, 4.6))
