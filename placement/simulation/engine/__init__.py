"""The engine room (docs/model.md §17): continuous-batching engine nodes with their own prefix caches.

- :mod:`.step_time` — the time of one engine step as a function of its batch, fitted to measured timings;
- :mod:`.kv_cache` — paged KV blocks of one node: pinned profile blocks and a dynamic LRU radix;
- :mod:`.scheduler` — one node's iteration-level scheduler (token budget, chunked prefill, decode,
  admission with a watermark, preemption by recompute) and the FCFS-slot limit;
- :mod:`.board` — what routers see of the nodes: loads and cache contents through delayed telemetry;
- :mod:`.routers` — production routers (SGLang, Dynamo, llm-d, vLLM production stack) and the package's own;
- :mod:`.cluster` — the event loop that replays a trace on engine nodes.

This ``__init__`` imports nothing, so :mod:`.names` stays a leaf the replay module can read.
"""
