"""A user's own trace: the fields are documented, the span and time unit printed, the time order
enforced the same way by profiles and replay, and the ids mapped back to the trace's blocks."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from edgeprefix.cli import main

SAMPLE = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")


def _lines() -> list[str]:
    return SAMPLE.read_text().splitlines()


def _profiles_json(capsys, *argv: str) -> dict:
    assert main(["profiles", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_profiles_help_lists_the_trace_fields(capsys):
    with pytest.raises(SystemExit):
        main(["profiles", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for word in ("timestamp", "input_length", "output_length", "hash_ids", "tokens", "milliseconds", "time order"):
        assert word in text


def test_the_span_and_the_unit_are_printed(capsys):
    first, last = (json.loads(_lines()[i])["timestamp"] / 1000 for i in (0, -1))
    report = _profiles_json(capsys)
    assert report["time"]["first"] == pytest.approx(first) and report["time"]["span"] == pytest.approx(last - first)
    assert report["time"]["unit"] == "milliseconds" and "hint" not in report["time"]
    assert main(["profiles"]) == 0
    assert f"time: span {last - first:.6g} s" in capsys.readouterr().out


def test_timestamps_in_seconds_get_a_hint(tmp_path, capsys):
    rows = [json.loads(line) for line in _lines()]
    for row in rows:
        row["timestamp"] = round(row["timestamp"] / 1000)  # seconds where milliseconds belong
    path = tmp_path / "seconds.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = _profiles_json(capsys, str(path))
    assert "seconds" in report["time"]["hint"] and "1000" in report["time"]["hint"]


def test_a_reversed_trace_is_refused_by_profiles_and_by_replay(tmp_path, capsys):
    path = tmp_path / "reversed.jsonl"
    path.write_text("\n".join(reversed(_lines())) + "\n")
    assert main(["profiles", str(path)]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "time order" in err and len(err.strip().splitlines()) == 1
    instance = tmp_path / "sample.toml"
    assert main(["profiles", "--out", str(instance)]) == 0
    capsys.readouterr()
    assert main(["replay", str(path), "--instance", str(instance)]) == 2
    assert "time order" in capsys.readouterr().err


def test_ids_map_back_to_the_trace_blocks_and_stay_stable(capsys):
    first, second = _profiles_json(capsys), _profiles_json(capsys)
    assert [q["id"] for q in first["requests"]] == [q["id"] for q in second["requests"]]
    assert [p["id"] for p in first["profiles"]] == [p["id"] for p in second["profiles"]]
    named = [q for q in first["requests"] if q["id"] != "q_uncached"]
    assert named and all(q["id"] == f"q_h{q['last_block']}" for q in named)  # the id names the path's last block
    blocks = {json.loads(line)["hash_ids"][0] for line in _lines()}
    assert all(q["first_blocks"][0] in blocks for q in named)  # a root block of the trace
    assert "q_h" in first["names"] and "family_h" in first["names"]
