"""The online router under delayed or periodic telemetry, routed in blocks of requests (docs/model.md (11.10)).

With a continuous telemetry delay ``D > 0`` a request at ``t`` reads every candidate's ``n_x(t − D)``;
with a board rewritten every ``Δt`` it reads ``n_x(kΔt − D)`` of the last refresh.  Either way the read
depends only on requests that arrived before some earlier epoch, and FCFS with known service times fixes
each of those requests' departure when it is routed.  So the requests fall into blocks whose reads are all
settled before the block starts:

- continuous delay: a block starting at request ``i_0`` holds every request with ``t − D < t_{i_0}``;
- board: a block is one phase ``[kΔt, (k+1)Δt)`` (before the first refresh every node shows 0).

In a block the shown counts ``n_x(u) = #{arrivals ≤ u} − #{departures ≤ u}`` come from two sorted arrays
at once, every request's cost ``Ĉ_{x,q}`` of (11.1) and its ``argmin`` are taken for the whole block, and
the FCFS bookings run in lock step over the nodes (the ``r``-th request of every node of the block in one
vector step), so the Python loop runs over blocks and ranks, never over requests.  The arithmetic is the
router's, operation for operation, so choices, waits and services are bit-identical to the per-request loop
of :func:`edgeprefix.placement.simulation.network.simulate_network` (tests/test_delayed_fast.py).
:func:`applies` says when this path is taken: the plain online router (margin allowed) with ``D > 0`` or
``Δt > 0``, no local accounting, no admission control, no catalogue view and no churn.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.simulation.online_fast import plain_router
from edgeprefix.placement.simulation.routers import REJECT, OnlineRouter

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

FAST_PATH = True  # off: every delayed or periodic request goes through ``router.choose``


def applies(router: Any, spec: Any, shown: Any = None, churn: Any = None) -> bool:
    """Whether :func:`route_delayed` gives the per-request loop's result for this run."""
    if not FAST_PATH or type(router) is not OnlineRouter or shown is not None or churn is not None:
        return False
    if router != plain_router(router) or router.admission_control or router.delay != "telemetry":
        return False
    if spec.local_accounting or not (spec.telemetry_delay > 0.0 or spec.refresh_period > 0.0):
        return False
    return router.margin == 0 or math.isfinite(spec.staleness_weight)


def _shown(keys_arr: FloatArray, keys_dep: FloatArray, span: float, nodes: IntArray, at: FloatArray) -> FloatArray:
    """``n_x(u)`` for every pair ``(x, u)`` from the sorted keys ``x·span + time`` of arrivals and departures."""
    key = nodes * span + at
    return (np.searchsorted(keys_arr, key, side="right") - np.searchsorted(keys_dep, key, side="right")).astype(float)


