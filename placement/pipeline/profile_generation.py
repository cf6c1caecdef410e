"""Trace-driven cache profiles and request types (docs/model.md §9.2–9.6).

From a :class:`~edgeprefix.placement.pipeline.forest.RadixForest`, a prefill law ``g`` and ``κ``:

- :func:`value_scores` — ``Γ_v = p̂_v [g(L_v) − g(L_v − ℓ_v)] / B_v`` with ``B_v = κ ℓ_v`` (eq. (48));
- :func:`marginal_values` — ``val_v = Σ_{q through v} p_q [g(L_q − ℓ_parent(v)) − g(L_q − ℓ_v)]``,
  which add up along a path to ``Σ_q p_q Δ_{s,q}`` (§9.3c);
- generators: :func:`greedy_profile` (Γ under a memory cap), :func:`family_profiles` (one per
  top-level branch below a shared root), :func:`knapsack_profile` (tree knapsack MILP);
- :func:`request_types` — requests grouped by their deepest retained vertex (§9.4);
- :func:`prune_dominated` — §9.5 through :func:`edgeprefix.placement.model.profiles.dominated_profiles`;
- :func:`generate_profiles` — all of the above with the empty fallback profile always first.

"Requests" below are the per-leaf aggregates of the forest: the requests ending at the same
vertex are represented by their mean input length (exact to within one block), so nothing
per request is needed.  Only vertices seen in at least ``k_min`` requests are ever retained
(minimum support, §9.6).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.lengths import length_bins as bin_lengths
from edgeprefix.placement.model.lengths import replace_lengths
from edgeprefix.placement.model.profiles import (
    Profile,
    concurrency,
    dominated_profiles,
    hit_depth,
    persistent_memory,
)
from edgeprefix.placement.model.workload import Prefix, PrefixForest, RequestType
from edgeprefix.placement.pipeline.forest import RadixForest
from edgeprefix.placement.pipeline.knapsack import KnapsackSolver, knapsack_dp

FloatArray = npt.NDArray[np.float64]
Prefill = Callable[[npt.ArrayLike], FloatArray]
FALLBACK_ID = "none"


# ------------------------------------------------------------------------------------------
# Scores and marginal values
# ------------------------------------------------------------------------------------------
# length sub-types of `profiles` (docs/model.md (2.10)): 16 bins per type, split at the target's threshold lengths,
# chosen on the Mooncake training half alone by their in-sample quadrature error (benchmarks/README.md 4b)
DEFAULT_LENGTH_BINS = 16
DEFAULT_BIN_EDGES_AT_TARGET = True


def _leaves(forest: RadixForest) -> tuple[np.ndarray, FloatArray, FloatArray]:
    """Leaf vertices (requests end there), their weight ``p_w = n_end / N`` and mean ``L_w``."""
    leaves = np.flatnonzero(forest.ends > 0)
    weight = forest.ends[leaves] / forest.n_requests
    length = forest.end_input_sum[leaves] / forest.ends[leaves]
    return leaves, weight, length


def value_scores(forest: RadixForest, g: Prefill, kappa: float) -> FloatArray:
    """``Γ_v = p̂_v [g(L_v) − g(L_v − ℓ_v)] / (κ ℓ_v)`` (eq. (48)): saved prefill per persistent byte.

    Computed :data:`CHUNK` vertices at a time (every entry is its vertex's alone: the same numbers
    as over the whole forest at once, in bounded memory)."""
    out = np.empty(forest.n_vertices)
    for cols in _chunks(forest.n_vertices):
        count, depth = forest.count[cols], forest.depth[cols]
        length = forest.input_sum[cols] / count
        saved = np.asarray(g(length)) - np.asarray(g(np.maximum(length - depth, 0.0)))
        out[cols] = count / forest.n_requests * saved / (kappa * depth)
    return out


def marginal_values(forest: RadixForest, g: Prefill) -> FloatArray:
    """``val_v = Σ_{q through v} p_q [g(L_q − ℓ_parent(v)) − g(L_q − ℓ_v)]`` (§9.3c).

    Level by level (each leaf, then its parent, ...): never all (leaf, ancestor) pairs at once; a
    level's pairs go :data:`CHUNK` at a time, in order, so every vertex's sum adds the same terms in
    the same order as one pass over all of them."""
    parent, depth, ends = forest.parent, forest.depth, forest.ends
    total = np.zeros(forest.n_vertices)
    index: Any = np.int32 if forest.n_vertices < 2**31 else np.int64
    leaf = np.flatnonzero(ends > 0).astype(index)  # each pair's leaf (requests end there) ...
    v = leaf.copy()  # ... and the leaf's ancestor at this level
    while leaf.size:
        for cols in _chunks(leaf.size):
            w, u = leaf[cols], v[cols]
            lq = forest.end_input_sum[w] / ends[w]  # L_w, the mean input length of the requests ending at w
            up = parent[u]
            parent_depth = np.where(up >= 0, depth[np.maximum(up, 0)], 0.0)
            gain = np.asarray(g(lq - parent_depth)) - np.asarray(g(np.maximum(lq - depth[u], 0.0)))
            np.add.at(total, u, ends[w] / forest.n_requests * gain)  # p_w = n_end / N
            v[cols] = up  # the next level's ancestor (-1 past a root)
        keep = v >= 0
        leaf, v = leaf[keep], v[keep]
    return total


CHUNK = 1 << 18  # vertices (or leaf-ancestor pairs) per vectorised step of the per-vertex passes


def _chunks(n: int) -> list[slice]:
    return [slice(lo, min(lo + CHUNK, n)) for lo in range(0, n, CHUNK)]


def eligible_vertices(forest: RadixForest, k_min: int) -> npt.NDArray[np.bool_]:
    """Vertices seen in at least ``k_min`` requests (ancestor-closed since counts shrink downwards)."""
    if k_min < 1:
        raise ValueError(f"min support k_min must be >= 1, got {plain(k_min)}")
    return forest.count >= k_min


def _closed(forest: RadixForest, chosen: Sequence[int]) -> tuple[int, ...]:
    members = set(int(v) for v in chosen)
    for v in list(members):
        members.update(forest.path(v))
    return tuple(sorted(members))


def is_ancestor_closed(forest: RadixForest, vertices: Sequence[int]) -> bool:
    """``v ∈ C ⇒ parent(v) ∈ C``."""
    members = set(vertices)
    return all(forest.parent[v] < 0 or int(forest.parent[v]) in members for v in members)


def profile_weight(forest: RadixForest, vertices: Sequence[int], kappa: float) -> float:
    """``B_s = Σ_{v ∈ C_s} κ (ℓ_v − ℓ_parent(v))``."""
    idx = np.asarray(list(vertices), dtype=np.int64)
    return float(kappa * _segment(forest, idx).sum()) if idx.size else 0.0


def _segment(forest: RadixForest, idx: np.ndarray) -> FloatArray:
    """``forest.segment[idx]`` without the whole forest's column (``ℓ_v − ℓ_parent(v)`` for ``v`` in ``idx``)."""
    up = forest.parent[idx]
    return forest.depth[idx] - np.where(up >= 0, forest.depth[np.maximum(up, 0)], 0.0)


