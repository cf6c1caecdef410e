"""Calibration of the prefill law, KV size and concurrency (docs/model.md §2–3, paper Table IV).

- ``g(n) = a n + b n²`` or ``g_0 + a n + b n²`` by non-negative least squares on *relative*
  residuals (each row divided by its measured time), so the fit minimises the RMS relative
  error it reports; a piecewise-linear table is the non-parametric alternative.
- Measured timings are read from a plain ``tokens,seconds`` CSV or from the Splitwise
  profile (``benchmarks/data/splitwise_perf_model.csv`` in the repository: ``prompt_size`` tokens,
  ``prompt_time`` ms), filtered by model, hardware, tensor-parallel degree and batch size 1.
- ``κ = 2 N_L N_H d_H b_e`` bytes per token from a Hugging Face style ``config.json`` on disk.
- ``c = floor((M − W − B_s) / m_run)`` from GPU memory, weights and the per-sequence budget.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np
import numpy.typing as npt
from scipy.optimize import nnls

from edgeprefix.placement.errors import plain
from edgeprefix.placement.files import parse_document, read_text
from edgeprefix.placement.model.costs import PiecewiseLinearPrefill, QuadraticPrefill

FloatArray = npt.NDArray[np.float64]

SPLITWISE_COLUMNS = ("model", "hardware", "prompt_size", "batch_size", "prompt_time", "token_time", "tensor_parallel")
WEIGHTINGS = ("relative", "absolute")
DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "bfloat16": 2,
    "bf16": 2,
    "float8": 1,
    "fp8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
    "uint8": 1,
}


class CalibrationError(ValueError):
    """Calibration input breaks a rule (names the file/field and the bad value)."""


# ------------------------------------------------------------------------------------------
# Prefill law
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PrefillFit:
    """A fitted prefill law ``g`` and its error on the measurements.

    Attributes
    ----------
    model : the fitted ``g`` (``QuadraticPrefill`` with ``a``, ``b`` and optional ``g_0``).
    rms_relative : ``sqrt(mean(((g(n_i) − t_i) / t_i)²))``.
    max_relative : ``max |g(n_i) − t_i| / t_i``.
    points : number of (tokens, seconds) measurements used.
    """

    model: QuadraticPrefill
    rms_relative: float
    max_relative: float
    points: int


def _relative_errors(model: object, tokens: FloatArray, seconds: FloatArray) -> FloatArray:
    return (np.asarray(model(tokens)) - seconds) / seconds  # type: ignore[operator]


def _check_samples(tokens: npt.ArrayLike, seconds: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    n = np.asarray(tokens, dtype=float)
    t = np.asarray(seconds, dtype=float)
    if n.ndim != 1 or n.shape != t.shape or n.size < 2:
        raise CalibrationError(f"need at least two (tokens, seconds) pairs of equal length, got {n.shape} and {t.shape}")
    if not (np.all(np.isfinite(n)) and np.all(n > 0)):
        raise CalibrationError("tokens must be finite and > 0")
    if not (np.all(np.isfinite(t)) and np.all(t > 0)):
        raise CalibrationError("seconds must be finite and > 0")
    return n, t


def fit_prefill(tokens: npt.ArrayLike, seconds: npt.ArrayLike, *, intercept: bool = False, weighting: str = "relative") -> PrefillFit:
    """NNLS fit of ``g(n) = [g_0] + a n + b n²`` (all coefficients ``>= 0``).

    Parameters
    ----------
    tokens, seconds : measured prefill times (seconds) of ``n`` input tokens.
    intercept : also fit the fixed per-request overhead ``g_0`` (docs/model.md §3).
    weighting : ``"relative"`` minimises the RMS relative error (the reported error);
        ``"absolute"`` is ordinary least squares on seconds.
    """
    n, t = _check_samples(tokens, seconds)
    if weighting not in WEIGHTINGS:
        raise CalibrationError(f"unknown weighting {weighting!r} (valid: {list(WEIGHTINGS)})")
    columns = [n, n * n] + ([np.ones_like(n)] if intercept else [])
    weight = t if weighting == "relative" else np.ones_like(t)
    design = np.column_stack(columns) / weight[:, None]
    scale = np.abs(design).max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(design / scale, t / weight)
    coef = coef / scale
    model = QuadraticPrefill(linear=float(coef[0]), quadratic=float(coef[1]), intercept=float(coef[2]) if intercept else 0.0)
    rel = _relative_errors(model, n, t)
    return PrefillFit(model, float(np.sqrt(np.mean(rel**2))), float(np.max(np.abs(rel))), int(n.size))


def piecewise_prefill(tokens: npt.ArrayLike, seconds: npt.ArrayLike) -> PiecewiseLinearPrefill:
    """Piecewise-linear ``g`` through the median time of each measured size (made nondecreasing)."""
    n, t = _check_samples(tokens, seconds)
    sizes = np.unique(n)
    medians = np.maximum.accumulate(np.array([np.median(t[n == s]) for s in sizes]))
    if sizes.size < 2:
        raise CalibrationError(f"a piecewise-linear table needs at least two distinct sizes, got {sizes.tolist()}")
    return PiecewiseLinearPrefill(tuple(sizes.tolist()), tuple(medians.tolist()))


# ------------------------------------------------------------------------------------------
# Reading measurements
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Measurements:
    """Prefill samples (tokens, seconds) and, when known, decode seconds per output token."""

    tokens: FloatArray
    seconds: FloatArray
    decode_per_token: float | None = None
    source: str = ""


def _open_rows(path: str | os.PathLike[str]) -> tuple[list[str], list[dict[str, str]]]:
    p = Path(path)
    if not p.is_file():
        raise CalibrationError(f"calibration file {str(p)!r} does not exist")
    reader = csv.DictReader(io.StringIO(read_text(p, "calibration file"), newline=""))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def _float(path: object, row: int, name: str, value: str) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise CalibrationError(f"{path}: row {row}, column {name!r}: not a number: {plain(value)}") from None
    if not math.isfinite(out):
        raise CalibrationError(f"{path}: row {row}, column {name!r}: must be finite, got {plain(value)}")
    return out


def splitwise_groups(path: str | os.PathLike[str]) -> list[tuple[str, str, int]]:
    """The (model, hardware, tensor_parallel) groups with batch-size-1 rows in a Splitwise CSV."""
    _, rows = _open_rows(path)
    return sorted({(r["model"], r["hardware"], int(float(r["tensor_parallel"]))) for r in rows if float(r["batch_size"]) == 1})


def read_measurements(
    path: str | os.PathLike[str],
    *,
    model: str | None = None,
    hardware: str | None = None,
    tensor_parallel: int | None = None,
) -> Measurements:
    """Read prefill timings from a CSV.

    A Splitwise profile (columns ``model, hardware, prompt_size, batch_size, prompt_time,
    token_time, tensor_parallel``; times in ms) is filtered to batch size 1 and to the given
    model / hardware / tensor-parallel degree (each required when the file holds several);
    otherwise the CSV needs ``tokens`` and ``seconds`` columns (optional
    ``decode_per_token`` seconds).
    """
    columns, rows = _open_rows(path)
    if all(c in columns for c in SPLITWISE_COLUMNS):
        return _splitwise(path, rows, model, hardware, tensor_parallel)
    if "tokens" not in columns or "seconds" not in columns:
        raise CalibrationError(
            f"{path}: needs columns 'tokens' and 'seconds' (or a Splitwise profile with {list(SPLITWISE_COLUMNS)}), got {columns}"
        )
    tokens = [_float(path, i + 2, "tokens", r["tokens"]) for i, r in enumerate(rows)]
    seconds = [_float(path, i + 2, "seconds", r["seconds"]) for i, r in enumerate(rows)]
    decode = None
    if "decode_per_token" in columns:
        values = [_float(path, i + 2, "decode_per_token", r["decode_per_token"]) for i, r in enumerate(rows) if r["decode_per_token"]]
        decode = float(np.mean(values)) if values else None
    n, t = _check_samples(tokens, seconds)
    return Measurements(n, t, decode, str(path))


def _splitwise(path: object, rows: list[dict[str, str]], model: str | None, hardware: str | None, tp: int | None) -> Measurements:
    batch1 = [r for r in rows if float(r["batch_size"]) == 1]
    choices = {"model": model, "hardware": hardware, "tensor_parallel": None if tp is None else str(tp)}
    selected = batch1
    for name, wanted in choices.items():
        present = sorted({str(int(float(r[name]))) if name == "tensor_parallel" else r[name] for r in selected})
        if wanted is None:
            if len(present) > 1:
                raise CalibrationError(
                    f"{path}: several {name} values {present}: choose one (e.g. --{name.replace('_', '-')} {present[0]})"
                )
            continue
        if wanted not in present:
            raise CalibrationError(f"{path}: unknown {name} {wanted!r} at batch size 1 (known: {present})")
        selected = [r for r in selected if (str(int(float(r[name]))) if name == "tensor_parallel" else r[name]) == wanted]
    tokens = [_float(path, 0, "prompt_size", r["prompt_size"]) for r in selected]
    seconds = [_float(path, 0, "prompt_time", r["prompt_time"]) * 1e-3 for r in selected]
    decode = float(np.mean([_float(path, 0, "token_time", r["token_time"]) for r in selected])) * 1e-3
    n, t = _check_samples(tokens, seconds)
    label = "/".join(str(v) for v in (model, hardware, tp) if v is not None)
    return Measurements(n, t, decode, f"{path} [{label}]" if label else str(path))


def fit_table(path: str | os.PathLike[str], *, weighting: str = "relative") -> dict[tuple[str, str, int], dict[str, float]]:
    """Fit every batch-1 group of a Splitwise CSV: RMS relative error without / with ``g_0``."""
    out: dict[tuple[str, str, int], dict[str, float]] = {}
    for model, hardware, tp in splitwise_groups(path):
        m = read_measurements(path, model=model, hardware=hardware, tensor_parallel=tp)
        plain = fit_prefill(m.tokens, m.seconds, weighting=weighting)
        with_g0 = fit_prefill(m.tokens, m.seconds, intercept=True, weighting=weighting)
        out[(model, hardware, tp)] = {
            "rms_relative": plain.rms_relative,
            "rms_relative_intercept": with_g0.rms_relative,
            "intercept": with_g0.model.intercept,
            "linear": with_g0.model.linear,
            "quadratic": with_g0.model.quadratic,
            "decode_per_token": float(m.decode_per_token or 0.0),
        }
    return out


# ------------------------------------------------------------------------------------------
# KV size and concurrency
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelSpec:
    """Transformer shape for ``κ = 2 N_L N_H d_H b_e`` (keys and values).

    layers : ``N_L``; kv_heads : ``N_H`` (KV heads, GQA aware); head_dim : ``d_H``;
    dtype_bytes : ``b_e``; parameters : weight count (for the weights' memory), optional.
    """

    layers: int
    kv_heads: int
    head_dim: int
    dtype_bytes: int = 2
    parameters: float | None = None
    name: str = ""

    def __post_init__(self) -> None:
        for name in ("layers", "kv_heads", "head_dim", "dtype_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CalibrationError(f"model.{name} must be a positive integer, got {plain(value)}")
        if self.parameters is not None and not (math.isfinite(self.parameters) and self.parameters > 0):
            raise CalibrationError(f"model.parameters must be > 0, got {plain(self.parameters)}")

    @property
    def kv_bytes_per_token(self) -> int:
        """``κ = 2 N_L N_H d_H b_e`` bytes per token."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def weight_bytes(self) -> float | None:
        return None if self.parameters is None else self.parameters * self.dtype_bytes


# Default prefill law and decode time: the relative-error NNLS fit with intercept of the
# Splitwise profile for llama2-70b / a100-80gb / tensor parallel 4 at batch size 1 (RMS
# relative error 4.0 %); tests re-derive these numbers from the CSV when it is present.
DEFAULT_CALIBRATION = ("llama2-70b", "a100-80gb", 4)
DEFAULT_PREFILL = QuadraticPrefill(linear=1.562041605093017e-04, quadratic=1.5150007962374313e-08, intercept=4.303013612699637e-02)
DEFAULT_DECODE_PER_TOKEN = 0.044513344308437494  # seconds per output token (token_time, batch 1)

# Llama-2-70B (public config.json values: 80 layers, 64 heads, 8 KV heads, hidden 8192, fp16).
LLAMA2_70B = ModelSpec(layers=80, kv_heads=8, head_dim=128, dtype_bytes=2, parameters=70e9, name="llama2-70b")


def _config_int(path: object, config: Mapping[str, object], *names: str) -> int | None:
    for name in names:
        if name in config and config[name] is not None:
            value = config[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise CalibrationError(f"{path}: field {name!r} must be a positive integer, got {plain(value)}")
            return value
    return None


def model_spec_from_config(path: str | os.PathLike[str], *, dtype_bytes: int | None = None) -> ModelSpec:
    """Read ``N_L``, ``N_H``, ``d_H``, ``b_e`` from a Hugging Face style ``config.json`` on disk.

    Uses ``num_hidden_layers`` (or ``n_layer``), ``num_key_value_heads`` (else
    ``num_attention_heads``), ``head_dim`` (else ``hidden_size / num_attention_heads``) and
    ``torch_dtype`` (default float16) unless ``dtype_bytes`` is given.
    """
    p = Path(path)
    try:
        config = parse_document(read_text(p, "model config"), "json", f"model config {str(p)!r}")
    except ValueError as exc:
        raise CalibrationError(str(exc)) from None
    if not isinstance(config, dict):
        raise CalibrationError(f"{p}: must hold a JSON object")
    layers = _config_int(p, config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _config_int(p, config, "num_attention_heads", "n_head")
    kv_heads = _config_int(p, config, "num_key_value_heads", "num_kv_heads") or heads
    head_dim = _config_int(p, config, "head_dim")
    hidden = _config_int(p, config, "hidden_size", "n_embd")
    if layers is None:
        raise CalibrationError(f"{p}: field 'num_hidden_layers' is missing")
    if kv_heads is None:
        raise CalibrationError(f"{p}: field 'num_key_value_heads' or 'num_attention_heads' is missing")
    if head_dim is None:
        if hidden is None or heads is None or hidden % heads:
            raise CalibrationError(f"{p}: 'head_dim' is missing and hidden_size / num_attention_heads is not an integer")
        head_dim = hidden // heads
    if dtype_bytes is None:
        dtype = str(config.get("torch_dtype") or "float16").lower()
        if dtype not in DTYPE_BYTES:
            raise CalibrationError(f"{p}: unknown torch_dtype {dtype!r} (known: {sorted(DTYPE_BYTES)})")
        dtype_bytes = DTYPE_BYTES[dtype]
    return ModelSpec(layers, kv_heads, head_dim, dtype_bytes, name=str(config.get("_name_or_path", p.parent.name)))


def kv_bytes_per_token(spec: ModelSpec, *, block_size: int | None = None, block_overhead_bytes: float = 0.0) -> float:
    """``κ`` bytes per token, plus an optional per-block overhead spread over ``block_size`` tokens."""
    if block_size is None:
        if block_overhead_bytes:
            raise CalibrationError("block_overhead_bytes needs a block_size")
        return float(spec.kv_bytes_per_token)
    if block_size < 1 or block_overhead_bytes < 0:
        raise CalibrationError(f"block_size must be >= 1 and the overhead >= 0, got {plain(block_size)}, {plain(block_overhead_bytes)}")
    return spec.kv_bytes_per_token + block_overhead_bytes / block_size


def kv_bytes(tokens: npt.ArrayLike, kappa: float, *, block_size: int | None = None) -> FloatArray:
    """KV bytes of sequences of ``tokens`` tokens, rounded up to whole blocks when paged."""
    n = np.asarray(tokens, dtype=float)
    if block_size is not None:
        n = np.ceil(n / block_size) * block_size
    return kappa * n


def concurrency_from_memory(gpu_bytes: float, weight_bytes: float, sequence_bytes: float, persistent_bytes: float = 0.0) -> int:
    """``c = floor((M − W − B_s) / m_run)`` (0 when nothing fits)."""
    if sequence_bytes <= 0:
        raise CalibrationError(f"the per-sequence budget m_run must be > 0, got {plain(sequence_bytes)}")
    free = gpu_bytes - weight_bytes - persistent_bytes
    return max(0, int(math.floor(free / sequence_bytes + 1e-12)))


class GpuNumbers(TypedDict):
    """The ``gpu`` section of an instance, as :meth:`Deployment.normalised` gives it."""

    memory: float
    runtime_per_sequence: float
    kv_per_token: float


@dataclass(frozen=True)
class Deployment:
    """One serving replica: total GPU memory (all tensor-parallel GPUs), model and budget.

    The written instance is normalised like ``paper_baseline``: memory is counted in units
    of one active sequence (``m_run = 1``), so ``M = (gpu_bytes − weights) / m_run_bytes`` and
    ``κ = kv_bytes_per_token / m_run_bytes`` with ``m_run_bytes = κ · sequence_tokens``.
    """

    gpu_bytes: float = 4 * 80e9  # four A100-80GB (tensor parallel 4, as DEFAULT_CALIBRATION)
    model: ModelSpec = LLAMA2_70B
    sequence_tokens: float = 16384.0  # per-sequence KV budget in tokens (input + output)
    kv_per_token_bytes: float | None = None  # default: model.kv_bytes_per_token

    def __post_init__(self) -> None:
        if not (self.gpu_bytes > 0 and self.sequence_tokens > 0):
            raise CalibrationError(f"gpu_bytes and sequence_tokens must be > 0, got {plain(self.gpu_bytes)}, {plain(self.sequence_tokens)}")
        if self.free_bytes <= 0:
            raise CalibrationError(f"weights ({self.weight_bytes:.3g} B) do not fit in GPU memory ({self.gpu_bytes:.3g} B)")

    @property
    def kappa_bytes(self) -> float:
        return float(self.kv_per_token_bytes or self.model.kv_bytes_per_token)

    @property
    def weight_bytes(self) -> float:
        return float(self.model.weight_bytes or 0.0)

    @property
    def free_bytes(self) -> float:
        return self.gpu_bytes - self.weight_bytes

    @property
    def sequence_bytes(self) -> float:
        """``m_run`` in bytes."""
        return self.kappa_bytes * self.sequence_tokens

    def normalised(self) -> GpuNumbers:
        """``gpu`` section of an instance: ``memory`` ``M``, ``runtime_per_sequence`` 1, ``kv_per_token`` ``κ``."""
        return {
            "memory": self.free_bytes / self.sequence_bytes,
            "runtime_per_sequence": 1.0,
            "kv_per_token": 1.0 / self.sequence_tokens,
        }
