"""Erlang-C queue of one node (docs/model.md §5): ``M/M/c_s`` with effective service rate ``μ_s``.

All functions are vectorised over tiers.  ``offered_load`` is ``a_s = λq_s / μ_s`` and
``servers`` is ``c_s``; ``ρ_s = a_s / c_s``.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import NumericalError, plain
from edgeprefix.placement.model.erlang import erlang_b_large, erlang_b_large_scalar

FloatArray = npt.NDArray[np.float64]
RHO_CLIP = 0.99  # ρ_clip: above it the advertised delay continues linearly (docs/model.md §7)


_SCALAR_LIMIT = 64  # below this many queues the recursion runs on Python floats (faster)
LARGE_SERVERS = 64  # from this c on, Erlang B in O(1) by the incomplete gamma function (docs/model.md §16)


def _erlang_b_scalar(a: float, c: int) -> float:
    if c >= LARGE_SERVERS:
        return erlang_b_large_scalar(a, c)
    e = 1.0
    for k in range(1, c + 1):
        e = a * e / (k + a * e)
    return e


_TINY = 2.2250738585072014e-308  # smallest normal float64: below it E_c(a) carries no relative precision


def _erlang_b_ratio_scalar(a: float, c: int, b: float) -> float:
    """``E_c(a) / a`` given ``b = E_c(a)``, ``c >= 1``, exact also where ``a`` or ``E_c(a)`` is subnormal or 0.

    Where ``E_c`` is a normal number the quotient is accurate to rounding; elsewhere (a vanishing
    load, where ``c / a`` would overflow and ``E_c`` underflows, ``inf · 0``) it is one step of the
    recursion, ``E_c / a = E_{c−1} / (c + a E_{c−1})``, which never divides by ``a`` (docs/model.md §20).
    """
    if b >= _TINY:
        return b / a
    prev = _erlang_b_scalar(a, c - 1)
    return prev / (c + a * prev)


def erlang_b_over_load(offered_load: npt.ArrayLike, servers: npt.ArrayLike, blocking: npt.ArrayLike) -> FloatArray:
    """``E_c(a) / a`` for whole ``c >= 1``, vectorised, given ``blocking = E_c(a)`` (:func:`_erlang_b_ratio_scalar`).

    Its limit at ``a = 0`` is 1 for ``c = 1`` and 0 above, so ``dE/da = c E/a − E (1 − E)`` is exact at
    every load, including subnormal ones.
    """
    a, c, b = np.broadcast_arrays(
        np.asarray(offered_load, dtype=float), np.asarray(servers, dtype=float), np.asarray(blocking, dtype=float)
    )
    normal = b >= _TINY  # implies a > 0
    out = np.divide(b, a, out=np.zeros(a.shape), where=normal)
    if not np.all(normal):
        low = ~normal
        prev = erlang_b(a[low], c[low] - 1.0)
        out[low] = prev / (c[low] + a[low] * prev)
    return out


def erlang_b(offered_load: npt.ArrayLike, servers: npt.ArrayLike) -> FloatArray:
    """Erlang-B blocking ``E_c(a)``: the recursion ``E_0 = 1``, ``E_k = a E_{k−1} / (k + a E_{k−1})`` below
    ``c = 64``, the incomplete-gamma ratio of docs/model.md §16 from there on.

    The recursion never forms a factorial or a power, so it is exact, but it costs ``c`` steps;
    the ratio costs the same for any ``c`` (:mod:`edgeprefix.placement.model.erlang`, within 2e-13
    of the recursion).  For a few queues the recursion runs on Python floats, for many it runs
    ``max(c)`` steps (``c < 64``) vectorised over the queues.
    """
    a = np.asarray(offered_load, dtype=float)
    c = np.asarray(servers)
    if c.dtype.kind == "f":
        if np.any(c != np.floor(c)):
            raise ValueError(f"servers: c must be whole numbers, got {c.tolist()}")
    c = c.astype(np.int64)
    a, c = np.broadcast_arrays(a, c)
    if np.any(c < 0):
        raise ValueError(f"servers: must be >= 0, got {c.min()}")
    if np.any(a < 0) or not np.all(np.isfinite(a)):
        raise ValueError("offered_load: must be finite and >= 0")
    if a.size <= _SCALAR_LIMIT:
        flat = [_erlang_b_scalar(float(x), int(k)) for x, k in zip(a.ravel(), c.ravel())]
        return np.array(flat, dtype=float).reshape(a.shape)
    e = np.ones(a.shape)
    out = np.ones(a.shape)
    large = c >= LARGE_SERVERS
    ae, den = np.empty(a.shape), np.empty(a.shape)
    for k in range(1, int(c.max(initial=0, where=~large)) + 1):
        np.multiply(a, e, out=ae)  # e ← a e / (k + a e), in place (the same numbers)
        np.add(ae, k, out=den)
        np.divide(ae, den, out=e)
        np.copyto(out, e, where=(c == k))
    if np.any(large):
        out[large] = erlang_b_large(a[large], c[large])
    return out


def _erlang_c_scalar(a: float, c: float) -> float:
    if not (0.0 <= a < c):
        if a < 0 or not math.isfinite(a):
            raise ValueError("offered_load: must be finite and >= 0")
        return 1.0
    b = _erlang_b_scalar(a, int(c))
    pw = b / (1.0 - (a / c) * (1.0 - b))
    if not -1e-9 <= pw <= 1.0 + 1e-9:  # also catches NaN, which max/min would silently drop
        raise NumericalError(f"Erlang C: waiting probability {pw!r} for offered load {a!r} on {c!r} servers (docs/model.md §20)")
    return min(1.0, max(0.0, pw))


def erlang_c(offered_load: npt.ArrayLike, servers: npt.ArrayLike) -> FloatArray:
    """Waiting probability ``P^W`` (eq. (17)) via ``P^W = E_c / (1 − ρ (1 − E_c))``; 1 when ``ρ ≥ 1``."""
    a = np.asarray(offered_load, dtype=float)
    c = np.asarray(servers, dtype=float)
    if a.shape == c.shape and a.size <= _SCALAR_LIMIT and np.all(c == np.floor(c)) and np.all(c >= 0):
        flat = [_erlang_c_scalar(x, k) for x, k in zip(a.ravel().tolist(), c.ravel().tolist())]
        return np.array(flat, dtype=float).reshape(a.shape)
    b = erlang_b(a, c)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(c > 0, a / np.where(c > 0, c, 1.0), np.inf)
        pw = b / (1.0 - rho * (1.0 - b))
    return np.where(rho < 1.0, np.clip(pw, 0.0, 1.0), 1.0)


def _erlang_c_and_slope(a: FloatArray, c: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``P^W(a)`` and ``dP^W/da`` for ``a < c`` (``dE/da = E (c/a − 1 + E)``)."""
    b = erlang_b(a, c)
    rho = a / c
    db = erlang_b_over_load(a, c, b) * c - b * (1.0 - b)  # exact at subnormal loads (no c/a · E = inf · 0)
    den = 1.0 - rho * (1.0 - b)
    pw = b / den
    dden = -(1.0 - b) / c + rho * db
    dpw = (db * den - b * dden) / den**2
    return pw, dpw


