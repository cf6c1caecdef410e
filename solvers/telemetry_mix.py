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
    coverage_se: float | None = None  # the sampled prediction's standard error of ``coverage`` (None: mean field)

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
            "coverage_se": self.coverage_se,
        }


def mix_for_telemetry(
    instance,
    telemetry: Telemetry,
    *,
    resolution: int = 5,
    target: float | None = None,
    progress=None,
    method: str = "meanfield",
    extra=(),
) -> TelemetryMix:
    """Best lattice mix for the online router at ``telemetry`` (``progress``: called once per mix; ``method``: the
    prediction at the age, ``meanfield`` or ``sampled``, docs/model.md (11.19); the sampled one scores every mix on
    the same seeds, common random numbers).  ``extra``: further mixes scored with the lattice's (e.g. a fresh plan's
    mix off the lattice)."""
    from edgeprefix.formulations.placement import placement_problem
    from edgeprefix.solvers.grid import feasible_lattice

    if not (isinstance(resolution, int) and resolution >= 1):
        raise ValueError(f"resolution: the lattice needs an integer >= 1, got {resolution}")
    tau = float(instance.placement.target if target is None else target)
    scored = []
    lattice = [np.asarray(m, dtype=float) for m in feasible_lattice(placement_problem(instance).constraints, resolution)]
    for more in extra:
        more = np.asarray(more, dtype=float)
        if not any(np.allclose(more, m, rtol=0.0, atol=1e-9) for m in lattice):
            lattice.append(more)
    for mix in lattice:
        ev = evaluate(instance, mix, "load_aware", target=tau)
        if ev.stable:
            stale = predict_online(instance, mix, telemetry, target=tau, evaluation=ev, method=method)
            scored.append((tuple(float(v) for v in mix), float(ev.coverage(tau)), float(stale.coverage), stale.coverage_se))
        if progress is not None:
            progress()
    if not scored:
        raise ValueError("mix: no mix of the lattice keeps every tier stable at this load; lower the request intensity")
    best = max(scored, key=lambda r: r[2])
    fresh = max(scored, key=lambda r: r[1])
    se = None if best[3] is None else float(best[3])
    return TelemetryMix(telemetry, best[0], best[2], fresh[0], fresh[2], fresh[1], len(scored), se)


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


MAX_DOUBLINGS = 12  # density doublings (or halvings) before ζ is declared out of reach (or met everywhere)
LEVEL_OFF = 0.002  # a doubling that adds less coverage than this (after two) ends the search: ζ out of reach


@dataclass(frozen=True)
class TelemetryDensity:
    """The smallest edge density at which the online router at ``telemetry`` reaches ``reliability`` (docs/model.md (11.18)).

    ``mix``: the mix used at ``edge_density`` (the given one, or the lattice's best for the age there);
    ``lower``: the largest density tried that misses ``ζ`` (``lower < edge_density ≤ lower (1 + rtol)``);
    ``coverage_se``: the sampled prediction's standard error at ``edge_density`` (None for the mean field).
    """

    telemetry: Telemetry
    reliability: float
    edge_density: float
    lower: float
    coverage: float
    coverage_se: float | None
    mix: tuple[float, ...]
    joint: bool
    method: str
    steps: int
    predictions: int
    trace: tuple[tuple[float, float], ...]  # (density, coverage) of every density tried, in order

    def to_dict(self, profile_ids=None) -> dict:
        mix = list(self.mix) if profile_ids is None else dict(zip(profile_ids, self.mix))
        return {
            "telemetry": {"delay": float(self.telemetry.delay), "refresh": float(self.telemetry.refresh)},
            "reliability": self.reliability,
            "edge_density": self.edge_density,
            "lower": self.lower,
            "coverage": self.coverage,
            "coverage_se": self.coverage_se,
            "mix": mix,
            "joint": self.joint,
            "method": self.method,
            "steps": self.steps,
            "predictions": self.predictions,
            "trace": [[d, c] for d, c in self.trace],
        }


