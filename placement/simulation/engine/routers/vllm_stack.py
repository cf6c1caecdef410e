"""The vLLM production stack's cache routers (vllm-project/production-stack, ``routing_logic``).

- ``prefixaware``: a hash trie of the prompts the router itself has sent to each endpoint; the
  endpoints with the longest match (all of them when nothing matches) are the candidates, one is
  drawn at random, and the prompt is inserted under it.  No load signal.
- ``kvaware``: asks the KV-cache controller (LMCache) which endpoint holds the longest prefix of
  the prompt (the nodes' real caches, through telemetry); it goes there when the match leaves
  at most ``kv_aware_threshold`` (2,000) tokens to compute, else to the endpoint with the fewest
  requests over the last ``qps_window`` seconds (the stack's QPS routing; 60 s window).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np

from edgeprefix.placement.simulation.engine.board import Board
from edgeprefix.placement.simulation.engine.routers.base import Router, RouteRequest, pick_ties


class VllmPrefixRouter(Router):
    name = "vllm-prefix"

    def __init__(self) -> None:
        self.trie: dict[int, set[int]] = {}

    def choose(self, request: RouteRequest, candidates: Sequence[int], board: Board, rng: np.random.Generator) -> int:
        matches = []
        for x in candidates:
            held = self.trie.get(x, set())
            m = 0
            for b in request.blocks:
                if b in held:
                    m += 1
                else:
                    break
            matches.append(m)
        return pick_ties(matches, max(matches), candidates, rng)

    def routed(self, request: RouteRequest, node: int) -> None:
        self.trie.setdefault(node, set()).update(request.blocks)


class VllmKvRouter(Router):
    name = "vllm-kv"

    def __init__(self, kv_aware_threshold: float = 2000, qps_window: float = 60.0):
        self.threshold = kv_aware_threshold
        self.window = qps_window
        self.recent: dict[int, deque[float]] = {}

    def _qps(self, x: int, now: float) -> int:
        q = self.recent.setdefault(x, deque())
        while q and q[0] <= now - self.window:
            q.popleft()
        return len(q)

    def choose(self, request: RouteRequest, candidates: Sequence[int], board: Board, rng: np.random.Generator) -> int:
        board.sync(request.now)
        hits = [board.hit_tokens(x, request.index) for x in candidates]
        best = max(hits)
        if best > 0 and best >= request.length - self.threshold:
            return candidates[hits.index(best)]
        qps = [self._qps(x, request.now) for x in candidates]
        return pick_ties(qps, min(qps), candidates, rng)

    def routed(self, request: RouteRequest, node: int) -> None:
        self.recent.setdefault(node, deque()).append(request.now)
