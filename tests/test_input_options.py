"""Options and paths checked before the work starts, argparse errors in the package's one-line format,
and names and ids that cannot reach a terminal raw (docs/instances.md, docs/model.md §20)."""

from __future__ import annotations

import copy
import os

import pytest
import tomli_w

from edgeprefix.cli import escape_controls, main
from edgeprefix.placement.atomic import atomic_write_text, check_output_path, write_output_set
from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.instance import instance_from_mapping


def one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


# -- --out ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["solve", "--budget", "5"], ["validate"], ["reproduce", "--figure", "8", "--quick"]])
def test_an_empty_out_is_refused_before_any_work(capsys, command):
    assert main([*command, "--out", ""]) == 2
    assert "--out is empty" in one_line(capsys)


def test_replay_out_naming_an_existing_file_is_refused_before_the_replay(tmp_path, capsys):
    existing = tmp_path / "result"
    existing.write_text("keep me", encoding="utf-8")
    # the trace does not even exist: the --out check comes first, before anything is read
    assert main(["replay", str(tmp_path / "missing.jsonl"), "--instance", "paper_baseline", "--out", str(existing)]) == 2
    assert "is a file, not a folder" in one_line(capsys)
    assert existing.read_text(encoding="utf-8") == "keep me"


def test_a_file_output_naming_a_folder_is_refused(tmp_path, capsys):
    assert main(["profiles", "--out", str(tmp_path)]) == 2
    assert "is a folder" in one_line(capsys)


def test_an_output_set_through_a_link_writes_the_folder_and_keeps_the_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    write_output_set(link, {"a.txt": b"1"})
    write_output_set(link, {"a.txt": b"2"})  # replacing an existing set through the link
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert (real / "a.txt").read_bytes() == b"2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]  # no .link.set-PID-* left behind


def test_an_atomic_file_write_through_a_link_keeps_the_link(tmp_path):
    target = tmp_path / "target.toml"
    target.write_text("old", encoding="utf-8")
    link = tmp_path / "link.toml"
    link.symlink_to(target)
    atomic_write_text(link, "new")
    assert link.is_symlink() and target.read_text(encoding="utf-8") == "new"


