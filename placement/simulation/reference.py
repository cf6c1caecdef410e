"""Closed forms the simulators are checked against (docs/model.md §5, §6).

Scalar fronts of the Erlang-C queue of :mod:`edgeprefix.placement.model.queueing` (eq. (17) … eq. (20)), the
M/M/1 limits (an independent check), and the joint selection–distance density of
Theorem 1 evaluated on a radial grid: the serving-distance CDF (which the evaluation does
not expose) and an independent trapezoid check of ``A_{s,q}``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain
from edgeprefix.placement.model import queueing

FloatArray = npt.NDArray[np.float64]


def erlang_c(offered_load: float, servers: int) -> float:
    """Erlang-C waiting probability ``P^W`` of one M/M/c queue (eq. (17)), as a float.

    Thin scalar front of :func:`edgeprefix.placement.model.queueing.erlang_c` (the single source of the
    formula); checks its arguments.  Returns 1 for ``ρ >= 1``.
    """
    if int(servers) < 1:
        raise ValueError(f"servers: c must be >= 1, got {plain(servers)}")
    if offered_load < 0:
        raise ValueError(f"offered_load: a must be >= 0, got {plain(offered_load)}")
    return float(queueing.erlang_c(float(offered_load), int(servers)))


def mmc_mean_wait(arrival_rate: float, service_rate: float, servers: int) -> float:
    """Mean FCFS wait ``W̄ = P^W / (c μ − λq)`` (eq. (18)); ``inf`` when ``ρ >= 1``."""
    return float(queueing.mean_wait(arrival_rate / service_rate, int(servers), 1.0 / service_rate))


def mmc_wait_cdf(w: npt.ArrayLike, arrival_rate: float, service_rate: float, servers: int) -> FloatArray:
    """Waiting-time CDF ``F_W(w) = 1 − P^W exp(−(c μ − λq) w)`` for ``w >= 0`` (eqs. (19)–(20)).

    0 for ``w < 0``; identically 0 for an unstable queue (docs/model.md §5 choice).
    """
    pw = erlang_c(arrival_rate / service_rate, servers)
    return queueing.waiting_cdf(w, pw, int(servers) * service_rate - arrival_rate)


def mm1_closed_forms(arrival_rate: float, service_rate: float) -> dict[str, float]:
    """M/M/1 limits: ``P^W = ρ``, ``W̄ = ρ / (μ − λ)``, sojourn mean ``1 / (μ − λ)``."""
    rho = arrival_rate / service_rate
    if rho >= 1:
        raise ValueError(f"arrival_rate: M/M/1 needs ρ = λ/μ < 1, got ρ = {plain(rho)}")
    return {
        "wait_probability": rho,
        "mean_wait": rho / (service_rate - arrival_rate),
        "mean_sojourn": 1.0 / (service_rate - arrival_rate),
    }


def joint_density(r: npt.ArrayLike, densities: npt.ArrayLike, bias: npt.ArrayLike, radio_scale: float, radio_exponent: float) -> FloatArray:
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
    return np.asarray(np.trapezoid(f, r, axis=-1))


def serving_distance_cdf(
    r: npt.ArrayLike,
    densities: npt.ArrayLike,
    bias: npt.ArrayLike,
    radio_scale: float,
    radio_exponent: float,
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


def mg1_closed_forms(arrival_rate: float, mean_service: float, scv: float) -> dict[str, float]:
    """M/G/1 (Pollaczek–Khinchine): ``P^W = ρ`` and ``W̄ = λ E[S²] / (2 (1 − ρ)) = ρ (1 + C²) (1/μ) / (2 (1 − ρ))``."""
    rho = arrival_rate * mean_service
    if rho >= 1:
        raise ValueError(f"arrival_rate: M/G/1 needs ρ = λ E[S] < 1, got ρ = {plain(rho)}")
    return {"wait_probability": rho, "mean_wait": rho * (1.0 + scv) * mean_service / (2.0 * (1.0 - rho))}


def md1_wait_cdf(w: npt.ArrayLike, arrival_rate: float, service: float) -> FloatArray:
    """Exact M/D/1 waiting-time CDF (Erlang's formula), for ``w ≤ 10 D``:

    ``F(w) = (1 − ρ) Σ_{k=0}^{⌊w/D⌋} (ρ (k − w/D))^k / k! · e^{ρ (w/D − k)}``, ``ρ = λ D``.  The sum
    alternates; beyond ``10 D`` its cancellation costs more than 8 digits, hence the bound.
    """
    import math

    rho = arrival_rate * service
    if rho >= 1:
        raise ValueError(f"arrival_rate: M/D/1 needs ρ = λ D < 1, got ρ = {plain(rho)}")
    x = np.atleast_1d(np.asarray(w, dtype=float)) / service
    if np.any(x > 10.0):
        raise ValueError("w: the alternating sum is only evaluated for w <= 10 D")
    out = np.zeros(x.shape)
    for i, xi in enumerate(x.ravel().tolist()):
        if xi < 0:
            continue
        terms = [(rho * (k - xi)) ** k / math.factorial(k) * math.exp(rho * (xi - k)) for k in range(int(math.floor(xi)) + 1)]
        out.flat[i] = (1.0 - rho) * math.fsum(terms)
    return out
