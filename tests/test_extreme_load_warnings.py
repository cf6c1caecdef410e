"""At an extreme load the cell model's unstable tiers give an infinite mean TTFT, one stderr line and no NaN warning."""

from __future__ import annotations

import json

import pytest

from edgeprefix.cli import main


def test_unreached_pairs_of_unstable_tiers_raise_no_invalid_value(capsys: pytest.CaptureFixture[str]) -> None:
    # Λ / λ_b = 10⁴: every tier overloaded (infinite waits), some (tier, type) pairs never associated (A = 0)
    args = ["evaluate", "paper_baseline", "--intensity", "1e7", "--density", "1000", "--queue-model", "cell", "--json"]
    assert main(args) == 3  # the fixed point does not converge: said so, exit 3 (pytest turns a RuntimeWarning into an error)
    out, err = capsys.readouterr()
    payload = json.loads(out)
    assert payload["stable"] is False and payload["coverage"] == 0.0 and payload["mean_ttft"] is None  # ∞ in JSON
    assert len(err.strip().splitlines()) == 1 and "did not converge" in err
