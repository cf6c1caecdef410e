"""The model workload on a network of batching-engine nodes, with common random numbers (docs/model.md §17.9).

:func:`simulate` replays the instance's model workload (:mod:`.model_workload`) on engine nodes (:mod:`.cluster`)
laid out as a torus of ``size.nodes`` expected nodes, once per replication: replication ``r`` draws its requests,
node positions and arrivals from the ``r``-th child of ``SeedSequence(size.seed)`` whatever the load, density, mix
or router, so two calls with the same :class:`SimSize` differ only by what the caller changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.placement.simulation.engine.cluster import engine_replay
from edgeprefix.placement.simulation.engine.model_workload import model_workload
from edgeprefix.placement.simulation.engine.step_time import StepTime
from edgeprefix.placement.simulation.replay import ReplayResult, ReplaySpec


@dataclass(frozen=True)
class SimSize:
    """Size of one simulated point: ``requests`` per replay, ``replications``, expected ``nodes`` in the window."""

    requests: int = 800
    replications: int = 3
    nodes: float = 12.0
    seed: int = 7

    def __post_init__(self) -> None:
        if isinstance(self.requests, bool) or not isinstance(self.requests, int) or self.requests < 40:
            raise ValueError(f"--requests: an integer >= 40, got {self.requests!r}")
        if isinstance(self.replications, bool) or not isinstance(self.replications, int) or self.replications < 2:
            raise ValueError(f"--replications: an integer >= 2 (a standard error needs two), got {self.replications!r}")
        if not (math.isfinite(self.nodes) and self.nodes >= 1):
            raise ValueError(f"--nodes: a number >= 1, got {self.nodes!r}")


def simulate(
    instance: Instance,
    mix: Any,
    intensity: float,
    size: SimSize,
    *,
    step: StepTime,
    router: str = "tier",
    cache: str = "planned",
    route_law: str = "slots",
    on_replication: Callable[[], None] | None = None,
) -> list[ReplayResult]:
    """The model workload of ``instance`` at ``Λ = intensity`` on batching-engine nodes with the engine ``step`` time,
    one result per replication (the module docstring's common random numbers).  ``route_law``: the law the routers
    route on (``engine_replay``'s; ``engine`` is the routing a prediction with the engine law assumes);
    ``on_replication`` is called after each replication (a progress bar)."""
    inst = instance.with_network(request_intensity=float(intensity))
    d = step.decode_run(1, 1, 0.0)
    tau = float(inst.placement.target)
    spec = ReplaySpec(
        decode_per_token=d,
        nodes=size.nodes,
        router=router,
        engine="batching",
        cache=cache,
        telemetry=Telemetry(),
        target=tau,
        arrivals="poisson",
        hits="type",
        lengths="type",
    )
    out = []
    for child in np.random.SeedSequence(size.seed).spawn(size.replications):
        wl, blocks = model_workload(inst, size.requests, d, seed=np.random.default_rng(child))
        out.append(engine_replay(inst, wl, mix, spec, blocks=blocks, step=step, seed=np.random.default_rng(child), route_law=route_law))
        if on_replication is not None:
            on_replication()
    return out
