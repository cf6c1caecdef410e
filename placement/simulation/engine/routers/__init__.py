"""Production routers on live caches, one module each, and a registry by name (docs/model.md §17).

Every router picks one node of a request's candidate set (the same set the package's online
router compares) and ignores radio distance, as the production routers do:

- ``sglang`` — SGLang's cache-aware policy (:mod:`.sglang`);
- ``dynamo`` — Dynamo's KV router (:mod:`.dynamo`);
- ``llm-d`` — llm-d's default scorers (:mod:`.llmd`);
- ``vllm-prefix``, ``vllm-kv`` — the vLLM production stack's prefix-aware and KV-aware routers
  (:mod:`.vllm_stack`).
"""

from __future__ import annotations

from edgeprefix.placement.simulation.engine.routers.base import Router, RouteRequest
from edgeprefix.placement.simulation.engine.routers.dynamo import DynamoRouter
from edgeprefix.placement.simulation.engine.routers.llmd import LlmdRouter
from edgeprefix.placement.simulation.engine.routers.sglang import SglangRouter
from edgeprefix.placement.simulation.engine.routers.vllm_stack import VllmKvRouter, VllmPrefixRouter

REGISTRY: dict[str, type[Router]] = {
    "sglang": SglangRouter,
    "dynamo": DynamoRouter,
    "llm-d": LlmdRouter,
    "vllm-prefix": VllmPrefixRouter,
    "vllm-kv": VllmKvRouter,
}


def make_router(name: str, **options: float) -> Router:
    """The production router ``name`` with its defaults (``options`` override them)."""
    if name not in REGISTRY:
        raise ValueError(f"--router: unknown {name!r} (production routers: {list(REGISTRY)})")
    return REGISTRY[name](**options)


__all__ = ["REGISTRY", "Router", "RouteRequest", "make_router"]
