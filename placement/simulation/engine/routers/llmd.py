"""llm-d's inference scheduler with its default scorers (llm-d-inference-scheduler).

Score of a pod, highest wins (max-score picker, ties at random): ``prefix_weight`` (1.0) × the
share of the request's blocks the pod holds (precise prefix-cache scorer on KV events) +
``load_weight`` (1.0) × ``0.5 · (1 − min(q, 128) / 128)`` with ``q`` the pod's waiting queue
(load-aware scorer, queue threshold 128), both read through telemetry (scraped every 50 ms in
llm-d: pass ``--telemetry-refresh 0.05`` to model it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from edgeprefix.placement.simulation.engine.board import Board
from edgeprefix.placement.simulation.engine.routers.base import Router, RouteRequest, pick_ties


class LlmdRouter(Router):
    name = "llm-d"

    def __init__(self, prefix_weight: float = 1.0, load_weight: float = 1.0, queue_threshold: int = 128):
        self.prefix_weight = prefix_weight
        self.load_weight = load_weight
        self.threshold = queue_threshold

    def choose(self, request: RouteRequest, candidates: Sequence[int], board: Board, rng: np.random.Generator) -> int:
        board.sync(request.now)
        n = max(len(request.blocks), 1)
        scores = []
        for x in candidates:
            q = board.waiting(x, request.now)
            load = 0.5 * (1.0 - min(q, self.threshold) / self.threshold)
            scores.append(self.prefix_weight * board.matched_blocks(x, request.blocks) / n + self.load_weight * load)
        return pick_ties(scores, max(scores), candidates, rng)
