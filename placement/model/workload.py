"""Prefix forest and request types (docs/model.md §2).

A vertex ``v`` is an exact reusable prefix of cumulative depth ``ℓ_v`` tokens; a request
type ``q`` has probability ``p_q``, input length ``L_q``, decode occupancy ``D_q`` and a
root-down chain of vertices ``P_q``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from edgeprefix.placement.errors import InstanceError, few, plain
from edgeprefix.placement.model.ranges import check_scale

PROBABILITY_TOLERANCE = 1e-9  # |Σ_q p_q − 1| allowed


def _check_positive(field: str, value: float, *, allow_zero: bool = False) -> None:
    ok = np.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise InstanceError(field, f"must be a finite number {bound}, got {plain(value)}")


def check_unique_ids(field: str, ids: Iterable[str]) -> None:
    """Raise if an id repeats or is not a non-empty string."""
    seen: set[str] = set()
    for i, ident in enumerate(ids):
        if not isinstance(ident, str) or not ident:
            raise InstanceError(f"{field}[{i}].id", f"must be a non-empty string, got {ident!r}")
        if ident in seen:
            raise InstanceError(f"{field}[{i}].id", f"duplicate id {ident!r}: ids must be unique")
        seen.add(ident)


@dataclass(frozen=True)
class Prefix:
    """Vertex ``v`` of the prefix forest.

    depth : ℓ_v, cumulative tokens from the root (strictly larger than the parent's).
    parent : id of the parent vertex, ``None`` for a root.
    kv_per_token : κ_v override (memory units per token); ``None`` uses the GPU's κ.
    blocks : the trace's block ids of ``v``'s own segment (after its parent), root side first,
        when the vertex comes from a trace (``edgeprefix profiles``); ``()`` otherwise.  They
        map a profile back to the blocks a node holds (trace replay, docs/model.md §17).
    """

    id: str
    depth: float
    parent: str | None = None
    kv_per_token: float | None = None
    blocks: tuple[int, ...] = ()


@dataclass(frozen=True)
class RequestType:
    """Request type ``q``: ``p_q``, ``L_q``, ``D_q`` and its path ``P_q`` (root first).

    group : id of the declared type a length sub-type stands for (docs/model.md §2.3), ``None``
        for a type declared with one length (the paper's model).
    share : ``w_k``, the sub-type's share of its declared type's requests (1 without ``group``).
    group_probability : ``p_q`` of the declared type (``None`` without ``group``), so that a file
        round-trips exactly.
    bin : ``(lower, upper)`` input lengths of the sub-type's bin, ``lower ≤ L < upper`` (``±inf`` at the
        ends; docs/model.md (2.8)), ``None`` when the file gives no ``lengths.edges`` (a replayed request
        then takes the sub-type of nearest length).
    """

    id: str
    probability: float  # p_q
    length: float  # L_q, input tokens
    decode: float  # D_q, seconds of occupancy beyond prefill
    path: tuple[str, ...] = ()
    group: str | None = None
    share: float = 1.0
    group_probability: float | None = None
    bin: tuple[float, float] | None = None


@dataclass(frozen=True)
class PrefixForest:
    """The rooted forest ``T = (V, E)`` with validated parent links and depths."""

    prefixes: tuple[Prefix, ...]

    def __post_init__(self) -> None:
        check_unique_ids("prefixes", (p.id for p in self.prefixes))
        index = {p.id: i for i, p in enumerate(self.prefixes)}
        for i, p in enumerate(self.prefixes):
            check_scale(f"prefixes[{i}].depth", p.depth)
            if p.kv_per_token is not None:
                _check_positive(f"prefixes[{i}].kv_per_token", p.kv_per_token)
            if any(isinstance(b, bool) or not isinstance(b, int) or b < 0 for b in p.blocks) or len(set(p.blocks)) != len(p.blocks):
                raise InstanceError(f"prefixes[{i}].blocks", f"must be distinct block ids (integers >= 0), got {list(p.blocks)[:8]!r}")
            if p.parent is None:
                continue
            if p.parent not in index:
                raise InstanceError(f"prefixes[{i}].parent", f"unknown prefix {p.parent!r} (known: {few(sorted(index))})")
            parent = self.prefixes[index[p.parent]]
            if not p.depth > parent.depth:
                raise InstanceError(
                    f"prefixes[{i}].depth",
                    f"depth {p.depth} of {p.id!r} must exceed its parent {parent.id!r}'s depth {parent.depth}",
                )
        # Depth strictly increases along parent links, so a cycle is impossible.

    @property
    def by_id(self) -> Mapping[str, Prefix]:
        return {p.id: p for p in self.prefixes}

    def parent_depth(self, prefix_id: str) -> float:
        """ℓ_{parent(v)}, 0 for a root."""
        p = self.by_id[prefix_id]
        return 0.0 if p.parent is None else self.by_id[p.parent].depth

    def ancestors(self, prefix_id: str) -> tuple[str, ...]:
        """Ids from the root down to ``prefix_id`` inclusive."""
        by_id = self.by_id
        chain = [prefix_id]
        while by_id[chain[-1]].parent is not None:
            chain.append(by_id[chain[-1]].parent)  # type: ignore[arg-type]
        return tuple(reversed(chain))


def validate_requests(requests: tuple[RequestType, ...], forest: PrefixForest) -> None:
    """Check ``p_q`` (nonnegative, summing to 1), ``L_q``, ``D_q`` and every path ``P_q``."""
    if not requests:
        raise InstanceError("requests", "at least one request type is needed")
    check_unique_ids("requests", (q.id for q in requests))
    by_id = forest.by_id
    names = declared_fields(requests)
    for i, q in enumerate(requests):
        _check_positive(f"requests[{i}].probability", q.probability, allow_zero=True)
        check_scale(names[i][0], q.length)
        check_scale(names[i][1], q.decode, allow_zero=True)
        for j, vid in enumerate(q.path):
            where = f"requests[{i}].path[{j}]"
            if vid not in by_id:
                raise InstanceError(where, f"unknown prefix {vid!r} (known: {few(sorted(by_id))})")
            expected_parent = q.path[j - 1] if j else None
            if by_id[vid].parent != expected_parent:
                raise InstanceError(
                    where,
                    f"path of {q.id!r} is not a root-to-leaf chain: {vid!r} has parent {by_id[vid].parent!r}, expected {expected_parent!r}",
                )
            if by_id[vid].depth > q.length:
                raise InstanceError(
                    where if q.group is None else names[i][0],
                    f"prefix {vid!r} depth {by_id[vid].depth} exceeds the request length {q.length} of {q.id!r}",
                )
    total = float(sum(q.probability for q in requests))
    if abs(total - 1.0) > PROBABILITY_TOLERANCE:
        raise InstanceError("requests.probability", f"probabilities must sum to 1 (±1e-9), got {plain(total)}")


def declared_fields(requests: tuple[RequestType, ...]) -> list[tuple[str, str]]:
    """The file's field paths of each type's ``L`` and ``D``: ``requests[i].length``/``.decode`` for a
    declared type, ``requests[i].lengths.input[k]``/``.decode[k]`` for the ``k``-th length sub-type of
    the ``i``-th declared type (docs/model.md §2.3)."""
    out: list[tuple[str, str]] = []
    declared, k, last = -1, 0, object()
    for q in requests:
        if q.group is None or q.group != last:
            declared, k = declared + 1, 0
        else:
            k += 1
        last = q.group
        out.append(
            (f"requests[{declared}].length", f"requests[{declared}].decode")
            if q.group is None
            else (f"requests[{declared}].lengths.input[{k}]", f"requests[{declared}].lengths.decode[{k}]")
        )
    return out
