"""The online router's choice with fresh telemetry, one tight pass over precomputed arrays (docs/model.md §11).

:func:`edgeprefix.placement.simulation.network.simulate_network` routes every request through
:meth:`OnlineRouter.choose <edgeprefix.placement.simulation.routers.OnlineRouter.choose>` on a
:class:`~edgeprefix.placement.simulation.routers.CandidateView`.  With fresh telemetry (``Δt = 0``,
``D = 0``), no admission control and no other router knob, the same choice follows from two facts:

1. the cost of a candidate is its telemetry-free part ``ξ r^α + g(L − h) + T_fetch`` (plus the tier
   delay with ``delay="tier"``) plus a non-negative state term (``Ŵ_x`` and the margin ``z_δ σ̂_x``),
   which is zero when the node has a free server (``n_x < c_x``: no customer ahead);
2. a node has a free server at ``t`` exactly when the earliest of its ``c_x`` server free times is
   ``≤ t`` (FCFS with known service: a queued request means every server is busy).

So the telemetry-free costs and their argmin are computed for all requests at once; a request whose
best candidate has a free server takes it (floating-point addition of a non-negative term never
lowers a cost, and ``argmin`` keeps the first of equal costs), and only the others evaluate the
router's full cost over their candidates, with ``n_x`` from the departure heaps exactly as the
per-request loop reads it.  The arithmetic is the router's, operation for operation, so the
choices, waits and services are bit-identical to the per-request loop (tests/test_online_fast.py).
:func:`applies` says when this path is taken; everything else (delayed or periodic telemetry,
admission control, the catalogue's view, churn, other routers) keeps the per-request loop.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.simulation.routers import REJECT, OnlineRouter

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def plain_router(router: OnlineRouter) -> OnlineRouter:
    """The router rebuilt from the knobs this path implements (any other knob then makes it differ)."""
    return OnlineRouter(
        policy=router.policy,
        delay=router.delay,
        tier_wait=router.tier_wait,
        candidates_per_profile=router.candidates_per_profile,
        margin=router.margin,
        fallback=router.fallback,
        fetch=router.fetch,
        name=router.name,
    )


FAST_PATH = True  # off: every request goes through ``router.choose`` (benchmarks/speed/validate_speed.py measures both)


def applies(router: Any, spec: Any, shown: Any = None, churn: Any = None) -> bool:
    """Whether :func:`route_fresh` gives the per-request loop's result for this run."""
    if not FAST_PATH or type(router) is not OnlineRouter or shown is not None or churn is not None:
        return False
    if router != plain_router(router) or router.admission_control:
        return False
    known = type(spec)(
        horizon=spec.horizon,
        warmup=spec.warmup,
        staleness_weight=spec.staleness_weight,
        service=spec.service,
        local_accounting=spec.local_accounting,
        layout=spec.layout,
    )
    if spec != replace(known, refresh_period=0.0, telemetry_delay=0.0):  # fresh telemetry, no other setting
        return False
    return router.margin == 0 or math.isfinite(spec.staleness_weight)


CHUNK = 1 << 15  # requests whose candidate arrays are built at once (bounds the memory)
COUNTED = True  # off: the in-system counts come from heaps of departure epochs (tests compare both)


def route_fresh(
    instance: Any, layout: Any, req: Any, cand: IntArray, dist: FloatArray, router: OnlineRouter, real_service: FloatArray
) -> tuple[IntArray, FloatArray, FloatArray, FloatArray] | None:
    """``(chosen, waits, services, hits)`` per request, as the per-request loop gives them (see the module).

    ``cand``/``dist``: the candidates ``(n, K)`` (node −1 / distance inf pads); ``real_service``: the
    mean occupancy ``(N, Q)``.  Returns ``None`` when a telemetry-free cost is not finite or a node has
    no server (the loop then decides, with numpy's conventions).
    """
    if (layout.servers < 1).any():
        return None
    n = cand.shape[0]
    occupancy = np.asarray(real_service, dtype=float)
    extra = np.broadcast_to(np.asarray(req.extra_service, dtype=float), req.time.shape)
    chosen = np.full(n, REJECT, dtype=np.int64)
    waits = np.zeros(n)
    free = [[0.0] * int(c) for c in layout.servers]
    departures: list[list[float]] = [[] for _ in range(layout.nodes)]
    occ = occupancy.tolist()
    # services never negative: a node's in-system count follows from its start times (see _book_counted)
    counted = COUNTED and bool((req.unit_service >= 0).all() and (occupancy >= 0).all() and (extra >= 0).all())
    starts: list[list[float]] = [[] for _ in range(layout.nodes)]
    seen = [0] * layout.nodes
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        packed = _telemetry_free(instance, layout, req.kind[lo:hi], cand[lo:hi], dist[lo:hi], router)
        if packed is None:
            return None
        svc_first = req.unit_service[lo:hi] * occupancy[np.maximum(packed[:, 0, 0].astype(np.int64), 0), req.kind[lo:hi]] + extra[lo:hi]
        args = (
            packed,
            req.time[lo:hi].tolist(),
            svc_first.tolist(),
            req.unit_service[lo:hi].tolist(),
            extra[lo:hi].tolist(),
            req.kind[lo:hi].tolist(),
            occ,
            router,
            free,
        )
        if counted:
            chosen[lo:hi], waits[lo:hi] = _book_counted(*args, (starts, seen))
        else:
            chosen[lo:hi], waits[lo:hi] = _book(*args, departures)
    served = chosen >= 0
    safe = np.maximum(chosen, 0)
    services = np.where(served, req.unit_service * occupancy[safe, req.kind] + extra, 0.0)
    hits = np.where(served, layout.verified_hit[safe, req.kind], 0.0)
    return chosen, waits, services, hits


