"""Every coverage the CLI prints names the router it predicts for (docs/model.md §14)."""

from __future__ import annotations

import json

import pytest

from edgeprefix.cli import main
from edgeprefix.placement.model.cell import ROUTER_DESCRIPTION, ROUTER_OF_QUEUE_MODEL
from edgeprefix.placement.model.evaluation import evaluate

MIX = "none=0.18,shallow=0.54,deep=0.28"


@pytest.mark.parametrize("queue_model, router", [("meanfield", "online"), ("cell", "tier")])
def test_json_names_the_router(queue_model: str, router: str, capsys, tmp_path) -> None:
    runs = {
        "evaluate": ["evaluate", "--json"],
        "solve": ["solve", "--budget", "10", "--json"],
        "plan-density": ["plan-density", "--reliability", "0.7", "--mix", MIX, "--json"],
        "migrate": [],
    }
    for name, argv in runs.items():
        if name == "migrate":
            from pathlib import Path

            argv = ["migrate", str(Path(__file__).resolve().parents[1] / "examples" / "epochs.toml"), "--json"]
        assert main([*argv, "--queue-model", queue_model]) == 0, name
        payload = json.loads(capsys.readouterr().out)
        assert payload["queue_model"] == queue_model and payload["router"] == router, name


@pytest.mark.parametrize("queue_model", ["meanfield", "cell"])
def test_text_output_names_the_router(queue_model: str, capsys) -> None:
    assert main(["evaluate", "--queue-model", queue_model]) == 0
    out = capsys.readouterr().out
    expected = "each node's own queue" if queue_model == "meanfield" else "tier-level rule"
    assert "predicted for" in out and expected in out


def test_every_queue_model_has_a_router_and_a_description(baseline) -> None:
    for queue_model, router in ROUTER_OF_QUEUE_MODEL.items():
        assert router in ROUTER_DESCRIPTION
        assert evaluate(baseline, queue_model=queue_model).to_dict()["router"] == router
