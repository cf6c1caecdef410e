"""Batching engines with their own prefix caches and production routers against the planned placement,
and the engine-calibrated queue law (docs/model.md §17.9, §17.10; benchmarks/README.md §10, §12)."""
