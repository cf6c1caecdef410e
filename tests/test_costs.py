"""Prefill laws g(n) and the radio cost; g is pluggable into an instance."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.costs import (
    PiecewiseLinearPrefill,
    QuadraticPrefill,
    RadioCost,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance, write_instance


def test_quadratic_with_intercept_is_zero_at_zero():
    g = QuadraticPrefill(linear=3.4e-4, quadratic=3e-9, intercept=0.025)
    np.testing.assert_allclose(g([0, 1000]), [0.0, 0.025 + 0.34 + 0.003])


def test_piecewise_table_interpolates_and_extends():
    g = PiecewiseLinearPrefill((512, 1024, 2048), (0.1, 0.2, 0.5))
    np.testing.assert_allclose(g([0, 256, 768, 2048, 3072]), [0.0, 0.05, 0.15, 0.5, 0.8])


def test_bad_tables_are_rejected():
    with pytest.raises(InstanceError, match="nondecreasing"):
        PiecewiseLinearPrefill((1, 2), (0.2, 0.1))
    with pytest.raises(InstanceError, match="strictly increasing"):
        PiecewiseLinearPrefill((2, 1), (0.1, 0.2))
    with pytest.raises(InstanceError, match="prefill.linear"):
        QuadraticPrefill(linear=-1.0)


def test_radio_cost():
    assert RadioCost(0.375, 2.0)(2.0) == pytest.approx(1.5)


def test_any_vectorised_g_plugs_into_an_instance(baseline, tmp_path):
    table = PiecewiseLinearPrefill((1024, 4096), tuple(float(x) for x in baseline.prefill(np.array([1024, 4096]))))
    inst = baseline.replace(prefill=table)
    ev = evaluate(inst)
    assert ev.fixed_point.converged and 0 < ev.coverage(0.8) < 1
    # the table round-trips through the instance file
    write_instance(inst, tmp_path / "table.toml")
    again = load_instance(tmp_path / "table.toml")
    np.testing.assert_allclose(again.residual_prefill, inst.residual_prefill)
    # a custom callable works too (it just cannot be written to a file)
    custom = baseline.replace(prefill=lambda n: 2e-4 * np.asarray(n, dtype=float))
    np.testing.assert_allclose(custom.full_prefill, 2e-4 * custom.lengths)
    with pytest.raises(InstanceError, match="custom prefill"):
        write_instance(custom, tmp_path / "custom.toml")


def test_negative_or_decreasing_g_is_rejected(baseline):
    with pytest.raises(InstanceError, match="finite nonnegative"):
        baseline.replace(prefill=lambda n: -np.asarray(n, dtype=float))
    with pytest.raises(InstanceError, match="nondecreasing"):
        baseline.replace(prefill=lambda n: 1.0 + np.cos(np.asarray(n, dtype=float) / 500.0))
