"""Bloom-filter catalogue and state churn in the network simulator (docs/model.md §19.7).

Every node advertises the prefixes it holds in a Bloom filter of ``m`` bits and ``k`` hashes.  The
hashes are salted per node, modelled as a random oracle: each (node, prefix, hash) position is an
independent uniform draw in ``[0, m)``, fixed for the run.  A prefix tests positive when all its
``k`` positions are set by the node's entries; an entry always tests positive (no false negative).

Nodes change state at rate ``γ``: a node re-draws its profile from ``π`` (its states, its slots
``c_s`` and its queue follow at once).  The catalogue is rebuilt from the nodes' states at the
refresh epochs ``0, T_r, 2T_r, …`` (``T_r = 0``: at every change), and the router reads it in
between.  A node's true hit, found by verification before reuse, decides its prefill.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.catalogue import Catalogue
from edgeprefix.placement.model.ranges import check_simulated_events

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class NodeCatalogue:
    """What each node's filter advertises, for every profile the node may hold.

    ``answers[x, s, v]``: the filter of node ``x`` holding profile ``s`` tests vertex ``v`` positive;
    ``depth[x, s, q]``: the advertised depth ``ĥ`` (path vertices positive from the root on);
    ``first_token[x, s, q]``: the first-token time the router expects, ``T^adv_{s,q}(ĥ)``.
    """

    answers: npt.NDArray[np.bool_]
    depth: FloatArray
    first_token: FloatArray


def filter_answers(instance, nodes: int, catalogue: Catalogue, rng: np.random.Generator) -> npt.NDArray[np.bool_]:
    """``(N, S, V)`` Bloom answers: exact membership for ``m = ∞`` (no random draw), else salted filters."""
    ids = {p.id: i for i, p in enumerate(instance.prefixes)}
    members = np.zeros((len(instance.profiles), len(ids)), dtype=bool)
    for s, prof in enumerate(instance.profiles):
        members[s, [ids[v] for v in prof.prefixes]] = True
    if math.isinf(catalogue.bits):
        return np.broadcast_to(members, (nodes,) + members.shape).copy()
    pos = rng.integers(0, int(catalogue.bits), size=(nodes, len(ids), int(catalogue.hashes)))
    out = np.zeros((nodes,) + members.shape, dtype=bool)
    for s in range(members.shape[0]):
        held = np.flatnonzero(members[s])
        if held.size == 0:
            continue  # an empty filter has no bit set
        for x in range(nodes):
            out[x, s] = np.isin(pos[x], pos[x, held]).all(axis=-1)
    return out


def node_catalogue(instance, nodes: int, catalogue: Catalogue, rng: np.random.Generator) -> NodeCatalogue:
    """Filters, advertised depths and expected first-token times of every node and profile (the
    instance's ``T^ft_{s,q}`` for a true hit, ``g_C(L_q − ĥ)`` for a phantom one, as
    :func:`edgeprefix.placement.model.catalogue.advertised_first_token`)."""
    answers = filter_answers(instance, nodes, catalogue, rng)
    ids = {p.id: i for i, p in enumerate(instance.prefixes)}
    vertex_depth = np.array([float(p.depth) for p in instance.prefixes])
    s_count, q_count = len(instance.profiles), len(instance.requests)
    depth = np.zeros((nodes, s_count, q_count))
    for q, req in enumerate(instance.requests):
        if not req.path:
            continue
        path = np.array([ids[v] for v in req.path])
        run = np.cumprod(answers[:, :, path], axis=-1).sum(axis=-1)  # positives from the root on
        depth[:, :, q] = np.where(run > 0, vertex_depth[path][np.maximum(run - 1, 0)], 0.0)
    true_depth = np.asarray(instance.hit_depth, dtype=float)[None, :, :]
    g = instance.prefill if instance.serving is None else instance.serving.first_token_prefill(instance.prefill)
    phantom = np.asarray(g(np.asarray(instance.lengths, dtype=float)[None, None, :] - depth), dtype=float)
    first = np.where(depth == true_depth, np.asarray(instance.first_token_time, dtype=float)[None, :, :], phantom)
    return NodeCatalogue(answers, depth, first)


@dataclass(frozen=True)
class Churn:
    """State changes sorted in time: node ``x`` takes profile ``s`` at ``time``."""

    time: FloatArray
    node: IntArray
    profile: IntArray

    @property
    def size(self) -> int:
        return int(self.time.size)


def churn_events(nodes: int, mix: FloatArray, rate: float, duration: float, rng: np.random.Generator) -> Churn:
    """Poisson(``γ``) changes per node over ``[0, duration)``, each to a profile drawn from ``π``
    (so the mix stays ``π`` in law); no draw at all when ``γ = 0``."""
    if rate <= 0:
        return Churn(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    check_simulated_events(
        rate * duration * nodes,
        "catalogue.churn",
        "churn events (γ × nodes × seconds)",
        "lower catalogue.churn, the nodes or the simulated seconds",
    )
    count = int(rng.poisson(rate * duration * nodes))
    time = rng.random(count) * duration
    node = rng.integers(0, nodes, count)
    pi = np.asarray(mix, dtype=float)
    profile = rng.choice(pi.size, size=count, p=pi / pi.sum()).astype(np.int64)
    order = np.argsort(time, kind="stable")
    return Churn(time[order], node[order].astype(np.int64), profile[order])


def catalogue_epochs(profile: IntArray, churn: Churn, refresh: float, duration: float) -> tuple[FloatArray, IntArray]:
    """Epoch starts and the profiles the catalogue shows in each, ``(E,)`` and ``(E, N)``.

    ``refresh > 0``: epochs at ``0, T_r, 2T_r, …`` showing the states at their start; ``refresh = 0``:
    a new epoch at every change (the catalogue is always fresh).
    """
    if churn.size == 0:
        return np.zeros(1), np.asarray(profile, dtype=np.int64)[None, :].copy()
    starts = np.concatenate([[0.0], churn.time]) if refresh == 0 else np.arange(0.0, duration, refresh)
    snaps = np.empty((starts.size, np.asarray(profile).size), dtype=np.int64)
    now = np.array(profile, dtype=np.int64)
    j = 0
    for e, start in enumerate(starts.tolist()):
        while j < churn.size and churn.time[j] <= start:
            now[churn.node[j]] = churn.profile[j]
            j += 1
        snaps[e] = now
    return starts, snaps


def full_scan_route(
    points: FloatArray,
    kind: IntArray,
    nodes: FloatArray,
    side: float,
    eligible: npt.NDArray[np.bool_],
    bias: FloatArray,
    xi: float,
    alpha: float,
) -> IntArray:
    """Theorem 1's rule over every eligible node: ``argmin_x ξ r_x^α + β_{x,q}`` with per-node biases.

    Per type, the nodes that share a bias value form a group in which the cost grows with distance,
    so the nearest node of each group (a periodic KD-tree query) competes; the argmin over the groups
    is the exact argmin over all nodes.  With biases equal within a profile the groups are the
    profiles and this is today's nearest-per-tier rule; a false positive puts a far node that
    advertises more in a group of its own.
    """
    from scipy.spatial import cKDTree

    out = np.full(kind.size, -1, dtype=np.int64)
    wrapped = np.mod(nodes, side)
    for q in np.unique(kind).tolist():
        rows = np.flatnonzero(kind == q)
        best = np.full(rows.size, np.inf)
        for value in np.unique(bias[eligible, q]).tolist():
            idx = np.flatnonzero(eligible & (bias[:, q] == value))
            d, j = cKDTree(wrapped[idx], boxsize=side).query(points[rows], k=1)  # type: ignore[call-overload]  # stub lacks scalar boxsize
            cost = xi * d**alpha + value
            better = cost < best
            best = np.where(better, cost, best)
            out[rows] = np.where(better, idx[j], out[rows])
    return out
