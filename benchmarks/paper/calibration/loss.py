"""What the calibration measures and the loss it minimises.

:func:`measure` evaluates one parameter vector on every calibrated point (Fig. 8 at the default
mix, Fig. 12 at ``Λ = FIG12_INTENSITY``) and on the structural comparisons of Fig. 10 (the
light-load mix must beat the high-load mix at light and moderate load, and lose to it — and to
its candidate neighbours — at high load).  :func:`loss` is the sum of squared misses plus a
hinge penalty on every structural comparison that fails by less than a 0.003 margin, plus a
hinge on every miss beyond ±0.02 (so no point sits at the edge of the ±0.03 band).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeprefix.benchmarks.paper.calibration.model import (
    DEFAULT_MIX,
    HIGH_LOAD_MIX,
    Parameters,
    build_instance,
)
from edgeprefix.benchmarks.paper.calibration.targets import (
    FIG8_PAPER,
    FIG10_LOADS,
    FIG12_INTENSITY,
    FIG12_PAPER,
    NEAREST_LOADS,
    NEAREST_PLATEAU,
    TARGET,
)
from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance

MARGIN = 0.003  # a structural comparison must hold by this much coverage
STRUCTURE_WEIGHT = 10.0
BAND = 0.02  # misses beyond ±0.02 pay an extra hinge (keeps every point well inside ±0.03)
BAND_WEIGHT = 10.0
LIGHT_MIX = tuple(DEFAULT_MIX.values())
HIGH_MIX = tuple(HIGH_LOAD_MIX.values())
HIGH_RIVALS = (LIGHT_MIX, (0.25, 0.65, 0.10), (0.40, 0.45, 0.15))  # candidate neighbours of the high-load mix


@dataclass(frozen=True)
class Measurement:
    """Every calibrated quantity of one parameter vector."""

    points: dict[tuple[str, str, float], tuple[float, float]]  # (figure, series, x) -> (ours, paper)
    comparisons: tuple[tuple[str, float, float, float], ...]  # (label, Λ, must-win coverage, rival coverage)

    def misses(self) -> np.ndarray:
        return np.array([ours - paper for ours, paper in self.points.values()])

    def shortfalls(self) -> np.ndarray:
        return np.array([max(0.0, rival - win + MARGIN) for _, _, win, rival in self.comparisons])


def coverage(instance: Instance, mix: tuple[float, ...] | None, policy: str = "load_aware") -> float:
    """``P_cov(τ)`` of ``mix`` (0 when a tier ends unstable)."""
    ev = evaluate(instance, None if mix is None else np.array(mix), policy)
    return float(ev.coverage(TARGET)) if ev.stable or policy != "load_aware" else 0.0


def measure(p: Parameters, high_load: float = FIG10_LOADS["high"]) -> Measurement:
    """Fig. 8 and Fig. 12 points and the Fig. 10 comparisons of ``p``."""
    points: dict[tuple[str, str, float], tuple[float, float]] = {}
    for load in sorted({*NEAREST_LOADS, *(x for _, x in FIG8_PAPER)}):
        inst = build_instance(p, intensity=load)
        for policy in ("load_aware", "prefix", "nearest"):
            paper = NEAREST_PLATEAU if policy == "nearest" and load in NEAREST_LOADS else FIG8_PAPER.get((policy, load))
            if paper is not None:
                points[("fig8", policy, load)] = (coverage(inst, None, policy), paper)
    for (policy, density), paper in FIG12_PAPER.items():
        inst = build_instance(p, intensity=FIG12_INTENSITY, density=density)
        points[("fig12", policy, density)] = (coverage(inst, None, policy), paper)
    comparisons = []
    for label in ("light", "moderate"):
        inst = build_instance(p, intensity=FIG10_LOADS[label])
        comparisons.append((f"{label}: light mix beats high mix", FIG10_LOADS[label], coverage(inst, LIGHT_MIX), coverage(inst, HIGH_MIX)))
    inst = build_instance(p, intensity=high_load)
    high = coverage(inst, HIGH_MIX)
    for rival in HIGH_RIVALS:
        comparisons.append((f"high: high mix beats {rival}", high_load, high, coverage(inst, rival)))
    return Measurement(points, tuple(comparisons))


def loss(p: Parameters, high_load: float = FIG10_LOADS["high"], *, fit_high_load: bool = False) -> float:
    """``Σ d² + 10 Σ max(0, |d| − 0.02)² + 10 Σ max(0, rival − winner + 0.003)²`` with ``d = ours − paper``
    (a large constant if ``p`` is invalid).

    The high-load comparisons enter only with ``fit_high_load`` (README.md explains why they
    cannot hold together with Fig. 8 under docs/model.md); they are always measured and reported.
    """
    try:
        m = measure(p, high_load)
    except (InstanceError, ValueError):
        return 10.0
    short = m.shortfalls()
    if not fit_high_load:
        short = short[[i for i, c in enumerate(m.comparisons) if not c[0].startswith("high")]]
    d = m.misses()
    band = np.maximum(0.0, np.abs(d) - BAND)
    return float(np.sum(d**2) + BAND_WEIGHT * np.sum(band**2) + STRUCTURE_WEIGHT * np.sum(short**2))
