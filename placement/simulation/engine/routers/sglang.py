"""SGLang's cache-aware router (sgl-project, sgl-model-gateway ``cache_aware`` policy).

Rule, with its defaults: the router counts each worker's in-flight requests itself.  The
system is imbalanced when ``max − min > balance_abs_threshold`` (64) **and**
``max > balance_rel_threshold · min`` (1.5); then the request goes to the least loaded worker.
Otherwise the worker whose approximate tree shares the longest prefix with the request is
taken if that match covers more than ``cache_threshold`` (0.3) of the prompt, else the worker
with the smallest tree (most free cache).  The approximate tree holds what the router itself
sent to each worker — not the worker's real cache; every ``eviction_interval`` (120 s) each
worker's tree is cut to ``max_tree_blocks`` least-recently-used entries (the gateway's
``max_tree_size`` of 2²⁶ characters at about 4 characters per token: 32,768 blocks of 512 tokens).
Ties go to the first candidate (the gateway iterates its worker list in order).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from edgeprefix.placement.simulation.engine.board import Board
from edgeprefix.placement.simulation.engine.routers.base import Router, RouteRequest


class SglangRouter(Router):
    name = "sglang"

    def __init__(
        self,
        cache_threshold: float = 0.3,
        balance_abs_threshold: float = 64,
        balance_rel_threshold: float = 1.5,
        eviction_interval: float = 120.0,
        max_tree_blocks: int = 32768,
        block_tokens: int = 512,
    ):
        self.cache_threshold = cache_threshold
        self.abs = balance_abs_threshold
        self.rel = balance_rel_threshold
        self.interval = eviction_interval
        self.max_blocks = max_tree_blocks
        self.block_tokens = block_tokens
        self.trees: list[OrderedDict[int, None]] = []  # per node (index), grown on demand
        self.load: list[int] = []
        self.last_eviction = 0.0

    def _grow(self, n: int) -> None:
        while len(self.trees) < n:
            self.trees.append(OrderedDict())
            self.load.append(0)

    def _tree(self, x: int) -> OrderedDict[int, None]:
        self._grow(x + 1)
        return self.trees[x]

    def _evict(self, now: float) -> None:
        while now - self.last_eviction >= self.interval:
            self.last_eviction += self.interval
            for tree in self.trees:
                while len(tree) > self.max_blocks:
                    tree.popitem(last=False)

    def choose(self, request: RouteRequest, candidates: Sequence[int], board: Board, rng: np.random.Generator) -> int:
        self._evict(request.now)
        self._grow(max(candidates) + 1)
        load = self.load
        loads = [load[x] for x in candidates]
        hi, lo = max(loads), min(loads)
        if hi - lo > self.abs and hi > self.rel * lo:
            return candidates[loads.index(lo)]
        trees = self.trees
        best, best_m = candidates[0], -1
        sizes = []
        blocks = request.blocks
        for x in candidates:
            tree = trees[x]
            sizes.append(len(tree))
            m = 0
            for b in blocks:
                if b in tree:
                    m += 1
                else:
                    break
            if m > best_m:
                best, best_m = x, m
        rate = min(best_m * self.block_tokens, request.length) / max(request.length, 1)
        if rate > self.cache_threshold:
            return best
        return candidates[sizes.index(min(sizes))]

    def routed(self, request: RouteRequest, node: int) -> None:
        tree = self._tree(node)
        self.load[node] += 1
        for b in reversed(request.blocks):  # deepest first: a leaf is older than its parent, evicted first
            if b in tree:
                tree.move_to_end(b)
            else:
                tree[b] = None

    def finished(self, index: int, node: int, now: float) -> None:
        self._grow(node + 1)
        self.load[node] -= 1
