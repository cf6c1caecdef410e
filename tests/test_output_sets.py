"""``solve --out``: the output set changes as a whole, studies resume only their own problem,
and the storage can come from ``EDGEPREFIX_STORAGE`` or a PostgreSQL URL in one process."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from edgeprefix.cli import main
from edgeprefix.placement.atomic import write_output_set

SET = ("result.json", "history.csv", "best_so_far.png")


def assert_complete_set(folder: Path) -> dict:
    """Every file of the set is present and is the one ``result.json`` describes (SHA-256 in ``files``)."""
    result = json.loads((folder / "result.json").read_text())
    for name, digest in result["files"].items():
        assert hashlib.sha256((folder / name).read_bytes()).hexdigest() == digest, name
    assert sorted(result["files"]) == ["best_so_far.png", "history.csv"]
    assert len((folder / "history.csv").read_text().splitlines()) == result["evaluations"] + 1
    return result


@pytest.mark.slow
def test_sigkill_at_random_points_leaves_the_old_set_or_the_new_one(tmp_path):
    """Kill ``solve --out`` at random instants, several times: the folder always holds one complete
    set (the previous run's or the new one's), never a mix, and a later run still resumes."""
    out = tmp_path / "run"
    base = [sys.executable, "-m", "edgeprefix.cli", "solve", "--method", "qmc", "--out", str(out), "--json"]
    assert subprocess.run([*base, "--budget", "4"], capture_output=True, timeout=300).returncode == 0
    previous = assert_complete_set(out)
    rng = random.Random(7)
    budget = 4
    for kill in range(6):
        budget += 3
        proc = subprocess.Popen([*base, "--budget", str(budget)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(1.5, 7.0))  # start-up, search or the final write
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        current = assert_complete_set(out)
        assert current["evaluations"] in (previous["evaluations"], budget), kill
        previous = current
        assert not [p for p in out.iterdir() if p.name not in (*SET, "study.journal")]
    final = subprocess.run([*base, "--budget", str(budget + 1)], capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr
    assert assert_complete_set(out)["evaluations"] == budget + 1
    assert not list(tmp_path.glob(".run.set-*"))  # dead writers' temporaries are swept


def test_write_output_set_swaps_the_whole_folder_and_keeps_the_study(tmp_path):
    folder = tmp_path / "o"
    write_output_set(folder, {"a.txt": b"1", "b.txt": b"1"})
    (folder / "study.journal").write_bytes(b"trials\n")
    inode = (folder / "study.journal").stat().st_ino
    write_output_set(folder, {"a.txt": b"2"}, keep=("study.journal",))
    assert sorted(p.name for p in folder.iterdir()) == ["a.txt", "study.journal"]
    assert (folder / "a.txt").read_bytes() == b"2"
    assert (folder / "study.journal").stat().st_ino == inode  # the same file, linked into the new set
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


def test_resuming_another_problem_is_refused_naming_the_difference(tmp_path, capsys):
    out = str(tmp_path / "d")
    assert main(["solve", "--method", "tpe", "--budget", "6", "--out", out, "--json"]) == 0
    capsys.readouterr()
    for extra, words in (
        (["--intensity", "4"], ["request_intensity: stored 3.0, this run 4.0"]),
        (["--policy", "nearest"], ["policy: stored 'load_aware', this run 'nearest'"]),
        (["--target", "0.7"], ["target: stored 0.8, this run 0.7"]),
    ):
        assert main(["solve", "--method", "tpe", "--budget", "8", "--out", out, *extra]) == 2
        err = capsys.readouterr().err
        assert "searched another problem" in err
        for word in words:
            assert word in err, err
    assert main(["solve", "--method", "cmaes", "--budget", "8", "--out", out]) == 2
    assert "method: stored 'tpe', this run 'cmaes'" in capsys.readouterr().err
    # the same problem resumes
    assert main(["solve", "--method", "tpe", "--budget", "8", "--out", out, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["extras"]["resumed_trials"] == 6


def test_result_json_and_header_show_the_overrides(tmp_path, capsys):
    out = tmp_path / "d"
    assert main(["solve", "--method", "grid", "--resolution", "5", "--intensity", "2.5", "--density", "1.5", "--out", str(out)]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert "Λ = 2.5" in header and "λ_b = 1.5" in header
    result = json.loads((out / "result.json").read_text())
    assert result["overrides"] == {"request_intensity": 2.5, "edge_density": 1.5}
    assert result["fingerprint"]["request_intensity"] == 2.5 and result["fingerprint"]["method"] == "grid"
    assert len(result["fingerprint"]["instance_hash"]) == 16


def test_storage_from_the_environment(tmp_path, capsys, monkeypatch):
    db = tmp_path / "env.db"
    monkeypatch.setenv("EDGEPREFIX_STORAGE", str(db))
    assert main(["solve", "--method", "tpe", "--budget", "3", "--study", "from-env", "--json"]) == 0
    capsys.readouterr()
    import optuna

    assert len(optuna.load_study(study_name="from-env", storage=f"sqlite:///{db}").trials) == 3


def test_single_process_postgresql_storage(capsys, postgres_url):
    url = postgres_url
    study = f"single-{uuid.uuid4().hex[:8]}"
    assert main(["solve", "--method", "tpe", "--budget", "4", "--storage", url, "--study", study, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["evaluations"] == 4
    assert main(["solve", "--method", "tpe", "--budget", "6", "--storage", url, "--study", study, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["extras"]["resumed_trials"] == 4


def test_compare_file_names_stay_inside_out(tmp_path):
    from edgeprefix.benchmarks.optimisers.compare import file_stem

    for label in ("../../../x", "/etc/passwd", "..", "a/b\\c", "ok-name_1.2"):
        stem = file_stem(label)
        path = (tmp_path / f"curves_{stem}.png").resolve()
        assert path.parent == tmp_path.resolve() and "/" not in stem and not stem.startswith(".")
    assert file_stem("ok-name_1.2") == "ok-name_1.2"


def test_journal_with_a_torn_last_line_is_repaired(tmp_path):
    from edgeprefix.solvers.persistence import repair_journal

    path = tmp_path / "s.journal"
    path.write_bytes(b'{"op": 1}\n{"op": 2}\n{"op"')
    repair_journal(path)
    assert path.read_bytes() == b'{"op": 1}\n{"op": 2}\n'
    os.truncate(path, 0)
    repair_journal(path)
    assert path.read_bytes() == b""
