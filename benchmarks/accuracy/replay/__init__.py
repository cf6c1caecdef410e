"""Does a real trace confirm the plan?  Plan on one half of the Mooncake trace, replay the other
(docs/model.md §2.3, §17; benchmarks/README.md §4, §4b, §4c)."""
