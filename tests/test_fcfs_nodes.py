"""FCFS waits booked across nodes at once equal the per-request heap pass bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.placement.simulation import fcfs_nodes


def _case(seed: int, nodes: int, requests: int, widest: int, rounded: bool):
    rng = np.random.default_rng(seed)
    servers = rng.integers(1, widest + 1, nodes)
    weight = rng.random(nodes) ** 4  # a few busy nodes with long tails
    node = rng.choice(nodes, requests, p=weight / weight.sum())
    node[rng.random(requests) < 0.05] = -1  # not served
    time = np.sort(rng.random(requests) * 50.0)
    service = rng.exponential(2.0, requests)
    if rounded:  # ties between arrivals, free times and services
        time, service = np.round(time, 1), np.round(service, 1)
    return node, time, service, servers


@pytest.mark.parametrize(
    "seed,nodes,requests,widest,rounded",
    [(0, 1, 500, 3, False), (1, 40, 5000, 1, False), (2, 300, 30000, 12, False), (3, 300, 30000, 12, True), (4, 60, 0, 4, False)],
)
def test_vectorised_waits_equal_theheap_waits(seed, nodes, requests, widest, rounded):
    node, time, service, servers = _case(seed, nodes, requests, widest, rounded)
    fast = fcfs_nodes.fcfs_node_waits(node, time, service, servers)
    reference = fcfs_nodes.heap_waits(node, time, service, servers)
    assert np.array_equal(fast, reference)
    assert requests == 0 or (fast > 0).mean() > 0.05  # queues form: the state carried between ranks matters
    assert np.all(fast[node < 0] == 0.0)


def test_theheap_waits_is_kept_for_huge_tables_and_empty_nodes(monkeypatch):
    node, time, service, servers = _case(5, 50, 4000, 6, False)
    monkeypatch.setattr(fcfs_nodes, "MAX_SLOTS", 10)
    assert np.array_equal(fcfs_nodes.fcfs_node_waits(node, time, service, servers), fcfs_nodes.heap_waits(node, time, service, servers))
