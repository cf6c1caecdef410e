"""``edgeprefix profiles``: the target from ``--target`` (seconds or a percentile of the no-cache
prefill), and the intensity's derivation, printed and recorded in the instance's metadata."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

from edgeprefix.cli import main
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.pipeline.calibration import DEFAULT_PREFILL
from edgeprefix.placement.pipeline.traces import read_trace

SAMPLE = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")


def prefill_times(split: float = 1.0) -> np.ndarray:
    records = list(read_trace(SAMPLE))
    records = records[: int(np.floor(split * len(records)))] if split < 1 else records
    return np.asarray(DEFAULT_PREFILL(np.array([r.input_length for r in records], dtype=float)))


@pytest.mark.parametrize("split", [1.0, 0.5])
def test_a_percentile_target_is_that_quantile_of_the_no_cache_prefill(tmp_path, capsys, split):
    out = tmp_path / "p60.toml"
    assert main(["profiles", "--target", "p60", "--split", str(split), "--length-bins", "1", "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    prefill = prefill_times(split)
    inst = load_instance(out)
    assert inst.placement.target == pytest.approx(float(np.percentile(prefill, 60)), rel=1e-12)
    meta = inst.metadata
    assert meta["target"]["percentile"] == 60 and meta["target"] == report["target"]
    assert meta["target"]["share_prefill_within_target"] == pytest.approx(float(np.mean(prefill <= inst.placement.target)))
    assert meta["target"]["prefill_quantiles"]["p90"] == pytest.approx(float(np.percentile(prefill, 90)))
    lam = meta["intensity"]
    assert lam["trace_requests"] == prefill.size and lam["request_intensity"] == inst.network.request_intensity
    assert lam["utilisation"] == 0.6
    assert lam["request_intensity"] == pytest.approx(
        lam["utilisation"] * lam["edge_density"] * lam["fallback_concurrency"] / lam["mean_occupancy_s"], rel=1e-12
    )
    assert lam["trace_rate_per_s"] == pytest.approx((prefill.size - 1) / lam["trace_span_s"])


def test_seconds_and_the_default_say_how_the_target_was_chosen(capsys):
    assert main(["profiles", "--target", "2.5"]) == 0
    text = capsys.readouterr().out
    assert "target τ_0 = 2.500 s: given in seconds" in text and "no-cache prefill g(L_i)" in text
    assert "intensity Λ = " in text and "200 requests over" in text
    assert main(["profiles", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["target"]["rule"].startswith("g(mean input length)")
    assert report["target"]["seconds"] == report["network"]["target"]


@pytest.mark.parametrize("value", ["p0", "p100", "pxx", "fast", "-1", "0"])
def test_a_bad_target_is_one_line_naming_the_option(capsys, value):
    assert main(["profiles", f"--target={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--target" in err[0]
