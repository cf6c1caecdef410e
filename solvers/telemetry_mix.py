"""The telemetry as a decision (docs/model.md (11.18)): the mix for the telemetry's age, and how fresh it must be.

- :func:`mix_for_telemetry` scores every feasible mix of the ``1/resolution`` lattice by the online router's
  prediction at the telemetry age (:func:`edgeprefix.placement.model.stale_router.predict_online`) and returns
  the best one beside the best for fresh telemetry (eq. (39)), both scored at that age.
- :func:`freshness_for` bisects the telemetry delay ``D`` (or the refresh period ``Δt``) for the largest age at
  which the online router's predicted coverage still reaches ``ζ``; the prediction falls with the age.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.stale_router import predict_online
from edgeprefix.placement.model.telemetry import Telemetry


@dataclass(frozen=True)
class TelemetryMix:
    """The lattice's best mix for the telemetry age and the best for fresh telemetry, both predicted at the age."""

    telemetry: Telemetry
    mix: tuple[float, ...]
    coverage: float  # the chosen mix's predicted coverage at the age
    fresh_mix: tuple[float, ...]
    fresh_mix_coverage: float  # the fresh-telemetry mix's predicted coverage at the age
    fresh_mix_fresh_coverage: float  # ... and with fresh telemetry (eq. (39))
    mixes: int  # stable lattice mixes scored

    def to_dict(self) -> dict:
        return {
            "telemetry": {"delay": float(self.telemetry.delay), "refresh": float(self.telemetry.refresh)},
            "mix": list(self.mix),
            "coverage": self.coverage,
            "fresh_mix": list(self.fresh_mix),
            "fresh_mix_coverage": self.fresh_mix_coverage,
            "fresh_mix_fresh_coverage": self.fresh_mix_fresh_coverage,
            "gain": self.coverage - self.fresh_mix_coverage,
            "mixes": self.mixes,
        }


def mix_for_telemetry(
    instance, telemetry: Telemetry, *, resolution: int = 5, target: float | None = None, progress=None, method: str = "meanfield"
) -> TelemetryMix:
    """Best lattice mix for the online router at ``telemetry`` (``progress``: called once per mix; ``method``: the
    prediction at the age, ``meanfield`` or ``sampled``, docs/model.md (11.19); the sampled one scores every mix on
    the same seeds, common random numbers)."""
    from edgeprefix.formulations.placement import placement_problem
    from edgeprefix.solvers.grid import feasible_lattice

    if not (isinstance(resolution, int) and resolution >= 1):
        raise ValueError(f"resolution: the lattice needs an integer >= 1, got {resolution}")
    tau = float(instance.placement.target if target is None else target)
    scored = []
    for mix in feasible_lattice(placement_problem(instance).constraints, resolution):
        ev = evaluate(instance, mix, "load_aware", target=tau)
        if ev.stable:
            stale = predict_online(instance, mix, telemetry, target=tau, evaluation=ev, method=method).coverage
            scored.append((tuple(float(v) for v in mix), float(ev.coverage(tau)), float(stale)))
        if progress is not None:
            progress()
    if not scored:
        raise ValueError("mix: no mix of the lattice keeps every tier stable at this load; lower the request intensity")
    best = max(scored, key=lambda r: r[2])
    fresh = max(scored, key=lambda r: r[1])
    return TelemetryMix(telemetry, best[0], best[2], fresh[0], fresh[2], fresh[1], len(scored))


def freshness_for(
    instance,
    mix,
    coverage: float,
    *,
    target: float | None = None,
    refresh: bool = False,
    upper: float | None = None,
    tolerance: float = 0.05,
    method: str = "meanfield",
) -> dict:
    """Largest telemetry delay (``refresh``: refresh period) at which the predicted coverage is still ``≥ coverage``.

    ``upper``: the largest age searched (default 4 s of delay, 8 s of refresh: both an equivalent board of 8 s,
    docs/model.md (11.13)).  Returns ``{"coverage", "fresh_coverage", "setting", "upper", "max_age"}``: ``max_age``
    None when even fresh telemetry
    misses ``coverage``, ``upper`` when the age ``upper`` still meets it, else bisected to ``tolerance`` seconds
    (the lower end of the last bracket, so the age returned meets it).
    """
    if not (0.0 < coverage < 1.0):
        raise ValueError(f"coverage: ζ must lie in (0, 1), got {coverage}")
    upper = (8.0 if refresh else 4.0) if upper is None else float(upper)
    if not (math.isfinite(upper) and upper > 0 and tolerance > 0):
        raise ValueError(f"upper/tolerance: must be > 0, got {upper} / {tolerance}")
    tau = float(instance.placement.target if target is None else target)
    ev = evaluate(instance, mix, "load_aware", target=tau)
    setting = "refresh" if refresh else "delay"

    def at(age: float) -> float:
        tel = Telemetry(refresh=age) if refresh else Telemetry(delay=age)
        return float(predict_online(instance, mix, tel, target=tau, evaluation=ev, method=method).coverage)

    fresh = at(0.0) if method == "sampled" else float(ev.coverage(tau))  # sampled: fresh telemetry sampled too (11.19)
    out = {"coverage": float(coverage), "fresh_coverage": fresh, "setting": setting, "upper": upper, "max_age": None}
    if fresh < coverage:
        return out
    if at(upper) >= coverage:
        out["max_age"] = float(upper)
        return out
    low, high = 0.0, float(upper)
    while high - low > tolerance:
        mid = 0.5 * (low + high)
        low, high = (mid, high) if at(mid) >= coverage else (low, mid)
    out["max_age"] = float(np.round(low, 6))
    return out
