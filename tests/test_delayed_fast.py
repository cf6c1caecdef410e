"""The delayed-telemetry fast path (blocks of requests) gives the per-request loop's numbers exactly."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from edgeprefix.placement.model.instance import default_instance
from edgeprefix.placement.simulation import delayed_fast
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter, PowerOfTwo

SPEC = SimulationSpec(horizon=12.0, warmup=3.0, layout=LayoutSpec(mean_nodes=60, counts="exact"))
FIELDS = ("node", "profile", "distance", "prefill", "hit", "wait", "service", "ttft")
PLAIN = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
CASES = [
    (PLAIN, {"telemetry_delay": 1.0}),
    (PLAIN, {"telemetry_delay": 0.3}),
    (PLAIN, {"refresh_period": 2.0}),
    (PLAIN, {"refresh_period": 1.5, "telemetry_delay": 0.7}),
    (OnlineRouter("load_aware", "telemetry", candidates_per_profile=2, margin=1.0), {"telemetry_delay": 0.5}),
    (OnlineRouter("load_aware", "telemetry", candidates_per_profile=3, margin=0.5), {"refresh_period": 1.0}),
    (OnlineRouter("prefix", "telemetry", candidates_per_profile=2), {"telemetry_delay": 1.0}),
]


@pytest.mark.parametrize("router,setting", CASES, ids=lambda v: str(v) if isinstance(v, dict) else f"{v.name}-{v.margin:g}")
def test_blocks_are_bit_identical_to_the_per_request_loop(monkeypatch, router, setting):
    instance = default_instance().with_network(request_intensity=5.0)  # heavy: herding fills queues
    spec = replace(SPEC, **setting)
    assert delayed_fast.applies(router, spec)
    fast = simulate_network(instance, None, router, spec, seed=3)
    with monkeypatch.context() as patch:
        patch.setattr(delayed_fast, "FAST_PATH", False)
        assert not delayed_fast.applies(router, spec)
        loop = simulate_network(instance, None, router, spec, seed=3)
    assert fast.requests == loop.requests > 500
    assert (fast.wait > 0).mean() > 0.05  # the queues the stale reads build are exercised
    for name in FIELDS:
        assert np.array_equal(getattr(fast, name), getattr(loop, name), equal_nan=True), name


@pytest.mark.parametrize(
    "router,setting",
    [
        (PLAIN, {}),  # fresh telemetry: the other fast path
        (PLAIN, {"telemetry_delay": 1.0, "local_accounting": True}),
        (OnlineRouter("load_aware", "telemetry", rho_high=0.9, rho_low=0.5), {"telemetry_delay": 1.0}),
        (OnlineRouter("load_aware", "tier", tier_wait=(0.1, 0.2, 0.3)), {"telemetry_delay": 1.0}),
        (PowerOfTwo(), {"telemetry_delay": 1.0}),
    ],
)
def test_the_loop_keeps_what_the_blocks_do_not_implement(router, setting):
    assert not delayed_fast.applies(router, replace(SPEC, **setting))
