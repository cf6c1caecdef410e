"""The paper's Sec. VI claims as checks: one number of ours against the paper's value or threshold.

A :class:`Check` is one claim of one figure with its relation and tolerance: ``≈`` holds when
``|ours − paper| ≤ tolerance``; ``<``, ``≤``, ``>``, ``≥`` compare ``ours`` with ``paper`` directly
(tolerance 0).  The figures list their checks as points (``paper`` non-null, with ``tolerance``,
``relation``, ``holds``); the calibration's assessment uses the same thresholds (with a search
margin on top), so a point the search accepts also passes the figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgeprefix.benchmarks.paper.calibration.targets import TOLERANCE

RELATIONS = ("≈", "<", "≤", ">", "≥")
MIX_TOLERANCE = 0.05  # Fig. 10: each share of the best mix within ±0.05 of the paper's (1/20 grid)
GAIN_THRESHOLD = 0.02  # Fig. 11: adaptive − fixed at high load must exceed this
COLLAPSE_DROP = 0.10  # Fig. 7: coverage must fall by at least this much past the heavy-load optimum
SAME_AT_LIGHT = 0.01  # Fig. 8: load-aware and queue-unaware within this at light load
SATURATION = 0.02  # Fig. 12: nearest changes by less than this over the last density step
KOLMOGOROV = 0.02  # Fig. 5: sup |F̂ − F| of the event simulation
MC_ERROR = 1e-3  # Fig. 4: max |A − Â| (the paper's bound)
STRONG_PREFERENCE = 0.5  # Fig. 4: "strongly prefers": the deep profile takes a majority of the long type


@dataclass(frozen=True)
class Check:
    """One claim: ``ours`` against ``paper`` under ``relation`` within ``tolerance``."""

    figure: int
    claim: str
    x: Any
    ours: float | None
    paper: float
    relation: str = "≈"
    tolerance: float = 0.0

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ValueError(f"check relation: one of {list(RELATIONS)}, got {self.relation!r}")

    @property
    def holds(self) -> bool:
        v, p = self.ours, self.paper
        if v is None:
            return False
        return {
            "≈": abs(v - p) <= self.tolerance + 1e-12,
            "<": v < p,
            "≤": v <= p + 1e-12,
            ">": v > p,
            "≥": v >= p - 1e-12,
        }[self.relation]

    def fields(self) -> dict[str, Any]:
        """The keys a figure point gets for this check (``paper`` non-null)."""
        return {"paper": self.paper, "tolerance": self.tolerance, "relation": self.relation, "holds": self.holds, "claim": self.claim}


def approx(figure: int, claim: str, x: Any, ours: float | None, paper: float, tolerance: float = TOLERANCE) -> Check:
    """A ``≈`` check: ``|ours − paper| ≤ tolerance`` (default the Fig. 8/12 band ±0.03)."""
    return Check(figure, claim, x, ours, paper, "≈", tolerance)