# columns of the packed candidate rows, sorted by telemetry-free cost
_NODE, _BASE, _RP, _FETCH, _PER, _SERVERS, _INDEX, _TIER = range(8)


def _telemetry_free(
    instance: Any, layout: Any, kind: IntArray, cand: IntArray, dist: FloatArray, router: OnlineRouter
) -> FloatArray | None:
    """Per request, its candidates sorted by the cost at ``n_x < c_x`` (stable: ties keep their order),
    packed ``(n, K, 8)``: node, that cost, ``ξ r^α + g``, ``T_fetch``, ``m̄/c_x``, ``c_x``, original
    index, tier delay.  Padded slots (node −1) sort last with cost inf.  ``None`` if a cost is not finite."""
    prof = layout.profile
    valid = cand >= 0
    safe = np.where(valid, cand, 0)
    s_all = prof[safe]
    g_adv = np.asarray(instance.first_token_time, dtype=float)
    radio = instance.network.radio_scale * np.where(valid, dist, 0.0) ** instance.network.radio_exponent
    rp = radio if router.policy == "nearest" else radio + g_adv[s_all, kind[:, None]]
    c_all = layout.servers.astype(float)[safe]
    zeros = np.zeros_like(radio)
    fetch_all = per = tier = zeros
    base = rp
    if router.policy == "load_aware":
        fetch_all = zeros if router.fetch is None else np.asarray(router.fetch, dtype=float)[s_all, kind[:, None]]
        tier = np.asarray(router.tier_wait, dtype=float)[s_all] if router.delay == "tier" else zeros
        base = rp + (tier + fetch_all)  # the router's cost with no customer ahead
        p = np.asarray(instance.probabilities, dtype=float)
        per = ((np.asarray(instance.service_time, dtype=float) @ p)[prof])[safe] / c_all  # m̄_s / c_x
    if not np.isfinite(np.where(valid, base, 0.0)).all():
        return None
    masked = np.where(valid, base, np.inf)
    order = np.argsort(masked, axis=1, kind="stable")
    n, k = cand.shape
    flat = (order + (np.arange(n) * k)[:, None]).ravel()
    columns = np.empty((8, n * k))
    for c, column in enumerate((cand.astype(float), masked, rp, fetch_all, per, c_all, None, tier)):
        if column is None:
            columns[c] = order.ravel()  # _INDEX: the candidate's original column
        elif column is zeros:
            columns[c] = 0.0
        else:
            np.take(column.ravel(), flat, out=columns[c])
    return columns.reshape(8, n, k).transpose(1, 2, 0)  # (n, K, 8), rows sorted


def _book(
    packed: FloatArray,
    times: list[float],
    svc_first: list[float],
    units: list[float],
    extras: list[float],
    kinds: list[int],
    occ: list[list[float]],
    router: OnlineRouter,
    free: list[list[float]],
    departures: list[list[float]],
) -> tuple[list[int], list[float]]:
    """The per-request pass: take the cheapest telemetry-free candidate when it has a free server,
    else the router's full cost decides (:func:`_full_choice`); book the server (FCFS).
    Returns the chosen node (−1: no candidate) and the wait of each request."""
    replace_min, push, pop = heapq.heapreplace, heapq.heappush, heapq.heappop
    state = router.policy == "load_aware" and (router.delay == "telemetry" or router.margin > 0)
    tier = router.delay == "tier"
    margin = float(router.margin)
    chosen = packed[:, 0, _NODE].astype(np.int64).tolist()
    waits = [0.0] * len(chosen)
    for i, (t, x, svc) in enumerate(zip(times, chosen, svc_first)):
        if x < 0:
            continue  # no eligible candidate
        heap = free[x]
        f = heap[0]
        if f > t and state:  # the cheapest candidate is busy: the router's full cost decides
            x = _full_choice(packed[i].tolist(), t, tier, margin, free, departures, pop)
            chosen[i] = x
            svc = units[i] * occ[x][kinds[i]] + extras[i]
            heap = free[x]
            f = heap[0]
        if f > t:
            waits[i] = f - t
            end = f + svc
        else:
            end = t + svc
        replace_min(heap, end)
        push(departures[x], end)
    return chosen, waits