def mean_wait(offered_load: npt.ArrayLike, servers: npt.ArrayLike, mean_service: npt.ArrayLike) -> FloatArray:
    """``W̄ = P^W / (c μ − λ) = P^W / (c − a) · (1/μ)`` (eq. (18)); ``inf`` when ``ρ ≥ 1``."""
    a = np.asarray(offered_load, dtype=float)
    c = np.asarray(servers, dtype=float)
    m = np.asarray(mean_service, dtype=float)
    pw = erlang_c(a, c)
    stable = a < c
    w = pw * m / np.where(stable, c - a, 1.0)  # c − a > 0 wherever kept (a − c may be subnormal: no overflow)
    return np.where(stable, w, np.inf)


def waiting_cdf(wait: npt.ArrayLike, wait_probability: npt.ArrayLike, decay: npt.ArrayLike) -> FloatArray:
    """``F_W(w) = 1 − P^W exp(−(cμ − λ) w)`` for ``w ≥ 0`` and 0 below (eqs. (19)–(20)).

    ``decay`` is ``cμ − λ``; an unstable tier (``decay <= 0``) has ``F_W ≡ 0`` (docs/model.md §5 choice).
    """
    w = np.asarray(wait, dtype=float)
    pw = np.asarray(wait_probability, dtype=float)
    theta = np.asarray(decay, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        value = 1.0 - pw * np.exp(-np.maximum(theta, 0.0) * np.maximum(w, 0.0))
    return np.where((w >= 0) & (theta > 0), value, 0.0)


def _advertised_scalar(a: float, c: float, m: float, rho_clip: float) -> float:
    return _advertised_scalar_and_slope(a, c, m, rho_clip)[0]


def _advertised_scalar_and_slope(a: float, c: float, m: float, rho_clip: float) -> tuple[float, float]:
    if c <= 0:
        return float("inf"), 0.0
    a_below = min(a, rho_clip * c)
    b = _erlang_b_scalar(a_below, int(c))
    rho = a_below / c
    db = _erlang_b_ratio_scalar(a_below, int(c), b) * c - b * (1.0 - b)  # b (c/a − 1 + b) without c/a = inf
    den = 1.0 - rho * (1.0 - b)
    pw = b / den
    dpw = (db * den - b * (-(1.0 - b) / c + rho * db)) / (den * den)
    gap = c - a_below
    wait = pw * m / gap
    slope = m * (dpw * gap + pw) / (gap * gap)
    return wait + slope * max(a - a_below, 0.0), slope


def advertised_wait(
    offered_load: npt.ArrayLike,
    servers: npt.ArrayLike,
    mean_service: npt.ArrayLike,
    rho_clip: float = RHO_CLIP,
) -> FloatArray:
    """Advertised delay used by association: ``W̄`` below ``ρ_clip``, continued linearly above.

    For ``ρ ≥ ρ_clip`` the Erlang-C mean wait is extended with its slope at ``ρ_clip`` (in the
    offered load, ``dE/da = E (c/a − 1 + E)`` for Erlang B), so the map ``W ↦ 𝒬(𝒜(W))`` is
    continuous and increasing in load (docs/model.md §7 choice).  Tiers with ``c = 0`` advertise
    ``+inf``.  This is on the fixed point's hot path: a few tiers run on Python floats.
    """
    if not 0.0 < rho_clip < 1.0:
        raise ValueError(f"rho_clip: must lie in (0, 1), got {plain(rho_clip)}")
    a, c, m = np.broadcast_arrays(
        np.asarray(offered_load, dtype=float), np.asarray(servers, dtype=float), np.asarray(mean_service, dtype=float)
    )
    if a.size <= _SCALAR_LIMIT:
        flat = [_advertised_scalar(x, k, t, rho_clip) for x, k, t in zip(a.ravel().tolist(), c.ravel().tolist(), m.ravel().tolist())]
        return np.array(flat, dtype=float).reshape(a.shape)
    safe_c = np.where(c > 0, c, 1.0)
    a_below = np.minimum(a, rho_clip * safe_c)
    pw, dpw = _erlang_c_and_slope(a_below, safe_c)
    wait = pw * m / (safe_c - a_below)
    slope = m * (dpw * (safe_c - a_below) + pw) / (safe_c - a_below) ** 2
    extended = wait + slope * np.maximum(a - a_below, 0.0)
    return np.where(c > 0, extended, np.inf)


def advertised_wait_and_slope(
    offered_load: npt.ArrayLike,
    servers: npt.ArrayLike,
    mean_service: npt.ArrayLike,
    rho_clip: float = RHO_CLIP,
) -> tuple[FloatArray, FloatArray]:
    """:func:`advertised_wait` and its derivative in the offered load ``∂W/∂a`` (at fixed ``1/μ``).

    The derivative in the mean service time at fixed ``a`` is ``W / (1/μ)`` (``W`` is linear in it).
    """
    if not 0.0 < rho_clip < 1.0:
        raise ValueError(f"rho_clip: must lie in (0, 1), got {plain(rho_clip)}")
    a = np.asarray(offered_load, dtype=float)
    c = np.asarray(servers, dtype=float)
    m = np.asarray(mean_service, dtype=float)
    if not (a.shape == c.shape == m.shape):
        a, c, m = np.broadcast_arrays(a, c, m)
    if a.size > _SCALAR_LIMIT:  # many queues (a batch of mixes): the same formulas on arrays
        safe_c = np.where(c > 0, c, 1.0)
        a_below = np.minimum(a, rho_clip * safe_c)
        pw, dpw = _erlang_c_and_slope(a_below, safe_c)
        gap = safe_c - a_below
        slope = m * (dpw * gap + pw) / (gap * gap)
        extended = pw * m / gap + slope * np.maximum(a - a_below, 0.0)
        return np.where(c > 0, extended, np.inf), np.where(c > 0, slope, 0.0)
    pairs = [_advertised_scalar_and_slope(x, k, t, rho_clip) for x, k, t in zip(a.ravel().tolist(), c.ravel().tolist(), m.ravel().tolist())]
    values = np.array(pairs, dtype=float).reshape(a.shape + (2,))
    return values[..., 0], values[..., 1]
