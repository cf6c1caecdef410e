"""The model layer of edgeprefix, in three rooms (``docs/model.md`` is its reference).

- :mod:`edgeprefix.placement.model` — the analytical model: instances, prefix forest and
  profiles, radio and prefill costs, association (Theorem 1), Erlang-C queues, the
  load–association fixed point and the latency metrics;
- :mod:`edgeprefix.placement.pipeline` — the workload pipeline: trace readers, the radix
  forest, value scores and profile generators, ``g(n)`` calibration, trace → instance;
- :mod:`edgeprefix.placement.simulation` — the simulators that check the model: Monte Carlo
  association, the M/M/c event simulator, the network simulator and its routers.

Nothing here imports the layers above (formulations, solvers, benchmarks, the CLI).
"""
