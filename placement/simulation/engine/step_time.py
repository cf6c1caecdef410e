"""The time of one engine step as a function of its batch, fitted to measured timings (docs/model.md §17).

One step of a continuous-batching engine runs prefill chunks and one decode token for every
running request.  Its time is linear in seven batch features (a roofline-free operator sum, as
Vidur's per-operator predictors add up):

``t = base + per_prefill_token · P + prefill_batching · P log₂ S + per_attention · A
+ per_sequence · b + decode_batching · b log₂ b + per_context_token · K``

- ``P`` prefill tokens of the step in ``S`` chunks (one per request in prefill), ``A = Σ_i c_i
  (k_i + c_i)`` the attention work of its chunks (chunk ``c_i`` over the ``k_i`` tokens already in
  the context), tokens²;
- ``b`` decoding requests, ``K`` the context tokens they attend to.

The two ``log₂`` terms are batch-dependent efficiencies: in the measured table a prefill token
costs more when it is batched with other prompts than when it is one long prompt of the same
total (Llama-2-70B, A100, TP 8: 0.25 ms per token for 16 prompts of 512 tokens, 0.19 ms for one
of 8,192), and a decode step's cost per request grows with the batch.  Without them (both zero:
the five-term model, which an instance's ``[engine.step_time]`` still gives) the held-out
prefill error is twice as large (docs/model.md §17.9).

:func:`fit_step_time` fits the seven non-negative coefficients to a timing table with the columns
of ``benchmarks/data/splitwise_perf_model.csv`` (per model, hardware and tensor-parallel degree):
``prompt_time`` of a static batch of ``b`` prompts of ``p`` tokens is one prefill step
(``P = b p``, ``S = b``, ``A = b p²``); ``token_time`` is one decode step of ``b`` requests at a
mean context ``p + t/2``; ``e2e_time`` is one prefill step and ``t − 1`` decode steps with the
context growing by one token per step (the sum of their features).  The fit minimises relative
squared error over the three (non-negative least squares), the ``e2e_time`` rows weighted by
``e2e_weight`` (the measured end-to-end time is what the check predicts, and in the table it is not
always the sum of its parts: a row's ``e2e_time`` is up to 11 % below its own ``prompt_time + (t − 1)
· token_time``).  :func:`select_e2e_weight` chooses the weight among :data:`E2E_WEIGHTS` by
leave-one-out on the rows it is given; the engine's fit (:func:`step_time_from_section`) uses it.
A configuration's repetitions are summarised by their median (:func:`read_timings`): a repetition
whose generation stopped early (Llama-2-70B, A100, TP 4, 512 output tokens: one repetition of
12.6 s beside 20.4 s and three of 22.7–22.9 s) would pull a mean far off the others.

:func:`static_batch_e2e` predicts a static batch's end-to-end time: one prefill step and
``t − 1`` decode steps with the context growing by one token per step.
:func:`held_out_errors` is the check: every configuration is left out of the fit in turn and
its measured ``e2e_time`` predicted; the weight is chosen on the training fold only (an inner
leave-one-out, nested inside the outer one), so the left-out configuration never selects it.  Configurations whose measured ``e2e_time`` disagrees with
their own ``prompt_time + (t − 1) · token_time`` by more than :data:`CONSISTENCY` (the generation
stopped early, or a batch that did not fit: in the shipped table every output of 1,024 tokens or
more, and batch 64 at tensor-parallel degree 2) are reported and left out of fit and check.  A
left-out configuration at the end of a sweep (the largest batch, prompt or output) is an
extrapolation and reported apart from the interior ones.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable
from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt
from scipy.optimize import nnls

FloatArray = npt.NDArray[np.float64]
CONSISTENCY = 0.15  # relative gap between e2e_time and prompt_time + (t − 1) token_time that flags a row
E2E_WEIGHTS = (1.0, 3.0, 10.0)  # candidate weights of the e2e_time rows, chosen by inner leave-one-out


@dataclass(frozen=True)
class StepTime:
    """Coefficients of the step-time model (seconds; see the module docstring)."""

    base: float
    per_prefill_token: float = 0.0
    per_attention: float = 0.0
    per_sequence: float = 0.0
    per_context_token: float = 0.0
    prefill_batching: float = 0.0
    decode_batching: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
                raise ValueError(f"engine.step_time.{f.name}: must be a finite number of seconds >= 0, got {value!r}")
        if self.base <= 0:
            raise ValueError(f"engine.step_time.base: a step takes time, must be > 0 seconds, got {self.base!r}")

    def __call__(self, prefill: float, attention: float, sequences: float, context: float, chunks: float = 1) -> float:
        """Seconds of one step with ``P``, ``A``, ``b``, ``K`` and ``S`` prefill chunks (see the module docstring)."""
        return (
            self._head(sequences, context)
            + self.per_prefill_token * prefill
            + self.per_attention * attention
            + self.prefill_batching * prefill * _log2(chunks)
        )

    def _head(self, sequences: float, context: float) -> float:
        """Seconds of a decode-only step of ``b`` requests at context ``K``."""
        return (
            self.base
            + self.per_sequence * sequences
            + self.decode_batching * sequences * _log2(sequences)
            + self.per_context_token * context
        )

    def decode_run(self, steps: int, sequences: int, context: float) -> float:
        """Seconds of ``steps`` decode-only steps of ``b`` requests starting at context ``K``
        (``K`` grows by ``b`` per step): ``steps·head(b, K) + per_context_token·b·steps(steps − 1)/2``."""
        head = self._head(sequences, context)
        return steps * head + self.per_context_token * sequences * steps * (steps - 1) / 2.0

    def decode_steps_done(self, elapsed: float, sequences: int, context: float, limit: int) -> int:
        """The number of whole decode steps (at most ``limit``) finished ``elapsed`` seconds into a run."""
        head = self._head(sequences, context)
        c = self.per_context_token * sequences
        if c > 0:  # c m²/2 + (head − c/2) m − elapsed = 0
            b = head - c / 2.0
            m = int((-b + np.sqrt(b * b + 2.0 * c * max(elapsed, 0.0))) / c)
        else:
            m = int(max(elapsed, 0.0) / head)
        m = max(0, min(m, limit))
        while m > 0 and self.decode_run(m, sequences, context) > elapsed:  # float guard
            m -= 1
        while m < limit and self.decode_run(m + 1, sequences, context) <= elapsed:
            m += 1
        return m


def _log2(n: float) -> float:
    """``log₂ n`` for a count ``n ≥ 1`` (0 for an empty batch)."""
    return float(np.log2(n)) if n > 1 else 0.0


@dataclass(frozen=True)
class TimingRow:
    """One measured configuration (mean over its repetitions; times in seconds)."""

    batch: int
    prompt: int
    tokens: int
    prompt_time: float
    token_time: float
    e2e_time: float

    @property
    def consistent(self) -> bool:
        """Whether ``e2e_time`` agrees with ``prompt_time + (t − 1) token_time`` within :data:`CONSISTENCY`."""
        own = self.prompt_time + (self.tokens - 1) * self.token_time
        return abs(self.e2e_time - own) <= CONSISTENCY * self.e2e_time


def read_timings(
    path: str | os.PathLike[str], model: str, hardware: str, tensor_parallel: int, *, statistic: str = "median"
) -> tuple[TimingRow, ...]:
    """The configurations of one model, hardware and tensor-parallel degree, each column the median of
    the repetitions (``statistic="mean"``: their mean, the summary before docs/model.md §17.9's robust one)."""
    if statistic not in ("median", "mean"):
        raise ValueError(f"engine.timings: statistic must be 'median' or 'mean', got {statistic!r}")
    summary = np.median if statistic == "median" else np.mean
    groups: dict[tuple[int, int, int], list[tuple[float, float, float]]] = {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["model"] != model or row["hardware"] != hardware or int(row["tensor_parallel"]) != tensor_parallel:
                continue
            key = (int(row["batch_size"]), int(row["prompt_size"]), int(row["token_size"]))
            groups.setdefault(key, []).append(
                (float(row["prompt_time"]) / 1e3, float(row["token_time"]) / 1e3, float(row["e2e_time"]) / 1e3)
            )
    if not groups:
        raise ValueError(
            f"engine.timings: no rows for model {model!r}, hardware {hardware!r}, tensor_parallel {tensor_parallel} in {os.fspath(path)!r}"
        )
    out = []
    for (b, p, t), reps in sorted(groups.items()):
        mid = summary(np.asarray(reps), axis=0)
        out.append(TimingRow(b, p, t, float(mid[0]), float(mid[1]), float(mid[2])))
    return tuple(out)


def _design(rows: Iterable[TimingRow]) -> tuple[FloatArray, FloatArray]:
    """Feature rows ``[1, P, A, b, K, P log₂ S, b log₂ b]`` (the order of :class:`StepTime`'s fields)
    and targets: a prefill step, a decode step and the whole static batch per configuration."""
    x, y = [], []
    for r in rows:
        b, lb = float(r.batch), _log2(r.batch)
        prefill = [1.0, b * r.prompt, b * float(r.prompt) ** 2, 0.0, 0.0, b * r.prompt * lb, 0.0]
        n = r.tokens - 1
        decodes = [n, 0.0, 0.0, b * n, b * (r.prompt * n + n * (n + 1) / 2.0), 0.0, b * lb * n]
        x += [prefill, [1.0, 0.0, 0.0, b, b * (r.prompt + r.tokens / 2.0), 0.0, b * lb], [u + v for u, v in zip(prefill, decodes)]]
        y += [r.prompt_time, r.token_time, r.e2e_time]
    return np.asarray(x), np.asarray(y)


def fit_step_time(rows: Iterable[TimingRow], *, batching: bool = True, e2e_weight: float = 1.0) -> StepTime:
    """Non-negative least squares on relative errors (see the module docstring), the ``e2e_time`` rows
    weighted by ``e2e_weight``; ``batching=False`` fits the five-term model (both log-batch coefficients zero)."""
    if not np.isfinite(e2e_weight) or e2e_weight <= 0:
        raise ValueError(f"engine.timings: e2e_weight must be a finite number > 0, got {e2e_weight!r}")
    x, y = _design(rows)
    if y.size < 3 * 3:
        raise ValueError(f"engine.timings: at least 3 configurations are needed to fit the step time, got {y.size // 3}")
    w = np.tile([1.0, 1.0, e2e_weight], y.size // 3)
    a = x / y[:, None] * w[:, None]
    if not batching:
        a = a[:, :5]
    coef, _ = nnls(a, w)
    coef[0] = max(coef[0], 1e-9)  # a step always takes time
    return StepTime(*(float(c) for c in coef))


def _loo_mean_error(rows: tuple[TimingRow, ...], e2e_weight: float, batching: bool) -> float:
    """Mean relative ``e2e_time`` error of each row predicted by the fit without it."""
    errors = [
        abs(
            static_batch_e2e(fit_step_time(rows[:i] + rows[i + 1 :], batching=batching, e2e_weight=e2e_weight), r.batch, r.prompt, r.tokens)
            / r.e2e_time
            - 1
        )
        for i, r in enumerate(rows)
    ]
    return float(np.mean(errors))


def select_e2e_weight(rows: Iterable[TimingRow], *, batching: bool = True, weights: tuple[float, ...] = E2E_WEIGHTS) -> float:
    """The ``e2e_time`` weight among ``weights`` with the least mean leave-one-out ``e2e_time`` error on
    ``rows`` (the first on ties)."""
    rows = tuple(rows)
    scores = [_loo_mean_error(rows, w, batching) for w in weights]
    return weights[int(np.argmin(scores))]


def static_batch_e2e(model: StepTime, batch: int, prompt: int, tokens: int) -> float:
    """End-to-end seconds of a static batch: one prefill step, then ``t − 1`` decode steps."""
    prefill = model(batch * prompt, batch * float(prompt) ** 2, 0, 0, batch)
    return prefill + model.decode_run(tokens - 1, batch, batch * (prompt + 1.0))


@dataclass(frozen=True)
class HeldOut:
    """Leave-one-configuration-out errors of the e2e prediction."""

    rows: tuple[TimingRow, ...]
    predicted: FloatArray
    excluded: tuple[TimingRow, ...]  # inconsistent measurements (generation stopped early)
    weights: tuple[float, ...] = ()  # the e2e weight each fold chose (inner leave-one-out)

    @property
    def errors(self) -> FloatArray:
        measured = np.array([r.e2e_time for r in self.rows])
        return np.abs(self.predicted - measured) / measured

    @property
    def boundary(self) -> npt.NDArray[np.bool_]:
        """Configurations at the end of a sweep (largest batch, prompt or output): extrapolations."""
        top = [max(getattr(r, k) for r in self.rows) for k in ("batch", "prompt", "tokens")]
        return np.array([any(getattr(r, k) == m for k, m in zip(("batch", "prompt", "tokens"), top)) for r in self.rows])

    @property
    def worst(self) -> float:
        """Worst relative error over the interior (interpolated) configurations."""
        return float(self.errors[~self.boundary].max())

    @property
    def worst_extrapolated(self) -> float:
        return float(self.errors[self.boundary].max())

    @property
    def worst_all(self) -> float:
        """Worst relative error over every left-out configuration, interior and extrapolated."""
        return float(self.errors.max())

    @property
    def worst_row(self) -> TimingRow:
        return self.rows[int(np.argmax(np.where(self.boundary, -1.0, self.errors)))]


def held_out_errors(
    rows: tuple[TimingRow, ...], predict: object = None, *, weights: tuple[float, ...] = E2E_WEIGHTS, batching: bool = True
) -> HeldOut:
    """Fit without each consistent configuration in turn and predict its ``e2e_time``.

    The fit of each fold takes the ``e2e_time`` weight :func:`select_e2e_weight` chooses on that
    fold's rows alone (nested leave-one-out; ``weights=(1.0,)`` fixes it).  ``predict(model, row) ->
    seconds`` defaults to :func:`static_batch_e2e`; the engine's own scheduler can be passed instead
    (``benchmarks/accuracy/engine/engine_timings.py`` does).
    """
    fn = predict if callable(predict) else (lambda m, r: static_batch_e2e(m, r.batch, r.prompt, r.tokens))
    good = tuple(r for r in rows if r.consistent)
    bad = tuple(r for r in rows if not r.consistent)
    predicted, chosen = [], []
    for i, r in enumerate(good):
        train = good[:i] + good[i + 1 :]
        w = weights[0] if len(weights) == 1 else select_e2e_weight(train, batching=batching, weights=weights)
        chosen.append(w)
        predicted.append(fn(fit_step_time(train, batching=batching, e2e_weight=w), r))
    return HeldOut(good, np.array(predicted), bad, tuple(chosen))


def step_time_from_section(section: object, default_file: str | os.PathLike[str]) -> StepTime:
    """The step time of an instance's ``[engine]`` (:class:`~edgeprefix.placement.model.engine_section.EngineSection`):
    its ``step_time`` coefficients, or the fit of its ``timings`` (``default_file`` unless it names one)."""
    coefficients = getattr(section, "step_time")
    if coefficients is not None:
        return StepTime(**dict(coefficients))
    path = getattr(section, "timings_file") or default_file
    rows = read_timings(path, getattr(section, "model"), getattr(section, "hardware"), getattr(section, "tensor_parallel"))
    good = tuple(r for r in rows if r.consistent)
    return fit_step_time(good, e2e_weight=select_e2e_weight(good))
