"""Smoke runs of the speed and timing benchmarks (the numbers themselves live in benchmarks/README.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from edgeprefix.benchmarks.speed import speed


def test_speed_smoke_fits_an_exponent_per_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert speed.main(["--smoke", "--no-grid", "--out", str(tmp_path)]) == 0
    payload = json.loads((tmp_path / "speed.json").read_text())
    fits = {f["sweep"]: f for f in payload["fits"]}
    assert set(fits) == {"types", "profiles", "nodes"}
    assert all(math.isfinite(f["exponent"]) and f["points"] == 2 for f in fits.values())
    assert fits["profiles"]["bound"] == 2.0
    rows = payload["rows"]
    assert len(rows) == len(speed.sweep_plan("smoke")) and all(r["ms"] > 0 and r["map_evaluations"] >= 1 for r in rows)
    with_reference = [r for r in rows if r["reference_ms"] is not None]
    assert with_reference  # the smallest sizes run the scipy.quad reference beside the fast kernel
    assert all(r["coverage_diff"] < 1e-6 for r in with_reference)
    assert (tmp_path / "speed.csv").read_text().startswith("sweep,")
    assert "growth of ms/map" in capsys.readouterr().out


def test_growth_fit_recovers_a_known_slope():
    rows = [speed.SpeedRow("profiles", 16, s, 20, 1.0, 1, 0.5 * s**2, math.nan, math.nan, math.nan) for s in (2, 4, 8)]
    (fit,) = speed.fit_growth(rows)
    assert fit.exponent == pytest.approx(2.0) and fit.sweep == "profiles"


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="mode must be one of"):
        speed.sweep_plan("huge")
