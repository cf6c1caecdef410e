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


def epochs_case(tmp_path) -> tuple:
    """A 300-request trace on :func:`hand_mapping`'s instance whose type mix shifts halfway, cut into
    100 s epochs: ``(trace path, instance path, epochs path)`` for ``replay --epochs``."""
    import json

    import numpy as np

    from edgeprefix.placement.model.instance import instance_from_mapping, write_instance
    from edgeprefix.placement.pipeline.epochs import cut_epochs, epochs_mapping, write_epochs
    from edgeprefix.placement.pipeline.trace_workload import load_trace_workload

    hand = instance_from_mapping(hand_mapping())
    inst_path = tmp_path / "hand.toml"
    write_instance(hand, inst_path)
    rng = np.random.default_rng(2)
    shapes = [((1, 2, 3, 4), 16), ((1, 5), 7), ((8,), 3)]
    lines, t = [], 0.0
    for i in range(300):
        t += float(rng.exponential(1.0))
        blocks, length = shapes[0] if (i < 150 and i % 4) else shapes[1 + i % 2]
        lines.append(json.dumps({"timestamp": int(1000 * t), "input_length": length, "output_length": 5, "hash_ids": list(blocks)}))
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    _, workload = load_trace_workload(trace, hand, block_size=B)
    epochs = tmp_path / "epochs.toml"
    write_epochs(epochs, epochs_mapping(cut_epochs(workload, hand, 100.0), str(inst_path), change_budget=0.5))
    return trace, inst_path, epochs
