"""Paths of the data sets shipped with the benchmarks (``benchmarks/data/README.md``)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
MOONCAKE_TRACE = DATA / "mooncake_conversation_trace.jsonl.gz"  # Apache-2.0, 12,031 requests
SPLITWISE_TIMINGS = DATA / "splitwise_perf_model.csv"  # MIT, prefill/decode timings
