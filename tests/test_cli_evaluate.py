"""``edgeprefix evaluate``: table, JSON contract, exit codes."""

from __future__ import annotations

import json

import pytest

from edgeprefix.cli import main

REQUIRED = {
    "coverage",
    "coverage_queue_free",
    "mean_ttft",
    "offload_ratio",
    "mean_prefix_depth",
    "mean_distance",
    "stable",
    "fixed_point",
    "tiers",
    "association",
}
TIER_KEYS = {"profile", "share", "concurrency", "memory", "arrival_rate", "utilization", "wait_probability", "mean_wait"}


def test_json_contract(capsys):
    assert main(["evaluate", "--mix", "none=0.3,shallow=0.5,deep=0.2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert REQUIRED <= set(out)
    assert set(out["fixed_point"]) >= {"converged", "iterations", "residual", "method"}
    assert [t["profile"] for t in out["tiers"]] == ["none", "shallow", "deep"]
    assert all(TIER_KEYS <= set(t) for t in out["tiers"])
    assert set(out["association"]) == {"short", "long"}
    assert sum(out["association"]["long"].values()) == pytest.approx(1.0, abs=1e-9)
    assert out["mix"] == {"none": 0.3, "shallow": 0.5, "deep": 0.2}


def test_default_instance_and_mix_and_target(capsys):
    assert main(["evaluate", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["target"] == 0.8 and default["mix"]["deep"] == 0.28
    assert main(["evaluate", "--json", "--target", "1.5"]) == 0
    later = json.loads(capsys.readouterr().out)
    assert later["target"] == 1.5 and later["coverage"] > default["coverage"]


def test_unstable_mean_wait_is_null(capsys):
    assert main(["evaluate", "--policy", "prefix", "--intensity", "4", "--json"]) == 1  # overloaded: exit 1, the JSON still printed
    out = json.loads(capsys.readouterr().out)
    assert out["stable"] is False
    unstable = [t for t in out["tiers"] if t["utilization"] >= 1]
    assert unstable and all(t["mean_wait"] is None for t in unstable)


def test_table_output(capsys):
    assert main(["evaluate"]) == 0
    text = capsys.readouterr().out
    assert "TTFT coverage" in text and "association" in text and "deep" in text


@pytest.mark.parametrize(
    "argv,words",
    [
        (["evaluate", "--mix", "none=0.3,foo=0.7"], ["unknown profile 'foo'"]),
        (["evaluate", "--mix", "none=0.3,shallow=0.3"], ["sum to 1"]),
        (["evaluate", "--mix", "none:1"], ["--mix", "PROFILE=SHARE"]),
        (["evaluate", "missing.toml"], ["no such file"]),
        (["evaluate", "--target", "-2"], ["target"]),
        (["evaluate", "--density", "-1"], ["network.edge_density"]),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    for word in words:
        assert word in err


def test_non_convergence_exits_3(capsys):
    code = main(["evaluate", "--method", "damped", "--intensity", "4", "--json"])
    captured = capsys.readouterr()
    if json.loads(captured.out)["fixed_point"]["converged"]:
        pytest.fail("the paper's damped iteration was expected not to converge at Λ = 4 (docs/model.md §7)")
    assert code == 3 and "did not converge" in captured.err


def test_closed_pipe_ends_quietly(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run(
        f"{sys.executable} -m edgeprefix.cli evaluate --json | head -c 10",
        cwd=tmp_path,
        shell=True,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.stdout.startswith("{")
    assert "Traceback" not in proc.stderr
