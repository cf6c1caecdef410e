"""``edgeprefix reproduce``: JSON contract, files written, bad input, and the calibrated instance."""

from __future__ import annotations

import json

import pytest

from edgeprefix.cli import main
from edgeprefix.placement.model.instance import EMBEDDED, load_instance


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_contract_and_files(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "reproduce", "--figure", "3", "--quick", "--json", "--out", str(tmp_path))
    assert code == 0
    payload = json.loads(out)
    assert payload["figure"] == 3
    assert payload["points"] and all(set(p) >= {"series", "x", "ours", "paper"} for p in payload["points"])
    assert (tmp_path / "fig3.csv").read_text().startswith("series,x,ours,paper")
    assert (tmp_path / "fig3.png").stat().st_size > 1000


def test_table_output_names_the_figure(capsys):
    code, out, _ = run_cli(capsys, "reproduce", "--figure", "5", "--quick")
    assert code == 0
    assert out.startswith("Fig. 5:")


def test_other_instance_by_name(capsys):
    code, out, _ = run_cli(capsys, "reproduce", "--figure", "3", "--quick", "--json", "--instance", "paper_baseline")
    assert code == 0
    assert json.loads(out)["instance"] == "paper_baseline"


@pytest.mark.parametrize("argv", [("--figure", "2"), ("--figure", "13")])
def test_unknown_figure_exits_2(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(["reproduce", *argv])
    assert exc.value.code == 2


def test_unknown_instance_exits_2(capsys):
    code, _, err = run_cli(capsys, "reproduce", "--figure", "3", "--quick", "--instance", "no_such_instance")
    assert code == 2
    assert "no_such_instance" in err


def test_calibrated_instance_is_embedded_with_several_slot_deep_cache():
    assert "paper_calibrated" in EMBEDDED
    inst = load_instance("paper_calibrated")
    assert inst.profile_ids == ("none", "shallow", "deep")
    assert inst.lengths.tolist() == [1024.0, 4096.0]
    assert inst.concurrency.tolist() == [12, 11, 9]  # deep caching costs three slots (M/M/9 tier)


def test_instance_from_a_file(capsys, tmp_path):
    from edgeprefix.placement.model.instance import write_instance

    path = tmp_path / "calibrated_copy.toml"
    write_instance(load_instance("paper_calibrated"), path)
    code, out, _ = run_cli(capsys, "reproduce", "--figure", "4", "--quick", "--json", "--instance", str(path))
    assert code == 0
    assert json.loads(out)["max_abs_error"] < 1e-3
