"""The calibration script: the shipped parameters reproduce the TOML and hit every target."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.benchmarks.paper.calibration.__main__ import SHIPPED, main
from edgeprefix.benchmarks.paper.calibration.loss import measure
from edgeprefix.benchmarks.paper.calibration.model import build_instance
from edgeprefix.benchmarks.paper.calibration.targets import TOLERANCE
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance


def test_embedded_toml_is_the_shipped_parameter_vector():
    shipped, built = load_instance("paper_calibrated"), build_instance(SHIPPED)
    assert shipped.concurrency.tolist() == built.concurrency.tolist() == [12, 11, 9]
    np.testing.assert_allclose(shipped.service_time, built.service_time, rtol=1e-5)
    for policy in ("load_aware", "prefix", "nearest"):
        assert evaluate(shipped, None, policy).coverage(0.8) == pytest.approx(evaluate(built, None, policy).coverage(0.8), abs=1e-4)


def test_every_calibrated_point_within_tolerance():
    m = measure(SHIPPED)
    assert len(m.points) == 11
    assert np.all(np.abs(m.misses()) <= TOLERANCE)
    fitted = [c for c in m.comparisons if not c[0].startswith("high")]
    assert fitted and all(win > rival for _, _, win, rival in fitted)


def test_check_command_reports_success(capsys):
    assert main(["--legacy", "--check"]) == 0
    assert "every fitted comparison holds: True" in capsys.readouterr().out


def test_paper_baseline_untouched():
    base = load_instance("paper_baseline")
    assert base.concurrency.tolist() == [12, 12, 11]
    assert evaluate(base.with_network(request_intensity=3.0), None, "prefix").coverage(0.8) == pytest.approx(0.544, abs=1e-3)
