"""Seeded instances of trace size (hundreds of profiles, thousands of request types) for the scaling benchmarks.

:func:`~edgeprefix.benchmarks.workloads.synthetic.synthetic_instance` draws its profiles as single root-to-vertex
chains, so it cannot give more profiles than its forest has vertices.  :func:`scale_instance` takes its
forest and request types and draws each profile as the ancestor closure of one to four random vertices
(distinct vertex sets), which gives as many profiles as the benchmarks ask for.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.profiles import Profile


def scale_instance(n_types: int, n_profiles: int, *, alpha: float = 3.5, intensity: float = 2.0, seed: int = 0) -> Instance:
    """``n_profiles`` profiles (the empty one first) × ``n_types`` request types, radio exponent ``alpha``."""
    base = synthetic_instance(n_types, 2, alpha=alpha, intensity=intensity, seed=seed)
    rng = np.random.default_rng(seed + 1)
    parent = {p.id: p.parent for p in base.prefixes}
    ids = [p.id for p in base.prefixes]
    seen: set[frozenset[str]] = {frozenset()}
    profiles = [Profile("none")]
    for _ in range(200 * n_profiles):
        if len(profiles) >= 3 * n_profiles:
            break
        members: set[str] = set()
        for vertex in rng.choice(len(ids), size=int(rng.integers(1, 5))):
            node: str | None = ids[int(vertex)]
            while node is not None and node not in members:
                members.add(node)
                node = parent[node]
        key = frozenset(members)
        if key not in seen:
            seen.add(key)
            order = [v for v in ids if v in members]  # parents come before their children in ``prefixes``
            profiles.append(Profile(f"p{len(profiles)}", tuple(order)))
    candidates = dataclasses.replace(base, profiles=tuple(profiles), placement=dataclasses.replace(base.placement, mix=None))
    kept = tuple(s for s, c in zip(profiles, candidates.concurrency) if c >= 1)[:n_profiles]  # profiles that fit the GPU
    if len(kept) < n_profiles:
        raise ValueError(f"n_profiles: only {len(kept)} distinct feasible profiles exist for {n_types} types; ask for fewer")
    share = 1.0 / n_profiles
    mix = tuple((s.id, share) for s in kept[:-1]) + ((kept[-1].id, 1.0 - share * (n_profiles - 1)),)
    return dataclasses.replace(
        base, name=f"scale_{n_types}x{n_profiles}_a{alpha:g}", profiles=kept, placement=dataclasses.replace(base.placement, mix=mix)
    )
