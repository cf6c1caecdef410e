"""Every failure is one line on stderr naming the file, field or option, with exit code 2
(3: a search that could not finish, 130: Ctrl-C); never a traceback, never a NaN."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.cli import main
from edgeprefix.placement import memory
from edgeprefix.placement.model.instance import instance_to_mapping, load_instance, write_instance

BASELINE = Path(__file__).resolve().parents[1] / "placement" / "data" / "paper_baseline.toml"


def fails(capsys, argv, *words, code=2):
    """Run the CLI; assert the exit code and that stderr is one line holding every word."""
    assert main([str(a) for a in argv]) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    return err


def edited(tmp_path, name="i.toml", **changes):
    """paper_baseline with ``section.key = value`` changes, written to ``tmp_path / name``."""
    data = instance_to_mapping(load_instance("paper_baseline"))
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        data[section][key] = value
    path = tmp_path / name
    text = json.dumps(data) if name.endswith(".json") else None
    if text is None:
        import tomli_w

        text = tomli_w.dumps(data)
    path.write_text(text)
    return path


# -- instance files --------------------------------------------------------------------------
def test_unreadable_file_names_the_file(tmp_path, capsys, monkeypatch):
    path = edited(tmp_path)

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)  # root reads any file: simulate the refusal
    fails(capsys, ["evaluate", path], str(path), "cannot read it (Permission denied)")


def test_a_folder_given_as_instance_names_it(tmp_path, capsys):
    fails(capsys, ["evaluate", tmp_path], "no such file")


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_deeply_nested_file_is_one_line(tmp_path, capsys, suffix):
    depth = 100_000
    path = tmp_path / f"deep{suffix}"
    path.write_text(("x = " if suffix == ".toml" else '{"x": ') + "[" * depth + "]" * depth + ("" if suffix == ".toml" else "}"))
    fails(capsys, ["evaluate", path], "nested too deeply")


def test_latin1_file_names_file_and_encoding(tmp_path, capsys):
    path = tmp_path / "latin.toml"
    path.write_bytes(BASELINE.read_bytes().replace(b"paper_baseline: the", "caf\u00e9 the".encode("latin-1")))
    fails(capsys, ["evaluate", path], str(path), "not UTF-8", "0xe9")


def test_prefill_table_tokens_not_a_list(tmp_path, capsys):
    data = instance_to_mapping(load_instance("paper_baseline"))
    data["prefill"] = {"table": {"tokens": 5, "seconds": [0.0, 1.0]}}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))
    fails(capsys, ["evaluate", path], "prefill.table.tokens", "must be a list of numbers, got 5")


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("gpu__memory", 1e308, ["gpu.memory", "[1e-30, 1e+30]"]),
        ("gpu__memory", 1e13, ["gpu.memory", "at most 1000000000000"]),
        ("network__request_intensity", 1e308, ["network.request_intensity"]),
        ("network__edge_density", 1e308, ["network.edge_density"]),
        ("network__radio_exponent", 1e-6, ["network.radio_exponent", "[1, 6]"]),
        ("network__radio_scale", float("inf"), ["network.radio_scale"]),
    ],
)
def test_out_of_range_numbers_name_their_field(tmp_path, capsys, field, value, words):
    path = edited(tmp_path, "i.json", **{field: value})
    err = fails(capsys, ["evaluate", path], *words)
    assert "mix" not in err and "offered_load" not in err


def test_huge_integer_names_its_field(tmp_path, capsys):
    path = tmp_path / "i.toml"
    path.write_text(BASELINE.read_text().replace("memory = 12.5 ", "memory = 1" + "0" * 400 + " "))
    fails(capsys, ["evaluate", path], "gpu.memory", "401 digits")
    data = instance_to_mapping(load_instance("paper_baseline"))
    data["gpu"]["memory"] = 10**400
    path = tmp_path / "i.json"
    path.write_text(json.dumps(data))
    fails(capsys, ["evaluate", path], "gpu.memory", "401 digits")


def test_override_names_the_option(capsys):
    fails(capsys, ["evaluate", "--intensity", "1e308"], "--intensity", "network.request_intensity")
    fails(capsys, ["evaluate", "--density", "-1"], "--density")


# -- options ---------------------------------------------------------------------------------
def test_negative_seed_names_the_option(capsys):
    fails(capsys, ["solve", "--seed", "-1", "--budget", "2"], "--seed must be an integer >= 0, got -1")


def test_negative_families_names_the_option(capsys):
    fails(capsys, ["profiles", "--families", "-1"], "--families must be an integer >= 0, got -1")


def test_profiles_out_folder_is_refused(tmp_path, capsys):
    fails(capsys, ["profiles", "--out", tmp_path], "--out", "is a folder", "instance.toml")


def test_validate_samples_beyond_memory_is_refused_up_front(capsys):
    fails(capsys, ["validate", "--samples", str(10**12)], "--samples", "GiB of memory", "lower --samples")


def test_empty_study_name_is_refused(capsys, tmp_path):
    fails(capsys, ["solve", "--method", "tpe", "--budget", "2", "--storage", tmp_path / "s.db", "--study", ""], "--study")


@pytest.mark.parametrize(
    "storage, words",
    [
        ("notaurl", ["storage 'notaurl'", "neither a database URL"]),
        ("mysql://u@h/db", ["unknown scheme 'mysql'"]),
        ("postgresql://u:secret@127.0.0.1:1/none", ["cannot open the study database", "u:***@"]),
    ],
)
def test_bad_storage_is_one_line_and_creates_nothing(tmp_path, capsys, monkeypatch, storage, words):
    monkeypatch.chdir(tmp_path)
    err = fails(capsys, ["solve", "--method", "tpe", "--budget", "2", "--storage", storage], *words)
    assert "secret" not in err
    assert list(tmp_path.iterdir()) == []  # no SQLite file appeared


def test_unauthorised_database_is_one_line(capsys, postgres_url):
    url = postgres_url
    bad = url.replace("://postgres:", "://postgres:wrong-", 1) if "://postgres:" in url else url.replace("://", "://nobody:x@", 1)
    err = fails(capsys, ["solve", "--method", "tpe", "--budget", "2", "--storage", bad], "cannot open the study database")
    assert "wrong-" not in err


def test_unreachable_dask_scheduler_is_one_line(capsys, monkeypatch):
    from edgeprefix.solvers import distributed

    monkeypatch.setattr(distributed, "CONNECT_TIMEOUT", "1s")
    fails(capsys, ["solve", "--method", "grid", "--dask", "tcp://127.0.0.1:9"], "--dask 'tcp://127.0.0.1:9'", "cannot reach")


# -- sizes -----------------------------------------------------------------------------------
@pytest.fixture()
def many_profiles(tmp_path):
    data = instance_to_mapping(load_instance("paper_baseline"))
    data["profiles"] = [{"id": f"p{i}", "prefixes": []} for i in range(2000)]
    data["placement"] = {"target": 0.8}
    path = tmp_path / "many.json"
    path.write_text(json.dumps(data))
    return path


def test_a_problem_beyond_memory_is_refused_up_front(many_profiles, capsys, monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda: 64e6)  # as if the machine had 64 MB
    fails(capsys, ["solve", many_profiles, "--budget", "2"], "profiles:", "2000 profiles", "GiB of memory")
    mix = ",".join(f"p{i}={1 / 2000!r}" for i in range(2000))
    fails(capsys, ["evaluate", many_profiles, "--mix", mix], "mix:", "2000 active profiles")


def test_a_bad_mix_among_many_profiles_is_a_short_line(many_profiles, capsys):
    err = fails(capsys, ["evaluate", many_profiles, "--mix", "nope=1"], "unknown profile 'nope'", "(2000 in all)")
    assert len(err) < 300


# -- traces ----------------------------------------------------------------------------------
def _trace_line(ids):
    return json.dumps({"timestamp": 0, "input_length": 512 * len(ids), "output_length": 1, "hash_ids": ids}) + "\n"


def test_trace_ids_beyond_int64_name_the_line(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_text(_trace_line([1, 2]) + _trace_line([2**63, 5]))
    fails(capsys, ["profiles", path], "line 2", "hash_ids", "2^63")


def test_not_gzip_and_truncated_gzip(tmp_path, capsys):
    plain = tmp_path / "plain.jsonl.gz"
    plain.write_text(_trace_line([1, 2]))
    fails(capsys, ["profiles", plain], "not a complete gzip file")
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(("".join(_trace_line([i, i + 1]) for i in range(0, 4000, 2))).encode())[:600])
    fails(capsys, ["profiles", cut], "not a complete gzip file")


def test_latin1_trace_names_the_file(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    path.write_bytes(_trace_line([1, 2]).encode() + b'{"x": "caf\xe9"}\n')
    fails(capsys, ["profiles", path], "not UTF-8")


# -- output folders --------------------------------------------------------------------------
def test_out_naming_a_file_is_refused_before_solving(tmp_path, capsys):
    path = tmp_path / "f"
    path.write_text("mine")
    fails(capsys, ["solve", "--budget", "2", "--out", path], "--out", "is a file")
    assert path.read_text() == "mine"


def test_out_in_a_read_only_folder_is_refused_before_solving(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # root writes anywhere: simulate a read-only folder
    fails(capsys, ["solve", "--budget", "2", "--out", tmp_path / "new"], "--out", "not writable")


def test_out_holding_other_files_is_refused(tmp_path, capsys):
    (tmp_path / "thesis.tex").write_text("precious")
    fails(capsys, ["solve", "--budget", "2", "--out", tmp_path], "did not write", "thesis.tex")
    assert (tmp_path / "thesis.tex").read_text() == "precious"


def test_a_failed_write_keeps_the_printed_result(tmp_path, capsys, monkeypatch):
    from edgeprefix.commands import solve as solve_command

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(solve_command, "write_output_set", broken)
    assert main(["solve", "--method", "grid", "--resolution", "5", "--out", str(tmp_path / "o"), "--json"]) == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["coverage"] > 0  # the answer reached stdout first
    assert "No space left on device" in captured.err and "--out" in captured.err


# -- numerics --------------------------------------------------------------------------------
def test_many_slots_give_the_queue_free_coverage_not_zero(tmp_path, capsys):
    """The reported case: M = 5000 made the α = 2 closed form overflow and coverage read 0.0000."""
    path = edited(tmp_path, "big.json", gpu__memory=5000.0)
    assert main(["evaluate", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["coverage"] == pytest.approx(data["coverage_queue_free"], abs=1e-9)
    assert data["coverage"] > 0.7


def test_a_nan_is_raised_not_clamped(monkeypatch):
    from edgeprefix.placement.errors import NumericalError
    from edgeprefix.placement.model import evaluation as ev_module
    from edgeprefix.placement.model.spatial import AnalyticKernel

    class NanKernel(AnalyticKernel):
        def truncated(self, *args, **kwargs):
            p1, p2 = super().truncated(*args, **kwargs)
            return p1 * np.nan, p2

    ev = ev_module.evaluate(load_instance("paper_baseline"), kernel=NanKernel())
    with pytest.raises(NumericalError, match="not finite"):
        ev.coverage()


# -- Ctrl-C ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_ctrl_c_prints_and_saves_the_partial_result(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgeprefix.cli", "solve", "--method", "tpe", "--budget", "100000", "--out", str(out), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not (out / "study.journal").exists() and time.monotonic() < deadline:  # the search has started
        time.sleep(0.2)
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    printed = json.loads(stdout)
    saved = json.loads((out / "result.json").read_text())
    assert printed["interrupted"] is True and 0 < saved["evaluations"] < 100000
    assert saved["coverage"] == printed["coverage"]
    # the study kept every finished trial: resuming replays them all
    assert main(["solve", "--method", "tpe", "--budget", str(saved["evaluations"]), "--out", str(out), "--json"]) == 0
    assert json.loads((out / "result.json").read_text())["extras"]["resumed_trials"] == saved["evaluations"]


def test_write_instance_is_atomic_and_durable(tmp_path):
    path = tmp_path / "x.toml"
    write_instance(load_instance("paper_baseline"), path)
    assert load_instance(path).name == "paper_baseline" and not list(tmp_path.glob(".*.tmp"))
