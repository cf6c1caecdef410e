"""The router stated once (docs/model.md §14): ``network.router`` in the instance or ``--router`` on
any command chooses the prediction; every output names it; a note when the other router's
prediction differs by more than 0.05."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from edgeprefix.cli import main
from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, write_instance
from edgeprefix.placement.model.router import DISAGREEMENT, PREDICTION_ROUTERS, QUEUE_MODEL_OF_ROUTER

MIX = "none=0.18,shallow=0.54,deep=0.28"
EPOCHS = Path(__file__).resolve().parents[1] / "examples" / "epochs.toml"


def _json(capsys, argv: list[str]) -> tuple[dict, str]:
    assert main(argv) == 0, argv
    out, err = capsys.readouterr()
    return json.loads(out), err


@pytest.fixture()
def tier_instance(tmp_path, baseline_mapping) -> Path:
    baseline_mapping["network"]["router"] = "tier"
    path = tmp_path / "tier.toml"
    write_instance(instance_from_mapping(baseline_mapping), path)
    return path


def test_the_names_are_defined_once():
    from edgeprefix.commands import replay as replay_command
    from edgeprefix.commands import validate as validate_command
    from edgeprefix.commands._common import ROUTER_OF_QUEUE_MODEL as cli_map
    from edgeprefix.placement.model import cell
    from edgeprefix.placement.simulation import replay

    assert PREDICTION_ROUTERS == ("tier", "online")
    from edgeprefix.placement.simulation.engine.names import PRODUCTION_ROUTERS

    # the simulating commands add the production routers (engine nodes only) after the two with a prediction
    for routers in (replay.ROUTERS, replay_command.ROUTERS, validate_command.ROUTERS):
        assert routers == (*PREDICTION_ROUTERS, *PRODUCTION_ROUTERS)
    assert cell.ROUTER_OF_QUEUE_MODEL is cli_map and set(cli_map.values()) == set(PREDICTION_ROUTERS)
    schema = json.loads(Path(__file__).resolve().parents[1].joinpath("placement", "model", "instance_schema.json").read_text())
    assert tuple(schema["properties"]["network"]["properties"]["router"]["enum"]) == PREDICTION_ROUTERS


def test_the_instance_field_round_trips_and_is_optional(baseline_mapping):
    assert "router" not in instance_to_mapping(instance_from_mapping(baseline_mapping))["network"]  # absent stays absent
    baseline_mapping["network"]["router"] = "online"
    assert instance_to_mapping(instance_from_mapping(baseline_mapping))["network"]["router"] == "online"
    baseline_mapping["network"]["router"] = "fastest"
    with pytest.raises(InstanceError, match="network.router"):
        instance_from_mapping(baseline_mapping)
    schema = json.loads(Path(__file__).resolve().parents[1].joinpath("placement", "model", "instance_schema.json").read_text())
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(baseline_mapping))


@pytest.mark.parametrize("how", ["instance", "option"])
def test_every_planning_command_predicts_for_the_stated_router(how, tier_instance, capsys):
    source = [str(tier_instance)] if how == "instance" else ["--router", "tier"]
    runs = {
        "evaluate": ["evaluate", *source, "--json"],
        "solve": ["solve", *source, "--method", "grid", "--resolution", "5", "--json"],
        "plan-density": ["plan-density", *source, "--reliability", "0.6", "--mix", MIX, "--json"],
    }
    for name, argv in runs.items():
        payload, _ = _json(capsys, argv)
        assert payload["router"] == "tier" and payload["queue_model"] == "cell", name
    payload, _ = _json(capsys, ["migrate", str(EPOCHS), "--router", "tier", "--json"])
    assert payload["router"] == "tier" and payload["queue_model"] == "cell"


def test_without_a_statement_every_command_keeps_its_old_default(capsys):
    payload, _ = _json(capsys, ["evaluate", "--json"])
    assert payload["router"] == "online" and payload["queue_model"] == "meanfield"


def test_the_option_overrides_the_instance(tier_instance, capsys):
    payload, _ = _json(capsys, ["evaluate", str(tier_instance), "--router", "online", "--json"])
    assert payload["router"] == "online" and payload["queue_model"] == "meanfield"
    payload, _ = _json(capsys, ["evaluate", str(tier_instance), "--queue-model", "meanfield", "--json"])
    assert payload["router"] == "online"


def test_router_and_queue_model_that_disagree_are_refused(capsys):
    assert main(["evaluate", "--router", "tier", "--queue-model", "meanfield"]) == 2
    err = capsys.readouterr().err
    assert "--router tier" in err and "--queue-model" in err and len(err.strip().splitlines()) == 1
    payload, _ = _json(capsys, ["evaluate", "--router", "tier", "--queue-model", "cell", "--json"])
    assert payload["router"] == "tier"


def test_a_note_when_the_other_routers_prediction_differs(capsys, baseline):
    mine = evaluate(baseline, None, "load_aware", queue_model="meanfield").coverage_at_target
    theirs = evaluate(baseline, None, "load_aware", queue_model=QUEUE_MODEL_OF_ROUTER["tier"]).coverage_at_target
    assert abs(mine - theirs) > DISAGREEMENT  # paper_baseline at Λ = 3: the two routers disagree
    payload, err = _json(capsys, ["evaluate", "--json"])
    assert payload["other_router"]["router"] == "tier"
    assert payload["other_router"]["coverage"] == pytest.approx(theirs, rel=1e-12)
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "tier router" in notes[0] and f"{theirs:.4f}" in notes[0]


def test_no_note_when_the_two_routers_agree(capsys, baseline):
    light = baseline.with_network(request_intensity=1.0)
    gap = abs(
        evaluate(light, None, queue_model="meanfield").coverage_at_target - evaluate(light, None, queue_model="cell").coverage_at_target
    )
    assert gap < DISAGREEMENT
    payload, err = _json(capsys, ["evaluate", "--intensity", "1", "--json"])
    assert "note:" not in err and abs(payload["other_router"]["difference"]) == pytest.approx(gap, rel=1e-9)


def test_text_outputs_name_the_router(capsys):
    assert main(["plan-density", "--reliability", "0.6", "--mix", MIX, "--router", "tier"]) == 0
    out = capsys.readouterr().out
    assert "router tier (queue model cell)" in out.splitlines()[0]
    assert main(["evaluate", "--router", "tier"]) == 0
    assert "predicted for router tier" in capsys.readouterr().out
