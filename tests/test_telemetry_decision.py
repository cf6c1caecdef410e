"""The telemetry as a decision (docs/model.md (11.18)): the mix for the telemetry age and how fresh it must be."""

from __future__ import annotations

import json

import pytest

from edgeprefix.cli import main
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.solvers.telemetry_mix import freshness_for, mix_for_telemetry


@pytest.fixture(scope="module")
def calibrated():
    return load_instance("paper_calibrated")


def test_with_fresh_telemetry_the_mix_for_the_age_is_the_fresh_mix(calibrated):
    chosen = mix_for_telemetry(calibrated.with_network(request_intensity=3.0), Telemetry(), resolution=2)
    assert chosen.mix == chosen.fresh_mix
    assert chosen.coverage == chosen.fresh_mix_coverage == chosen.fresh_mix_fresh_coverage
    with pytest.raises(ValueError, match="resolution"):
        mix_for_telemetry(calibrated, Telemetry(), resolution=0)


def test_freshness_out_of_reach_and_at_light_load(calibrated):
    light = calibrated.with_network(request_intensity=0.5)
    fresh = float(evaluate(light, None, "load_aware").coverage())
    unreachable = freshness_for(light, None, min(fresh + 0.05, 0.99))
    assert unreachable["max_age"] is None and unreachable["fresh_coverage"] == pytest.approx(fresh)
    easy = freshness_for(light, None, fresh - 0.05)  # light load: the delay changes (almost) nothing
    assert easy["max_age"] == easy["upper"] == 4.0
    with pytest.raises(ValueError, match="coverage"):
        freshness_for(light, None, 1.5)


def test_cli_freshness_and_telemetry_mix(capsys):
    assert main(["evaluate", "paper_calibrated", "--intensity", "0.5", "--freshness-for", "0.99", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["freshness"]["delay"]["max_age"] is None and out["freshness"]["refresh"]["max_age"] is None
    assert (
        main(["solve", "paper_calibrated", "--intensity", "3", "--method", "grid", "--resolution", "2", "--for-telemetry", "2", "--json"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    block = out["telemetry_mix"]
    assert block["gain"] == 0.0 and block["mix"] == block["fresh_mix"]
    assert main(["evaluate", "paper_calibrated", "--freshness-for", "2"]) == 2
    assert "--freshness-for" in capsys.readouterr().err
