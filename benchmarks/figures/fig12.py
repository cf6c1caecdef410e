"""Fig. 12: coverage vs edge density ``λ_b`` at fixed demand ``Λ``.

Paper: load-aware coverage rises from ≈ 0.48 at ``λ_b = 0.5`` to ≈ 0.94 at ``λ_b = 3``; nearest
saturates near 0.52.  The paper does not state the demand; the calibration fixes it
(:data:`edgeprefix.benchmarks.calibration.targets.FIG12_INTENSITY`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgeprefix.benchmarks.calibration.targets import (
    FIG12_INTENSITY,
    FIG12_PAPER,
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

FIGURE = 12
DENSITIES = (0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0)
QUICK_DENSITIES = (0.5, 1.0, 2.0, 3.0)
POLICIES = ("load_aware", "prefix", "nearest")


def sweep(instance: Instance, densities: tuple[float, ...], intensity: float = FIG12_INTENSITY,
          target: float = TARGET) -> dict[str, list[float]]:
    """Coverage per policy along ``λ_b`` at demand ``Λ = intensity``."""
    return coverage_along((instance.with_network(edge_density=density, request_intensity=intensity) for density in densities), POLICIES, target)


def run(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None,
        *, intensity: float = FIG12_INTENSITY, echo: bool = True) -> dict[str, Any]:
    inst = resolve_instance(instance)
    densities = QUICK_DENSITIES if quick else DENSITIES
    cov = sweep(inst, densities, intensity)
    points = [point(policy, d, value, FIG12_PAPER.get((policy, d)))
              for policy in POLICIES for d, value in zip(densities, cov[policy])]
    payload = result(FIGURE, f"coverage at τ = {TARGET} s vs edge density λ_b (Λ = {intensity:g})", points,
                     instance=inst.name, intensity=intensity)

    draw = coverage_curves(points, POLICIES, FIG12_PAPER, xlabel="edge density λ_b [nodes / unit area]", title=f"Fig. 12 at Λ = {intensity:g} (× = paper)",
                           target=TARGET, plateau=NEAREST_PLATEAU)

    return finish(payload, out, draw, echo=echo)
