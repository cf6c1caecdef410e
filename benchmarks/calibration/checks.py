"""The paper's Sec. VI claims as checks: one number of ours against the paper's value or threshold.

A :class:`Check` is one claim of one figure with the relation and the tolerance it is held to
(``≈``: ``|ours − paper| ≤ tolerance``; ``<``, ``≤``, ``>``, ``≥``: ``ours`` against ``paper``
shifted by the tolerance in the claim's favour never — the tolerance of an inequality is 0).
The figures list their checks as points (``paper`` non-null, with ``tolerance``, ``relation``,
``holds``); the calibration search reads the same thresholds from here, so the search and the
figures agree on what holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgeprefix.benchmarks.calibration.targets import TOLERANCE

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
        return {"paper": self.paper, "tolerance": self.tolerance, "relation": self.relation, "holds": self.holds,
                "claim": self.claim}


def approx(figure: int, claim: str, x: Any, ours: float | None, paper: float, tolerance: float = TOLERANCE) -> Check:
    return Check(figure, claim, x, ours, paper, "≈", tolerance)


def summary(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """How many checked points hold over figure payloads (points with ``holds``)."""
    rows = [(payload["figure"], p) for payload in payloads for p in payload["points"] if "holds" in p]
    return {"checked": len(rows), "hold": sum(bool(p["holds"]) for _, p in rows),
            "failing": [{"figure": f, "series": p["series"], "x": p["x"], "ours": p["ours"], "paper": p["paper"]}
                        for f, p in rows if not p["holds"]]}
