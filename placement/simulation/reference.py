"""Closed forms the simulators are checked against (MODEL.md §5, §6).

These are small, local re-statements of the analytical laws so that the simulators can be
validated on their own: the Erlang-C queue (P-17 … P-20), the M/M/1 limits and the
joint selection–distance density of Theorem 1 on a radial grid (used for the
serving-distance CDF and as an independent check of ``A_{s,q}``).  The package's
analytical model lives in ``placement.queueing`` / ``placement.association``; the
simulation only re-derives what it needs to compare against.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def erlang_c(offered_load: float, servers: int) -> float:
    """Erlang-C waiting probability ``P^W`` of an M/M/c queue (P-17).

    Parameters
    ----------
    offered_load : a = λq / μ (Erlangs).
    servers : c >= 1.

    Uses the Erlang-B recursion ``E_k = a E_{k−1} / (k + a E_{k−1})`` and
    ``P^W = E_c / (1 − ρ (1 − E_c))`` with ``ρ = a / c`` (exact for large ``c``).
    Returns 1 for ``ρ >= 1``.
    """
    c = int(servers)
    if c < 1:
        raise ValueError(f"servers: c must be >= 1, got {servers!r}")
    if offered_load < 0:
        raise ValueError(f"offered_load: a must be >= 0, got {offered_load!r}")
    rho = offered_load / c
    if rho >= 1.0:
        return 1.0
    e = 1.0
    for k in range(1, c + 1):
        e = offered_load * e / (k + offered_load * e)
    return float(e / (1.0 - rho * (1.0 - e)))


def mmc_mean_wait(arrival_rate: float, service_rate: float, servers: int) -> float:
    """Mean FCFS wait ``W̄ = P^W / (c μ − λq)`` (P-18); ``inf`` when ``ρ >= 1``."""
    c = int(servers)
    if arrival_rate >= c * service_rate:
        return float("inf")
    return erlang_c(arrival_rate / service_rate, c) / (c * service_rate - arrival_rate)


def mmc_wait_cdf(w: npt.ArrayLike, arrival_rate: float, service_rate: float, servers: int) -> FloatArray:
    """Waiting-time CDF ``F_W(w) = 1 − P^W exp(−(c μ − λq) w)`` for ``w >= 0`` (P-19/20).

    0 for ``w < 0``; identically 0 for an unstable queue (MODEL.md §5 choice).
    """
    w = np.asarray(w, dtype=float)
    c = int(servers)
    if arrival_rate >= c * service_rate:
        return np.zeros_like(w)
    pw = erlang_c(arrival_rate / service_rate, c)
    return np.where(w >= 0, 1.0 - pw * np.exp(-(c * service_rate - arrival_rate) * np.maximum(w, 0.0)), 0.0)


def mm1_closed_forms(arrival_rate: float, service_rate: float) -> dict[str, float]:
    """M/M/1 limits: ``P^W = ρ``, ``W̄ = ρ / (μ − λ)``, sojourn mean ``1 / (μ − λ)``."""
    rho = arrival_rate / service_rate
    if rho >= 1:
        raise ValueError(f"arrival_rate: M/M/1 needs ρ = λ/μ < 1, got ρ = {rho!r}")
    return {
        "wait_probability": rho,
        "mean_wait": rho / (service_rate - arrival_rate),
        "mean_sojourn": 1.0 / (service_rate - arrival_rate),
    }


def joint_density(
    r: npt.ArrayLike, densities: npt.ArrayLike, bias: npt.ArrayLike, radio_scale: float, radio_exponent: float
) -> FloatArray:
    """Joint selection–distance density ``f_{s,q}(r)`` of Theorem 1, shape ``(S, Q, len(r))``.

    ``f_{s,q}(r) = 2π λ_s r exp(−π λ_s r² − Σ_{t≠s} π λ_t d_{t|s,q}(r)²)`` with
    ``d_{t|s,q}(r) = (max(0, r^α + (β_{s,q} − β_{t,q})/ξ))^{1/α}``.  Tiers with ``λ_s = 0``
    get density 0.
    """
    r = np.atleast_1d(np.asarray(r, dtype=float))
    lam = np.asarray(densities, dtype=float)
    beta = np.asarray(bias, dtype=float)
    alpha = float(radio_exponent)
    ra = r[None, None, None, :] ** alpha  # (1,1,1,R)
    delta = (beta[:, None, :] - beta[None, :, :]) / radio_scale  # (s, t, q)
    d2 = np.maximum(0.0, ra + delta[..., None]) ** (2.0 / alpha)  # (s, t, q, R)
    s_count = lam.size
    mask = ~np.eye(s_count, dtype=bool)
    competitors = np.einsum("st,t,stqr->sqr", mask.astype(float), lam, d2)
    expo = -np.pi * lam[:, None, None] * r[None, None, :] ** 2 - np.pi * competitors
    out = 2.0 * np.pi * lam[:, None, None] * r[None, None, :] * np.exp(expo)
    return np.where(lam[:, None, None] > 0, out, 0.0)


def radial_grid(densities: npt.ArrayLike, points: int = 20001) -> FloatArray:
    """A radial grid covering the nearest-node law of the sparsest active tier (tail < 1e-15)."""
    lam = np.asarray(densities, dtype=float)
    lam_min = float(lam[lam > 0].min())
    r_max = np.sqrt(36.0 / (np.pi * lam_min))
    return np.linspace(0.0, r_max, points)


def association_by_quadrature(
    densities: npt.ArrayLike, bias: npt.ArrayLike, radio_scale: float, radio_exponent: float, points: int = 20001
) -> FloatArray:
    """``A_{s,q} = ∫ f_{s,q}(r) dr`` by the trapezoid rule on :func:`radial_grid` (check value)."""
    r = radial_grid(densities, points)
    f = joint_density(r, densities, bias, radio_scale, radio_exponent)
    return np.trapezoid(f, r, axis=-1)


def serving_distance_cdf(
    r: npt.ArrayLike, densities: npt.ArrayLike, bias: npt.ArrayLike, radio_scale: float, radio_exponent: float,
    points: int = 20001,
) -> FloatArray:
    """Conditional serving-distance CDF ``P(R ≤ r | s, q)``, shape ``(S, Q, len(r))``.

    Cumulative trapezoid of ``f_{s,q}`` divided by ``A_{s,q}``; ``nan`` where ``A_{s,q} = 0``.
    """
    grid = radial_grid(densities, points)
    f = joint_density(grid, densities, bias, radio_scale, radio_exponent)
    steps = 0.5 * (f[..., 1:] + f[..., :-1]) * np.diff(grid)
    cum = np.concatenate([np.zeros(f.shape[:-1] + (1,)), np.cumsum(steps, axis=-1)], axis=-1)
    total = cum[..., -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = np.where(total > 0, cum / total, np.nan)
    r = np.atleast_1d(np.asarray(r, dtype=float))
    out = np.empty(f.shape[:-1] + (r.size,))
    for s in range(f.shape[0]):
        for q in range(f.shape[1]):
            out[s, q] = np.interp(r, grid, cond[s, q])
    return out
