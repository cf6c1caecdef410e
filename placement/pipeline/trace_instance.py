"""A solvable :class:`~edgeprefix.placement.model.instance.Instance` from trace-generated profiles (docs/model.md §9).

Documented defaults for the parts a trace does not give (all overridable):

- ``edge_density`` ``λ_b = 1`` (distance in units where one node sits in a unit area);
- ``target`` ``τ_0 = g(L̄)``: the uncached prefill time of a mean-length request, so meeting
  the target needs reuse or a short queue;
- ``radio_scale`` ``ξ = 0.1 τ_0 π λ_b``: the mean radio cost to the nearest node,
  ``ξ E[R²] = ξ / (π λ_b)``, is 10 % of the target (``α = 2``);
- ``request_intensity`` ``Λ = u λ_b c_0 / Σ_q p_q (g(L_q) + D_q)`` with utilisation
  ``u = 0.6`` of an all-fallback network (``c_0`` the empty profile's concurrency);
- placement: fallback ``"none"``, ``π_min = min(0.1, 1/S)``, default mix uniform over the
  feasible profiles, no memory budget or share caps.

Memory is normalised like ``paper_baseline`` (``m_run = 1``: one active sequence), see
:class:`edgeprefix.placement.pipeline.calibration.Deployment`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.costs import PrefillModel
from edgeprefix.placement.model.instance import Gpu, Instance, Network, PlacementSpec
from edgeprefix.placement.pipeline.profile_generation import FALLBACK_ID, ProfileSet

DEFAULT_UTILISATION = 0.6
DEFAULT_RADIO_SHARE = 0.1


def default_target(profile_set: ProfileSet, g: PrefillModel) -> float:
    """``τ_0 = g(L̄)`` with ``L̄ = Σ_q p_q L_q``."""
    mean_length = float(np.dot(profile_set.types.probability, profile_set.types.length))
    return float(np.asarray(g(mean_length)))


def target_length(g: PrefillModel, tau: float) -> float | None:
    """``L*`` with ``g(L*) = τ_0``: the longest uncached request that meets the target with no radio
    cost and no wait (``0`` if ``τ_0 ≤ g(0+)``; ``None`` if no length reaches it).  Root of the
    nondecreasing ``g`` by Brent's method (docs/model.md (2.10))."""
    if not (math.isfinite(tau) and tau > 0):
        raise ValueError(f"target τ_0 must be > 0 seconds, got {plain(tau)}")

    def gap(n: float) -> float:
        return float(np.asarray(g(n))) - tau

    low, high = 1e-9, 1.0
    if gap(low) >= 0:
        return 0.0
    while gap(high) < 0:
        low, high = high, 2.0 * high
        if high > 1e12:
            return None
    return float(brentq(gap, low, high, xtol=1e-6, rtol=1e-12))


def instance_from_profiles(
    profile_set: ProfileSet,
    g: PrefillModel,
    gpu: Gpu,
    *,
    name: str = "trace",
    target: float | None = None,
    utilisation: float = DEFAULT_UTILISATION,
    edge_density: float = 1.0,
    radio_share: float = DEFAULT_RADIO_SHARE,
) -> Instance:
    """Assemble and validate the instance (network numbers per the module docstring)."""
    if not 0 < utilisation < 1:
        raise ValueError(f"utilisation u must lie in (0, 1), got {plain(utilisation)}")
    if not 0 < radio_share:
        raise ValueError(f"radio_share must be > 0, got {plain(radio_share)}")
    tau = default_target(profile_set, g) if target is None else float(target)
    if not (math.isfinite(tau) and tau > 0):
        raise ValueError(f"target τ_0 must be > 0 seconds, got {plain(tau)}")
    # Σ_q p_q (g(L_q) + D_q) over the instance's types: with length sub-types, E g(L) (docs/model.md §2.3)
    p = np.array([q.probability for q in profile_set.requests])
    full = np.asarray(g(np.array([q.length for q in profile_set.requests])), dtype=float) + np.array(
        [q.decode for q in profile_set.requests]
    )
    ids = [s.id for s in profile_set.profiles]
    c0 = int(profile_set.concurrency[ids.index(FALLBACK_ID)]) if FALLBACK_ID in ids else int(profile_set.concurrency.max())
    intensity = utilisation * edge_density * c0 / float(np.dot(p, full))
    network = Network(
        edge_density=edge_density,
        request_intensity=intensity,
        radio_scale=radio_share * tau * math.pi * edge_density,
        radio_exponent=2.0,
    )
    feasible = [sid for sid, c in zip(ids, profile_set.concurrency) if c >= 1]
    share = 1.0 / len(feasible)
    mix = [(sid, share) for sid in feasible]
    mix[-1] = (mix[-1][0], 1.0 - share * (len(feasible) - 1))
    placement = PlacementSpec(
        target=tau,
        fallback=FALLBACK_ID if FALLBACK_ID in ids else None,
        fallback_min=min(0.1, share) if FALLBACK_ID in ids else 0.0,
        mix=tuple(mix),
    )
    return Instance(name, network, gpu, g, profile_set.prefixes, profile_set.requests, profile_set.profiles, placement)
