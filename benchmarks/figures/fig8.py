"""Fig. 8: TTFT coverage at ``τ = 0.8 s`` vs request intensity ``Λ`` for the three policies.

Paper (Sec. VI): almost identical prefix and load-aware routing at light load; at ``Λ = 3``
load-aware ≈ 0.69 vs queue-unaware ≈ 0.55, at ``Λ = 4`` ≈ 0.63 vs ≈ 0.23; nearest-node
routing stays ≈ 0.52.  The load-aware fixed point is warm-started from the previous load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgeprefix.benchmarks.calibration.targets import (
    FIG8_PAPER,
    NEAREST_PLATEAU,
    TARGET,
)
from edgeprefix.benchmarks.figures._common import (
    coverage_along,
    coverage_curves,
    finish,
    point,
    resolve_instance,
    result,
)
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.policies import POLICIES

FIGURE = 8
LOADS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5)
QUICK_LOADS = (1.0, 2.0, 3.0, 4.0)


def paper_value(policy: str, load: float) -> float | None:
    """The paper's coverage for ``policy`` at ``Λ`` (nearest: ≈ 0.52 over the plotted range 1–4)."""
    if policy == "nearest":
        return NEAREST_PLATEAU if 1.0 <= load <= 4.0 else None
    return FIG8_PAPER.get((policy, load))


def sweep(instance: Instance, loads: tuple[float, ...], policies: tuple[str, ...] = POLICIES,
          target: float = TARGET) -> dict[str, list[float]]:
    """Coverage ``P_cov(τ)`` per policy along ``loads`` (load-aware warm-started)."""
    return coverage_along((instance.with_network(request_intensity=load) for load in loads), policies, target)


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None,
        *, echo: bool = True) -> dict[str, Any]:
    inst = resolve_instance(instance)
    loads = QUICK_LOADS if quick else LOADS
    cov = sweep(inst, loads)
    points = [point(policy, load, value, paper_value(policy, load))
              for policy in POLICIES for load, value in zip(loads, cov[policy])]
    payload = result(FIGURE, f"coverage at τ = {TARGET} s vs request intensity Λ", points, instance=inst.name)

    draw = coverage_curves(points, POLICIES, FIG8_PAPER, xlabel="request intensity Λ [requests / unit area / s]", title="Fig. 8 (× = paper)",
                           target=TARGET, plateau=NEAREST_PLATEAU)

    return finish(payload, out, draw, echo=echo)
