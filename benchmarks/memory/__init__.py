"""Peak memory: an evaluation report, ``edgeprefix profiles`` on a large trace, and the size guard's
estimate against the measured peak (docs/model.md §20; benchmarks/README.md §6)."""