def _book_counted(
    packed: FloatArray,
    times: list[float],
    svc_first: list[float],
    units: list[float],
    extras: list[float],
    kinds: list[int],
    occ: list[list[float]],
    router: OnlineRouter,
    free: list[list[float]],
    counts: tuple[list[list[float]], list[int]],
) -> tuple[list[int], list[float]]:
    """:func:`_book` with each node's start epochs (in booking order) in place of its heap of departures.

    Requests arrive in time order and services are ``≥ 0``, so the start epochs ``max(t, min free)`` of a
    node never decrease, and when all ``c_x`` servers are busy at ``t`` (the earliest free time is ``> t``)
    each server holds exactly one request in service (its end ``> t``): the requests in the system are then
    ``c_x`` plus those booked to start after ``t``, the count the departure heap gives, with a bisection.
    A request that starts on arrival starts before every later arrival, so only the starts of requests that
    waited are kept (still in non-decreasing order).
    """
    replace_min = heapq.heapreplace
    state = router.policy == "load_aware" and (router.delay == "telemetry" or router.margin > 0)
    tier = router.delay == "tier"
    margin = float(router.margin)
    starts, seen = counts
    chosen = packed[:, 0, _NODE].astype(np.int64).tolist()
    waits = [0.0] * len(chosen)
    for i, (t, x, svc) in enumerate(zip(times, chosen, svc_first)):
        if x < 0:
            continue  # no eligible candidate
        heap = free[x]
        f = heap[0]
        if f <= t:  # the cheapest candidate has a free server: it takes the request at once
            replace_min(heap, t + svc)
            continue
        if state:  # the cheapest candidate is busy: the router's full cost decides
            x = _full_choice_counted(packed[i].tolist(), t, tier, margin, free, starts, seen)
            chosen[i] = x
            svc = units[i] * occ[x][kinds[i]] + extras[i]
            heap = free[x]
            f = heap[0]
        if f > t:
            waits[i] = f - t
            replace_min(heap, f + svc)
            starts[x].append(f)  # only a start after the arrival can lie after a later request's arrival
        else:
            replace_min(heap, t + svc)
    return chosen, waits


def _full_choice_counted(
    row: list[list[float]], t: float, tier: bool, margin: float, free: list[list[float]], starts: list[list[float]], seen: list[int]
) -> int:
    """:func:`_full_choice` with ``n_x − c_x`` read as the requests of ``x`` booked to start after ``t``."""
    best_cost = math.inf
    best_index = math.inf
    best = -1
    for x, bound, rp, fetch, per, servers, index, tier_wait in row:
        if bound > best_cost or x < 0:
            break
        x = int(x)
        if free[x][0] <= t:  # a free server: nobody ahead, the cost is its bound
            cost = bound
        else:
            booked = starts[x]
            first = bisect_right(booked, t, seen[x])
            seen[x] = first
            ahead = (len(booked) - first) + 1.0  # n_x − c_x + 1 with n_x = c_x + the requests not started by t
            cost = rp + ((tier_wait if tier else ahead * per) + fetch)
            if margin > 0:
                cost = cost + margin * (math.sqrt(ahead) * per + 0.0)
        if cost < best_cost or (cost == best_cost and index < best_index):
            best_cost, best_index, best = cost, index, x
    return best


def _full_choice(
    row: list[list[float]],
    t: float,
    tier: bool,
    margin: float,
    free: list[list[float]],
    departures: list[list[float]],
    pop: Callable[[list[float]], float],
) -> int:
    """``argmin`` of the router's cost (``OnlineRouter.cost``, operation for operation) with ``n_x`` read at ``t``.

    ``row``: the request's packed candidates in increasing telemetry-free cost, a lower bound of the full
    cost; the scan stops at the first whose bound exceeds the best cost.  Equal costs go to the lower
    original index, as ``numpy.argmin`` does.
    """
    best_cost = math.inf
    best_index = math.inf
    best = -1
    for x, bound, rp, fetch, per, servers, index, tier_wait in row:
        if bound > best_cost or x < 0:
            break
        x = int(x)
        if free[x][0] <= t:  # a free server: nobody ahead, the cost is its bound
            cost = bound
        else:
            dep = departures[x]
            while dep and dep[0] <= t:
                pop(dep)
            ahead = len(dep) - servers + 1.0
            if not ahead > 0.0:
                ahead = 0.0
            cost = rp + ((tier_wait if tier else ahead * per) + fetch)
            if margin > 0:
                cost = cost + margin * (math.sqrt(ahead) * per + 0.0)
        if cost < best_cost or (cost == best_cost and index < best_index):
            best_cost, best_index, best = cost, index, x
    return best
