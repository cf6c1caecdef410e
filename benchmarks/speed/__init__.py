"""CPU time: one evaluation, its gradient, batches, Erlang B, projections, start-up, ``validate``, the
engine room and parallel modes, each as a ratio against a reference measured in the same run
(benchmarks/README.md §2, §5, §6).  ``python -m edgeprefix.benchmarks.speed.perf`` prints the summary tables."""
