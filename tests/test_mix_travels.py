"""Mixes that travel: what ``solve`` prints is what ``--mix`` reads; ``--mix-from FILE`` reads a
result; ``solve --instance-out`` writes the instance back with its mix; every command that uses a
mix prints it and puts ``mix`` in its JSON."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from edgeprefix.cli import main
from edgeprefix.commands._common import mix_text, parse_mix
from edgeprefix.placement.model.instance import load_instance

SAMPLE = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")
SOLVE = ["solve", "--method", "grid", "--resolution", "5"]


def _run(capsys, argv: list[str]) -> tuple[str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def test_what_solve_prints_is_what_mix_reads(capsys):
    out, _ = _run(capsys, SOLVE)
    line = next(row for row in out.splitlines() if row.startswith("best mix"))
    printed = line.removeprefix("best mix").strip()
    assert "  " in printed and "," not in printed  # the printed form: two spaces between pairs
    for text in (printed, line):  # the pairs alone, or the whole line
        evaluated = json.loads(_run(capsys, ["evaluate", "--mix", text, "--json"])[0])
        assert mix_text(evaluated["mix"]) == printed


def test_parse_mix_forms_agree():
    assert parse_mix("none=0.1000  deep=0.9000") == parse_mix("none=0.1,deep=0.9") == parse_mix("none=0.1, deep=0.9")
    with pytest.raises(ValueError, match="--mix: share of 'deep'"):
        parse_mix("none=0.1  deep=x")


def test_mix_from_a_result_json_and_a_json_output(tmp_path, capsys):
    out = tmp_path / "run"
    solved = json.loads(_run(capsys, [*SOLVE, "--out", str(out), "--json"])[0])
    printed = tmp_path / "solve.json"
    printed.write_text(json.dumps(solved))
    for source in (out / "result.json", printed):
        evaluated = json.loads(_run(capsys, ["evaluate", "--mix-from", str(source), "--json"])[0])
        assert evaluated["mix"] == pytest.approx(solved["mix"], abs=1e-12)
        assert evaluated["coverage"] == pytest.approx(solved["coverage"], rel=1e-9)


def test_mix_and_mix_from_together_or_a_file_without_a_mix_are_refused(tmp_path, capsys):
    empty = tmp_path / "empty.json"
    empty.write_text("{}")
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--mix", "none=1", "--mix-from", str(empty)])
    assert exc.value.code == 2 and "--mix-from" in capsys.readouterr().err
    assert main(["evaluate", "--mix-from", str(empty)]) == 2
    err = capsys.readouterr().err
    assert "--mix-from" in err and "has no mix" in err and len(err.strip().splitlines()) == 1


def test_solve_writes_the_instance_back_with_its_mix(tmp_path, capsys):
    path = tmp_path / "best.toml"
    solved_text, err = _run(capsys, [*SOLVE, "--router", "tier", "--intensity", "2", "--instance-out", str(path), "--json"])
    solved = json.loads(solved_text)
    assert f"wrote {path}" in err
    written = load_instance(path)
    assert dict(written.placement.mix) == pytest.approx(solved["mix"], abs=1e-12)
    assert written.network.router == "tier" and written.network.request_intensity == 2.0
    evaluated = json.loads(_run(capsys, ["evaluate", str(path), "--json"])[0])
    assert evaluated["router"] == "tier" and evaluated["coverage"] == pytest.approx(solved["coverage"], rel=1e-9)


@pytest.fixture(scope="module")
def trace_instance(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("mix") / "sample.toml"
    assert main(["profiles", "--out", str(path), "--json"]) == 0
    return path


def test_replay_prints_its_mix_and_puts_it_in_the_json(trace_instance, capsys):
    instance = load_instance(trace_instance)
    expected = dict(zip(instance.profile_ids, instance.mix_vector(None).tolist()))
    report = json.loads(_run(capsys, ["replay", str(SAMPLE), "--instance", str(trace_instance), "--nodes", "10", "--json"])[0])
    assert report["mix"] == pytest.approx(expected, abs=1e-12)
    text = _run(capsys, ["replay", str(SAMPLE), "--instance", str(trace_instance), "--nodes", "10"])[0]
    assert "mix      " + mix_text(expected) in text.splitlines()
    assert "(replayed ± " in text  # the SE belongs to the replayed column


def test_replay_takes_its_router_from_the_instance(trace_instance, tmp_path, capsys):
    text = trace_instance.read_text().replace("[network]\n", '[network]\nrouter = "online"\n', 1)
    online = tmp_path / "online.toml"
    online.write_text(text)
    report = json.loads(_run(capsys, ["replay", str(SAMPLE), "--instance", str(online), "--nodes", "10", "--json"])[0])
    assert report["router"] == "online" and report["queue_model"] == "meanfield"
    report = json.loads(_run(capsys, ["replay", str(SAMPLE), "--instance", str(online), "--nodes", "10", "--router", "tier", "--json"])[0])
    assert report["router"] == "tier" and report["queue_model"] == "cell"