def density_for_telemetry(
    instance,
    reliability: float,
    telemetry: Telemetry,
    *,
    mix=None,
    resolution: int = 5,
    target: float | None = None,
    method: str = "meanfield",
    rtol: float = 0.01,
    start: float | None = None,
    progress=None,
    extra=(),
) -> TelemetryDensity:
    """Smallest ``λ_b`` at which the online router's predicted coverage at ``telemetry`` reaches ``reliability``.

    At each density tried the coverage is :func:`~edgeprefix.placement.model.stale_router.predict_online` at the age
    (``method``: ``meanfield`` or ``sampled``, docs/model.md (11.19)) for ``mix`` when given, else the best of the
    ``1/resolution`` lattice (and the ``extra`` mixes) for the age (:func:`mix_for_telemetry`, the mix optimised for
    the age at that density);
    a density where no mix keeps every tier stable misses.  From ``start`` (default the instance's ``λ_b``) the
    bracket doubles or halves until it holds a miss and a hit, then geometric bisection narrows it to
    ``hi / lo ≤ 1 + rtol``; the answer is ``hi``.  The coverage grows with the density (nearer nodes, lighter
    queues); the sampled prediction's seeds are fixed, so it is a deterministic function of the density.
    """
    if not (0.0 < reliability < 1.0):
        raise ValueError(f"reliability: ζ must lie in (0, 1), got {reliability}")
    if not (0.0 < rtol < 1.0):
        raise ValueError(f"rtol must lie in (0, 1), got {rtol}")
    if mix is None and not (isinstance(resolution, int) and resolution >= 1):
        raise ValueError(f"resolution: the lattice needs an integer >= 1, got {resolution}")
    tau = float(instance.placement.target if target is None else target)
    fixed = None if mix is None else tuple(float(v) for v in np.asarray(mix, dtype=float))
    count = {"predictions": 0}
    trace: list[tuple[float, float]] = []

    def score(density: float) -> tuple[float, float | None, tuple[float, ...]]:
        inst = instance.with_network(edge_density=float(density))
        if fixed is not None:
            ev = evaluate(inst, np.asarray(fixed), "load_aware", target=tau)
            if not ev.stable:
                trace.append((float(density), 0.0))
                return 0.0, None, fixed
            got = predict_online(inst, np.asarray(fixed), telemetry, target=tau, evaluation=ev, method=method)
            count["predictions"] += 1
            cov, se, used = float(got.coverage), got.coverage_se, fixed
        else:
            try:
                chosen = mix_for_telemetry(inst, telemetry, resolution=resolution, target=tau, method=method, extra=extra)
            except ValueError:  # no stable mix at this density
                trace.append((float(density), 0.0))
                return 0.0, None, ()
            count["predictions"] += chosen.mixes
            cov, se, used = float(chosen.coverage), chosen.coverage_se, chosen.mix
        trace.append((float(density), cov))
        if progress is not None:
            progress(density, cov)
        return cov, se, used

    lo_d = hi_d = float(instance.network.edge_density if start is None else start)
    if not (math.isfinite(lo_d) and lo_d > 0):
        raise ValueError(f"start: the first density must be a finite number > 0, got {start}")
    got = score(lo_d)
    if got[0] >= reliability:
        best = got
        for _ in range(MAX_DOUBLINGS):
            lo_d = hi_d / 2.0
            low = score(lo_d)
            if low[0] < reliability:
                break
            hi_d, best = lo_d, low
        else:
            raise ValueError(f"reliability: ζ = {reliability:g} is met at every density down to {lo_d:.3g}")
    else:
        previous = got[0]
        for step in range(MAX_DOUBLINGS):
            hi_d = lo_d * 2.0
            best = score(hi_d)
            if best[0] >= reliability:
                break
            if step >= 2 and best[0] - previous < LEVEL_OFF:  # nearer nodes no longer help: out of reach
                hi_d = math.inf
                break
            lo_d, previous = hi_d, best[0]
        else:
            hi_d = math.inf
        if not math.isfinite(hi_d):
            raise ValueError(
                f"reliability: ζ = {reliability:g} is out of reach of the online router at telemetry delay "
                f"{telemetry.delay:g} s, refresh {telemetry.refresh:g} s: its predicted coverage levels off at "
                f"{best[0]:.4f} by λ_b = {lo_d * 2.0:.4g}; lower --reliability (or use a finer mix lattice)"
            )
    while hi_d / lo_d > 1.0 + rtol:
        mid = math.sqrt(lo_d * hi_d)
        now = score(mid)
        if now[0] >= reliability:
            hi_d, best = mid, now
        else:
            lo_d = mid
    return TelemetryDensity(
        telemetry,
        float(reliability),
        float(hi_d),
        float(lo_d),
        float(best[0]),
        None if best[1] is None else float(best[1]),
        tuple(best[2]),
        fixed is None,
        method,
        len(trace),
        count["predictions"],
        tuple(trace),
    )
