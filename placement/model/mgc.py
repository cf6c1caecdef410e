"""M/G/c waiting law of one node (docs/model.md §19.6): Erlang C corrected for the service's variability.

The law is a function of the offered load ``a_s``, the servers ``c_s``, the mean service time
``1/μ_s`` and its squared coefficient of variation ``C_S²`` only, so that any load model (the
tier's mean load, a per-node load spread) and any derivative code can compose with it:

- waiting probability ``P^W = C(a, c)``, Erlang C (its insensitivity approximation);
- mean wait ``W̄ = K(ρ, c, C_S²) · W̄_{M/M/c}`` with the two-point system interpolation
  ``K = (1 + C²) k / (2 C² k + 1 − C²)`` between M/M/c (``C² = 1``, ``K = 1``) and M/D/c
  (``C² = 0``, ``K = k``), where ``k = W̄_{M/D/c} / W̄_{M/M/c}`` is Cosmetatos' ratio
  ``k = ½ (1 + min(1, F))``, ``F = (1 − ρ)(c − 1)(√(4 + 5c) − 2) / (16 ρ c)`` (eqs. (19.18)–(19.20));
- waiting-time law ``F_W(w) = 1 − P^W exp(−θ w)`` with ``θ = P^W / W̄ = (c − a) / (K / μ)``: the
  two-moment form (atom and mean exact to the approximation, exponential conditional wait).

At ``c = 1`` it is the Pollaczek–Khinchine mean ``ρ (1 + C²) / (2 (μ − λ))`` exactly; at
``C² = 1`` every function returns Erlang C's value bit for bit (``K = 1`` exactly).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.evaluation_registry import SLOT_QUEUE_REGISTRY
from edgeprefix.placement.model.queueing import (
    RHO_CLIP,
    _erlang_c_and_slope,
    advertised_wait_and_slope,
    erlang_c,
)

FloatArray = npt.NDArray[np.float64]
QUEUE_LAWS = SLOT_QUEUE_REGISTRY.names()


def _arrays(*values: npt.ArrayLike) -> list[FloatArray]:
    return [np.asarray(v, dtype=float) for v in np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in values))]


def _check_scv(scv: FloatArray) -> None:
    if np.any(~np.isfinite(scv)) or np.any(scv < 0):
        raise ValueError(f"scv: the squared coefficient of variation C_S² must be finite and >= 0, got {plain(scv)}")


def cosmetatos_ratio(a: FloatArray, c: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``k = W̄_{M/D/c} / W̄_{M/M/c}`` and ``dk/da`` (eq. (19.18)); ``k = 1`` where ``F ≥ 1`` (light traffic).

    ``F = A_c (c − a)/a`` is compared with 1 as ``A_c (c − a) ≥ a`` and divided only where it is below
    1, so a vanishing (even subnormal) load never overflows; there ``a > A_c c / (1 + A_c)`` keeps
    ``dk/da = −A_c c / (2 a²)`` finite.  At ``c = 1`` (``A_c = 0``) ``F = 0`` at every load, ``a = 0``
    included (its limit), so ``k = ½`` and ``K = (1 + C²)/2`` hold exactly, as Pollaczek–Khinchine says.
    """
    spread = np.maximum(c - 1.0, 0.0) * (np.sqrt(4.0 + 5.0 * c) - 2.0) / (16.0 * np.maximum(c, 1.0))  # A_c, 0 at c = 1
    excess = spread * np.maximum(c - a, 0.0)  # A_c (c − a) = F a
    capped = (excess >= a) & (spread > 0)  # F ≥ 1, and every a = 0 with c > 1 (F = ∞)
    safe = np.where(capped | (a <= 0), 1.0, a)  # a > 0 wherever it is used; 1 elsewhere (F = 0 at c = 1, a = 0)
    f = np.where(capped, 1.0, excess / safe)
    dk = np.where(capped, 0.0, -0.5 * (spread * c / safe) / safe)
    return 0.5 * (1.0 + f), dk


