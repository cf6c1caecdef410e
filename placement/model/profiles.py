"""Cache profiles: ancestor-closed prefix sets and their derived quantities (docs/model.md §2–3).

Arrays are indexed ``[s, q]`` (profile, request type) everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.workload import (
    PrefixForest,
    RequestType,
    check_unique_ids,
)

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Profile:
    """Cache profile ``s`` holding the ancestor-closed vertex set ``C_s``."""

    id: str
    prefixes: tuple[str, ...] = ()


def validate_profiles(profiles: tuple[Profile, ...], forest: PrefixForest) -> None:
    """Check ids, known prefixes and ancestor closure of every ``C_s``."""
    if not profiles:
        raise InstanceError("profiles", "at least one cache profile is needed")
    check_unique_ids("profiles", (s.id for s in profiles))
    by_id = forest.by_id
    for i, s in enumerate(profiles):
        members = set(s.prefixes)
        if len(members) != len(s.prefixes):
            raise InstanceError(f"profiles[{i}].prefixes", f"profile {s.id!r} lists a prefix twice")
        for vid in s.prefixes:
            if vid not in by_id:
                raise InstanceError(f"profiles[{i}].prefixes", f"profile {s.id!r} names unknown prefix {vid!r}")
            parent = by_id[vid].parent
            if parent is not None and parent not in members:
                raise InstanceError(
                    f"profiles[{i}].prefixes",
                    f"profile {s.id!r} is not ancestor-closed: {vid!r} needs its parent {parent!r}",
                )


def hit_depth(profiles: tuple[Profile, ...], requests: tuple[RequestType, ...], forest: PrefixForest) -> FloatArray:
    """``h_{s,q} = max{ℓ_v : v ∈ C_s ∩ P_q}`` (0 when empty), shape ``(S, Q)``."""
    depth = {p.id: p.depth for p in forest.prefixes}
    h = np.zeros((len(profiles), len(requests)))
    for i, s in enumerate(profiles):
        cached = set(s.prefixes)
        for j, q in enumerate(requests):
            shared = [depth[v] for v in q.path if v in cached]
            h[i, j] = max(shared, default=0.0)
    return h


def persistent_memory(profiles: tuple[Profile, ...], forest: PrefixForest, kv_per_token: float) -> FloatArray:
    """``B_s = Σ_{v∈C_s} κ_v (ℓ_v − ℓ_{parent(v)})``: each segment counted once, shape ``(S,)``."""
    by_id = forest.by_id
    memory = np.zeros(len(profiles))
    for i, s in enumerate(profiles):
        for vid in s.prefixes:
            v = by_id[vid]
            kappa = kv_per_token if v.kv_per_token is None else v.kv_per_token
            memory[i] += kappa * (v.depth - forest.parent_depth(vid))
    return memory


def concurrency(memory: FloatArray, gpu_memory: float, runtime_per_sequence: float) -> npt.NDArray[np.int64]:
    """``c_s = floor((M − B_s) / m_run)``, clipped at 0; ``c_s < 1`` marks an infeasible profile."""
    slots = np.floor((gpu_memory - memory) / runtime_per_sequence + 1e-12)
    return np.maximum(slots, 0).astype(np.int64)


def dominated_profiles(
    memory: FloatArray, hits: FloatArray, slots: npt.ArrayLike, times: FloatArray | None = None
) -> npt.NDArray[np.bool_]:
    """docs/model.md §9.5: ``s`` is dominated if some ``t`` has ``B_t ≤ B_s``, ``h_{t,q} ≥ h_{s,q}`` ∀q
    and ``c_t ≥ c_s`` with at least one strict inequality. Identical profiles do not dominate
    each other. ``times`` ``(S, K)`` (e.g. first-token and service times of docs/model.md §19)
    adds ``times_t ≤ times_s`` to "no worse" and ``<`` to "strict". Returns a mask of shape ``(S,)``."""
    c = np.asarray(slots, dtype=float)
    no_worse = (
        (memory[:, None] <= memory[None, :]) & np.all(hits[:, None, :] >= hits[None, :, :], axis=2) & (c[:, None] >= c[None, :])
    )  # [t, s]: t is no worse than s
    strictly = (memory[:, None] < memory[None, :]) | np.any(hits[:, None, :] > hits[None, :, :], axis=2) | (c[:, None] > c[None, :])
    if times is not None:
        no_worse &= np.all(times[:, None, :] <= times[None, :, :], axis=2)
        strictly |= np.any(times[:, None, :] < times[None, :, :], axis=2)
    return np.any(no_worse & strictly, axis=0)
