"""Trace lines are checked like instance fields (docs/model.md §20): every number in its range, the line
number in every error, time order, no duplicate keys, integers too long to read refused in one line."""

from __future__ import annotations

import json

import pytest

from edgeprefix.cli import main
from edgeprefix.placement.pipeline.traces import TraceError, lines_of, read_trace


def mooncake(**changes):
    line = {"timestamp": 0, "input_length": 600, "output_length": 10, "hash_ids": [1, 2]}
    line.update(changes)
    return json.dumps(line)


def records(*lines, fmt="mooncake"):
    return list(read_trace(lines_of("\n".join(lines) + "\n"), fmt=fmt))


@pytest.mark.parametrize(
    "changes,field",
    [
        ({"output_length": 2**62}, "output_length"),  # shifted the replayed coverage from 0.672 to 0.797
        ({"output_length": 10**19}, "output_length"),  # wrote an instance with D_q = 1.4e16 s
        ({"input_length": 10**12, "hash_ids": [1]}, "input_length"),
        ({"timestamp": 10**400}, "timestamp"),  # OverflowError without a line number
        ({"timestamp": 1e300}, "timestamp"),
    ],
)
def test_a_number_out_of_range_names_its_line_and_field(changes, field):
    with pytest.raises(TraceError) as info:
        records(mooncake(), mooncake(**changes))
    assert info.value.line == 2 and info.value.field == field
    assert str(info.value).startswith("trace line 2") and "docs/model.md §20" in str(info.value)
    assert len(str(info.value)) < 300


def test_the_tokens_format_checks_its_numbers_too():
    with pytest.raises(TraceError) as info:
        records(json.dumps({"tokens": [1, 2, 3], "output_length": 2**62}), fmt="tokens")
    assert (info.value.line, info.value.field) == (1, "output_length")


def test_a_timestamp_earlier_than_the_line_before_is_refused_naming_both_lines():
    with pytest.raises(TraceError) as info:
        records(mooncake(timestamp=5000), mooncake(timestamp=6000), mooncake(timestamp=4000))
    assert (info.value.line, info.value.field) == (3, "timestamp")
    assert "line 2" in str(info.value) and "time order" in str(info.value)


def test_equal_timestamps_are_in_time_order():
    assert len(records(mooncake(timestamp=5), mooncake(timestamp=5))) == 2


def test_a_duplicate_key_in_a_trace_line_is_refused():
    text = mooncake().replace('"output_length": 10', '"output_length": 10, "output_length": 20')
    with pytest.raises(TraceError) as info:
        records(text)
    assert info.value.line == 1 and "'output_length' appears twice" in str(info.value)


def test_a_5000_digit_integer_is_one_line_with_the_line_and_field():
    text = mooncake().replace('"output_length": 10', '"output_length": 1' + "0" * 4999)
    with pytest.raises(TraceError) as info:
        records(mooncake(), text)
    message = str(info.value)
    assert info.value.line == 2 and "'output_length'" in message and "5000 digits" in message
    assert "set_int_max_str_digits" not in message and "\n" not in message


def test_profiles_refuses_an_out_of_range_line_with_exit_2(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text(mooncake() + "\n" + mooncake(output_length=2**62) + "\n", encoding="utf-8")
    assert main(["profiles", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "line 2" in err and "output_length" in err


def test_profiles_refuses_a_reversed_trace_naming_the_first_bad_line(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    lines = [mooncake(timestamp=t, hash_ids=[1, 10 + t]) for t in (3000, 2000, 1000)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["profiles", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "line 2" in err and "time order" in err


@pytest.mark.slow
def test_the_profiles_memory_benchmark_runs_and_counts_the_blocks(tmp_path):
    from edgeprefix.benchmarks.memory import profiles_memory

    assert profiles_memory.main(["--requests", "300", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "profiles_memory.json").read_text(encoding="utf-8"))
    (row,) = data["rows"]
    assert row["requests"] == 300 and row["unique_blocks"] > 300  # private tails: more blocks than requests
    assert row["peak_mb"] > 0 and data["reference"]["requests"] > 0


def test_with_progress_passes_every_record_through():
    from edgeprefix.placement.pipeline.traces import synthetic_records, with_progress

    original = list(synthetic_records(10_000, seed=3))
    assert list(with_progress(iter(original), every=4096)) == original
