"""Compressed radix forest: a hand-made trace and a synthetic trace with known forests."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from edgeprefix.placement.pipeline.forest import ForestBuilder, build_forest
from edgeprefix.placement.pipeline.traces import TraceRecord, synthetic_records

B = 512


def _rec(line: int, t: float, length: int, blocks: tuple[int, ...], out: int = 10) -> TraceRecord:
    return TraceRecord(line, t, length, out, blocks)


def test_hand_made_forest_is_reproduced_exactly() -> None:
    # root chain 1-2 shared by all; branch 3-4 (two requests), leaf 5 (one request), leaf 6 below 4
    records = [
        _rec(1, 0.0, 4 * B, (1, 2, 3, 4)),
        _rec(2, 1.0, 3 * B - 100, (1, 2, 5), out=20),
        _rec(3, 2.0, 5 * B, (1, 2, 3, 4, 6)),
        _rec(4, 3.0, 2 * B, (1, 2)),
        _rec(5, 4.0, 9 * B, (10, 11, 12, 13, 14, 15, 16, 17, 18)),  # a second root: one merged chain
    ]
    forest = build_forest(records)
    ids = forest.ids
    assert ids == ("h2", "h4", "h5", "h6", "h18")
    assert forest.parent.tolist() == [-1, 0, 0, 1, -1]
    assert forest.depth.tolist() == [2 * B, 4 * B, 3 * B - 100, 5 * B, 9 * B]
    assert forest.depth_blocks.tolist() == [2, 4, 3, 5, 9]
    assert forest.count.tolist() == [4, 2, 1, 1, 1]
    assert forest.ends.tolist() == [1, 1, 1, 1, 1]
    assert forest.top_block.tolist() == [1, 3, 5, 6, 10]
    assert forest.first_seen.tolist() == [0.0, 0.0, 1.0, 2.0, 4.0]
    assert forest.last_seen.tolist() == [3.0, 2.0, 1.0, 2.0, 4.0]
    assert forest.input_sum[0] == 4 * B + 3 * B - 100 + 5 * B + 2 * B
    assert forest.output_sum[0] == 50
    assert forest.segment.tolist() == [2 * B, 2 * B, B - 100, B, 9 * B]
    assert forest.state_size(2.0).tolist() == (2.0 * forest.depth).tolist()
    assert forest.path(3) == (0, 1, 3)
    assert forest.children(0) == (1, 2)
    assert forest.n_blocks == 15 and forest.block_occurrences == 4 + 3 + 5 + 2 + 9
    assert forest.shared_blocks == 4  # blocks 1, 2, 3, 4
    edges, counts = forest.depth_histogram()
    assert counts.sum() == 5


def test_partial_last_block_takes_the_smallest_end() -> None:
    forest = build_forest([_rec(1, 0.0, 700, (1, 2)), _rec(2, 1.0, 1100, (1, 2, 3))])
    # block 2 ends at token 700 for the first request: the vertex depth never exceeds its requests' lengths
    assert forest.depth.tolist() == [700.0, 1100.0]
    assert forest.depth_blocks.tolist() == [2, 3]


def test_synthetic_trace_reproduces_its_known_forest() -> None:
    n, system = 3000, 2
    records = list(synthetic_records(n, n_families=12, system_blocks=system, seed=11))
    family_of = Counter(r.blocks[system] for r in records)  # first block of the family prefix
    forest = build_forest(iter(records))
    shared = [f for f, c in family_of.items() if c >= 2]
    assert forest.n_requests == n
    assert forest.n_vertices == 1 + len(shared) + n  # system root, used families, one leaf per request
    assert forest.roots == (0,)
    assert forest.depth[0] == system * B and forest.count[0] == n
    for f in shared:
        v = int(np.flatnonzero(forest.top_block == f)[0])
        assert forest.parent[v] == 0 and forest.count[v] == family_of[f]
        assert forest.ends[v] == 0 and len(forest.children(v)) == family_of[f]
    assert int(forest.ends.sum()) == n and int(np.count_nonzero(forest.ends)) == n


def test_a_generator_streams_without_holding_records() -> None:
    builder = ForestBuilder(B)
    stream = synthetic_records(20_000, n_families=40, tail_blocks=(1, 3), seed=2)
    builder.extend(stream)
    forest = builder.build()
    assert forest.n_requests == 20_000 and forest.count[0] == 20_000
    assert forest.n_blocks == builder.n_blocks


def test_empty_trace_is_rejected() -> None:
    with pytest.raises(ValueError, match="no valid request"):
        build_forest([])


def test_children_and_released_builder() -> None:
    records = list(synthetic_records(400, n_families=7, seed=8))
    builder = ForestBuilder(B)
    builder.extend(records)
    builder.release_index()
    forest = builder.build()
    naive: dict[int, list[int]] = {v: [] for v in range(forest.n_vertices)}
    for v, p in enumerate(forest.parent.tolist()):
        if p >= 0:
            naive[p].append(v)
    assert all(forest.children(v) == tuple(naive[v]) for v in range(forest.n_vertices))
    with pytest.raises(RuntimeError, match="released"):
        builder.add(records[0])
