"""Hand-made trace pieces shared by the trace-replay tests (blocks of 4 tokens)."""

from __future__ import annotations

from edgeprefix.placement.pipeline.traces import TraceRecord

B = 4  # tokens per block of the hand-made examples


def record(line: int, blocks: tuple[int, ...], length: int, output: int = 10, t: float | None = None) -> TraceRecord:
    return TraceRecord(line, float(line if t is None else t), length, output, blocks)


def hand_mapping() -> dict:
    """Forest h1 = [1] (4 tokens) → h3 = [2, 3] (12 tokens) → h4 = [4] (15); h1 → h5 = [5] (6)."""
    return {
        "name": "hand",
        "network": {"edge_density": 1.0, "request_intensity": 0.5, "radio_scale": 0.1},
        "gpu": {"memory": 10.0, "runtime_per_sequence": 1.0, "kv_per_token": 0.01},
        "prefill": {"linear": 0.01},
        "prefixes": [
            {"id": "h1", "depth": 4.0, "blocks": [1]},
            {"id": "h3", "depth": 12.0, "parent": "h1", "blocks": [2, 3]},
            {"id": "h4", "depth": 15.0, "parent": "h3", "blocks": [4]},
            {"id": "h5", "depth": 6.0, "parent": "h1", "blocks": [5]},
        ],
        "requests": [
            {"id": "q_h4", "probability": 0.3, "length": 15.0, "decode": 0.1, "path": ["h1", "h3", "h4"]},
            {"id": "q_h1", "probability": 0.3, "length": 10.0, "decode": 0.1, "path": ["h1"]},
            {"id": "q_h5", "probability": 0.2, "length": 6.0, "decode": 0.1, "path": ["h1", "h5"]},
            {"id": "q_uncached", "probability": 0.2, "length": 8.0, "decode": 0.1, "path": []},
        ],
        "profiles": [
            {"id": "none", "prefixes": []},
            {"id": "deep", "prefixes": ["h1", "h3"]},
            {"id": "shallow", "prefixes": ["h1"]},
            {"id": "full", "prefixes": ["h1", "h3", "h4", "h5"]},
        ],
        "placement": {"target": 1.0, "fallback": "none", "mix": {"none": 0.25, "deep": 0.25, "shallow": 0.25, "full": 0.25}},
    }
