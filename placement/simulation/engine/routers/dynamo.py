"""Dynamo's KV router (ai-dynamo/dynamo, ``--router-mode kv``).

Cost of a worker, lowest wins: ``overlap_score_weight`` (1.0) × the request's blocks the worker
would have to prefill (its blocks minus the overlap the KV indexer sees, fed by KV events) +
the worker's active decode blocks (blocks of the requests the router has in flight there, the
router's own bookkeeping).  Temperature 0 (the default): the argmin, ties at random.  Units are
trace blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgeprefix.placement.simulation.engine.board import Board
from edgeprefix.placement.simulation.engine.routers.base import Router, RouteRequest, pick_ties


class DynamoRouter(Router):
    name = "dynamo"

    def __init__(self, overlap_score_weight: float = 1.0):
        self.weight = overlap_score_weight
        self.active: dict[int, int] = {}
        self.size: dict[int, int] = {}

    def choose(self, request: RouteRequest, candidates: Sequence[int], board: Board, rng: np.random.Generator) -> int:
        board.sync(request.now)
        n = len(request.blocks)
        costs = [self.weight * (n - board.matched_blocks(x, request.blocks)) + self.active.get(x, 0) for x in candidates]
        return pick_ties(costs, min(costs), candidates, rng)

    def routed(self, request: RouteRequest, node: int) -> None:
        self.size[request.index] = len(request.blocks)
        self.active[node] = self.active.get(node, 0) + len(request.blocks)

    def finished(self, index: int, node: int, now: float) -> None:
        self.active[node] = self.active.get(node, 0) - self.size.pop(index, 0)
