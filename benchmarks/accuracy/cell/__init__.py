"""The cell-load queue model (docs/model.md §14) against the network simulator: coverage, horizon,
constants, decisions, regret, out-of-sample instances and overloaded nodes (benchmarks/README.md §7)."""
