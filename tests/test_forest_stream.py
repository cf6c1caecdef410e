"""The compact streaming forest builder gives the reference builder's forest, errors and skip log."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE
from edgeprefix.placement.pipeline import forest_stream
from edgeprefix.placement.pipeline.forest import ForestBuilder, RadixForest
from edgeprefix.placement.pipeline.forest_stream import StreamForestBuilder, stream_forest
from edgeprefix.placement.pipeline.traces import SkipLog, TraceError, TraceRecord, read_trace, synthetic_records

B = 512


def _reference(records: list[TraceRecord], *, skip_invalid: bool = False, log: SkipLog | None = None,
               block_size: int = B) -> RadixForest:
    builder = ForestBuilder(block_size)
    builder.extend(records, skip_invalid=skip_invalid, log=log)
    builder.release_index()
    return builder.build()


def _assert_same(a: RadixForest, b: RadixForest) -> None:
    for f in dataclasses.fields(a):
        if not f.init:
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        else:
            assert x == y, f.name


def test_shipped_mooncake_trace_gives_the_reference_forest() -> None:
    _assert_same(_reference(list(read_trace(MOONCAKE_TRACE))), stream_forest(read_trace(MOONCAKE_TRACE)))


def test_synthetic_trace_across_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forest_stream, "CHUNK_RECORDS", 97)  # many chunks: blocks first seen in earlier chunks
    records = list(synthetic_records(3000, n_families=12, seed=5))
    _assert_same(_reference(records), stream_forest(records))


_blocks = st.lists(st.integers(0, 11), min_size=0, max_size=6)


@settings(max_examples=150, deadline=None)
@given(paths=st.lists(_blocks, min_size=1, max_size=25), chunk=st.integers(1, 7))
def test_random_traces_with_conflicts_match_the_reference(paths: list[list[int]], chunk: int) -> None:
    # twelve block ids shared at random: two parents, repeats and empty requests are common
    records = [TraceRecord(i + 1, float(i), max(len(p), 1) * B - (i % 7), i % 5, tuple(p)) for i, p in enumerate(paths)]
    forest_stream.CHUNK_RECORDS, saved = chunk, forest_stream.CHUNK_RECORDS
    try:
        ref_log, new_log = SkipLog(), SkipLog()
        try:
            expected: RadixForest | None = _reference(records, skip_invalid=True, log=ref_log)
        except ValueError:  # no valid request at all
            expected = None
        builder = StreamForestBuilder(B)
        builder.extend(records, skip_invalid=True, log=new_log)
        if expected is None:
            with pytest.raises(ValueError, match="no valid request"):
                builder.build()
        else:
            _assert_same(expected, builder.build())
        assert (new_log.skipped, new_log.by_field, new_log.examples) == (ref_log.skipped, ref_log.by_field, ref_log.examples)
        try:
            _reference(records)
            reference_error: TraceError | None = None
        except TraceError as error:
            reference_error = error
        assert (reference_error is not None) == (ref_log.skipped > 0)
        if reference_error is None:
            StreamForestBuilder(B).extend(records)
        else:
            with pytest.raises(TraceError) as info:
                StreamForestBuilder(B).extend(records)
            assert str(info.value) == str(reference_error) and info.value.line == reference_error.line
    finally:
        forest_stream.CHUNK_RECORDS = saved


def test_two_parents_names_the_line_and_both_parents() -> None:
    records = [TraceRecord(1, 0.0, 2 * B, 0, (1, 2)), TraceRecord(2, 1.0, 2 * B, 0, (3, 2))]
    with pytest.raises(TraceError, match=r"line 2, field 'hash_ids': block 2 seen under two parents \(repeated"):
        stream_forest(records)
    records = [TraceRecord(1, 0.0, 2 * B, 0, (1, 2)), TraceRecord(2, 1.0, 2 * B, 0, (2, 5))]
    with pytest.raises(TraceError, match=r"block 2 seen under two parents \(parent 1, now a root\)"):
        stream_forest(records)
