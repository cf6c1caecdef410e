"""Fig. 12: coverage vs edge density ``λ_b`` at fixed demand ``Λ``.

Paper: load-aware coverage rises from ≈ 0.48 at ``λ_b = 0.5`` to ≈ 0.94 at ``λ_b = 3``; nearest
saturates near 0.52.  The paper does not state the demand; the calibration chooses it
(``FigureLoads.fig12`` of the instance, :mod:`edgeprefix.benchmarks.paper.calibration.section6`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.paper.calibration import checks
from edgeprefix.benchmarks.paper.calibration.targets import (
    FIG12_PAPER,
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
    loads_of,
    point,
    resolve_instance,
    result,
    subtitle,
)
from edgeprefix.placement.model.instance import Instance

FIGURE = 12
DENSITIES = (0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0)
QUICK_DENSITIES = (0.5, 1.0, 2.0, 3.0)
POLICIES = ("load_aware", "prefix", "nearest")


def sweep(instance: Instance, densities: tuple[float, ...], intensity: float, target: float = TARGET) -> dict[str, list[float]]:
    """Coverage per policy along ``λ_b`` at demand ``Λ = intensity``."""
    return coverage_along(
        (instance.with_network(edge_density=density, request_intensity=intensity) for density in densities), POLICIES, target
    )


def run(
    quick: bool = False,
    out: Path | str | None = None,
    instance: Instance | str | None = None,
    *,
    intensity: float | None = None,
    echo: bool = True,
) -> dict[str, Any]:
    inst = resolve_instance(instance)
    intensity = loads_of(inst).fig12 if intensity is None else intensity
    densities = QUICK_DENSITIES if quick else DENSITIES
    cov = sweep(inst, densities, intensity)
    points = []
    for policy in POLICIES:
        for d, value in zip(densities, cov[policy]):
            row = point(policy, d, value, FIG12_PAPER.get((policy, d)))
            if row["paper"] is not None:
                add_check_fields(row, checks.approx(FIGURE, f"{policy} at λ_b = {d:g}", d, value, row["paper"], TOLERANCE))
            points.append(row)
    rise = float(np.min(np.diff(cov["load_aware"])))
    points += [
        check_point(checks.Check(FIGURE, "load-aware rises with density (smallest step)", "all", rise, 0.0, ">")),
        check_point(
            checks.Check(
                FIGURE,
                "nearest saturates (|last step|)",
                densities[-1],
                abs(cov["nearest"][-1] - cov["nearest"][-2]),
                checks.SATURATION,
                "<",
            )
        ),
    ]
    payload = result(
        FIGURE, f"coverage at τ = {TARGET} s vs edge density λ_b (Λ = {intensity:g})", points, instance=inst.name, intensity=intensity
    )

    draw = coverage_curves(
        points,
        POLICIES,
        FIG12_PAPER,
        xlabel="edge density λ_b [nodes / unit area]",
        title=f"Fig. 12: coverage vs edge density (× = paper)\n{subtitle(inst, f'fixed demand Λ = {intensity:g}')}",
        target=TARGET,
        plateau=NEAREST_PLATEAU,
    )

    return finish(payload, out, draw, echo=echo)
