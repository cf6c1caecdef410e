"""Names of the engine room's choices (a leaf module: no imports, read by the replay spec and the CLI)."""

ENGINES = ("slots", "batching")  # --engine: FCFS slots (the model's node) or the continuous-batching engine
CACHES = ("planned", "lru", "planned+lru")  # --cache: pinned profile, dynamic LRU radix, or both
PRODUCTION_ROUTERS = ("sglang", "dynamo", "llm-d", "vllm-prefix", "vllm-kv")  # --router additions


def in_engine_room(engine: str, cache: str, router: str, fresh: bool) -> bool:
    """Whether a replay needs the engine room: anything but FCFS slots, the planned cache, the
    tier or online router and fresh telemetry (that case stays the plain FCFS-slot replay)."""
    return engine != "slots" or cache != "planned" or router in PRODUCTION_ROUTERS or not fresh
