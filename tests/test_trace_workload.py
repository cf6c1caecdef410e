"""A trace seen through an instance: vertex blocks, block-level hit depths, request types."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from replay_fixtures import B, hand_mapping, record

from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.costs import QuadraticPrefill
from edgeprefix.placement.model.instance import (
    Gpu,
    instance_from_mapping,
    instance_to_mapping,
    load_instance,
    write_instance,
)
from edgeprefix.placement.pipeline.forest import build_forest
from edgeprefix.placement.pipeline.profile_generation import generate_profiles
from edgeprefix.placement.pipeline.trace_instance import instance_from_profiles
from edgeprefix.placement.pipeline.trace_workload import (
    block_catalogue,
    decode_per_token,
    load_trace_workload,
    recover_blocks,
    split_index,
    trace_workload,
)
from edgeprefix.placement.pipeline.traces import read_trace, synthetic_records


def test_block_level_hit_depth_matches_a_hand_computed_example() -> None:
    instance = instance_from_mapping(hand_mapping())
    catalogue = block_catalogue(instance, B)
    records = [
        record(1, (1, 2, 99), 10),  # diverges inside h3's chain: deep holds blocks 1, 2 → 8 tokens
        record(2, (1, 2, 3, 7), 14),  # passes h3: 12 tokens on deep and full
        record(3, (9,), 3),  # no held block
        record(4, (1, 2, 3), 11),  # ends inside its last held block: capped at L = 11
        record(5, (2, 3), 8),  # block 2 at the wrong position: no hit (ids are chained)
        record(6, (1, 2, 3, 4), 16),  # passes h4: 15 tokens on full only
        record(7, (1, 5), 7),  # passes h5: 6 tokens on full
    ]
    w = trace_workload(records, catalogue)
    #                  a    b    c    d    e    f    g
    expected = np.array(
        [
            [0, 0, 0, 0, 0, 0, 0],  # none
            [8, 12, 0, 11, 0, 12, 4],  # deep = {h1, h3}
            [4, 4, 0, 4, 0, 4, 4],  # shallow = {h1}
            [8, 12, 0, 11, 0, 15, 6],  # full
        ],
        dtype=float,
    )
    np.testing.assert_array_equal(w.hit, expected)
    ids = np.array(instance.request_ids)
    # types: the deepest retained vertex passed completely (h3 has no type: its deepest typed ancestor is h1)
    assert list(ids[w.kind]) == ["q_h1", "q_h1", "q_uncached", "q_h1", "q_uncached", "q_h4", "q_h5"]
    assert list(w.matched) == [True, True, False, True, False, True, True]
    # per-type hit depths lose the partial hit inside h3's chain (a: 8 → 4 on deep)
    assert instance.hit_depth[1, instance.request_ids.index("q_h1")] == 4.0
    np.testing.assert_array_equal(w.length, [10, 14, 3, 11, 8, 16, 7])


def test_a_trace_built_instance_carries_its_blocks_and_they_round_trip(tmp_path: Path) -> None:
    records = list(synthetic_records(600, n_families=6, seed=3, block_size=B, family_blocks=(2, 4), tail_blocks=(1, 3)))
    forest = build_forest(records, block_size=B)
    for v in range(forest.n_vertices):  # each vertex's own blocks, root side first, end at its bottom block
        chain = forest.chain(v)
        parent_blocks = forest.depth_blocks[forest.parent[v]] if forest.parent[v] >= 0 else 0
        assert len(chain) == forest.depth_blocks[v] - parent_blocks and chain[-1] == forest.bottom_block[v]
    path = sum((forest.chain(u) for u in forest.path(forest.vertex_of_block(records[5].blocks[-1]))), ())
    assert path == records[5].blocks
    g = QuadraticPrefill(linear=1e-3, quadratic=0.0)
    ps = generate_profiles(forest, g, kappa=0.01, gpu_memory=4.0, cap=1.0, decode_per_token=0.02)
    instance = instance_from_profiles(ps, g, Gpu(memory=4.0, runtime_per_sequence=1.0, kv_per_token=0.01))
    assert all(p.blocks for p in instance.prefixes)
    out = tmp_path / "inst.toml"
    write_instance(instance, out)
    again = load_instance(out)
    assert [p.blocks for p in again.prefixes] == [p.blocks for p in instance.prefixes]
    # an instance written without blocks gets them back from its trace
    bare = again.replace(prefixes=tuple(dataclasses.replace(p, blocks=()) for p in again.prefixes))
    assert "blocks" not in json.dumps(instance_to_mapping(bare))
    assert recover_blocks(bare, records).prefixes == again.prefixes
    # over its own requests the block-level hit is the per-type one, and d comes back exactly
    w = trace_workload(records, block_catalogue(again, B))
    np.testing.assert_array_equal(w.hit, again.hit_depth[:, w.kind])
    assert decode_per_token(again, float(w.output.mean())) == pytest.approx(0.02, rel=1e-12)


def test_catalogue_rejects_missing_blocks_and_a_wrong_block_size() -> None:
    data = hand_mapping()
    with pytest.raises(InstanceError, match="--block-size"):
        block_catalogue(instance_from_mapping(data), 8)  # h3 (12 tokens) does not fit 2 blocks of 8
    del data["prefixes"][1]["blocks"]
    with pytest.raises(InstanceError, match=r"prefixes\[1\].blocks"):
        block_catalogue(instance_from_mapping(data), B)
    with pytest.raises(InstanceError, match="does not occur in the trace"):
        recover_blocks(instance_from_mapping(data), [record(1, (1, 9), 8)])
    data["prefixes"][0]["blocks"] = [1, 1]
    with pytest.raises(InstanceError, match="distinct block ids"):
        instance_from_mapping(data)


def test_load_trace_workload_reads_the_file_once_per_pass(tmp_path: Path) -> None:
    lines = [
        json.dumps({"timestamp": 1000 * i, "input_length": 4 * len(b), "output_length": 5, "hash_ids": list(b)})
        for i, b in enumerate([(1, 2, 3), (1, 5), (1, 2, 3, 4), (9,)])
    ]
    trace = tmp_path / "t.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    instance, w = load_trace_workload(trace, instance_from_mapping(hand_mapping()), block_size=B)
    assert w.requests == 4 and list(w.time) == [0.0, 1.0, 2.0, 3.0]
    np.testing.assert_array_equal(w.hit[3], [12, 6, 15, 0])
    assert [r.blocks for r in read_trace(trace, block_size=B)][2] == (1, 2, 3, 4)


@pytest.mark.parametrize(("n", "split", "cut"), [(10, 0.0, 0), (10, 0.5, 5), (11, 0.5, 5), (3, 0.99, 2)])
def test_split_index(n: int, split: float, cut: int) -> None:
    assert split_index(n, split) == cut


def test_split_outside_the_unit_interval_is_rejected() -> None:
    with pytest.raises(ValueError, match="--split"):
        split_index(10, 1.0)
