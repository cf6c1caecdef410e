"""Radio and prefill cost models (docs/model.md §3).

``T_com(r) = ξ r^α`` and the prefill law ``g(n)``.  Any nondecreasing vectorised callable with
``g(0) = 0`` can be used as ``g``; two are provided: the calibrated quadratic form (with an
optional per-request intercept ``g_0``) and a piecewise-linear table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import InstanceError, plain

FloatArray = npt.NDArray[np.float64]


class PrefillModel(Protocol):
    """``g(n)``: prefill seconds of ``n`` uncached tokens, vectorised, ``g(0) = 0``."""

    def __call__(self, tokens: npt.ArrayLike) -> FloatArray: ...


@dataclass(frozen=True)
class QuadraticPrefill:
    """``g(n) = g_0 + a n + b n²`` for ``n > 0`` and ``g(0) = 0``.

    Parameters
    ----------
    linear : a, seconds per token.
    quadratic : b, seconds per token².
    intercept : g_0, fixed per-request overhead in seconds (0 in the paper's form).
    """

    linear: float
    quadratic: float = 0.0
    intercept: float = 0.0

    def __post_init__(self) -> None:
        for name in ("linear", "quadratic", "intercept"):
            value = getattr(self, name)
            if not np.isfinite(value) or value < 0:
                raise InstanceError(f"prefill.{name}", f"must be a finite number >= 0, got {plain(value)}")

    def __call__(self, tokens: npt.ArrayLike) -> FloatArray:
        n = np.asarray(tokens, dtype=float)
        value = self.intercept + n * (self.linear + self.quadratic * n)
        return np.where(n > 0, value, 0.0)


@dataclass(frozen=True)
class PiecewiseLinearPrefill:
    """``g`` interpolated linearly in a measured table ``(tokens, seconds)``.

    The table must start at ``(0, 0)`` or above it with nonnegative values and be
    nondecreasing; beyond the last point the last segment's slope is extended.
    """

    tokens: tuple[float, ...]
    seconds: tuple[float, ...]
    _slope_tail: float = field(init=False, repr=False, compare=False, default=0.0)

    def __post_init__(self) -> None:
        x = np.asarray(self.tokens, dtype=float)
        y = np.asarray(self.seconds, dtype=float)
        if x.ndim != 1 or x.shape != y.shape or x.size < 2:
            raise InstanceError("prefill.table", "needs at least two (tokens, seconds) points of equal length")
        if np.any(np.diff(x) <= 0) or x[0] < 0:
            raise InstanceError("prefill.table.tokens", "must be >= 0 and strictly increasing")
        if np.any(np.diff(y) < 0) or y[0] < 0:
            raise InstanceError("prefill.table.seconds", "must be >= 0 and nondecreasing (g is nondecreasing)")
        object.__setattr__(self, "_slope_tail", float((y[-1] - y[-2]) / (x[-1] - x[-2])))

    def __call__(self, tokens: npt.ArrayLike) -> FloatArray:
        n = np.asarray(tokens, dtype=float)
        x = np.asarray(self.tokens, dtype=float)
        y = np.asarray(self.seconds, dtype=float)
        xs = np.concatenate(([0.0], x)) if x[0] > 0 else x
        ys = np.concatenate(([0.0], y)) if x[0] > 0 else y
        inside = np.interp(n, xs, ys)
        tail = ys[-1] + self._slope_tail * (n - xs[-1])
        value = np.where(n > xs[-1], tail, inside)
        return np.where(n > 0, value, 0.0)


@dataclass(frozen=True)
class RadioCost:
    """Delay-equivalent radio cost ``T_com(r) = ξ r^α``."""

    scale: float  # ξ, seconds per distance^α
    exponent: float = 2.0  # α

    def __call__(self, distance: npt.ArrayLike) -> FloatArray:
        return self.scale * np.asarray(distance, dtype=float) ** self.exponent
