"""The recent window of ``profiles --recent auto``: chosen on the training part alone (docs/model.md (17.24)).

The instance can be built from the last fraction ``F`` of the training requests only, a forecast of a
drifting workload (docs/model.md §17.11).  Which ``F``: the training part is cut in two, a *fit* part (its
first half) and a *check* part (its second half).  Each candidate window (the last ``F`` of the fit part)
forecasts the check part's mean no-cache prefill ``E g(L_i)``, the statistic that carries the drift into the
mean TTFT (docs/model.md (17.19)).  A window is *consistent* when its forecast error is within the noise,

    |log(m_check / m_F)| ≤ z · sqrt(se_F² + se_check²)        (relative standard errors by batch means),

and the rule takes the largest consistent ``F`` (the longest window whose forecast the check part does not
contradict: no window when no drift is detected); if none is consistent the drift is not one a window
carries (it changes direction or is a change of rate), and ``F = 1``.  It reads only input lengths, so it
costs one pass over the lengths (no replay).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

WINDOWS = (1.0, 0.5, 0.25, 0.125)  # candidate fractions F of the training part
Z = 1.96  # two-sided 5 % level of the consistency test
BATCHES = 10  # batch means: a trace's requests come in sessions, so neighbours are not independent
MIN_REQUESTS = 2 * BATCHES  # fewest requests in a window (and in the check part) to estimate its mean's error


def batch_mean_se(x: np.ndarray, batches: int = BATCHES) -> float:
    """Standard error of the mean of ``x`` by batch means over ``batches`` contiguous runs."""
    means = np.array([part.mean() for part in np.array_split(np.asarray(x, dtype=float), batches)])
    return float(means.std(ddof=1) / math.sqrt(batches))


@dataclass(frozen=True)
class WindowChoice:
    """The chosen fraction, one line saying why, and each candidate's test (JSON-ready)."""

    fraction: float
    reason: str
    candidates: list[dict[str, Any]] = field(default_factory=list)
    check_mean_prefill: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": f"auto: largest F whose forecast of the check part's E g(L_i) is within {Z:g} SE (docs/model.md (17.24))",
            "fraction": self.fraction,
            "reason": self.reason,
            "check_mean_prefill_s": self.check_mean_prefill,
            "candidates": self.candidates,
        }


def choose_window(prefill: np.ndarray, windows: Sequence[float] = WINDOWS, z: float = Z) -> WindowChoice:
    """The recent window ``F`` for training requests whose no-cache prefill times, in time order, are ``prefill``."""
    g = np.asarray(prefill, dtype=float)
    fractions = sorted({float(f) for f in windows}, reverse=True)
    if not fractions or fractions[0] > 1.0 or fractions[-1] <= 0.0:
        raise ValueError(f"recent-window fractions must lie in (0, 1], got {list(windows)!r}")
    fit = g.size // 2
    check = g[fit:]
    if check.size < MIN_REQUESTS or fit < MIN_REQUESTS:
        return WindowChoice(1.0, f"F = 1: {g.size} training requests are too few to test a window (need {4 * BATCHES})")
    m_check = float(check.mean())
    se_check = batch_mean_se(check) / m_check
    rows: list[dict[str, Any]] = []
    for f in fractions:
        window = g[fit - max(1, int(round(f * fit))) : fit]
        if window.size < MIN_REQUESTS:
            continue
        m = float(window.mean())
        error = math.log(m_check / m)
        noise = z * math.hypot(batch_mean_se(window) / m, se_check)
        rows.append(
            {
                "fraction": f,
                "requests": int(window.size),
                "forecast_s": m,
                "ratio": m_check / m,
                "log_error": error,
                "noise": noise,
                "consistent": bool(abs(error) <= noise),
            }
        )
    consistent = [r for r in rows if r["consistent"]]
    if consistent:
        best = consistent[0]  # largest F first
        if best["fraction"] == 1.0:
            why = (
                f"F = 1: no drift detected (the fit part forecasts the check part's E g(L_i) at ratio {best['ratio']:.3f}, "
                f"within ±{best['noise']:.3f} in log)"
            )
        else:
            drop = rows[0]
            why = (
                f"F = {best['fraction']:g}: drift (the whole fit part forecasts the check part's E g(L_i) at ratio "
                f"{drop['ratio']:.3f}, |log| {abs(drop['log_error']):.3f} > {drop['noise']:.3f}); its last {best['fraction']:g} "
                f"at {best['ratio']:.3f}, within ±{best['noise']:.3f}"
            )
        return WindowChoice(best["fraction"], why, rows, m_check)
    why = "F = 1: no window's forecast of the check part's E g(L_i) is within the noise (a drift no window carries)"
    return WindowChoice(1.0, why, rows, m_check)
