"""Exact nearest-distance Monte Carlo of the association law (docs/model.md §6, §13, eq. (52)).

No finite window: the distance to the nearest node of each tier is drawn exactly,
``R_s = sqrt(−ln U / (π λ_s))``, and every sample is routed by the biased rule
``s* = argmin_s ξ R_s^α + β_{s,q}``.  The empirical ``A_{s,q}`` and serving distances are
then compared with Theorem 1.

``sampler="sobol"`` (default) draws ``U`` from a scrambled Sobol sequence (randomised
quasi-Monte Carlo): still an exact sample of every ``R_s`` and unbiased, with an error far
below the binomial ``sqrt(A (1 − A) / n)`` of ``sampler="random"``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain

if TYPE_CHECKING:
    from edgeprefix.placement.model.instance import Instance

FloatArray = npt.NDArray[np.float64]
SAMPLERS = ("sobol", "random")


@dataclass(frozen=True)
class AssociationSample:
    """Result of :func:`simulate_association`.

    Attributes
    ----------
    association : empirical ``A_{s,q}``, shape ``(S, Q)``.
    choice : selected profile per sample, shape ``(Q, n)``.
    serving_distance : distance to the selected node, shape ``(Q, n)``.
    nearest : the sampled ``R_s``, shape ``(S, n)`` (``inf`` for empty tiers).
    samples : n.
    """

    association: FloatArray
    choice: npt.NDArray[np.int64] = field(repr=False)
    serving_distance: FloatArray = field(repr=False)
    nearest: FloatArray = field(repr=False)
    samples: int = 0

    def standard_error(self) -> FloatArray:
        """Binomial standard error ``sqrt(A (1 − A) / n)`` of plain Monte Carlo, ``(S, Q)``."""
        a = self.association
        return np.sqrt(a * (1.0 - a) / self.samples)

    def mean_distance(self) -> FloatArray:
        """Empirical ``R̄_{s,q}`` (``nan`` where a tier never serves ``q``), ``(S, Q)``."""
        s_count, q_count = self.association.shape
        out = np.full((s_count, q_count), np.nan)
        for q in range(q_count):
            sums = np.bincount(self.choice[q], weights=self.serving_distance[q], minlength=s_count)
            counts = np.bincount(self.choice[q], minlength=s_count)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[:, q] = np.where(counts > 0, sums / counts, np.nan)
        return out

    def serving_distance_cdf(self, r: npt.ArrayLike) -> FloatArray:
        """Empirical ``P(R ≤ r | s, q)``, shape ``(S, Q, len(r))`` (``nan`` if never served)."""
        r = np.atleast_1d(np.asarray(r, dtype=float))
        s_count, q_count = self.association.shape
        out = np.full((s_count, q_count, r.size), np.nan)
        for q in range(q_count):
            for s in range(s_count):
                d = np.sort(self.serving_distance[q][self.choice[q] == s])
                if d.size:
                    out[s, q] = np.searchsorted(d, r, side="right") / d.size
        return out


def nearest_distances(
    densities: npt.ArrayLike, samples: int, *, seed: int | np.random.Generator | None = None, sampler: str = "sobol"
) -> FloatArray:
    """Exact nearest-node distances ``R_s = sqrt(−ln U / (π λ_s))``, shape ``(S, n)``.

    Parameters
    ----------
    densities : λ_s per tier; a tier with ``λ_s = 0`` gets ``R_s = inf``.
    samples : n >= 1.
    seed : seed or generator (the only source of randomness).
    sampler : ``"sobol"`` (scrambled Sobol, randomised QMC) or ``"random"`` (i.i.d. uniforms).
    """
    lam = np.asarray(densities, dtype=float)
    if lam.ndim != 1 or np.any(~np.isfinite(lam)) or np.any(lam < 0) or not np.any(lam > 0):
        raise ValueError(f"densities: λ_s must be finite, >= 0 with one > 0, got {lam.tolist()}")
    if int(samples) < 1:
        raise ValueError(f"samples: must be >= 1, got {plain(samples)}")
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler: unknown {sampler!r} (valid: {list(SAMPLERS)})")
    rng = np.random.default_rng(seed)
    n = int(samples)
    if sampler == "sobol":
        from scipy.stats import qmc  # imported here: scipy.stats costs a second to import (i.i.d. draws never load it)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # n need not be a power of two
            u = qmc.Sobol(d=lam.size, scramble=True, seed=rng).random(n).T
    else:
        u = rng.random((lam.size, n))
    u = np.clip(u, np.finfo(float).tiny, 1.0)
    with np.errstate(divide="ignore"):
        r = np.sqrt(-np.log(u) / (np.pi * lam[:, None]))
    return np.where(lam[:, None] > 0, r, np.inf)


def route_by_bias(nearest: npt.ArrayLike, bias: npt.ArrayLike, radio_scale: float, radio_exponent: float) -> npt.NDArray[np.int64]:
    """Selected profile ``argmin_s ξ R_s^α + β_{s,q}`` for every sample, shape ``(Q, n)``.

    ``nearest`` is ``(S, n)``, ``bias`` is ``β_{s,q}`` of shape ``(S, Q)``.
    """
    r = np.asarray(nearest, dtype=float)
    beta = np.asarray(bias, dtype=float)
    if beta.ndim != 2 or beta.shape[0] != r.shape[0]:
        raise ValueError(f"bias: expected shape (S={r.shape[0]}, Q), got {beta.shape}")
    radio = radio_scale * r**radio_exponent  # (S, n)
    cost = radio[:, None, :] + beta[:, :, None]  # (S, Q, n)
    return np.argmin(cost, axis=0)


def simulate_association(
    densities: npt.ArrayLike,
    bias: npt.ArrayLike,
    radio_scale: float,
    radio_exponent: float = 2.0,
    *,
    samples: int = 200_000,
    seed: int | np.random.Generator | None = None,
    sampler: str = "sobol",
) -> AssociationSample:
    """Monte Carlo association ``A_{s,q}`` (Theorem 1 check, eq. (52)).

    Parameters
    ----------
    densities : λ_s = π_s λ_b, shape ``(S,)``.
    bias : β_{s,q} the router uses, shape ``(S, Q)``.
    radio_scale, radio_exponent : ξ and α of ``T_com(r) = ξ r^α``.
    samples, seed, sampler : see :func:`nearest_distances`.
    """
    lam = np.asarray(densities, dtype=float)
    beta = np.array(bias, dtype=float)
    beta[lam <= 0, :] = np.inf  # empty tiers are never candidates
    r = nearest_distances(lam, samples, seed=seed, sampler=sampler)
    choice = route_by_bias(r, beta, radio_scale, radio_exponent)
    served = np.take_along_axis(r, choice, axis=0)  # (Q, n)
    s_count, q_count = beta.shape
    counts = np.stack([np.bincount(choice[q], minlength=s_count) for q in range(q_count)], axis=1)
    return AssociationSample(counts / float(samples), choice, served, r, int(samples))


def simulate_instance_association(
    instance: Instance,
    mix: Mapping[str, float] | npt.ArrayLike | None,
    bias: npt.ArrayLike,
    *,
    samples: int = 200_000,
    seed: int | np.random.Generator | None = None,
    sampler: str = "sobol",
) -> AssociationSample:
    """:func:`simulate_association` with ``λ_s = π_s λ_b``, ``ξ`` and ``α`` taken from an instance."""
    pi = instance.mix_vector(mix)
    net = instance.network
    return simulate_association(
        pi * net.edge_density, bias, net.radio_scale, net.radio_exponent, samples=samples, seed=seed, sampler=sampler
    )
