"""The planned density refined on the batching-engine simulation (docs/model.md §17.10.2).

``plan-density --queue-model cell --queue-law engine`` plans ``λ_b`` from the engine law; on a network of
batching-engine nodes that density can cover less than ``ζ`` (on ``mooncake_engine`` 0.75 for ζ = 0.8: the law's
shape at small waits, docs/model.md §17.10.3).  :func:`refined_density` finds instead the root of the *simulated*
coverage ``C_R(λ_b) = ζ`` over ``R`` replications with common random numbers (replication ``r`` has the same
requests, node positions and arrivals, scaled, at every ``λ_b``; :mod:`~edgeprefix.placement.simulation.engine.model_network`):
a Newton step in ``log λ_b`` on the model's slope from the model's density, then secant steps kept inside the
bracket (bisection when a secant step leaves it), stopping within :data:`REFINE_TOL` of ``ζ`` or after
:data:`REFINE_MAX` simulations.  The density found is then simulated on ``R`` fresh replications (seed
``+ FRESH_SEED``), whose mean ± SE is the held-out coverage.  The accuracy of the density is the simulation's:
the law only gives the start and the first step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.engine.model_network import SimSize, simulate
from edgeprefix.placement.simulation.engine.step_time import StepTime

REFINE_TOL = 0.002  # stop when the simulated coverage is this close to ζ
REFINE_MAX = 8  # simulations of the root search at most
MAX_LOG_STEP = 0.5  # a Newton step changes λ_b by at most this factor's log (e^0.5 ≈ 1.65)
FRESH_SEED = 1000  # seed offset of the held-out replications
SLOPE_STEP = 0.02  # half-width in log λ_b of the model slope's central difference
ROUTERS = ("online", "tier")  # the simulated network's router, routed on the engine law


def refine(
    coverage: Callable[[float], float], start: float, target: float, slope: float, *, tol: float = REFINE_TOL, max_sims: int = REFINE_MAX
) -> tuple[float, float, list[tuple[float, float]]]:
    """The root of ``coverage(λ_b) = target`` near ``start``: a Newton step in ``log λ_b`` on the model's ``slope``
    (``dC/d log λ_b``), then secant steps kept inside the bracket (bisection when a secant step leaves it).  Returns
    the density, its coverage and the points evaluated.  ``coverage`` must increase with ``λ_b`` (more nodes, less
    load each, nearer); with common random numbers it is one fixed function of ``λ_b``."""
    if not (slope > 0 and math.isfinite(slope)):
        raise ValueError(f"refine: the model's slope dC/dlog λ_b must be > 0, got {slope!r}")
    pts: list[tuple[float, float]] = []

    def f(x: float, density: float | None = None) -> float:
        d = math.exp(x) if density is None else density
        y = coverage(d) - target
        pts.append((d, y + target))
        return y

    x0 = math.log(start)
    y0 = f(x0, start)  # the model's density itself, not exp(log(start)), which can differ by an ulp
    if abs(y0) <= tol:
        return start, y0 + target, pts
    lo: tuple[float, float] | None = (x0, y0) if y0 < 0 else None
    hi: tuple[float, float] | None = (x0, y0) if y0 > 0 else None
    x = x0 + _newton(y0, slope)
    while len(pts) < max_sims:
        y = f(x)
        if abs(y) <= tol:
            return math.exp(x), y + target, pts
        if y < 0:
            lo = (x, y)
        else:
            hi = (x, y)
        if lo is None or hi is None:  # not bracketed yet: step on with the model's slope, doubled until it brackets
            x = x + 2.0 * _newton(y, slope)
            continue
        secant = lo[0] - lo[1] * (hi[0] - lo[0]) / (hi[1] - lo[1])
        inside = min(lo[0], hi[0]) + 0.05 * abs(hi[0] - lo[0]) < secant < max(lo[0], hi[0]) - 0.05 * abs(hi[0] - lo[0])
        x = secant if inside else 0.5 * (lo[0] + hi[0])
    # out of simulations: the nearer end of the bracket, or the last point
    best = min(pts, key=lambda p: abs(p[1] - target))
    return best[0], best[1], pts


def _newton(y: float, slope: float) -> float:
    """A Newton step in ``log λ_b``, at most :data:`MAX_LOG_STEP` either way."""
    return float(np.clip(-y / slope, -MAX_LOG_STEP, MAX_LOG_STEP))


@dataclass(frozen=True)
class EngineNetwork:
    """What simulating the engine network at a density needs: the ``instance`` (its ``Λ``, its ``[engine]`` section,
    the target ``τ_0`` in ``placement.target``), the ``mix`` vector ``π``, the engine's ``step`` time and the
    simulated ``router`` (routed on the engine law); ``policy`` and ``queue_model`` are the model's, for its slope."""

    instance: Instance
    mix: np.ndarray
    step: StepTime
    router: str = "online"
    policy: str = "load_aware"
    queue_model: str = "cell"

    def __post_init__(self) -> None:
        if self.instance.engine is None:
            raise ValueError(f"engine refinement: instance {self.instance.name!r} has no [engine] section (docs/instances.md)")
        if self.router not in ROUTERS:
            raise ValueError(f"engine refinement: router one of {', '.join(ROUTERS)}, got {self.router!r}")

    def at(self, density: float) -> Instance:
        return self.instance.with_network(edge_density=float(density))

    def simulated(self, density: float, size: SimSize, on_replication: Callable[[], None] | None = None) -> list[float]:
        """Per replication, the batching-engine network's coverage at ``density`` (common random numbers: ``size.seed``)."""
        at = self.at(density)
        runs = simulate(
            at,
            self.mix,
            float(at.network.request_intensity),
            size,
            router=self.router,
            step=self.step,
            route_law="engine",
            on_replication=on_replication,
        )
        return [r.coverage() for r in runs]

    def model_coverage(self, density: float) -> float:
        """The model's coverage at ``density`` with the engine law (docs/model.md §17.10)."""
        at = self.at(density)
        ev = evaluate(at, self.mix, self.policy, target=at.placement.target, queue_model=self.queue_model, queue_law="engine")
        return float(ev.coverage_at_target)

    def slope(self, density: float, step: float = SLOPE_STEP) -> float:
        """``dC/d log λ_b`` of the model with the engine law, a central difference."""
        up = self.model_coverage(density * math.exp(step))
        down = self.model_coverage(density * math.exp(-step))
        return (up - down) / (2.0 * step)