def variability_interpolation(k: FloatArray, scv: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``K``, ``∂K/∂k``, ``∂K/∂C²`` and ``∂²K/∂k∂C²`` of ``K = (1 + C²) k / (2 C² k + 1 − C²)`` (eq. (19.19))."""
    den = 2.0 * scv * k + (1.0 - scv)  # >= 1 when C² >= 1, > 0 otherwise (k >= ½); exact 2k at C² = 1
    big_k = (1.0 + scv) * k / den
    dk = (1.0 + scv) * (1.0 - scv) / den**2
    ds = 2.0 * k * (1.0 - k) / den**2
    dkds = -2.0 * (scv * den + (1.0 - scv * scv) * (2.0 * k - 1.0)) / den**3
    return big_k, dk, ds, dkds


def variability_factor(offered_load: npt.ArrayLike, servers: npt.ArrayLike, scv: npt.ArrayLike) -> FloatArray:
    """``K = W̄_{M/G/c} / W̄_{M/M/c}`` (eq. (19.19)); 1 at ``C² = 1``, ``(1 + C²)/2`` at ``c = 1``."""
    a, c, s = _arrays(offered_load, servers, scv)
    _check_scv(s)
    k, _ = cosmetatos_ratio(a, c)
    return variability_interpolation(k, s)[0]


def mgc_wait_probability(offered_load: npt.ArrayLike, servers: npt.ArrayLike) -> FloatArray:
    """``P^W`` of the M/G/c law: Erlang C (eq. (17)), 1 when ``ρ ≥ 1``."""
    return erlang_c(offered_load, servers)


def mgc_mean_wait(offered_load: npt.ArrayLike, servers: npt.ArrayLike, mean_service: npt.ArrayLike, scv: npt.ArrayLike) -> FloatArray:
    """``W̄ = K · P^W (1/μ) / (c − a)`` (eq. (19.20)); ``inf`` when ``ρ ≥ 1``."""
    a, c, m, s = _arrays(offered_load, servers, mean_service, scv)
    _check_scv(s)
    pw = erlang_c(a, c)
    stable = a < c
    k, _ = cosmetatos_ratio(a, c)
    w = variability_interpolation(k, s)[0] * pw * m / np.where(stable, c - a, 1.0)
    return np.where(stable, w, np.inf)


def mgc_decay(offered_load: npt.ArrayLike, servers: npt.ArrayLike, mean_service: npt.ArrayLike, scv: npt.ArrayLike) -> FloatArray:
    """``θ = P^W / W̄ = (c − a) / (K / μ)`` (eq. (19.21)), ``≤ 0`` when unstable (as ``c μ − λq``)."""
    a, c, m, s = _arrays(offered_load, servers, mean_service, scv)
    _check_scv(s)
    k, _ = cosmetatos_ratio(a, c)
    return (c - a) / (m * variability_interpolation(k, s)[0])


def mgc_waiting_cdf(
    wait: npt.ArrayLike, offered_load: npt.ArrayLike, servers: npt.ArrayLike, mean_service: npt.ArrayLike, scv: npt.ArrayLike
) -> FloatArray:
    """Two-moment waiting law ``F_W(w) = 1 − P^W exp(−θ w)`` for ``w ≥ 0`` (eq. (19.21)); ``≡ 0`` when unstable."""
    from edgeprefix.placement.model.queueing import waiting_cdf

    return waiting_cdf(wait, mgc_wait_probability(offered_load, servers), mgc_decay(offered_load, servers, mean_service, scv))


def mgc_mean_wait_and_derivatives(
    offered_load: npt.ArrayLike, servers: npt.ArrayLike, mean_service: npt.ArrayLike, scv: npt.ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """``W̄`` and its partial derivatives ``∂W̄/∂a``, ``∂W̄/∂(1/μ)``, ``∂W̄/∂C²`` for ``a < c``.

    ``∂W̄/∂a = K' W̄_MM + K W̄_MM'`` with ``K' = ∂K/∂k · dk/da``; ``∂W̄/∂(1/μ) = W̄ / (1/μ)``;
    ``∂W̄/∂C² = ∂K/∂C² · W̄_MM`` (eq. (19.22)).  Raises for ``a ≥ c``.
    """
    a, c, m, s = _arrays(offered_load, servers, mean_service, scv)
    _check_scv(s)
    if np.any(a >= c):
        raise ValueError("offered_load: derivatives of W̄ need ρ < 1 on every tier")
    pw, dpw = _erlang_c_and_slope(a, c)
    gap = c - a
    w_mm = pw * m / gap
    dw_mm = m * (dpw * gap + pw) / gap**2
    k, dk_da = cosmetatos_ratio(a, c)
    big_k, dk, ds, _ = variability_interpolation(k, s)
    w = big_k * w_mm
    return w, dk * dk_da * w_mm + big_k * dw_mm, w / m, ds * w_mm


def mgc_advertised_wait_and_slopes(
    offered_load: npt.ArrayLike,
    servers: npt.ArrayLike,
    mean_service: npt.ArrayLike,
    scv: npt.ArrayLike,
    rho_clip: float = RHO_CLIP,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Advertised delay of the M/G/c law and its slopes ``∂Ŵ/∂a`` and ``∂Ŵ/∂C²`` (eq. (19.23)).

    With ``ā = min(a, ρ_clip c)`` and the M/M/c advertised delay ``Ŵ_MM(a)`` of docs/model.md §7:
    ``Ŵ(a) = K(ā) Ŵ_MM(a) + K'(ā) W̄_MM(ā) (a − ā)``, i.e. ``K W̄_MM`` below the clip and its
    tangent line above it, so ``Ŵ`` is continuous and increasing in ``a`` (C¹ at the clip).
    ``∂Ŵ/∂(1/μ) = Ŵ / (1/μ)`` at fixed ``a`` and ``C²``.  At ``C² = 1`` every value is Erlang C's.
    Tiers with ``c = 0`` advertise ``+inf``.
    """
    if not 0.0 < rho_clip < 1.0:
        raise ValueError(f"rho_clip: must lie in (0, 1), got {plain(rho_clip)}")
    a, c, m, s = _arrays(offered_load, servers, mean_service, scv)
    _check_scv(s)
    w_adv, slope_mm = advertised_wait_and_slope(a, c, m, rho_clip)
    safe_c = np.where(c > 0, c, 1.0)
    a_bar = np.minimum(a, rho_clip * safe_c)
    pw = erlang_c(a_bar, safe_c)
    w_bar = pw * m / (safe_c - a_bar)  # W̄_MM(ā)
    k, dk_da = cosmetatos_ratio(a_bar, safe_c)
    big_k, dk, ds, dkds = variability_interpolation(k, s)
    excess = a - a_bar
    k_prime = dk * dk_da  # dK/da at ā
    wait = big_k * w_adv + k_prime * w_bar * excess
    slope = big_k * slope_mm + k_prime * w_bar
    d_scv = ds * w_adv + dkds * dk_da * w_bar * excess
    on = c > 0
    return np.where(on, wait, np.inf), np.where(on, slope, 0.0), np.where(on, d_scv, 0.0)


def mgc_advertised_wait(
    offered_load: npt.ArrayLike, servers: npt.ArrayLike, mean_service: npt.ArrayLike, scv: npt.ArrayLike, rho_clip: float = RHO_CLIP
) -> FloatArray:
    """The advertised delay of :func:`mgc_advertised_wait_and_slopes` alone."""
    return mgc_advertised_wait_and_slopes(offered_load, servers, mean_service, scv, rho_clip)[0]
