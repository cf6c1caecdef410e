"""Conventions shared by every command: ``--json``, one meaning of ``--seeds``, overrides in the
header, ``wrote PATH`` lines, and messages free of numpy reprs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprefix.benchmarks.sweeps.seeds import parse_seeds
from edgeprefix.cli import COMMANDS, build_parser, main
from edgeprefix.placement.errors import MixError, plain
from edgeprefix.placement.model.instance import default_instance


def _subparsers() -> dict:
    parser = build_parser()
    return next(a for a in parser._actions if a.dest == "command").choices


JSON_BY_NATURE = {"instance schema"}  # prints a JSON Schema (a JSON object) already


def _leaves(name: str, parser) -> list[tuple[str, object]]:
    """(command words, parser) of every runnable (sub-)command under ``parser``."""
    nested = [a for a in parser._actions if isinstance(a, type(parser._subparsers._group_actions[0]))] if parser._subparsers else []
    if not nested:
        return [(name, parser)]
    return [leaf for action in nested for word, sub in action.choices.items() for leaf in _leaves(f"{name} {word}", sub)]


def test_every_command_takes_json():
    subparsers = _subparsers()
    assert set(subparsers) == set(COMMANDS)
    for name, sub in subparsers.items():
        for words, leaf in _leaves(name, sub):
            assert "--json" in leaf._option_string_actions or words in JSON_BY_NATURE, f"{words} lacks --json"


def test_seeds_mean_seed_values_in_every_help_text():
    for name, sub in _subparsers().items():
        action = sub._option_string_actions.get("--seeds")
        if action is not None:
            assert "seed values" in action.help and "0-9" in action.help, name


def test_parse_seeds_lists_ranges_and_errors():
    assert parse_seeds("0-3") == (0, 1, 2, 3)
    assert parse_seeds("5") == (5,)
    assert parse_seeds("0,1") == (0, 1)  # the sweep's old form keeps working
    assert parse_seeds("0-1, 7") == (0, 1, 7)
    for bad, words in (("3-1", "0 <= A <= B"), ("a", "integers >= 0"), ("1,1", "given twice"), (",", "no seed")):
        with pytest.raises(ValueError, match="--seeds") as exc:
            parse_seeds(bad)
        assert words in str(exc.value) and "\n" not in str(exc.value)


def test_sweep_seeds_list_and_json(capsys, tmp_path):
    out = tmp_path / "sweep.csv"
    args = [
        "sweep",
        "--loads",
        "2",
        "--densities",
        "1",
        "--seeds",
        "0-1",
        "--method",
        "random",
        "--budget",
        "4",
        "--serial",
        "--json",
        "--out",
        str(out),
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["sweep"]["seeds"] == [0, 1] and [r["seed"] for r in payload["rows"]] == [0, 1]
    row = payload["rows"][0]
    assert isinstance(row["coverage"], float) and isinstance(row["mix"], dict) and abs(sum(row["mix"].values()) - 1) < 1e-9
    assert out.read_text().count("\n") == 3  # header + 2 cells
    assert f"wrote {out}" in captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate"],
        ["solve", "--method", "random", "--budget", "5"],
        ["plan-density", "--reliability", "0.6", "--mix", "none=0.3,shallow=0.5,deep=0.2"],
        [
            "validate",
            "--samples",
            "2000",
            "--customers",
            "500",
            "--intensities",
            "1",
            "--nodes",
            "40",
            "--horizon",
            "4",
            "--warmup",
            "2",
            "--replications",
            "1",
        ],
    ],
    ids=lambda argv: argv[0],
)
def test_overrides_are_named_in_the_header(argv, capsys):
    plans_density = argv[0] == "plan-density"  # λ_b is plan-density's answer: --density is refused there
    assert main([*argv, "--intensity", "2.5", *([] if plans_density else ["--density", "1.5"])]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "Λ = 2.5 (--intensity)" in head and (plans_density or "λ_b = 1.5 (--density)" in head)
    assert main(argv) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "Λ = 3" in head and "(--intensity)" not in head and "(--density)" not in head


def test_solve_out_prints_a_wrote_line_per_file(capsys, tmp_path):
    assert main(["solve", "--method", "random", "--budget", "5", "--out", str(tmp_path), "--json"]) == 0
    err = capsys.readouterr().err
    for name in ("result.json", "history.csv", "best_so_far.png"):
        assert f"wrote {tmp_path / name}" in err and (tmp_path / name).is_file()


def test_text_tables_use_words_not_equation_labels(capsys):
    assert main(["evaluate"]) == 0
    text = capsys.readouterr().out
    for label in ("P^W", "A_{s,q}", "P_cov", "eq. (", "Theorem"):
        assert label not in text
    assert "wait prob." in text and "share of each request type served by each profile" in text


def test_messages_show_numpy_values_as_plain_numbers():
    assert plain(np.float64(1.1)) == "1.1"
    assert plain([np.int64(3), (np.float32(0.5),)]) == "[3, (0.5,)]"
    assert plain(np.array([1.0, 2.0])) == "[1.0, 2.0]"
    assert plain("deep") == "'deep'"
    inst = default_instance()
    with pytest.raises(MixError) as exc:
        inst.mix_vector(np.array([0.5, 0.4, 0.2]))
    assert "np." not in str(exc.value) and "1.1" in str(exc.value)
    with pytest.raises(ValueError) as exc:
        inst.with_network(request_intensity=np.float64(-1.0))
    assert "np." not in str(exc.value) and "-1.0" in str(exc.value)
