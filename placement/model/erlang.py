"""Erlang B for many servers in O(1) per queue (docs/model.md §16).

The blocking probability of an ``M/M/c/c`` loss system with offered load ``a`` is the
truncated Poisson ratio

    ``E_B(a, c) = (a^c e^{−a} / c!) / Σ_{k≤c} a^k e^{−a} / k! = p(c; a) / Q(c + 1, a)``       (16.1)

with ``p(c; a)`` the Poisson probability of ``c`` and ``Q`` the regularised upper incomplete gamma
function (``Q(c + 1, a) = P(N ≤ c)`` for ``N ~ Poisson(a)``, :func:`scipy.special.gammaincc`).
The recursion ``E_k = a E_{k−1} / (k + a E_{k−1})`` costs ``c`` steps; (16.1) costs a fixed
number of operations whatever ``c`` is.  Two details keep it exact to rounding:

* ``p(c; a)`` by the saddle-point form ``p = e^{−δ(c) − D(c, a)} / √(2π c)`` (16.2), with
  ``δ(c) = ln c! − ln(√(2π c) (c/e)^c)`` (Stirling's error, its asymptotic series for ``c > 15``) and
  the deviance ``D(c, a) = c ln(c/a) + a − c`` summed as a series when ``c ≈ a`` (where the direct
  form cancels).  The textbook ``c ln a − ln c! − a`` loses ``log10(c ln a)`` digits to cancellation.
* overload beyond ``a ≥ c + 5√c``, where both factors of (16.1) shrink together (and underflow
  once ``a − c ≳ 37 √a``): ``1/E_B = a^{−c} e^{a} Γ(c + 1, a)`` by Legendre's continued fraction
  (16.3) for the incomplete gamma function, evaluated with the modified Lentz method; it needs
  at most ~30 terms there (measured for ``c`` up to 10⁶), and fewer the deeper the overload.

:func:`erlang_b_large` is vectorised over queues; :func:`erlang_b_large_scalar` is the same on
Python floats (the fixed point evaluates a few queues at a time).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy.special import gammaincc

FloatArray = npt.NDArray[np.float64]
_STIRLING = (1.0 / 12.0, 1.0 / 360.0, 1.0 / 1260.0, 1.0 / 1680.0, 1.0 / 1188.0)  # δ(n) series coefficients
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SERIES_BAND = 0.5  # |v| < 0.5, v = (c − a)/(c + a): the deviance by its series (no cancellation)
_SERIES_TERMS = 28  # v² < 0.25 there, so 28 terms reach 1e-17 of the leading term
_OVERLOAD_SIGMAS = 5.0  # a ≥ c + 5√c: the continued fraction (16.3) instead of the ratio (16.1)
_LENTZ_FLOOR = 1e-300
_LENTZ_ITERATIONS = 200
_LENTZ_TOLERANCE = 1e-15
MIN_SERVERS = 16  # δ(c) uses its asymptotic series: accurate to rounding for c > 15


def _stirling_error(n: FloatArray) -> FloatArray:
    """``δ(n) = ln n! − ln(√(2π n) (n/e)^n) = 1/(12n) − 1/(360n³) + …`` for ``n > 15``."""
    nn = n * n
    s0, s1, s2, s3, s4 = _STIRLING
    return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n


def _deviance(c: FloatArray, a: FloatArray) -> FloatArray:
    """``D(c, a) = c ln(c/a) + a − c ≥ 0`` for ``a > 0``, without cancellation when ``c ≈ a``.

    For ``|v| < 0.5``, ``v = (c − a)/(c + a)``, it is ``(c − a) v + 2c Σ_{j≥1} v^{2j+1}/(2j + 1)``,
    a sum of terms of one sign (the direct form loses ``1/|v|`` digits there).
    """
    far = a < c * 1e-300  # c/a would overflow (a subnormal load): ln c − ln a, and D > 690 c makes e^{−D} = 0 anyway
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.where(far, np.log(c) - np.log(np.where(far, a, 1.0)), np.log(c / np.where(far, 1.0, a)))
    direct = c * log_ratio + a - c
    v = (c - a) / (c + a)
    v2 = v * v
    total = (c - a) * v
    term = 2.0 * c * v
    for j in range(1, _SERIES_TERMS + 1):
        term = term * v2
        total = total + term / (2 * j + 1)
    return np.where(np.abs(v) < _SERIES_BAND, total, direct)


def poisson_log_pmf(c: npt.ArrayLike, a: npt.ArrayLike) -> FloatArray:
    """``ln p(c; a)`` by the saddle-point form (16.2), for whole ``c > 15`` and ``a > 0``."""
    c = np.asarray(c, dtype=float)
    a = np.asarray(a, dtype=float)
    return -_stirling_error(c) - _deviance(c, a) - _LOG_SQRT_2PI - 0.5 * np.log(c)


def _inverse_by_continued_fraction(a: FloatArray, c: FloatArray) -> FloatArray:
    """``1/E_B = a^{−c} e^{a} Γ(c + 1, a) = a / (b_0 + a_1 / (b_1 + a_2 / (b_2 + …)))`` (16.3).

    ``b_n = a − c + 2n``, ``a_n = n (c + 1 − n)`` (Legendre's fraction for ``Γ(s, x)`` at
    ``s = c + 1``, ``x = a``; all terms positive for ``a > c``), by the modified Lentz method.
    """
    tiny = _LENTZ_FLOOR
    b = a - c
    f = np.where(b == 0.0, tiny, b)
    big_c = f.copy()
    d = np.zeros_like(f)
    done = np.zeros(f.shape, dtype=bool)
    for n in range(1, _LENTZ_ITERATIONS + 1):
        an = n * (c + 1.0 - n)
        bn = a - c + 2.0 * n
        d = bn + an * d
        d = np.where(np.abs(d) < tiny, tiny, d)
        big_c = bn + an / big_c
        big_c = np.where(np.abs(big_c) < tiny, tiny, big_c)
        d = 1.0 / d
        delta = big_c * d
        f = np.where(done, f, f * delta)
        done |= np.abs(delta - 1.0) <= _LENTZ_TOLERANCE
        if done.all():
            break
    return a / f


def erlang_b_large(offered_load: npt.ArrayLike, servers: npt.ArrayLike) -> FloatArray:
    """Erlang-B ``E_B(a, c)`` by (16.1), vectorised; ``c`` whole and ``> 15``, ``a ≥ 0`` finite.

    The caller validates the inputs (:func:`edgeprefix.placement.model.queueing.erlang_b`).
    """
    a = np.asarray(offered_load, dtype=float)
    c = np.asarray(servers, dtype=float)
    a, c = np.broadcast_arrays(a, c)
    positive = a > 0
    safe_a = np.where(positive, a, 1.0)
    deep = positive & (a >= c + _OVERLOAD_SIGMAS * np.sqrt(c))
    q = gammaincc(c + 1.0, np.where(deep, c, safe_a))  # P(N ≤ c), N ~ Poisson(a); ≥ 3e-7 off `deep`
    with np.errstate(under="ignore"):
        pmf = np.exp(poisson_log_pmf(c, safe_a))
    out = pmf / q
    if np.any(deep):
        out[deep] = 1.0 / _inverse_by_continued_fraction(a[deep], c[deep])
    return np.where(positive, np.minimum(out, 1.0), 0.0)


def _erlang_b_overload_scalar(a: float, c: float) -> float:
    """(16.3) on Python floats: ``E_B = f / a`` with ``f`` Legendre's fraction (see above)."""
    tiny = _LENTZ_FLOOR
    f = a - c if a != c else tiny
    big_c, d = f, 0.0
    for n in range(1, _LENTZ_ITERATIONS + 1):
        an = n * (c + 1.0 - n)
        bn = a - c + 2.0 * n
        d = bn + an * d
        d = 1.0 / (d if abs(d) >= tiny else tiny)
        big_c = bn + an / big_c
        big_c = big_c if abs(big_c) >= tiny else tiny
        delta = big_c * d
        f *= delta
        if abs(delta - 1.0) <= _LENTZ_TOLERANCE:
            break
    return min(1.0, f / a)