def test_solve_out_through_a_link_to_a_folder(tmp_path, capsys):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    assert main(["solve", "--method", "random", "--budget", "4", "--out", str(link), "--json"]) == 0
    capsys.readouterr()
    assert link.is_symlink() and (real / "result.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]


def test_check_output_path_names_the_flag_and_follows_links(tmp_path):
    with pytest.raises(ValueError, match="--out is empty"):
        check_output_path("  ", "--out", "folder")
    link = tmp_path / "l"
    link.symlink_to(tmp_path / "absent")  # dangling: followed, the folder is created there
    assert check_output_path(link, "--out", "folder") == tmp_path / "absent"


# -- seeds and argparse errors ---------------------------------------------------------------------------
def test_a_huge_seed_range_is_refused_while_parsing(capsys):
    """``compare --seeds 0-100000000000`` built the whole range first: a MemoryError traceback."""
    with pytest.raises(SystemExit) as info:
        main(["compare", "--seeds", "0-100000000000"])
    assert info.value.code == 2
    err = one_line(capsys)
    assert "at most 10000 seeds" in err and err.startswith("edgeprefix compare: error:")


@pytest.mark.parametrize("argv", [["solve", "--bogus"], ["solve", "--method", "nope"], ["plan-density"], ["bogus"]])
def test_argparse_errors_are_one_line_in_the_package_format(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = one_line(capsys)
    assert err.startswith("edgeprefix") and ": error: " in err and "usage:" not in err
    if argv[0] != "bogus":
        assert err.startswith(f"edgeprefix {argv[0]}: error:") and f"edgeprefix {argv[0]} --help" in err


# -- names and ids -------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["red\x1b[31mname", "bell\x07", "two\nlines", "tab\there"])
def test_control_characters_are_escaped_as_repr_does(text):
    escaped = escape_controls(text)
    assert escaped.isprintable() and escaped == repr(text)[1:-1]


def test_plain_text_is_left_as_it_is():
    assert escape_controls("λ_b = 0.5 → ok") == "λ_b = 0.5 → ok"


@pytest.mark.parametrize(
    "where,value,field",
    [
        ("name", "evil\x1b[2J\x07", "name"),
        ("profiles.1.id", "a\nb", "profiles[1].id"),
        ("requests.0.id", "short\x1b[31m", "requests[0].id"),
        ("profiles.1.id", "shallow=0.5", "profiles[1].id"),
        ("profiles.1.id", "shallow,deep", "profiles[1].id"),
    ],
)
def test_names_and_ids_that_cannot_be_echoed_or_named_are_refused_at_load(baseline_mapping, where, value, field):
    data = copy.deepcopy(baseline_mapping)
    steps = [int(s) if s.isdigit() else s for s in where.split(".")]
    node = data
    for step in steps[:-1]:
        node = node[step]
    old = node[steps[-1]]
    node[steps[-1]] = value
    for key in ("mix", "max_share"):  # keep the placement tables naming the renamed profile
        table = data["placement"].get(key) or {}
        if old in table:
            table[value] = table.pop(old)
    with pytest.raises(InstanceError) as info:
        instance_from_mapping(data)
    assert info.value.field == field
    assert str(info.value).isprintable(), "the message itself must quote the id with escapes"


def test_an_ansi_name_never_reaches_the_terminal(tmp_path, capsys, baseline_mapping):
    data = copy.deepcopy(baseline_mapping)
    data["name"] = "x\x1b[31mred\x07"
    path = tmp_path / "a.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    assert main(["evaluate", str(path)]) == 2
    out = capsys.readouterr()
    assert "\x1b" not in out.err + out.out and "\x07" not in out.err + out.out
    assert "\\x1b" in out.err and out.err.count("\n") == 1


def test_an_error_message_with_a_raw_newline_or_escape_is_printed_as_one_escaped_line():
    from edgeprefix import cli

    assert cli._one_line(ValueError("unknown id a\nb\x1b[31m")) == "unknown id a\\nb\\x1b[31m"


def test_a_mix_naming_an_unknown_id_with_a_bell_is_one_escaped_line(capsys):
    assert main(["evaluate", "--mix", "a\x07b=1"]) == 2
    err = one_line(capsys)
    assert "\\x07" in err and "\x07" not in err


# -- the size guard ------------------------------------------------------------------------------------
@pytest.mark.parametrize("profiles,types,measured_gb", [(3000, 10, 11.7), (500, 2000, 8.0)])
def test_the_size_guard_is_within_one_and_a_half_of_the_measured_peaks(profiles, types, measured_gb):
    """The two runs the old estimate (8 · 4 S² Q bytes: 2.9 GB and 16 GB) got wrong by 4× and 2× (docs/model.md §20)."""
    from edgeprefix.placement.memory import evaluation_bytes

    estimate = evaluation_bytes(profiles, types, 2.0, "load_aware") / 1e9
    assert measured_gb / 1.5 <= estimate <= measured_gb * 1.5


def test_the_size_guard_refuses_what_does_not_fit(monkeypatch):
    from edgeprefix.placement import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 4e9)
    with pytest.raises(InstanceError, match="GiB of memory"):
        memory.check_memory(memory.evaluation_bytes(3000, 10, 2.0, "load_aware"), "mix", "an evaluation", "fewer profiles")
    memory.check_memory(memory.evaluation_bytes(50, 75, 2.0, "load_aware"), "mix", "an evaluation", "fewer profiles")


def test_the_size_benchmark_builds_distinct_closed_profiles():
    from edgeprefix.benchmarks.memory.size_guard import many_profiles

    inst = many_profiles(10, 40, 2.0)
    assert len(inst.profiles) == 40 and len({frozenset(s.prefixes) for s in inst.profiles}) == 40
    with pytest.raises(ValueError, match="distinct profiles"):
        many_profiles(3, 1000, 2.0)
