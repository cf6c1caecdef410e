"""Network layouts for the discrete-event simulator (docs/model.md §1, §4, §11).

Nodes are a PPP of density ``λ_b`` on a torus of side ``√(N̄ / λ_b)`` (no edge effects:
every node sees the same geometry; :func:`edge_effect_check` measures it).  Each node
independently picks profile ``s`` with probability ``π_s``, has ``c_s`` servers, service
attributes used by candidate filtering (model, tokenizer, adapter, privacy domain,
catalogue epoch) and the records of its cached prefix states, checked before reuse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.spatial import cKDTree

from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.ranges import check_simulated_slots

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
POSITION_ENCODING = "rope"


@dataclass(frozen=True)
class NodeAttributes:
    """What candidate filtering compares (docs/model.md §11)."""

    model: str = "model"
    tokenizer: str = "tokenizer"
    adapter: str = "base"
    privacy_domain: str = "public"
    catalogue_epoch: int = 0

    def serves(self, required: NodeAttributes) -> bool:
        """``True`` iff model, tokenizer, adapter, privacy domain and epoch all match."""
        return self == required


@dataclass(frozen=True)
class StateRecord:
    """The identity of one cached prefix state, verified before reuse (docs/model.md §11)."""

    model: str
    tokenizer: str
    adapter: str
    prefix_hash: str
    position_encoding: str
    catalogue_epoch: int


def expected_record(attributes: NodeAttributes, vertex: str) -> StateRecord:
    """The record a correct state of ``vertex`` must carry under the current catalogue."""
    return StateRecord(
        attributes.model,
        attributes.tokenizer,
        attributes.adapter,
        f"{vertex}@{attributes.catalogue_epoch}",
        POSITION_ENCODING,
        attributes.catalogue_epoch,
    )


def verify_reuse(
    states: Mapping[str, StateRecord],
    expected: Mapping[str, StateRecord],
    path: Sequence[str],
    depths: Mapping[str, float],
) -> tuple[float, str | None]:
    """Verified hit depth of a request on a node: the deepest valid prefix of ``P_q``.

    Walks ``P_q`` from the root and stops at the first vertex that is missing or whose
    record differs from ``expected`` in any field (model, tokenizer, adapter, prefix hash,
    position encoding, epoch); returns ``(ℓ_v, v)`` of the last valid vertex, or
    ``(0, None)`` for a full prefill.  A mismatched state is never reused.
    """
    depth, used = 0.0, None
    for vertex in path:
        record = states.get(vertex)
        if record is None or record != expected[vertex]:
            break
        depth, used = float(depths[vertex]), vertex
    return depth, used


@dataclass(frozen=True)
class LayoutSpec:
    """How a simulated network is drawn.

    Parameters
    ----------
    mean_nodes : expected node count N̄ on the torus (side ``√(N̄/λ_b)``).
    foreign_fraction : share of nodes serving another model (must be filtered out).
    stale_fraction : share of nodes on a stale catalogue epoch (must be filtered out).
    mismatch_fraction : share of nodes whose deepest cached state is corrupted (wrong
        prefix hash): verification must downgrade their hits.
    counts : ``"poisson"``: node count Poisson(N̄) and independent profile marks (a PPP);
        ``"exact"``: ``N = round(N̄)`` nodes with exactly ``round(π_s N)`` of each profile
        (largest remainders), uniformly placed: the PPP conditioned on its counts, a
        variance reduction for validation that removes the realised-mix noise.
    """

    mean_nodes: float = 400.0
    foreign_fraction: float = 0.0
    stale_fraction: float = 0.0
    mismatch_fraction: float = 0.0
    counts: str = "poisson"

    def __post_init__(self) -> None:
        if self.counts not in ("poisson", "exact"):
            raise ValueError(f"counts: unknown {self.counts!r} (valid: ['poisson', 'exact'])")
        if not (np.isfinite(self.mean_nodes) and self.mean_nodes >= 1):
            raise ValueError(f"mean_nodes: must be >= 1, got {plain(self.mean_nodes)}")
        for name in ("foreign_fraction", "stale_fraction", "mismatch_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name}: must lie in [0, 1], got {plain(value)}")


@dataclass(frozen=True)
class Layout:
    """One drawn network.

    Attributes
    ----------
    side : torus side length.
    positions : node coordinates, ``(N, 2)``.
    profile : profile index ``s`` of each node, ``(N,)``.
    servers : ``c_s`` of each node, ``(N,)``.
    attributes : the node's :class:`NodeAttributes`, one per node.
    eligible : ``(N,)`` nodes that pass candidate filtering for the current catalogue.
    advertised_hit : catalogue hit depth ``h_{s(x),q}``, ``(N, Q)``.
    verified_hit : hit depth after verification, ``(N, Q)`` (``<= advertised_hit``).
    reused_vertex : id of the reused state per ``(x, q)`` (``None`` for a full prefill).
    states : per node, the records of its cached states.
    """

    side: float
    positions: FloatArray = field(repr=False)
    profile: IntArray = field(repr=False)
    servers: IntArray = field(repr=False)
    attributes: tuple[NodeAttributes, ...] = field(repr=False)
    eligible: npt.NDArray[np.bool_] = field(repr=False)
    advertised_hit: FloatArray = field(repr=False)
    verified_hit: FloatArray = field(repr=False)
    reused_vertex: tuple[tuple[str | None, ...], ...] = field(repr=False)
    states: tuple[Mapping[str, StateRecord], ...] = field(repr=False)
    current: NodeAttributes = NodeAttributes()

    @property
    def nodes(self) -> int:
        return int(self.profile.size)

    @property
    def area(self) -> float:
        return self.side**2

    def trees(self) -> list[tuple[int, cKDTree, IntArray] | None]:
        """Per profile: a periodic KD-tree over its eligible nodes and their indices."""
        out: list[tuple[int, cKDTree, IntArray] | None] = []
        for s in range(int(self.profile.max(initial=-1)) + 1):
            idx = np.flatnonzero((self.profile == s) & self.eligible)
            if idx.size == 0:
                out.append(None)
                continue
            pts = np.mod(self.positions[idx], self.side)
            out.append((s, cKDTree(pts, boxsize=self.side), idx))  # type: ignore[call-overload]  # stub lacks scalar boxsize
        return out


def exact_counts(mix: npt.ArrayLike, nodes: int) -> IntArray:
    """``round(π_s N)`` nodes per profile by largest remainders (they sum to ``N``)."""
    pi = np.asarray(mix, dtype=float)
    share = pi * nodes
    per = np.floor(share).astype(np.int64)
    per[np.argsort(per - share)[: nodes - per.sum()]] += 1  # largest remainders
    return per


def sample_layout(instance, mix, spec: LayoutSpec = LayoutSpec(), *, seed=None) -> Layout:
    """Draw a PPP network for ``instance`` with profile mix ``π`` (docs/model.md §4).

    The node count is Poisson(N̄); profiles are independent marks with law ``π``.
    """
    rng = np.random.default_rng(seed)
    pi = instance.mix_vector(mix)
    side = float(np.sqrt(spec.mean_nodes / instance.network.edge_density))
    if spec.counts == "exact":
        n = int(round(spec.mean_nodes))
        profile = rng.permutation(np.repeat(np.arange(pi.size), exact_counts(pi, n))).astype(np.int64)
    else:
        n = max(int(rng.poisson(spec.mean_nodes)), 1)
        profile = rng.choice(pi.size, size=n, p=pi).astype(np.int64)
    positions = rng.random((n, 2)) * side
    servers = np.asarray(instance.concurrency, dtype=np.int64)[profile]
    check_simulated_slots(servers)
    current = NodeAttributes()
    kind = rng.random(n)
    attrs: list[NodeAttributes] = []
    for x in range(n):
        if kind[x] < spec.foreign_fraction:
            attrs.append(NodeAttributes(model="other-model"))
        elif kind[x] < spec.foreign_fraction + spec.stale_fraction:
            attrs.append(NodeAttributes(catalogue_epoch=current.catalogue_epoch - 1))
        else:
            attrs.append(current)
    eligible = np.array([a.serves(current) for a in attrs], dtype=bool)
    depths = {p.id: float(p.depth) for p in instance.prefixes}
    expected = {v: expected_record(current, v) for v in depths}
    corrupt = rng.random(n) < spec.mismatch_fraction
    states: list[dict[str, StateRecord]] = []
    advertised = np.asarray(instance.hit_depth, dtype=float)[profile]  # (N, Q)
    verified = np.zeros_like(advertised)
    reused: list[tuple[str | None, ...]] = []
    seen: dict[tuple[NodeAttributes, int, bool], tuple[dict[str, StateRecord], list[float], tuple[str | None, ...]]] = {}
    for x in range(n):  # nodes alike in attributes, profile and corruption get the same states: built once per kind
        key = (attrs[x], int(profile[x]), bool(corrupt[x]))
        if key not in seen:
            own = {v: expected_record(attrs[x], v) for v in instance.profiles[profile[x]].prefixes}
            if corrupt[x] and own:
                deepest = max(own, key=lambda v: depths[v])
                rec = own[deepest]
                own[deepest] = StateRecord(
                    rec.model, rec.tokenizer, rec.adapter, rec.prefix_hash + "-stale", rec.position_encoding, rec.catalogue_epoch
                )
            checked = [verify_reuse(own, expected, req.path, depths) for req in instance.requests]
            seen[key] = (own, [depth for depth, _ in checked], tuple(used for _, used in checked))
        own, hits, used_row = seen[key]
        states.append(dict(own))
        verified[x] = hits
        reused.append(used_row)
    return Layout(side, positions, profile, servers, tuple(attrs), eligible, advertised, verified, tuple(reused), tuple(states), current)


def edge_effect_check(layout: Layout, densities: npt.ArrayLike, *, probes: int = 20_000, seed=None) -> FloatArray:
    """Kolmogorov distance of the torus nearest-node distance per tier vs ``1 − exp(−π λ_s r²)``.

    On the torus every location sees the stationary law; a small distance (≈ the
    sampling error of a Poisson node count) confirms that no edge effect biases the
    association.  ``nan`` for tiers without eligible nodes.
    """
    rng = np.random.default_rng(seed)
    lam = np.asarray(densities, dtype=float)
    probe = rng.random((probes, 2)) * layout.side
    out = np.full(lam.size, np.nan)
    for entry in layout.trees():
        if entry is None:
            continue
        s, tree, _ = entry
        d, _ = tree.query(probe, k=1)
        d = np.sort(d)
        cdf = 1.0 - np.exp(-np.pi * lam[s] * d**2)
        out[s] = float(np.max(np.abs(np.arange(1, d.size + 1) / d.size - cdf)))
    return out
