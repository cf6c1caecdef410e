"""``edgeprefix validate``: JSON report, plots written, bad input exits with 2."""

from __future__ import annotations

import json

import pytest
from validate_fixtures import fast_validate_args

from edgeprefix.cli import main

FAST = fast_validate_args("1")


def test_validate_json_and_plots(tmp_path, capsys):
    out = tmp_path / "plots"
    assert main(["validate", *FAST, "--json", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["association"]) == {"load_aware", "prefix", "nearest"}
    for d in report["association"].values():
        assert d["max_abs_error"] < 5e-3
    assert report["queues"] and all(0 <= q["kolmogorov"] <= 1 for q in report["queues"])
    assert {row["policy"] for row in report["coverage"]} == {"load_aware", "prefix", "nearest"}
    for name in ("association.png", "queues.png", "coverage.png"):
        assert (out / name).stat().st_size > 1000
    assert not list(out.glob(".*.tmp"))  # atomic writes leave no temporaries


def test_validate_table_output(capsys):
    assert main(["validate", *FAST, "--mix", "none=0.2,shallow=0.5,deep=0.3", "--baselines"]) == 0
    text = capsys.readouterr().out
    assert "Monte Carlo vs analysis" in text and "Erlang C" in text and "closest" in text
    assert "edge effect of the torus" in text and "telemetry period sweep" in text and "mooncake" in text


def test_validate_baselines_table(capsys):
    assert main(["validate", *FAST, "--baselines", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    routers = {row["router"] for row in report["policies"]}
    assert {"sglang", "power_of_two", "dynamo", "llm-d", "preble", "mooncake", "load_aware_online"} <= routers
    assert sorted({row["refresh_period"] for row in report["staleness"]}) == [0.0, 0.5, 2.0, 8.0]
    assert {row["local_accounting"] for row in report["staleness"]} == {False, True}


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "--intensities", "abc"],
        ["validate", "--mix", "none=2"],
        ["validate", "--samples", "0"],
    ],
)
def test_validate_bad_input_exits_2(argv, capsys):
    assert main(argv) == 2
    assert "edgeprefix validate: error:" in capsys.readouterr().err
