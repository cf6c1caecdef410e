"""What old telemetry costs the online router, predicted against simulated (docs/model.md §11;
benchmarks/README.md §11)."""
