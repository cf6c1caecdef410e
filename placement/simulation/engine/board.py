"""What routers see of the engine nodes: loads and cache contents through telemetry (docs/model.md §11, §17).

Every read at time ``t`` shows the nodes as they were at ``t − D`` (``telemetry.delay``), and
with a periodic board (``telemetry.refresh`` ``Δt > 0``) as they were at the last refresh
before that.  Loads come from each node's load history; cache contents from the KV events the
nodes emit (block stored / evicted), applied to one index per node up to the read time — a
router acting on it can route to a block evicted since (the stale-events failure mode).
Pinned profile blocks are known from the start.

With fresh telemetry every event is stamped at or before the read (the event loop completes
every node's steps due by an arrival before routing it), so the applied events are exactly the
node's dynamic blocks: the board then reads the node's cache itself instead of replaying its
events (the same answers, without the per-event work).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

import numpy as np

from edgeprefix.placement.model.telemetry import Telemetry


class Board:
    """Delayed view of ``nodes`` (each with ``history_t/n/q``, ``profile``, ``cache``) and their KV events."""

    def __init__(
        self,
        nodes: Sequence[Any],
        events: list[tuple[float, int, int, int]],
        telemetry: Telemetry,
        pinned_hit: Sequence[Sequence[float]],
        trace_block: int,
        lengths: Sequence[int],
        seqs: Sequence[Sequence[int]],
    ):
        self.nodes = nodes
        self.events = events
        self.telemetry = telemetry
        self.fresh = telemetry.fresh
        self.index: list[set[int]] = [set() for _ in nodes]
        self.pinned = [node.cache.pinned for node in nodes]
        self.planned = [bool(node.cache.pinned) or not node.cache.dynamic for node in nodes]
        self.dynamic = [node.cache.dynamic for node in nodes]
        self.pinned_hit = pinned_hit
        self.trace_block = trace_block
        self.lengths = lengths
        self.seqs = seqs
        self._applied = 0
        self.hit_table = np.asarray(pinned_hit, dtype=float)  # (S, n)
        self.profile = np.array([node.profile for node in nodes], dtype=np.int64)
        self.any_dynamic = any(self.dynamic)

    def read_time(self, now: float) -> float:
        t = now - self.telemetry.delay
        if self.telemetry.refresh > 0:
            t = math.floor(t / self.telemetry.refresh) * self.telemetry.refresh
        return t

    def sync(self, now: float) -> None:
        """Apply the KV events up to the read time (nothing to apply when fresh: see the module docstring)."""
        if self.fresh:
            return
        t = self.read_time(now)
        ev, k, index = self.events, self._applied, self.index
        while k < len(ev) and ev[k][0] <= t:
            _, x, b, sign = ev[k]
            if sign > 0:
                index[x].add(b)
            else:
                index[x].discard(b)
            k += 1
        self._applied = k

    def matched_blocks(self, x: int, seq: Sequence[int]) -> int:
        """Leading blocks of ``seq`` node ``x`` holds as seen (call :meth:`sync` first)."""
        if self.fresh:
            return self.nodes[x].cache.match(seq)
        pinned, seen = self.pinned[x], self.index[x]
        m = 0
        for b in seq:
            if b in seen or b in pinned:
                m += 1
            else:
                break
        return m

    def hit_tokens(self, x: int, i: int) -> float:
        """Hit depth of request ``i`` on node ``x`` as seen (the pinned profile's exact depth included)."""
        pinned = float(self.pinned_hit[self.nodes[x].profile][i]) if self.planned[x] else 0.0
        if not self.dynamic[x]:
            return pinned  # the planned cache: the profile's exact depth
        m = self.matched_blocks(x, self.seqs[i])
        return max(pinned, float(min(m * self.trace_block, self.lengths[i])))

    def hits(self, xs: np.ndarray, i: int) -> np.ndarray:
        """:meth:`hit_tokens` of request ``i`` on every node of ``xs`` (call :meth:`sync` first)."""
        if not self.any_dynamic:
            return self.hit_table[self.profile[xs], i]
        return np.array([self.hit_tokens(int(x), i) for x in xs.tolist()])

    def loads(self, xs: np.ndarray, now: float) -> np.ndarray:
        """:meth:`in_system` of every node of ``xs``."""
        nodes = self.nodes
        if self.fresh:
            return np.array([nodes[x].history_n[-1] for x in xs.tolist()], dtype=float)
        return np.array([self.in_system(x, now) for x in xs.tolist()], dtype=float)

    def _at(self, x: int, now: float, values: str) -> int:
        node = self.nodes[x]
        series = getattr(node, values)
        if self.fresh:
            return series[-1]
        j = bisect_right(node.history_t, self.read_time(now)) - 1
        return series[max(j, 0)]

    def in_system(self, x: int, now: float) -> int:
        """Requests waiting or running at node ``x`` as seen."""
        return self._at(x, now, "history_n")

    def waiting(self, x: int, now: float) -> int:
        """Requests waiting at node ``x`` as seen."""
        return self._at(x, now, "history_q")
