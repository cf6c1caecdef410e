"""FCFS waits at many independent multi-server nodes for a fixed routing, vectorised across nodes (docs/model.md §11).

Each node is a FCFS queue with ``c_x`` servers and known service requirements, so a request's wait is
``max(min free − t, 0)`` with ``min free`` the earliest of its node's ``c_x`` server free times, and the
freed slot becomes ``max(t, min free) + S`` (:func:`edgeprefix.placement.simulation.mmc.fcfs_waits`).
Nodes do not interact once the routing is fixed: the ``r``-th request of every node can be booked at
once, a numpy step over the nodes that have an ``r``-th request.  The arithmetic is the heap's, operation
for operation, and a node's multiset of free times evolves identically whichever of equal slots is
replaced, so the waits are bit-identical to the per-request heap pass (tests/test_fcfs_nodes.py).
When few nodes are left (a busy node's long tail), each finishes in a plain heap loop of its own.
"""

from __future__ import annotations

import heapq

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

VECTORISED = True  # off: the per-request heap pass (benchmarks/speed/validate_speed.py measures both)
MAX_SLOTS = 1 << 22  # nodes × most servers of the free-time table; larger tables keep the heap pass
MIN_ACTIVE = 24  # below this many nodes with a next request the rest go node by node


def fcfs_node_waits(node: IntArray, time: FloatArray, service: FloatArray, servers: IntArray) -> FloatArray:
    """Waits of the requests in index order, each at its ``node`` (−1: not served, wait 0).

    ``time``: arrival epochs (a node's requests are served in index order); ``service``: requirements;
    ``servers``: ``c_x ≥ 1`` per node.
    """
    node = np.asarray(node, dtype=np.int64)
    time = np.asarray(time, dtype=float)
    service = np.asarray(service, dtype=float)
    servers = np.asarray(servers, dtype=np.int64)
    n_nodes = servers.size
    widest = int(servers.max()) if n_nodes else 0
    if not VECTORISED or n_nodes * widest > MAX_SLOTS or (servers < 1).any():
        return heap_waits(node, time, service, servers)
    waits = np.zeros(node.size)
    routed = np.flatnonzero(node >= 0)
    if routed.size == 0:
        return waits
    counts = np.bincount(node[routed], minlength=n_nodes)
    by_count = np.argsort(-counts, kind="stable")  # node at each position, most requests first
    position = np.empty(n_nodes, dtype=np.int64)
    position[by_count] = np.arange(n_nodes)
    keys = node[routed]
    if n_nodes <= np.iinfo(np.int16).max:
        keys = keys.astype(np.int16)  # numpy's stable sort of 16-bit keys is a radix sort
    grouped = routed[np.argsort(keys, kind="stable")]  # by node, index order kept
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.arange(grouped.size) - first[node[grouped]]
    active = np.bincount(rank)  # nodes holding an r-th request (non-increasing in r)
    bounds = np.concatenate(([0], np.cumsum(active)))
    order = np.empty_like(grouped)  # by rank, then by position: rank r holds positions 0 … active[r] − 1
    order[bounds[rank] + position[node[grouped]]] = grouped
    free = np.full((n_nodes, widest), np.inf)
    free[np.arange(widest)[None, :] < servers[by_count, None]] = 0.0
    t_all, s_all = time[order], service[order]
    w_all = np.zeros(order.size)
    rows = np.arange(n_nodes)
    r = 0
    while r < active.size and active[r] >= MIN_ACTIVE:
        lo, hi = bounds[r], bounds[r + 1]
        m = int(active[r])
        table = free[:m]
        slot = table.argmin(axis=1) if widest > 1 else np.zeros(m, dtype=np.int64)
        f = table[rows[:m], slot]
        t = t_all[lo:hi]
        busy = f > t
        w_all[lo:hi] = np.where(busy, f - t, 0.0)
        table[rows[:m], slot] = np.where(busy, f, t) + s_all[lo:hi]
        r += 1
    waits[order[: bounds[r]]] = w_all[: bounds[r]]
    if r < active.size:  # the tails of the busiest nodes, one heap each
        for p in range(int(active[r])):
            x = int(by_count[p])
            heap = free[p, : servers[x]].tolist()
            heapq.heapify(heap)
            tail = grouped[first[x] + r : first[x] + counts[x]]
            waits[tail] = _heap_tail(heap, time[tail].tolist(), service[tail].tolist())
    return waits


def _heap_tail(heap: list[float], times: list[float], services: list[float]) -> list[float]:
    """One node's waits from its heap of server free times on (the heap pass of a single node)."""
    replace = heapq.heapreplace
    out = [0.0] * len(times)
    for j, (t, svc) in enumerate(zip(times, services)):
        f = heap[0]
        if f > t:
            out[j] = f - t
            replace(heap, f + svc)
        else:
            replace(heap, t + svc)
    return out


def heap_waits(node: IntArray, time: FloatArray, service: FloatArray, servers: IntArray) -> FloatArray:
    """The per-request heap pass over the arrival stream (the reference)."""
    free = [[0.0] * int(c) for c in servers]
    waits = [0.0] * node.size
    replace = heapq.heapreplace
    for i, (x, t, svc) in enumerate(zip(node.tolist(), time.tolist(), service.tolist())):
        if x < 0:
            continue
        heap = free[x]
        f = heap[0]
        if f > t:
            waits[i] = f - t
            replace(heap, f + svc)
        else:
            replace(heap, t + svc)
    return np.asarray(waits)