def erlang_b_large_scalar(a: float, c: int) -> float:
    """:func:`erlang_b_large` for one queue on Python floats (one :func:`gammaincc` call)."""
    cf = float(c)
    if a < cf * 1e-300:  # includes a = 0; E_B < (a/c)^c e^c < 1e-300^16: 0 (and c/a below would overflow)
        return 0.0
    if a >= cf + _OVERLOAD_SIGMAS * math.sqrt(cf):
        return _erlang_b_overload_scalar(a, cf)
    q = float(gammaincc(cf + 1.0, a))
    nn = cf * cf
    s0, s1, s2, s3, s4 = _STIRLING
    stirling = (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / cf
    if abs(cf - a) < _SERIES_BAND * (cf + a):
        v = (cf - a) / (cf + a)
        v2 = v * v
        deviance = (cf - a) * v
        term = 2.0 * cf * v
        for j in range(1, _SERIES_TERMS + 1):
            term *= v2
            step = term / (2 * j + 1)
            deviance += step
            if abs(step) <= 1e-17 * abs(deviance):
                break
    else:
        deviance = cf * math.log(cf / a) + a - cf
    log_pmf = -stirling - deviance - _LOG_SQRT_2PI - 0.5 * math.log(cf)
    return min(1.0, math.exp(log_pmf) / q) if log_pmf > -745.0 else 0.0