# ------------------------------------------------------------------------------------------
# Generators
# ------------------------------------------------------------------------------------------
def greedy_profile(
    forest: RadixForest,
    scores: FloatArray,
    kappa: float,
    cap: float,
    eligible: npt.NDArray[np.bool_],
    *,
    within: Sequence[int] | None = None,
) -> tuple[int, ...]:
    """Greedy expansion on ``scores`` (``Γ_v``): repeatedly add the best frontier vertex whose
    own segment still fits under ``cap``; the set stays ancestor-closed.  ``within`` forces a
    starting set (its vertices are taken first and count against the cap)."""
    chosen: list[int] = list(_closed(forest, within or ()))
    seg = np.zeros(forest.n_vertices)  # read at the eligible vertices (the frontier) and the start set only
    at = np.union1d(np.flatnonzero(eligible), np.asarray(chosen, dtype=np.int64))
    seg[at] = kappa * _segment(forest, at)
    used = float(seg[chosen].sum()) if chosen else 0.0
    members = set(chosen)
    frontier = [
        v for v in (forest.roots if not members else [c for m in members for c in forest.children(m)]) if v not in members and eligible[v]
    ]
    if within:
        frontier = [v for v in frontier if _below(forest, v, within)]
    heap = [(-scores[v], v) for v in frontier]
    heapq.heapify(heap)
    while heap:
        _, v = heapq.heappop(heap)
        if used + seg[v] > cap * (1 + 1e-9) or scores[v] <= 0:
            continue
        chosen.append(v)
        used += seg[v]
        for c in forest.children(v):
            if eligible[c]:
                heapq.heappush(heap, (-scores[c], c))
    return tuple(sorted(chosen))