def route_delayed(
    instance: Any, layout: Any, req: Any, cand: IntArray, dist: FloatArray, router: OnlineRouter, spec: Any, real_service: FloatArray
) -> tuple[IntArray, FloatArray, FloatArray, FloatArray] | None:
    """``(chosen, waits, services, hits)`` per request, as the per-request loop gives them (module docstring).

    Returns ``None`` when a node has no server or a cost is not finite (the loop then decides).
    """
    servers = np.asarray(layout.servers, dtype=np.int64)
    if (servers < 1).any():
        return None
    n = req.time.size
    kind = req.kind
    prof = layout.profile
    p = np.asarray(instance.probabilities, dtype=float)
    g_adv = np.asarray(instance.first_token_time, dtype=float)
    fetch_table = router.fetch
    fetch = np.zeros_like(g_adv) if fetch_table is None else np.asarray(fetch_table, dtype=float)
    xi, alpha = instance.network.radio_scale, instance.network.radio_exponent
    valid = cand >= 0
    safe = np.where(valid, cand, 0)
    c_all = servers.astype(float)[safe]
    s_all = prof[safe]
    radio_all = xi * np.where(valid, dist, 0.0) ** alpha
    prefill_all = g_adv[s_all, kind[:, None]]
    fetch_all = fetch[s_all, kind[:, None]]
    m_all = ((np.asarray(instance.service_time, dtype=float) @ p)[prof])[safe] / c_all
    static = radio_all.copy()  # the loop's order: radio, + prefill, + (wait + fetch), + margin σ̂
    if router.policy != "nearest":
        static += prefill_all
    extra = np.broadcast_to(np.asarray(req.extra_service, dtype=float), req.time.shape)
    occupancy = np.asarray(real_service, dtype=float)
    lag, period = float(spec.telemetry_delay), float(spec.refresh_period)
    margin, staleness = float(router.margin), float(spec.staleness_weight)
    time = np.asarray(req.time, dtype=float)
    duration = float(time[-1]) if n else 0.0
    span = 2.0 ** math.ceil(math.log2(duration + lag + 2.0))  # every read time lies in [−lag, duration]
    # block boundaries (indices into the requests) and, per block, the read epoch (board) or None (continuous)
    bounds: list[tuple[int, int, float | None]] = []
    if period > 0.0:
        epochs = [0.0]
        nxt = period
        while nxt <= duration:
            epochs.append(nxt)
            nxt += period
        edges = np.searchsorted(time, np.asarray(epochs[1:] + [math.inf]), side="left")
        lo = 0
        for k, hi in enumerate(edges.tolist()):
            if hi > lo:
                bounds.append((lo, hi, None if k == 0 else epochs[k]))
            lo = hi
    else:
        read = time - lag
        lo = 0
        while lo < n:
            hi = max(int(np.searchsorted(read, time[lo], side="left")), lo + 1)
            bounds.append((lo, hi, None))
            lo = hi
    chosen = np.full(n, REJECT, dtype=np.int64)
    waits = np.zeros(n)
    services = np.zeros(n)
    width = int(servers.max())
    free = np.where(np.arange(width)[None, :] < servers[:, None], 0.0, math.inf)  # server free times, inf pads
    rec_node = np.zeros(0, dtype=np.int64)
    rec_arr = np.zeros(0)
    rec_dep = np.zeros(0)
    for lo, hi, epoch in bounds:
        c = cand[lo:hi]
        t = time[lo:hi]
        if period > 0.0:
            if epoch is None:  # before the first refresh the board shows 0 everywhere, read at time 0
                floor = -math.inf
                n_shown = np.zeros(c.shape)
                snap = np.zeros(c.shape)
            else:
                at = epoch - lag
                floor = at
                keys_arr = np.sort(rec_node * span + rec_arr)
                keys_dep = np.sort(rec_node * span + np.minimum(rec_dep, span - 1.0))
                n_shown = _shown(keys_arr, keys_dep, span, safe[lo:hi], np.full(c.shape, max(at, 0.0)))
                snap = np.full(c.shape, at)
        else:
            at_i = t - lag
            floor = float(at_i[0])
            keys_arr = np.sort(rec_node * span + rec_arr)
            keys_dep = np.sort(rec_node * span + np.minimum(rec_dep, span - 1.0))
            n_shown = _shown(keys_arr, keys_dep, span, safe[lo:hi], np.broadcast_to(np.maximum(at_i, 0.0)[:, None], c.shape))
            snap = np.broadcast_to(at_i[:, None], c.shape)
        if router.policy == "load_aware":
            ahead = np.maximum(n_shown - c_all[lo:hi] + 1.0, 0.0)
            cost = static[lo:hi] + (ahead * m_all[lo:hi] + fetch_all[lo:hi])
            if margin > 0:
                age = t[:, None] - snap
                cost = cost + margin * (np.sqrt(ahead) * m_all[lo:hi] + staleness * age)
        else:
            cost = static[lo:hi]
        cost = np.where(valid[lo:hi], cost, math.inf)
        if not np.isfinite(cost.min(axis=1)).all():
            return None
        pick = np.argmin(cost, axis=1)
        x = c[np.arange(c.shape[0]), pick]
        q = kind[lo:hi]
        svc = req.unit_service[lo:hi] * occupancy[x, q] + extra[lo:hi]
        start = _book(free, x, t, svc)
        chosen[lo:hi] = x
        waits[lo:hi] = start - t
        services[lo:hi] = svc
        # records whose departure is at or before every later read contribute 0 to every later count
        keep = rec_dep > floor
        rec_node = np.r_[rec_node[keep], x]
        rec_arr = np.r_[rec_arr[keep], t]
        rec_dep = np.r_[rec_dep[keep], start + svc]
    served = chosen >= 0
    hits = np.where(served, layout.verified_hit[np.maximum(chosen, 0), kind], 0.0)
    return chosen, waits, services, hits


def _book(free: FloatArray, x: IntArray, t: FloatArray, svc: FloatArray) -> FloatArray:
    """FCFS start times of one block's requests (in time order), booking ``free`` in place.

    The ``r``-th request of every node is booked in one vector step (``r = 0, 1, …``): the earliest free
    server of its node takes it, as the loop's heap does.
    """
    order = np.lexsort((np.arange(x.size), x))
    xs = x[order]
    first = np.r_[True, xs[1:] != xs[:-1]]
    seg = np.flatnonzero(first)
    rank = np.arange(xs.size) - np.repeat(seg, np.diff(np.r_[seg, xs.size]))
    start = np.zeros(x.size)
    by_rank = np.argsort(rank, kind="stable")
    counts = np.bincount(rank)
    pos = 0
    for cnt in counts.tolist():
        idx = order[by_rank[pos : pos + cnt]]
        pos += cnt
        nodes = x[idx]
        col = np.argmin(free[nodes], axis=1)
        f = free[nodes, col]
        s = np.where(f > t[idx], f, t[idx])
        free[nodes, col] = s + svc[idx]
        start[idx] = s
    return start
