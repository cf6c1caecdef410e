"""The workload pipeline (``docs/model.md`` §9): trace → radix forest → profiles → instance.

- :mod:`~edgeprefix.placement.pipeline.traces` — streaming readers (Mooncake JSONL, token ids);
- :mod:`~edgeprefix.placement.pipeline.forest` — the compressed radix forest;
- :mod:`~edgeprefix.placement.pipeline.profile_generation` — value scores and profile generators;
- :mod:`~edgeprefix.placement.pipeline.knapsack` — the exact tree-knapsack dynamic programme;
- :mod:`~edgeprefix.placement.pipeline.calibration` — fitting ``g(n)``, ``κ`` and concurrency;
- :mod:`~edgeprefix.placement.pipeline.trace_instance` — a profile set as an instance.
"""