def _below(forest: RadixForest, v: int, base: Sequence[int]) -> bool:
    """``v`` lies in the subtree of the deepest vertex of ``base`` (a root-down chain)."""
    deepest = max(base, key=lambda u: forest.depth[u])
    return deepest in forest.path(v)


def shared_root(forest: RadixForest, eligible: npt.NDArray[np.bool_]) -> tuple[int, ...]:
    """The chain shared by every request (e.g. the Mooncake block 0), empty if none."""
    chain: list[int] = []
    roots = forest.roots
    if len(roots) != 1 or forest.count[roots[0]] != forest.n_requests or not eligible[roots[0]]:
        return ()
    v = roots[0]
    while True:
        chain.append(v)
        kids = [c for c in forest.children(v) if forest.count[c] == forest.n_requests]
        if len(kids) != 1 or not eligible[kids[0]]:
            return tuple(chain)
        v = kids[0]


def family_profiles(
    forest: RadixForest, scores: FloatArray, kappa: float, cap: float, eligible: npt.NDArray[np.bool_], n_families: int
) -> list[tuple[str, tuple[int, ...]]]:
    """One profile per request family: the ``n_families`` most requested top-level branches
    (children of the shared root, or roots when there is none), each grown greedily on Γ
    inside its branch under ``cap``."""
    base = shared_root(forest, eligible)
    heads = list(forest.children(base[-1])) if base else list(forest.roots)
    heads = [h for h in heads if eligible[h]]
    heads.sort(key=lambda h: (-forest.count[h], h))
    out = []
    for h in heads[:n_families]:
        start = _closed(forest, [h])
        if profile_weight(forest, start, kappa) > cap * (1 + 1e-9):
            continue
        out.append((f"family_{forest.vertex_id(h)}", greedy_profile(forest, scores, kappa, cap, eligible, within=start)))
    return out


def knapsack_profile(
    forest: RadixForest,
    values: FloatArray,
    kappa: float,
    cap: float,
    eligible: npt.NDArray[np.bool_],
    *,
    knapsack: KnapsackSolver = knapsack_dp,
) -> tuple[int, ...]:
    """Tree knapsack (§9.3c) over the eligible (``n_v >= k_min``) vertices, solved by ``knapsack``
    (the exact DP by default; :func:`edgeprefix.formulations.tree_knapsack.solve_knapsack` is the MILP)."""
    sub = np.flatnonzero(eligible)
    renumber = np.full(forest.n_vertices, -1, dtype=np.int64)
    renumber[sub] = np.arange(sub.size)
    parent = np.where(forest.parent[sub] >= 0, renumber[np.maximum(forest.parent[sub], 0)], -1)
    weights = kappa * _segment(forest, sub)
    result = knapsack(parent, weights, values[sub], cap)
    return tuple(sorted(int(sub[i]) for i in result.selected))


# ------------------------------------------------------------------------------------------
# Request types
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TypeGroups:
    """Request types: ``vertex[q]`` is the deepest retained vertex (``-1`` none), ``p_q``,
    ``L_q``, mean output tokens, and ``D_q = output × decode_per_token``."""

    vertex: tuple[int, ...]
    probability: FloatArray
    length: FloatArray
    output: FloatArray
    decode: FloatArray
    # per type, its length sub-types (input means, decode means, weights) when binned (docs/model.md §2.3)
    bins: tuple[tuple[FloatArray, FloatArray, FloatArray], ...] | None = None
    # per type, the input lengths between its bins (docs/model.md (2.8)) when binned
    bin_edges: tuple[FloatArray, ...] | None = None


