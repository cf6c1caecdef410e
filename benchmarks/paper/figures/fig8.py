"""Fig. 8: TTFT coverage at ``τ = 0.8 s`` vs request intensity ``Λ`` for the three policies.

Paper (Sec. VI): almost identical prefix and load-aware routing at light load; at ``Λ = 3``
load-aware ≈ 0.69 vs queue-unaware ≈ 0.55, at ``Λ = 4`` ≈ 0.63 vs ≈ 0.23; nearest-node
routing stays ≈ 0.52, so cache awareness without load awareness can do worse than ignoring
cache affinity.  The load-aware fixed point is warm-started from the previous load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgeprefix.benchmarks.paper.calibration import checks
from edgeprefix.benchmarks.paper.calibration.targets import (
    FIG8_PAPER,
    NEAREST_PLATEAU,
    TARGET,
    TOLERANCE,
)
from edgeprefix.benchmarks.paper.figures._common import (
    add_check_fields,
    check_point,
    coverage_along,
    coverage_curves,
    finish,
    point,
    resolve_instance,
    result,
    subtitle,
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


def sweep(
    instance: Instance, loads: tuple[float, ...], policies: tuple[str, ...] = POLICIES, target: float = TARGET
) -> dict[str, list[float]]:
    """Coverage ``P_cov(τ)`` per policy along ``loads`` (load-aware warm-started)."""
    return coverage_along((instance.with_network(request_intensity=load) for load in loads), policies, target)


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None, *, echo: bool = True) -> dict[str, Any]:
    inst = resolve_instance(instance)
    loads = QUICK_LOADS if quick else LOADS
    cov = sweep(inst, loads)
    points = []
    for policy in POLICIES:
        for load, value in zip(loads, cov[policy]):
            row = point(policy, load, value, paper_value(policy, load))
            if row["paper"] is not None:
                add_check_fields(row, checks.approx(FIGURE, f"{policy} at Λ = {load:g}", load, value, row["paper"], TOLERANCE))
            points.append(row)
    at = {(policy, load): value for policy in POLICIES for load, value in zip(loads, cov[policy])}
    light, heavy = loads[loads.index(1.0)], 4.0
    points += [
        check_point(
            checks.Check(
                FIGURE,
                "light load: |load-aware − prefix|",
                light,
                abs(at[("load_aware", light)] - at[("prefix", light)]),
                checks.SAME_AT_LIGHT,
                "≤",
            )
        ),
        check_point(
            checks.Check(
                FIGURE,
                "Λ = 4: prefix − nearest (cache-aware worse than nearest)",
                heavy,
                at[("prefix", heavy)] - at[("nearest", heavy)],
                0.0,
                "<",
            )
        ),
    ]
    payload = result(
        FIGURE, f"coverage at τ = {TARGET} s vs request intensity Λ", points, instance=inst.name, edge_density=inst.network.edge_density
    )

    draw = coverage_curves(
        points,
        POLICIES,
        FIG8_PAPER,
        xlabel="request intensity Λ [requests / unit area / s]",
        title=f"Fig. 8: coverage vs load (× = paper)\n{subtitle(inst, f'λ_b = {inst.network.edge_density:g}, mix = default')}",
        target=TARGET,
        plateau=NEAREST_PLATEAU,
    )

    return finish(payload, out, draw, echo=echo)
