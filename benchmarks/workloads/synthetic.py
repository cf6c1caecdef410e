"""Seeded synthetic instances of any size, for speed measurements and optimiser comparisons.

The forest has ``roots`` system prompts, each with ``fanout`` tool specs, each with ``fanout``
documents; request types follow root → tool → document paths; profiles cache nested subtrees
so that deeper profiles cost more memory and concurrency.
"""

from __future__ import annotations

import numpy as np

from edgeprefix.placement.model.costs import QuadraticPrefill
from edgeprefix.placement.model.instance import Gpu, Instance, Network, PlacementSpec
from edgeprefix.placement.model.profiles import Profile
from edgeprefix.placement.model.workload import Prefix, RequestType


def synthetic_instance(
    n_types: int = 64,
    n_profiles: int = 16,
    *,
    alpha: float = 2.5,
    intensity: float = 2.0,
    seed: int = 0,
    name: str | None = None,
) -> Instance:
    """A feasible instance with ``n_types`` request types and ``n_profiles`` profiles (incl. the empty one)."""
    if n_types < 1 or n_profiles < 2:
        raise ValueError(f"n_types >= 1 and n_profiles >= 2 are needed, got {n_types}, {n_profiles}")
    rng = np.random.default_rng(seed)
    roots = max(1, int(round(n_types ** (1 / 3))))
    fanout = max(1, int(np.ceil(np.sqrt(n_types / roots))))
    prefixes: list[Prefix] = []
    leaves: list[tuple[str, ...]] = []
    for r in range(roots):
        rid = f"sys{r}"
        base = float(rng.integers(400, 900))
        prefixes.append(Prefix(rid, base))
        for t in range(fanout):
            tid = f"{rid}.tool{t}"
            tdepth = base + float(rng.integers(600, 1600))
            prefixes.append(Prefix(tid, tdepth, rid))
            for d in range(fanout):
                did = f"{tid}.doc{d}"
                prefixes.append(Prefix(did, tdepth + float(rng.integers(300, 1200)), tid))
                leaves.append((rid, tid, did))
    depth = {p.id: p.depth for p in prefixes}
    chosen = rng.choice(len(leaves), size=n_types, replace=len(leaves) < n_types)
    weights = rng.dirichlet(np.full(n_types, 2.0))
    weights = weights / weights.sum()
    requests = []
    for i, leaf_index in enumerate(chosen):
        path = leaves[leaf_index][: int(rng.integers(1, 4))]
        length = depth[path[-1]] + float(rng.integers(200, 2500))
        requests.append(RequestType(f"q{i}", float(weights[i]), length, float(rng.uniform(0.4, 2.5)), path))
    # fix rounding so probabilities sum to 1 within 1e-12
    total = sum(q.probability for q in requests)
    requests[-1] = RequestType(
        requests[-1].id, requests[-1].probability + 1.0 - total, requests[-1].length, requests[-1].decode, requests[-1].path
    )
    profiles = [Profile("none")]
    candidates = [p.id for p in prefixes]
    while len(profiles) < n_profiles:
        top = candidates[int(rng.integers(len(candidates)))]
        chain: list[str] = []
        node = next(p for p in prefixes if p.id == top)
        while True:
            chain.insert(0, node.id)
            if node.parent is None:
                break
            node = next(p for p in prefixes if p.id == node.parent)
        members = tuple(chain)
        if all(set(members) != set(s.prefixes) for s in profiles):
            profiles.append(Profile(f"p{len(profiles)}", members))
    uniform = tuple((s.id, 1.0 / n_profiles) for s in profiles)
    uniform = uniform[:-1] + ((uniform[-1][0], 1.0 - sum(v for _, v in uniform[:-1])),)
    return Instance(
        name=name or f"synthetic_{n_types}x{n_profiles}",
        network=Network(edge_density=1.0, request_intensity=intensity, radio_scale=0.375, radio_exponent=alpha),
        gpu=Gpu(memory=12.5, runtime_per_sequence=1.0, kv_per_token=0.0012),
        prefill=QuadraticPrefill(1.25e-4, 6.0e-8),
        prefixes=tuple(prefixes),
        requests=tuple(requests),
        profiles=tuple(profiles),
        placement=PlacementSpec(target=1.2, fallback="none", fallback_min=0.05, mix=uniform),
    )