def _leaf_columns(forest: RadixForest, leaves: np.ndarray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``p_w = n_end / N``, the mean input ``L_w`` and the mean output of the requests ending at each of ``leaves``."""
    ends = forest.ends[leaves]
    return ends / forest.n_requests, forest.end_input_sum[leaves] / ends, forest.end_output_sum[leaves] / ends


def _weighted_quantile(values: FloatArray, weights: FloatArray, q: float) -> float:
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, q * cum[-1] - 1e-12)])


def _deepest_marked(parent: np.ndarray, marked: npt.NDArray[np.bool_]) -> np.ndarray:
    """Deepest marked ancestor-or-self of every vertex (``-1`` if none), by pointer jumping:
    ``anc[v]`` skips unmarked vertices only, so ``O(log depth)`` vectorised rounds."""
    index: Any = np.int32 if parent.size < 2**31 else np.int64  # vertex numbers: half the memory of int64 on any trace
    deepest = np.where(marked, np.arange(parent.size, dtype=index), index(-1))
    anc = parent.astype(index)
    todo = np.flatnonzero((deepest < 0) & (anc >= 0)).astype(index)
    while todo.size:
        up = anc[todo]
        deepest[todo] = deepest[up]
        anc[todo] = anc[up]
        todo = todo[(deepest[todo] < 0) & (anc[todo] >= 0)]
    return deepest


def _hit_depths(forest: RadixForest, retained: npt.NDArray[np.bool_], vertex: int) -> FloatArray:
    """The hit depths a profile can give the type of ``vertex`` (``n_vertices``: none): 0 and the
    token depths of the retained vertices on its path (profiles are ancestor-closed)."""
    if vertex >= forest.n_vertices or vertex < 0:
        return np.zeros(1)
    path = np.asarray(forest.path(vertex), dtype=np.intp)
    return np.concatenate(([0.0], forest.depth[path[retained[path]]]))


def request_types(
    forest: RadixForest,
    retained: Sequence[int],
    decode_per_token: float,
    *,
    length_quantile: float | None = None,
    length_bins: int | None = None,
    length_threshold: float | None = None,
) -> TypeGroups:
    """Group requests by the deepest retained vertex on their path (§9.4).

    ``L_q`` is the mean input length of the group, or the ``length_quantile`` of it computed
    from the per-leaf mean lengths (exact to within one block).  ``length_bins = K`` also gives
    each type's length distribution as ``K`` bins of its per-leaf lengths of least within-bin
    variance, each at its conditional mean input and decode (docs/model.md §2.3; ``L_q`` stays the mean).
    ``length_threshold`` ``L*`` (with bins): the uncached length whose prefill is the target,
    ``g(L*) = τ_0``; a type's bins are also split at ``L* + h`` for every hit depth ``h`` a profile
    can give it (0 and the depths of the retained vertices on its path), so no bin straddles a
    threshold of its coverage (docs/model.md (2.10)).
    """
    if length_bins is not None and (length_bins < 1 or length_quantile is not None):
        raise ValueError(f"length_bins must be >= 1 and excludes length_quantile, got {length_bins!r}")
    if decode_per_token < 0:
        raise ValueError(f"decode_per_token must be >= 0, got {plain(decode_per_token)}")
    if length_threshold is not None and not (np.isfinite(length_threshold) and length_threshold >= 0):
        raise ValueError(f"length_threshold must be a finite number of tokens >= 0, got {plain(length_threshold)}")
    if length_quantile is not None and not 0 <= length_quantile <= 1:
        raise ValueError(f"length_quantile must lie in [0, 1], got {plain(length_quantile)}")
    keep = np.zeros(forest.n_vertices, dtype=bool)
    keep[list(retained)] = True
    deepest = _deepest_marked(forest.parent, keep)  # keep (one byte per vertex) stays: the bin edges read it
    leaves = np.flatnonzero(forest.ends > 0).astype(deepest.dtype)  # per-leaf columns are gathered per type below
    group = deepest[leaves]
    del deepest
    group[group < 0] = forest.n_vertices
    vertices = np.unique(group)
    inverse = np.searchsorted(vertices, group)  # np.unique's inverse without sorting every leaf again
    del group
    n = np.bincount(inverse, weights=forest.ends[leaves])  # read as float64 (counts: exact)
    probability = n / forest.n_requests
    if length_quantile is None:
        lengths = np.bincount(inverse, weights=forest.end_input_sum[leaves]) / n
    else:
        quantiles = []
        for k in range(vertices.size):
            weight, length, _ = _leaf_columns(forest, leaves[inverse == k])
            quantiles.append(_weighted_quantile(length, weight, length_quantile))
        lengths = np.array(quantiles)
    outputs = np.bincount(inverse, weights=forest.end_output_sum[leaves]) / n
    bins: list[tuple[FloatArray, FloatArray, FloatArray]] | None = None
    between_bins: list[FloatArray] = []
    if length_bins is not None and length_bins > 1:
        bins = []
        for k in range(vertices.size):
            edges = () if length_threshold is None else length_threshold + _hit_depths(forest, keep, int(vertices[k]))
            mine = leaves if vertices.size == 1 else leaves[inverse == k]  # one type holds every leaf: no mask
            weight, length, leaf_output = _leaf_columns(forest, mine)
            inp, out, w, between = bin_lengths(length, weight, length_bins, leaf_output, edges=edges, return_edges=True)
            bins.append((inp, out * decode_per_token, w))
            between_bins.append(between)
    retained = tuple(int(u) if u < forest.n_vertices else -1 for u in vertices)  # "no retained vertex" last
    return TypeGroups(
        retained,
        probability,
        lengths,
        outputs,
        outputs * decode_per_token,
        None if bins is None else tuple(bins),
        None if bins is None else tuple(between_bins),
    )


# ------------------------------------------------------------------------------------------
# Assembly and pruning
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ProfileSet:
    """Generated profiles with their request types, in instance form.

    ``prefixes``/``requests``/``profiles`` are ready for :class:`edgeprefix.placement.model.instance.Instance`;
    ``memory`` ``B_s``, ``hits`` ``h_{s,q}`` ``(S, Q)`` and ``concurrency`` ``c_s`` are given
    for the GPU numbers used; ``pruned`` names the dominated profiles removed (§9.5).
    """

    prefixes: tuple[Prefix, ...]
    requests: tuple[RequestType, ...]
    profiles: tuple[Profile, ...]
    vertices: tuple[tuple[int, ...], ...]
    types: TypeGroups
    memory: FloatArray
    hits: FloatArray
    concurrency: npt.NDArray[np.int64]
    pruned: tuple[str, ...]
    dropped: tuple[str, ...]


class _VertexIds:
    """``forest.ids[v]`` on demand: only the vertices an instance names get a string."""

    def __init__(self, forest: RadixForest) -> None:
        self._forest = forest

    def __getitem__(self, v: int) -> str:
        return self._forest.vertex_id(v)


def assemble(
    forest: RadixForest,
    named: Sequence[tuple[str, tuple[int, ...]]],
    *,
    decode_per_token: float,
    length_quantile: float | None = None,
    length_bins: int | None = None,
    length_threshold: float | None = None,
) -> tuple[tuple[Prefix, ...], tuple[RequestType, ...], tuple[Profile, ...], TypeGroups]:
    """Instance objects for profiles ``named`` (id, vertex set): prefixes = union of the sets."""
    retained = sorted(set().union(*[set(s) for _, s in named])) if named else []
    ids = _VertexIds(forest)
    prefixes = tuple(
        Prefix(ids[v], float(forest.depth[v]), None if forest.parent[v] < 0 else ids[int(forest.parent[v])], blocks=forest.chain(v))
        for v in retained
    )
    types = request_types(
        forest, retained, decode_per_token, length_quantile=length_quantile, length_bins=length_bins, length_threshold=length_threshold
    )
    declared = tuple(
        RequestType(
            id=f"q_{ids[u]}" if u >= 0 else "q_uncached",
            probability=float(p),
            length=float(lq),
            decode=float(d),
            path=tuple(ids[w] for w in forest.path(u)) if u >= 0 else (),
        )
        for u, p, lq, d in zip(types.vertex, types.probability, types.length, types.decode)
    )
    requests = (
        declared
        if types.bins is None
        else tuple(
            sub
            for q, (inp, dec, w), e in zip(declared, types.bins, types.bin_edges or (None,) * len(types.bins))
            for sub in replace_lengths(q, inp, dec, w, e)
        )
    )
    profiles = tuple(Profile(name, tuple(ids[v] for v in sorted(s))) for name, s in named)
    return prefixes, requests, profiles, types


def profile_metrics(
    prefixes: tuple[Prefix, ...],
    requests: tuple[RequestType, ...],
    profiles: tuple[Profile, ...],
    kappa: float,
    gpu_memory: float,
    runtime_per_sequence: float = 1.0,
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int64]]:
    """``B_s``, ``h_{s,q}`` and ``c_s`` through :mod:`edgeprefix.placement.model.profiles` (one source of truth)."""
    tree = PrefixForest(prefixes)
    memory = persistent_memory(profiles, tree, kappa)
    return memory, hit_depth(profiles, requests, tree), concurrency(memory, gpu_memory, runtime_per_sequence)


def prune_dominated(
    forest: RadixForest,
    named: Sequence[tuple[str, tuple[int, ...]]],
    *,
    kappa: float,
    gpu_memory: float,
    runtime_per_sequence: float = 1.0,
    type_vertices: Sequence[int] | None = None,
) -> tuple[list[tuple[str, tuple[int, ...]]], list[str]]:
    """Remove the profiles dominated in (``B_s``, ``h_{s,q}`` ∀q, ``c_s``) (§9.5); returns
    (kept, removed ids).

    Request types are the groups of the deepest vertex of ``type_vertices`` (default: the
    union of all candidates, the finest grouping any of them distinguishes).  With the
    finest grouping a profile can only be dominated by one that caches a superset at no
    more memory — i.e. an identical set — so dominance bites when types are coarser than
    the profiles (``type_vertices`` a subset) or after deduplication is skipped.
    """
    types_from = named if type_vertices is None else [("types", tuple(_closed(forest, type_vertices)))]
    _, requests, _, _ = assemble(forest, types_from, decode_per_token=0.0)
    prefixes, _, profiles, _ = assemble(forest, named, decode_per_token=0.0)
    by_id = {p.id for p in prefixes}
    extra, _, _, _ = assemble(forest, types_from, decode_per_token=0.0)
    prefixes = prefixes + tuple(p for p in extra if p.id not in by_id)
    memory, hits, slots = profile_metrics(prefixes, requests, profiles, kappa, gpu_memory, runtime_per_sequence)
    mask = dominated_profiles(memory, hits, slots)
    kept = [p for p, bad in zip(named, mask) if not bad]
    return kept, [p[0] for p, bad in zip(named, mask) if bad]


def generate_profiles(
    forest: RadixForest,
    g: Prefill,
    *,
    kappa: float,
    gpu_memory: float,
    cap: float,
    decode_per_token: float,
    runtime_per_sequence: float = 1.0,
    max_profiles: int = 6,
    k_min: int = 2,
    ladder: Sequence[float] = (1.0, 0.5, 0.25),
    n_families: int = 2,
    length_quantile: float | None = None,
    knapsack: KnapsackSolver = knapsack_dp,
    length_bins: int | None = None,
    length_threshold: float | None = None,
) -> ProfileSet:
    """Candidate profiles → dedupe → drop infeasible (``c_s < 1``) → prune dominated → keep
    at most ``max_profiles`` (the empty fallback ``"none"`` always first).

    Candidates in preference order: tree knapsack at ``cap × ladder`` (``knapsack``,
    ``knapsack_50`` ...), greedy on Γ at ``cap``, then one profile per top family.  ``knapsack``
    solves the tree knapsack (exact DP by default; the CLI passes the HiGHS MILP).  ``length_threshold``:
    see :func:`request_types` (bin edges at the target, docs/model.md (2.10)).
    """
    if max_profiles < 1:
        raise ValueError(f"max_profiles must be >= 1, got {plain(max_profiles)}")
    if not (np.isfinite(cap) and cap >= 0):
        raise ValueError(f"memory cap must be finite and >= 0, got {plain(cap)}")
    eligible = eligible_vertices(forest, k_min)
    scores = value_scores(forest, g, kappa)
    values = marginal_values(forest, g)
    named: list[tuple[str, tuple[int, ...]]] = [(FALLBACK_ID, ())]
    for share in ladder:
        label = "knapsack" if share == 1 else f"knapsack_{round(100 * share)}"
        named.append((label, knapsack_profile(forest, values, kappa, cap * share, eligible, knapsack=knapsack)))
    named.append(("greedy", greedy_profile(forest, scores, kappa, cap, eligible)))
    named.extend(family_profiles(forest, scores, kappa, cap, eligible, n_families))
    seen: set[tuple[int, ...]] = set()
    unique = []
    for name, members in named:
        if members not in seen:
            seen.add(members)
            unique.append((name, members))
    memory = np.array([profile_weight(forest, s, kappa) for _, s in unique])
    feasible = np.floor((gpu_memory - memory) / runtime_per_sequence + 1e-12) >= 1
    dropped = [name for (name, _), ok in zip(unique, feasible) if not ok]
    unique = [p for p, ok in zip(unique, feasible) if ok]
    kept, pruned = prune_dominated(forest, unique, kappa=kappa, gpu_memory=gpu_memory, runtime_per_sequence=runtime_per_sequence)
    kept = kept[:max_profiles]
    prefixes, requests, profiles, types = assemble(
        forest,
        kept,
        decode_per_token=decode_per_token,
        length_quantile=length_quantile,
        length_bins=length_bins,
        length_threshold=length_threshold,
    )
    memory, hits, slots = profile_metrics(prefixes, requests, profiles, kappa, gpu_memory, runtime_per_sequence)
    return ProfileSet(prefixes, requests, profiles, tuple(s for _, s in kept), types, memory, hits, slots, tuple(pruned), tuple(dropped))
