"""Calibration: NNLS prefill fits, Splitwise CSV, piecewise table, κ from config.json, concurrency."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.benchmarks.datasets import SPLITWISE_TIMINGS as SPLITWISE
from edgeprefix.placement.model.profiles import concurrency
from edgeprefix.placement.pipeline.calibration import (
    DEFAULT_CALIBRATION,
    DEFAULT_DECODE_PER_TOKEN,
    DEFAULT_PREFILL,
    LLAMA2_70B,
    CalibrationError,
    Deployment,
    ModelSpec,
    concurrency_from_memory,
    fit_prefill,
    fit_table,
    kv_bytes,
    kv_bytes_per_token,
    model_spec_from_config,
    piecewise_prefill,
    read_measurements,
    splitwise_groups,
)

SIZES = np.array([128, 256, 512, 1024, 2048, 4096, 8192], dtype=float)


@pytest.mark.parametrize("weighting", ["relative", "absolute"])
def test_exact_quadratic_is_recovered(weighting: str) -> None:
    seconds = 3e-4 * SIZES + 4e-9 * SIZES**2
    fit = fit_prefill(SIZES, seconds, weighting=weighting)
    assert fit.model.linear == pytest.approx(3e-4, rel=1e-8) and fit.model.quadratic == pytest.approx(4e-9, rel=1e-6)
    assert fit.rms_relative < 1e-8 and fit.points == 7
    with_g0 = fit_prefill(SIZES, seconds + 0.025, intercept=True, weighting=weighting)
    assert with_g0.model.intercept == pytest.approx(0.025, rel=1e-6) and with_g0.rms_relative < 1e-8
    assert float(with_g0.model(0.0)) == 0.0  # g(0) = 0 despite g_0


def test_fit_is_nonnegative_and_errors_are_reported() -> None:
    seconds = 0.05 + 1e-4 * SIZES  # concave-looking data would want a negative b without NNLS
    fit = fit_prefill(SIZES, np.sqrt(seconds))
    assert fit.model.linear >= 0 and fit.model.quadratic >= 0 and fit.rms_relative > 0.05
    with pytest.raises(CalibrationError, match="> 0"):
        fit_prefill([1, 2], [0.1, -0.2])
    with pytest.raises(CalibrationError, match="weighting"):
        fit_prefill(SIZES, seconds, weighting="log")


def test_plain_csv_and_piecewise_table(tmp_path: Path) -> None:
    path = tmp_path / "timings.csv"
    rows = ["tokens,seconds,decode_per_token"] + [f"{n:.0f},{0.02 + 2e-4 * n},0.03" for n in SIZES for _ in range(2)]
    path.write_text("\n".join(rows) + "\n")
    m = read_measurements(path)
    assert m.tokens.size == 14 and m.decode_per_token == pytest.approx(0.03)
    table = piecewise_prefill(m.tokens, m.seconds)
    np.testing.assert_allclose(table(SIZES), 0.02 + 2e-4 * SIZES)
    assert float(table(0)) == 0.0 and np.all(np.diff(table(np.linspace(1, 9000, 50))) >= 0)
    (tmp_path / "bad.csv").write_text("tokens,seconds\n128,abc\n")
    with pytest.raises(CalibrationError, match="row 2, column 'seconds'"):
        read_measurements(tmp_path / "bad.csv")
    (tmp_path / "cols.csv").write_text("n,t\n1,2\n")
    with pytest.raises(CalibrationError, match="tokens"):
        read_measurements(tmp_path / "cols.csv")


def test_splitwise_groups_fit_and_default_constants() -> None:
    groups = splitwise_groups(SPLITWISE)
    assert ("llama2-70b", "a100-80gb", 2) in groups and len(groups) == 12
    with pytest.raises(CalibrationError, match="several model"):
        read_measurements(SPLITWISE)
    with pytest.raises(CalibrationError, match="unknown hardware"):
        read_measurements(SPLITWISE, model="llama2-70b", hardware="tpu", tensor_parallel=2)
    m = read_measurements(SPLITWISE, model="llama2-70b", hardware="a100-80gb", tensor_parallel=2)
    assert m.tokens.size == 75 and set(m.tokens.tolist()) == set(SIZES.tolist()) and m.seconds.min() > 0.05  # ms → s
    table = fit_table(SPLITWISE)
    for row in table.values():  # the intercept always helps (docs/model.md §3)
        assert row["rms_relative_intercept"] < row["rms_relative"] < 0.35
    ols = fit_table(SPLITWISE, weighting="absolute")[("llama2-70b", "a100-80gb", 2)]
    assert ols["intercept"] == pytest.approx(0.025, abs=0.003) and ols["linear"] == pytest.approx(3.4e-4, rel=0.05)
    model, hardware, tp = DEFAULT_CALIBRATION
    d = read_measurements(SPLITWISE, model=model, hardware=hardware, tensor_parallel=tp)
    fit = fit_prefill(d.tokens, d.seconds, intercept=True)
    assert fit.model.linear == pytest.approx(DEFAULT_PREFILL.linear, rel=1e-6)
    assert fit.model.quadratic == pytest.approx(DEFAULT_PREFILL.quadratic, rel=1e-6)
    assert fit.model.intercept == pytest.approx(DEFAULT_PREFILL.intercept, rel=1e-6)
    assert d.decode_per_token == pytest.approx(DEFAULT_DECODE_PER_TOKEN, rel=1e-9)


def test_kv_bytes_from_a_config_file(tmp_path: Path) -> None:
    config = {"num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 8192, "torch_dtype": "float16"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    spec = model_spec_from_config(path)
    assert spec.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == LLAMA2_70B.kv_bytes_per_token == 327_680
    del config["num_key_value_heads"]
    config.update(head_dim=96, torch_dtype="float32")
    path.write_text(json.dumps(config))
    spec = model_spec_from_config(path)
    assert (spec.kv_heads, spec.head_dim, spec.dtype_bytes) == (64, 96, 4)
    assert model_spec_from_config(path, dtype_bytes=1).kv_bytes_per_token == 2 * 80 * 64 * 96
    path.write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 3, "hidden_size": 8}))
    with pytest.raises(CalibrationError, match="head_dim"):
        model_spec_from_config(path)
    path.write_text(json.dumps({"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 8, "torch_dtype": "int3"}))
    with pytest.raises(CalibrationError, match="torch_dtype"):
        model_spec_from_config(path)
    with pytest.raises(CalibrationError, match="does not exist"):
        model_spec_from_config(tmp_path / "missing.json")


def test_block_overhead_and_concurrency() -> None:
    spec = ModelSpec(layers=2, kv_heads=2, head_dim=4, dtype_bytes=2)
    assert spec.kv_bytes_per_token == 2 * 2 * 2 * 4 * 2 == 64
    assert kv_bytes_per_token(spec, block_size=16, block_overhead_bytes=64) == 68.0
    assert kv_bytes([1, 16, 17], 32.0, block_size=16).tolist() == [512.0, 512.0, 1024.0]
    assert concurrency_from_memory(100.0, 20.0, 8.0) == 10
    assert concurrency_from_memory(100.0, 20.0, 8.0, persistent_bytes=1.0) == 9
    assert concurrency_from_memory(10.0, 20.0, 8.0) == 0
    dep = Deployment()
    norm = dep.normalised()
    # the normalised instance gives the same concurrency as the byte-level formula
    cached_tokens = 20_000
    bytes_level = concurrency_from_memory(dep.gpu_bytes, dep.weight_bytes, dep.sequence_bytes, dep.kappa_bytes * cached_tokens)
    units = concurrency(np.array([norm["kv_per_token"] * cached_tokens]), norm["memory"], norm["runtime_per_sequence"])
    assert int(units[0]) == bytes_level
    with pytest.raises(CalibrationError, match="do not fit"):
        Deployment(gpu_bytes=100e9)
