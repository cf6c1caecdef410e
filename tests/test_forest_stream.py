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


def _reference(records: list[TraceRecord], *, skip_invalid: bool = False, log: SkipLog | None = None, block_size: int = B) -> RadixForest:
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


def test_profiles_writes_the_same_instance_as_with_the_reference_builder(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from edgeprefix.cli import main
    from edgeprefix.commands import profiles

    def reference_forest(records, *, block_size=B, skip_invalid=False, log=None):  # type: ignore[no-untyped-def]
        return _reference(list(records), skip_invalid=skip_invalid, log=log, block_size=block_size)

    argv = ["profiles", str(MOONCAKE_TRACE), "--split", "0.5", "--json"]
    assert main(argv + ["--out", str(tmp_path / "compact.json")]) == 0
    monkeypatch.setattr(profiles, "stream_forest", reference_forest)
    assert main(argv + ["--out", str(tmp_path / "reference.json")]) == 0
    assert (tmp_path / "compact.json").read_bytes() == (tmp_path / "reference.json").read_bytes()


def test_marginal_values_level_by_level_equal_the_sum_over_all_pairs() -> None:
    from edgeprefix.placement.pipeline.calibration import DEFAULT_PREFILL as g
    from edgeprefix.placement.pipeline.profile_generation import _leaves, marginal_values

    forest = stream_forest(read_trace(MOONCAKE_TRACE))
    leaves, weight, length = _leaves(forest)
    pos, v = [np.arange(leaves.size)], [leaves]
    while pos[-1].size:  # every (leaf, ancestor-or-self) pair, then one bincount over all of them
        up = forest.parent[v[-1]]
        pos.append(pos[-1][up >= 0])
        v.append(up[up >= 0])
    p, u = np.concatenate(pos), np.concatenate(v)
    gain = np.asarray(g(length[p] - forest.parent_depth[u])) - np.asarray(g(np.maximum(length[p] - forest.depth[u], 0.0)))
    expected = np.bincount(u, weights=weight[p] * gain, minlength=forest.n_vertices)
    assert np.array_equal(marginal_values(forest, g), expected)


def test_build_releases_the_index_and_a_second_build_is_refused() -> None:
    builder = StreamForestBuilder(B)
    builder.extend([TraceRecord(1, 0.0, B, 0, (1,))])
    builder.build()
    with pytest.raises(RuntimeError, match="build"):
        builder.build()
    with pytest.raises(RuntimeError, match="build"):
        builder.extend([TraceRecord(2, 1.0, B, 0, (2,))])


def test_profiles_draws_a_progress_bar_of_the_requests_read_when_asked(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    import json

    from edgeprefix.cli import main

    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "1")
    assert main(["profiles", "--json"]) == 0
    captured = capsys.readouterr()
    assert "profiles: reading the trace" in captured.err and "requests" in captured.err
    assert json.loads(captured.out)["forest"]["requests"] == 200  # the bar never reaches stdout
    monkeypatch.setenv("EDGEPREFIX_PROGRESS", "0")
    assert main(["profiles", "--json"]) == 0
    assert "reading the trace" not in capsys.readouterr().err
