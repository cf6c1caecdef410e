"""The online router's fast path and the remembered candidate queries give the per-request loop's numbers exactly."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.placement.model.instance import default_instance
from edgeprefix.placement.simulation import nearest, online_fast
from edgeprefix.placement.simulation.layout import LayoutSpec, sample_layout
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter, PowerOfTwo

SPEC = SimulationSpec(horizon=25.0, warmup=10.0, layout=LayoutSpec(mean_nodes=150, counts="exact"))
FIELDS = ("node", "profile", "distance", "prefill", "hit", "wait", "service", "ttft")
ROUTERS = [
    OnlineRouter("load_aware", "telemetry", candidates_per_profile=2),
    OnlineRouter("load_aware", "telemetry", candidates_per_profile=3, margin=1.5),
    OnlineRouter("load_aware", "tier", tier_wait=(0.1, 0.2, 0.3), margin=0.7),
    OnlineRouter("load_aware", "telemetry", candidates_per_profile=2, fetch=((0.01, 0.02),) * 3),
    OnlineRouter("prefix", "telemetry", candidates_per_profile=2),
    OnlineRouter("nearest", "telemetry"),
]


def _both(monkeypatch, instance, router, spec=SPEC, seed=5):
    fast = simulate_network(instance, None, router, spec, seed=seed)
    with monkeypatch.context() as patch:
        patch.setattr(online_fast, "applies", lambda *args, **kwargs: False)
        loop = simulate_network(instance, None, router, spec, seed=seed)
    return fast, loop


@pytest.mark.parametrize("router", ROUTERS, ids=lambda r: f"{r.name}-{r.delay}-{r.margin:g}")
def test_fast_path_is_bit_identical_to_the_per_request_loop(monkeypatch, router):
    instance = default_instance().with_network(request_intensity=4.0)  # heavy: many requests meet a busy best node
    assert online_fast.applies(router, SPEC)
    fast, loop = _both(monkeypatch, instance, router)
    assert fast.requests == loop.requests > 1000
    assert (fast.wait > 0).mean() > 0.01  # the state-dependent part is exercised
    for name in FIELDS:
        assert np.array_equal(getattr(fast, name), getattr(loop, name), equal_nan=True), name


def test_busy_best_candidates_change_the_choice():
    """At high load the online router leaves its telemetry-free favourite for a free node (what the full cost decides)."""
    instance = default_instance().with_network(request_intensity=4.0)
    live = simulate_network(instance, None, ROUTERS[0], SPEC, seed=5)
    nearest_only = simulate_network(instance, None, OnlineRouter("prefix", "telemetry", candidates_per_profile=2), SPEC, seed=5)
    assert np.mean(live.node != nearest_only.node) > 0.05
    assert live.wait.mean() < nearest_only.wait.mean()


@pytest.mark.parametrize(
    "router,spec",
    [
        (OnlineRouter("load_aware", "telemetry", rho_high=0.9, rho_low=0.5), SPEC),
        (ROUTERS[0], SimulationSpec(refresh_period=0.5, layout=SPEC.layout)),
        (ROUTERS[0], SimulationSpec(telemetry_delay=0.2, layout=SPEC.layout)),
        (PowerOfTwo(), SPEC),
    ],
)
def test_the_loop_keeps_what_the_fast_path_does_not_implement(router, spec):
    assert not online_fast.applies(router, spec)


def test_remembered_candidates_equal_a_fresh_query():
    instance = default_instance()
    layout = sample_layout(instance, None, LayoutSpec(mean_nodes=200, counts="exact"), seed=1)
    points = np.random.default_rng(2).random((5000, 2)) * layout.side
    nearest.forget()
    one = nearest.nearest_per_profile(layout, points, 1, 3)
    two = nearest.nearest_per_profile(layout, points, 2, 3)
    again = nearest.nearest_per_profile(layout, points, 1, 3)
    for k, (nodes, dist) in ((1, one), (2, two), (1, again)):
        fresh_nodes, fresh_dist = nearest.query(layout, points, k, 3)
        assert np.array_equal(nodes, fresh_nodes) and np.array_equal(dist, fresh_dist)
        assert not nodes.flags.writeable and not dist.flags.writeable
    assert np.all(np.diff(two[1].reshape(-1, 3, 2), axis=2) >= 0)  # each profile's block in distance order
    moved = points.copy()
    moved[0] += 1e-9
    assert not np.array_equal(nearest.nearest_per_profile(layout, moved, 1, 3)[1][0], one[1][0])
    nearest.forget()


def test_a_question_repeats_only_when_equal_bit_for_bit(monkeypatch):
    instance = default_instance()
    layout = sample_layout(instance, None, LayoutSpec(mean_nodes=200, counts="exact"), seed=1)
    points = np.random.default_rng(2).random((3000, 2)) * layout.side
    asked: list[int] = []
    real = nearest.query
    monkeypatch.setattr(nearest, "query", lambda *a, **k: asked.append(1) or real(*a, **k))
    nearest.forget()
    first = nearest.nearest_per_profile(layout, points, 2, 3)
    nearest.nearest_per_profile(layout, points.copy(), 2, 3)  # equal arrays, another object: remembered
    assert len(asked) == 1
    points[-1, 1] = np.nextafter(points[-1, 1], 0.0)  # the caller changes its array after asking: a new question
    changed = nearest.nearest_per_profile(layout, points, 2, 3)
    assert len(asked) == 2 and np.array_equal(changed[1][:-1], first[1][:-1])
    zero = points.copy()
    zero[0] = 0.0
    signed = zero.copy()
    signed[0] = -0.0  # equal as numbers, not as bytes: a digest of the bytes told them apart too
    nearest.nearest_per_profile(layout, zero, 2, 3)
    nearest.nearest_per_profile(layout, signed, 2, 3)
    assert len(asked) == 4
    nearest.forget()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_grid_query_gives_the_kd_tree_neighbours_bit_for_bit(k):
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(k)
    for nodes, side in ((1, 3.0), (7, 10.0), (333, 31.6), (1500, 5.0)):
        data = rng.random((nodes, 2)) * side
        points = rng.random((20_000, 2)) * side
        points[:4] = [[0.0, 0.0], [side * (1 - 1e-16), 0.0], data[0], [0.0, np.nextafter(side, 0)]]  # corners, a node
        tree = cKDTree(data, boxsize=side)
        kk = min(k, nodes)
        want_d, want_j = tree.query(points, k=kk)
        got_d, got_j = nearest.grid_query(data, tree, points, kk, side)
        assert np.array_equal(got_d, want_d.reshape(-1, kk)) and np.array_equal(got_j, want_j.reshape(-1, kk))


def test_grid_and_kd_tree_candidates_give_the_same_simulation(monkeypatch):
    instance = default_instance().with_network(request_intensity=2.0)
    router = ROUTERS[0]
    nearest.forget()
    grid = simulate_network(instance, None, router, SPEC, seed=3)
    with monkeypatch.context() as patch:
        patch.setattr(nearest, "GRID", False)
        nearest.forget()
        tree = simulate_network(instance, None, router, SPEC, seed=3)
    nearest.forget()
    assert grid.requests > 1000
    for name in FIELDS:
        assert np.array_equal(getattr(grid, name), getattr(tree, name), equal_nan=True), name


def test_start_counts_give_the_departure_heaps_choices(monkeypatch):
    """n_x read from the start epochs (services ≥ 0) equals the heap of departures, choice for choice."""
    instance = default_instance().with_network(request_intensity=4.0)
    router = ROUTERS[1]
    counted = simulate_network(instance, None, router, SPEC, seed=7)
    with monkeypatch.context() as patch:
        patch.setattr(online_fast, "COUNTED", False)
        heaps = simulate_network(instance, None, router, SPEC, seed=7)
    assert (counted.wait > 0).mean() > 0.01
    for name in FIELDS:
        assert np.array_equal(getattr(counted, name), getattr(heaps, name), equal_nan=True), name


def test_remembered_draws_give_the_fresh_draws_and_generator_state(monkeypatch):
    from edgeprefix.placement.simulation import network

    instance = default_instance().with_network(request_intensity=2.0)
    router = ROUTERS[0]
    network.forget_draws()
    first_rng, second_rng = np.random.default_rng(11), np.random.default_rng(11)
    first = simulate_network(instance, None, router, SPEC, seed=first_rng)
    second = simulate_network(instance, None, router, SPEC, seed=second_rng)  # same state: the remembered draw
    assert second.layout is first.layout
    with monkeypatch.context() as patch:
        patch.setattr(network, "REMEMBER_DRAWS", False)
        fresh_rng = np.random.default_rng(11)
        fresh = simulate_network(instance, None, router, SPEC, seed=fresh_rng)
    for name in FIELDS:
        assert np.array_equal(getattr(second, name), getattr(fresh, name), equal_nan=True), name
    assert second_rng.bit_generator.state == fresh_rng.bit_generator.state == first_rng.bit_generator.state
    assert second_rng.random() == fresh_rng.random()
    equal = simulate_network(instance.with_network(request_intensity=2.0), None, router, SPEC, seed=11)
    assert equal.layout is first.layout  # an equal instance (another object) from the same state
    other = simulate_network(instance.with_network(request_intensity=2.5), None, router, SPEC, seed=11)
    assert other.layout is not first.layout and other.requests != first.requests  # another Λ: drawn afresh
    network.forget_draws()