@dataclass(frozen=True)
class Refined:
    """The simulation-refined density: the root search's points ``(λ_b, C_R)`` (seed ``size.seed``), the density
    found and its search coverage, and the held-out simulation there (seed ``size.seed + FRESH_SEED``)."""

    points: tuple[tuple[float, float], ...]
    density: float
    search_coverage: float
    held_out: tuple[float, ...]
    simulations: int
    start: float
    reliability: float
    size: SimSize

    @property
    def held_out_mean(self) -> float:
        return float(np.mean(self.held_out))

    @property
    def held_out_se(self) -> float:
        return float(np.std(self.held_out, ddof=1) / math.sqrt(len(self.held_out)))

    @property
    def converged(self) -> bool:
        """Whether the search ended within :data:`REFINE_TOL` of ``ζ`` (else it ran out of simulations)."""
        return abs(self.search_coverage - self.reliability) <= REFINE_TOL

    def to_dict(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        n = self.size.nodes
        return {
            "edge_density": self.density,
            "model_edge_density": self.start,
            "coverage_search": self.search_coverage,
            "coverage_held_out": self.held_out_mean,
            "coverage_held_out_se": self.held_out_se,
            "converged": self.converged,
            "tolerance": REFINE_TOL,
            "simulations": self.simulations,
            "nodes": n,
            "replications": self.size.replications,
            "requests_per_node": self.size.requests / n,
            "seed": self.size.seed,
            "held_out_seed": self.size.seed + FRESH_SEED,
            "points": [[d, c] for d, c in self.points],
            **(extra or {}),
        }


def refined_density(
    net: EngineNetwork, start: float, reliability: float, size: SimSize, *, max_sims: int = REFINE_MAX, desc: str = "refine on the engine"
) -> Refined:
    """The simulation-refined density from ``start`` (the model's, module docstring), and its held-out simulation;
    a progress bar on stderr counts the simulations' replications (at most ``max_sims`` + 1 simulations)."""
    if not (0.0 < reliability < 1.0):
        raise ValueError(f"engine refinement: ζ in (0, 1), got {reliability!r}")
    if not (math.isfinite(start) and start > 0):
        raise ValueError(f"engine refinement: a start density > 0, got {start!r}")
    sims = 0
    with progress_bar(total=(max_sims + 1) * size.replications, desc=desc, unit="replication") as bar:
        tick = lambda: bar.update(1)

        def cov(density: float) -> float:
            nonlocal sims
            sims += 1
            got = float(np.mean(net.simulated(density, size, tick)))
            bar.set_postfix_str(f"simulation {sims}: λ_b {density:.4g} coverage {got:.4f}")
            return got

        density, found, pts = refine(cov, start, reliability, net.slope(start), max_sims=max_sims)
        fresh = SimSize(size.requests, size.replications, size.nodes, size.seed + FRESH_SEED)
        held = net.simulated(density, fresh, tick)
    return Refined(tuple(pts), density, found, tuple(held), sims + 1, float(start), float(reliability), size)
