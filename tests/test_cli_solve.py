"""The solve, plan-density and migrate commands (their JSON keys are a public contract)."""

from __future__ import annotations

import csv
import json

import pytest

from edgeprefix.cli import main


def run_json(capsys, argv):
    code = main(argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_solve_paper_baseline_json_keys(capsys):
    code, data = run_json(capsys, ["solve", "--method", "spsa", "--budget", "40", "--seed", "3", "--json"])
    assert code == 0
    assert {"method", "mix", "coverage", "evaluations", "seconds", "history"} <= set(data)
    assert data["method"] == "spsa" and data["evaluations"] == 40 and len(data["history"]) == 40
    assert set(data["mix"]) == {"none", "shallow", "deep"}
    assert sum(data["mix"].values()) == pytest.approx(1.0)
    assert data["coverage"] == pytest.approx(max(data["history"]))


def test_solve_grid_table_output(capsys):
    assert main(["solve", "--method", "grid", "--resolution", "10"]) == 0
    out = capsys.readouterr().out
    assert "method grid" in out and "TTFT coverage" in out and "best mix" in out


def test_solve_out_dir_writes_result_history_and_plot_and_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["solve", "--method", "tpe", "--budget", "12", "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    result = json.loads((out / "result.json").read_text())
    assert result["evaluations"] == 12
    rows = list(csv.DictReader((out / "history.csv").read_text().splitlines()))
    assert len(rows) == 12 and {"best_coverage", "none", "shallow", "deep"} <= set(rows[0])
    assert (out / "best_so_far.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, data = run_json(capsys, ["solve", "--method", "tpe", "--budget", "15", "--out", str(out), "--json"])
    assert code == 0 and data["evaluations"] == 15 and data["extras"]["resumed_trials"] == 12


def test_solve_bad_input_exits_2_with_one_line(tmp_path, capsys):
    instance = tmp_path / "bad.toml"
    from edgeprefix.placement.model.instance import (
        instance_from_mapping,
        instance_to_mapping,
        load_instance,
        write_instance,
    )

    data = instance_to_mapping(load_instance())
    data["placement"]["max_share"] = {"none": 0.2, "shallow": 0.2, "deep": 0.2}
    write_instance(instance_from_mapping(data), instance)
    assert main(["solve", str(instance)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "placement.max_share" in err[0]
    assert main(["solve", "--method", "spsa", "--resolution", "4"]) == 2
    assert "--resolution applies to --method grid only" in capsys.readouterr().err


def test_plan_density_fixed_mix_json(capsys):
    code, data = run_json(capsys, ["plan-density", "--reliability", "0.8", "--mix", "none=0.18,shallow=0.54,deep=0.28", "--json"])
    assert code == 0 and {"edge_density", "coverage", "mix"} <= set(data)
    assert data["coverage"] >= 0.8 and data["edge_density"] == pytest.approx(1.478, rel=0.01)
    assert data["mix"] == {"none": 0.18, "shallow": 0.54, "deep": 0.28}


def test_plan_density_joint_table(capsys):
    assert main(["plan-density", "--reliability", "0.7", "--resolution", "5"]) == 0
    out = capsys.readouterr().out
    assert "edge density λ_b" in out and "joint with the mix" in out


def test_plan_density_bad_reliability(capsys):
    assert main(["plan-density", "--reliability", "1.2"]) == 2
    assert "reliability ζ must lie in (0, 1)" in capsys.readouterr().err


def test_migrate_json_and_table(tmp_path, capsys):
    epochs = tmp_path / "epochs.toml"
    epochs.write_text(
        "current_mix = { none = 0.18, shallow = 0.54, deep = 0.28 }\nchange_budget = 0.15\n"
        '[[epochs]]\nname = "night"\nrequest_intensity = 2.0\n'
        '[[epochs]]\nname = "peak"\nrequest_intensity = 3.5\nprobabilities = { short = 0.6, long = 0.4 }\n'
    )
    code, data = run_json(capsys, ["migrate", str(epochs), "--resolution", "10", "--json"])
    assert code == 0 and len(data["epochs"]) == 2
    for epoch in data["epochs"]:
        assert {"mix", "coverage", "moved_share", "moved_bytes", "plan"} <= set(epoch)
        assert epoch["moved_share"] <= 0.15 + 1e-9
    assert main(["migrate", str(epochs), "--resolution", "10"]) == 0
    out = capsys.readouterr().out
    assert "epoch night" in out and "epoch peak" in out and "plan" in out


def test_migrate_missing_file(capsys, tmp_path):
    assert main(["migrate", str(tmp_path / "nope.toml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_migrate_joint_json(tmp_path, capsys):
    epochs = tmp_path / "epochs.json"
    epochs.write_text(json.dumps({"change_budget": 0.1, "epochs": [{"request_intensity": 2.5}, {"request_intensity": 3.5}]}))
    code, data = run_json(capsys, ["migrate", str(epochs), "--joint", "--budget", "40", "--json"])
    assert code == 0 and data["evaluations"] == 40 and len(data["epochs"]) == 2
    assert all(e["moved_share"] <= 0.1 + 1e-6 for e in data["epochs"])
