"""Trace readers: Mooncake and token-id JSONL, malformed lines, the real Mooncake trace."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE as MOONCAKE
from edgeprefix.placement.pipeline.forest import ForestBuilder, build_forest
from edgeprefix.placement.pipeline.traces import (
    SkipLog,
    TraceError,
    lines_of,
    read_trace,
    record_to_mooncake_json,
    synthetic_records,
    token_block_ids,
)


def _line(**fields: object) -> str:
    base = {"timestamp": 0, "input_length": 700, "output_length": 5, "hash_ids": [1, 2]}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not ...})


def test_mooncake_record_fields() -> None:
    (rec,) = read_trace(lines_of(_line(timestamp=1500) + "\n"))
    assert rec.line == 1 and rec.timestamp == 1.5 and rec.input_length == 700 and rec.output_length == 5
    assert rec.blocks == (1, 2)


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ("{not json", ""),
        ("[1, 2]", ""),
        (_line(input_length=...), "input_length"),
        (_line(output_length=-1), "output_length"),
        (_line(input_length=-3), "input_length"),
        (_line(timestamp=-1), "timestamp"),
        (_line(hash_ids=[1, 2, 3]), "hash_ids"),
        (_line(hash_ids=[1, "x"]), "hash_ids"),
        (_line(hash_ids=...), "hash_ids"),
    ],
)
def test_malformed_line_names_its_number(bad: str, field: str) -> None:
    text = _line() + "\n" + _line(hash_ids=[1, 3]) + "\n" + bad + "\n"
    with pytest.raises(TraceError) as info:
        list(read_trace(lines_of(text)))
    assert info.value.line == 3 and "line 3" in str(info.value)
    assert info.value.field == field
    log = SkipLog()
    records = list(read_trace(lines_of(text), skip_invalid=True, log=log))
    assert len(records) == 2 and log.skipped == 1 and "line 3" in log.examples[0]


def test_hash_under_two_parents_is_rejected_atomically() -> None:
    text = "\n".join([_line(hash_ids=[1, 2]), _line(hash_ids=[3, 2]), _line(hash_ids=[1, 2])])
    with pytest.raises(TraceError) as info:
        build_forest(read_trace(lines_of(text)))
    assert info.value.line == 2 and "two parents" in str(info.value)
    log = SkipLog()
    forest = build_forest(read_trace(lines_of(text)), skip_invalid=True, log=log)
    assert log.skipped == 1 and forest.n_requests == 2 and forest.n_blocks == 2  # block 3 was not committed
    with pytest.raises(TraceError, match="line 4"):  # a block repeated inside one request
        build_forest(read_trace(lines_of("\n" * 3 + _line(input_length=1100, hash_ids=[7, 8, 7]))))


def test_missing_file_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="does not exist"):
        list(read_trace(tmp_path / "nope.jsonl"))
    with pytest.raises(ValueError, match="valid"):
        list(read_trace(tmp_path / "nope.jsonl", fmt="csv"))


def test_gzip_and_roundtrip(tmp_path: Path) -> None:
    records = list(synthetic_records(30, seed=3))
    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(record_to_mooncake_json(r) + "\n" for r in records)
    back = list(read_trace(path))
    assert [r.blocks for r in back] == [r.blocks for r in records]
    assert [r.input_length for r in back] == [r.input_length for r in records]


def test_token_format_blocks_and_token_level() -> None:
    a = list(range(1000))
    b = list(range(600)) + [9] * 500
    text = json.dumps({"tokens": a, "output_length": 3}) + "\n" + json.dumps({"tokens": b, "timestamp": 2.0}) + "\n"
    r1, r2 = read_trace(lines_of(text), fmt="tokens", block_size=512)
    assert len(r1.blocks) == math.ceil(1000 / 512) and len(r2.blocks) == math.ceil(1100 / 512)
    assert r1.blocks[0] == r2.blocks[0] and r1.blocks[1] != r2.blocks[1]  # first 512 tokens shared
    assert r2.timestamp == 2.0 and r2.output_length == 0
    t1, t2 = read_trace(lines_of(text), fmt="tokens", block_size=1)
    common = sum(1 for x, y in zip(t1.blocks, t2.blocks) if x == y)
    assert common == 600  # token-level: the shared prefix is exactly 600 tokens
    forest = build_forest(read_trace(lines_of(text), fmt="tokens", block_size=1), block_size=1)
    assert forest.n_vertices == 3 and sorted(forest.depth.tolist()) == [600, 1000, 1100]
    # the same block content under another parent gets another id (chain hashing)
    assert token_block_ids([5] * 4, 2)[0] != token_block_ids([5] * 4, 2)[1]
    with pytest.raises(TraceError, match="line 1"):
        list(read_trace(lines_of(json.dumps({"tokens": [1, -2]})), fmt="tokens"))


def test_mooncake_trace_forest_matches_independent_counts() -> None:
    counter: Counter[int] = Counter()
    lengths = []
    builder = ForestBuilder(512)
    for rec in read_trace(MOONCAKE):
        counter.update(rec.blocks)
        lengths.append((rec.input_length, rec.blocks[0], rec.blocks[-1]))
        builder.add(rec)
    forest = builder.build()
    assert forest.n_requests == 12031 == len(lengths)
    shared = sum(1 for c in counter.values() if c >= 2)
    assert forest.n_blocks == len(counter)
    assert forest.shared_blocks == shared
    assert forest.summary()["shared_block_fraction"] == pytest.approx(shared / len(counter), abs=0)
    assert forest.shared_occurrences == sum(c for c in counter.values() if c >= 2)
    assert forest.roots == (0,) and forest.count[0] == 12031  # block 0 is the shared root
    bottom = {b: v for v, b in enumerate(forest.bottom_block.tolist())}
    for length, _, last in lengths:
        leaf = bottom[last]
        assert forest.depth_blocks[leaf] == math.ceil(length / 512)
        assert forest.depth[leaf] <= length
    assert int(forest.ends.sum()) == 12031


def test_mooncake_path_blocks_match_every_request() -> None:
    forest = build_forest(read_trace(MOONCAKE))
    bottom = {b: v for v, b in enumerate(forest.bottom_block.tolist())}
    for rec in read_trace(MOONCAKE):
        path = forest.path(bottom[rec.blocks[-1]])
        for v in path:
            start = 0 if forest.parent[v] < 0 else forest.depth_blocks[forest.parent[v]]
            assert rec.blocks[start] == forest.top_block[v]
            assert rec.blocks[forest.depth_blocks[v] - 1] == forest.bottom_block[v]
        assert forest.depth_blocks[path[-1]] == len(rec.blocks) == math.ceil(rec.input_length / 512)
