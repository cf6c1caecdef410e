"""What a production router is handed, and the small base class they share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edgeprefix.placement.simulation.engine.board import Board


@dataclass(frozen=True)
class RouteRequest:
    """One request to route: its index, arrival time, prompt tokens and trace blocks (root first)."""

    index: int
    now: float
    length: int
    blocks: Sequence[int]


class Router:
    """Base of the production routers: ``choose`` one of ``candidates`` (node indices).

    ``routed`` and ``finished`` let a router keep the state it tracks itself (in-flight counts,
    its own approximate prefix tree); everything about the nodes' caches or queues that it does
    not track itself it reads from the :class:`~..board.Board` (delayed telemetry).
    """

    name = "router"

    def choose(self, request: RouteRequest, candidates: Sequence[int], board: Board, rng: np.random.Generator) -> int:
        raise NotImplementedError

    def routed(self, request: RouteRequest, node: int) -> None:
        """Called once the request is sent to ``node``."""

    def finished(self, index: int, node: int, now: float) -> None:
        """Called when request ``index`` completes at ``node`` (the response stream ends)."""


def pick_ties(values: Sequence[float], best: float, candidates: Sequence[int], rng: np.random.Generator) -> int:
    """A uniformly random candidate among those whose value equals ``best``."""
    ties = [x for x, v in zip(candidates, values) if v == best]
    return ties[0] if len(ties) == 1 else ties[int(rng.integers(len(ties)))]
