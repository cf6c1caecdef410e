"""``solve --out DIR`` study folders (``DIR/study.journal``, docs/distributed.md): refused runs leave
the folder as it was, renaming an instance or editing its metadata resumes the study, a changed
budget or method is stated, and a lock left by a killed append is cleared with a note."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import tomli_w

from edgeprefix.cli import main
from edgeprefix.placement.model.instance import default_instance, instance_to_mapping


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def _solve(capsys, *argv: str) -> tuple[int, dict | None, str]:
    code = main(["solve", "--method", "tpe", "--json", *argv])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def _instance_file(path: Path, **changes) -> str:
    mapping = {**instance_to_mapping(default_instance()), **changes}
    path.write_text(tomli_w.dumps(mapping))
    return str(path)


def test_a_refused_run_leaves_the_folder_untouched(tmp_path, capsys):
    out = str(tmp_path / "d")
    assert _solve(capsys, "--budget", "3", "--out", out)[0] == 0
    before = _snapshot(Path(out))
    code, _, err = _solve(capsys, "--budget", "4", "--out", out, "--intensity", "4")
    assert code == 2 and "request_intensity: stored 3.0, this run 4.0" in err
    assert _snapshot(Path(out)) == before  # not even a create-study line in the journal


def test_a_renamed_instance_or_new_metadata_resumes_the_study(tmp_path, capsys):
    out = str(tmp_path / "d")
    first = _instance_file(tmp_path / "a.toml")
    assert _solve(capsys, first, "--budget", "3", "--out", out)[0] == 0
    renamed = _instance_file(tmp_path / "b.toml", name="renamed", metadata={"owner": "someone else", "note": "edited"})
    code, payload, err = _solve(capsys, renamed, "--budget", "4", "--out", out)
    assert code == 0, err
    assert payload["extras"]["resumed_trials"] == 3 and payload["evaluations"] == 4
    changed = _instance_file(
        tmp_path / "c.toml", name="renamed", placement={**instance_to_mapping(default_instance())["placement"], "target": 0.7}
    )
    code, _, err = _solve(capsys, changed, "--budget", "5", "--out", out)
    assert code == 2 and "problem_hash: stored" in err  # a change of content is still another problem


def test_a_changed_budget_resumes_with_the_new_budget_and_says_so(tmp_path, capsys):
    out = str(tmp_path / "d")
    assert _solve(capsys, "--budget", "3", "--out", out)[0] == 0
    code, payload, err = _solve(capsys, "--budget", "5", "--out", out)
    assert code == 0 and payload["evaluations"] == 5 and payload["extras"]["resumed_trials"] == 3
    assert "was run with budget 3 and holds 3 trials: this run's budget 5 adds 2" in err
    code, payload, err = _solve(capsys, "--budget", "2", "--out", out)
    assert code == 0 and payload["evaluations"] == 5  # the result covers every stored trial
    assert "already holds 5 trials, at least --budget 2: nothing new is evaluated" in err


def test_a_method_that_cannot_resume_the_folder_study_is_refused(tmp_path, capsys):
    out = str(tmp_path / "d")
    assert _solve(capsys, "--budget", "3", "--out", out)[0] == 0
    before = _snapshot(Path(out))
    assert main(["solve", "--method", "spsa", "--budget", "4", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "holds a tpe study (study.journal) that --method spsa does not resume" in err and len(err.strip().splitlines()) == 1
    assert _snapshot(Path(out)) == before


def test_a_stale_journal_lock_is_cleared_with_a_note(tmp_path, capsys):
    out = tmp_path / "d"
    assert _solve(capsys, "--budget", "3", "--out", str(out))[0] == 0
    (out / "study.journal.lock").write_bytes(b"")  # Optuna's append lock, as a process killed mid-append leaves it
    start = time.monotonic()
    code, payload, err = _solve(capsys, "--budget", "4", "--out", str(out))
    assert code == 0 and payload["evaluations"] == 4
    assert time.monotonic() - start < 25  # Optuna's own wait for a stale lock (30 s) never starts
    notes = [line for line in err.splitlines() if "study.journal.lock" in line]
    assert len(notes) == 1 and "removed" in notes[0] and "died while appending" in notes[0]
    assert not (out / "study.journal.lock").exists()


def test_a_journal_in_use_by_a_live_process_is_waited_for(tmp_path):
    """The lock's owner is alive: a second command waits (saying so) and then resumes the study."""
    out = tmp_path / "d"
    out.mkdir()
    journal = out / "study.journal"
    fd = os.open(journal, os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a running solve holds it
    (out / "study.journal.lock").write_bytes(b"")  # the live owner's append lock: not to be removed under it
    command = [sys.executable, "-m", "edgeprefix.cli", "solve", "--method", "tpe", "--budget", "3", "--out", str(out), "--json"]
    errors = tmp_path / "stderr.txt"
    with open(errors, "w") as err:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True, env={**os.environ, "EDGEPREFIX_PROGRESS": "0"})
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and "waiting for another process" not in errors.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        assert "waiting for another process that uses" in errors.read_text()
        assert (out / "study.journal.lock").exists()  # the owner is alive: its lock stays
    finally:
        os.close(fd)  # the owner ends
    stdout, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, errors.read_text()
    assert json.loads(stdout)["evaluations"] == 3
