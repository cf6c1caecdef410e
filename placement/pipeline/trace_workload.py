"""A trace seen through an instance: per-request hit depths and types (docs/model.md §17).

An instance built from a trace (``edgeprefix profiles``) names its prefix-forest vertices
``h<bottom block id>`` and carries, per vertex, the block ids of its own segment
(``prefixes[].blocks``).  :class:`BlockCatalogue` maps those blocks back: for every held
block its position on the path, its token end, the profiles that hold it and the vertex it
closes.  :func:`trace_workload` then streams a trace once and keeps, per request, only
compact arrays:

- arrival time, input length ``L`` and output tokens;
- the block-level hit depth ``h_{s,i}`` of request ``i`` on a node of profile ``s``: the token
  end of the longest prefix of the request's *own* block sequence held by the profile (a node
  of a profile holds every block of every vertex of ``C_s``; the held blocks of a request
  form a prefix of its sequence because ``C_s`` is ancestor-closed and block ids are
  chained), capped at ``L``;
- its type ``q(i)``: the instance's request type of the deepest retained vertex the request
  passes through completely — the grouping of docs/model.md §9.4 applied to a new request.

Type of a request (choice, documented): the type whose path ends at that vertex; if no type
does (the vertex was only ever passed on the way to deeper retained vertices), the type of the
deepest ancestor that has one, else the most likely type whose path contains the vertex.
A request that passes no retained vertex gets the uncached type (empty path); an instance
without one gives it the type with the shortest path (most likely first) and the request is
counted as unmatched.

Block ends (choice, as in the forest): the ``j``-th block of a path ends at token
``j · block_size``; a vertex's last block ends at its depth ``ℓ_v`` (the forest's smallest end
seen).  An instance whose depths do not fit ``block_size`` is rejected.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.lengths import type_groups
from edgeprefix.placement.model.workload import PrefixForest
from edgeprefix.placement.pipeline.traces import DEFAULT_BLOCK_SIZE, SkipLog, TraceRecord, read_trace
from edgeprefix.placement.progress import progress_bar

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
_CHUNK = 4096  # records between progress-bar updates


@dataclass(frozen=True)
class BlockCatalogue:
    """The held blocks of an instance's profiles, one row per block.

    Attributes
    ----------
    block_size : tokens per block of the trace.
    index : block id → row.
    position : 1-based position of the block on its path, ``(K,)``.
    end : token end of the block, ``(K,)``.
    held : ``held[s, k]`` — profile ``s`` holds block ``k``, ``(S, K)``.
    closes : vertex (prefix index) whose last block this is, ``-1`` inside a chain, ``(K,)``.
    type_of_vertex : request type of a request whose deepest passed vertex is ``v``, ``(V,)``.
    default_type : type of a request that passes no retained vertex.
    has_uncached_type : whether ``default_type`` is the instance's uncached (empty-path) type.
    """

    block_size: int
    index: dict[int, int] = field(repr=False)
    position: IntArray = field(repr=False)
    end: FloatArray = field(repr=False)
    held: npt.NDArray[np.bool_] = field(repr=False)
    closes: IntArray = field(repr=False)
    type_of_vertex: IntArray = field(repr=False)
    default_type: int
    has_uncached_type: bool
    # length sub-types (docs/model.md §2.3): per declared type with several, its sub-type columns by
    # increasing L and the lengths between them (the bin edges, else the midpoints: the nearest sub-type)
    length_split: tuple[tuple[IntArray, FloatArray], ...] = field(default=(), repr=False)
    group_of: IntArray | None = field(default=None, repr=False)

    @property
    def blocks(self) -> int:
        return int(self.position.size)


def _bottom_id(prefix_id: str) -> int | None:
    return int(prefix_id[1:]) if prefix_id.startswith("h") and prefix_id[1:].isdigit() else None


def recover_blocks(instance: Instance, records: Iterable[TraceRecord]) -> Instance:
    """Fill ``prefixes[].blocks`` of a trace-built instance from the trace (for instances written
    before they carried them): the path to vertex ``h<b>`` is the block sequence of any request
    through block ``b`` up to it.  Prefixes already carrying blocks are kept; one whose bottom
    block never occurs in ``records`` raises :class:`InstanceError`."""
    wanted = {_bottom_id(p.id): i for i, p in enumerate(instance.prefixes) if not p.blocks}
    if None in wanted:
        i = wanted[None]
        raise InstanceError(
            f"prefixes[{i}].blocks",
            f"prefix {instance.prefixes[i].id!r} is not a trace vertex h<block id>: rebuild the instance with edgeprefix profiles",
        )
    paths: dict[int, tuple[int, ...]] = {}
    if wanted:
        for record in records:
            for j, b in enumerate(record.blocks):
                if b in wanted and b not in paths:
                    paths[b] = record.blocks[: j + 1]
            if len(paths) == len(wanted):
                break
    by_id = {p.id: p for p in instance.prefixes}
    prefixes = []
    for i, p in enumerate(instance.prefixes):
        if p.blocks:
            prefixes.append(p)
            continue
        bottom = _bottom_id(p.id)
        if bottom not in paths:
            raise InstanceError(
                f"prefixes[{i}].blocks",
                f"block {bottom} of prefix {p.id!r} does not occur in the trace: pass the trace the instance was built from",
            )
        path = paths[bottom]
        start = 0
        if p.parent is not None:
            parent_bottom = _bottom_id(by_id[p.parent].id)
            start = path.index(parent_bottom) + 1 if parent_bottom in path else len(path)
        prefixes.append(replace(p, blocks=path[start:]))
    return instance.replace(prefixes=tuple(prefixes))


def _vertex_types(instance: Instance, forest: PrefixForest) -> tuple[IntArray, int, bool]:
    """``type_of_vertex`` and the default type (see the module docstring)."""
    ids = [p.id for p in instance.prefixes]
    index = {v: i for i, v in enumerate(ids)}
    p_q = np.asarray(instance.probabilities, dtype=float)
    ends_here: dict[int, int] = {}
    for q, req in enumerate(instance.requests):
        if req.path:
            v = index[req.path[-1]]
            if v not in ends_here or p_q[q] > p_q[ends_here[v]]:
                ends_here[v] = q
    out = np.full(len(ids), -1, dtype=np.int64)
    for v, vid in enumerate(ids):
        for u in reversed(forest.ancestors(vid)):  # deepest first
            if index[u] in ends_here:
                out[v] = ends_here[index[u]]
                break
        else:
            through = [q for q, req in enumerate(instance.requests) if vid in req.path]
            if through:
                out[v] = max(through, key=lambda q: (p_q[q], -q))
    uncached = [q for q, req in enumerate(instance.requests) if not req.path]
    if uncached:
        default, has_uncached = max(uncached, key=lambda q: (p_q[q], -q)), True
    else:
        shortest = min(len(req.path) for req in instance.requests)
        cands = [q for q, req in enumerate(instance.requests) if len(req.path) == shortest]
        default, has_uncached = max(cands, key=lambda q: (p_q[q], -q)), False
    out[out < 0] = default  # a vertex on no type's path (not in a trace-built instance)
    return out, default, has_uncached


def block_catalogue(instance: Instance, block_size: int = DEFAULT_BLOCK_SIZE) -> BlockCatalogue:
    """The held blocks of ``instance``'s profiles (needs ``prefixes[].blocks``; see :func:`recover_blocks`)."""
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"--block-size must be a positive integer, got {block_size!r}")
    forest = PrefixForest(instance.prefixes)
    by_id = forest.by_id
    index_of = {p.id: i for i, p in enumerate(instance.prefixes)}
    n_blocks: dict[str, int] = {}

    def cumulative(vid: str) -> int:  # blocks on the path down to vid
        if vid not in n_blocks:
            p = by_id[vid]
            n_blocks[vid] = (0 if p.parent is None else cumulative(p.parent)) + len(p.blocks)
        return n_blocks[vid]

    index: dict[int, int] = {}
    position: list[Any] = []
    end: list[Any] = []
    closes: list[Any] = []
    owner: list[Any] = []
    for i, p in enumerate(instance.prefixes):
        if not p.blocks:
            raise InstanceError(
                f"prefixes[{i}].blocks",
                f"prefix {p.id!r} carries no block ids: rebuild the instance with edgeprefix profiles, or recover them from its trace",
            )
        total = cumulative(p.id)
        if not (total - 1) * block_size < p.depth <= total * block_size:
            raise InstanceError(
                f"prefixes[{i}].depth",
                f"depth {p.depth:g} of {p.id!r} does not fit its {total} blocks of {block_size} tokens: pass the trace's --block-size",
            )
        first = total - len(p.blocks) + 1
        for j, b in enumerate(p.blocks):
            if b in index:
                raise InstanceError(f"prefixes[{i}].blocks", f"block {b} of {p.id!r} is also held by another prefix")
            index[b] = len(position)
            pos = first + j
            position.append(pos)
            end.append(min(pos * block_size, p.depth))
            closes.append(i if j == len(p.blocks) - 1 else -1)
            owner.append(i)
    owner_arr = np.asarray(owner, dtype=np.int64)
    held = np.zeros((len(instance.profiles), len(position)), dtype=bool)
    for s, profile in enumerate(instance.profiles):
        members = np.zeros(len(instance.prefixes), dtype=bool)
        members[[index_of[v] for v in profile.prefixes]] = True
        held[s] = members[owner_arr]
    type_of_vertex, default, uncached = _vertex_types(instance, forest)
    split, group_of = length_split(instance)
    return BlockCatalogue(
        block_size,
        index,
        np.asarray(position, dtype=np.int64),
        np.asarray(end, dtype=float),
        held,
        np.asarray(closes, dtype=np.int64),
        type_of_vertex,
        default,
        uncached,
        split,
        group_of,
    )


def length_split(instance: Instance) -> tuple[tuple[tuple[IntArray, FloatArray], ...], IntArray | None]:
    """Per declared type with length sub-types: its columns by increasing ``L`` and the lengths between
    consecutive ones — the bin edges the instance carries (``lengths.edges``, docs/model.md (2.8)), else the
    midpoints between the sub-types' lengths (the nearest one) — and the group of every column (``None``
    without sub-types)."""
    groups = type_groups(instance.requests)
    if not groups.resolved:
        return (), None
    lengths = np.asarray(instance.lengths, dtype=float)
    out = []
    for j in range(len(groups.ids)):
        cols = np.flatnonzero(groups.index == j)
        cols = cols[np.argsort(lengths[cols], kind="stable")]
        uppers = [b[1] for b in (instance.requests[c].bin for c in cols) if b is not None]
        if len(uppers) == cols.size:  # every sub-type carries its bin (lengths.edges)
            between = np.array(uppers[:-1], dtype=float)
        else:
            between = 0.5 * (lengths[cols][1:] + lengths[cols][:-1])
        out.append((cols.astype(np.int64), between))
    return tuple(out), groups.index.astype(np.int64)


def assign_subtypes(kind: IntArray, length: FloatArray, catalogue: BlockCatalogue) -> IntArray:
    """Each request's sub-type within its declared type: the one whose bin holds its input length (the
    instance's ``lengths.edges``), else the one of nearest input length (docs/model.md (2.8))."""
    if catalogue.group_of is None:
        return kind
    out = kind.copy()
    group = catalogue.group_of[kind]
    for j, (cols, edges) in enumerate(catalogue.length_split):
        mine = group == j
        if cols.size > 1 and mine.any():
            out[mine] = cols[np.searchsorted(edges, length[mine], side="right")]
    return out


@dataclass(frozen=True)
class TraceWorkload:
    """Per-request arrays of a trace seen through an instance (``n`` requests, trace order).

    Attributes
    ----------
    time : arrival time in the trace's seconds, ``(n,)``.
    length : input tokens ``L_i``; ``output`` : output tokens, ``(n,)``.
    hit : block-level hit depth ``h_{s,i}`` in tokens, ``(S, n)``.
    kind : request type ``q(i)``, ``(n,)``; ``matched`` : the request passed a retained vertex.
    """

    time: FloatArray = field(repr=False)
    length: FloatArray = field(repr=False)
    output: FloatArray = field(repr=False)
    hit: FloatArray = field(repr=False)
    kind: IntArray = field(repr=False)
    matched: npt.NDArray[np.bool_] = field(repr=False)

    @property
    def requests(self) -> int:
        return int(self.time.size)

    def part(self, index: slice | npt.NDArray[np.integer[Any]] | npt.NDArray[np.bool_]) -> TraceWorkload:
        """The requests selected by ``index`` (a slice or index/mask array), in order."""
        return TraceWorkload(
            self.time[index],
            self.length[index],
            self.output[index],
            self.hit[:, index],
            self.kind[index],
            self.matched[index],
        )

    def repeated(self, copies: int) -> TraceWorkload:
        """The trace ``copies`` times over, each copy one span (first to last arrival plus a mean gap) after the last."""
        span = float(self.time[-1] - self.time[0]) + float(np.mean(np.diff(self.time)))
        shift = np.repeat(np.arange(copies), self.requests) * span
        return TraceWorkload(
            np.tile(self.time, copies) + shift,
            np.tile(self.length, copies),
            np.tile(self.output, copies),
            np.tile(self.hit, (1, copies)),
            np.tile(self.kind, copies),
            np.tile(self.matched, copies),
        )

    def type_mix(self, types: int) -> FloatArray:
        """Empirical distribution of the request types, ``(Q,)``."""
        return np.bincount(self.kind, minlength=types) / max(self.requests, 1)


def split_index(n: int, split: float) -> int:
    """Requests in the training part: the first ``⌊split · n⌋`` (the trace is in time order)."""
    if not (0.0 <= split < 1.0):
        raise ValueError(f"--split must lie in [0, 1), got {split!r}")
    return int(np.floor(split * n))


def trace_workload(
    records: Iterable[TraceRecord], catalogue: BlockCatalogue, *, total: int | None = None, desc: str = "trace"
) -> TraceWorkload:
    """Stream ``records`` once and return their :class:`TraceWorkload` (progress on stderr)."""
    index, position, closes = catalogue.index, catalogue.position.tolist(), catalogue.closes.tolist()
    type_of_vertex = catalogue.type_of_vertex.tolist()
    # compact typed buffers (8 bytes per value, not a Python object each): memory grows with the
    # requests and their held blocks only
    time, length, output, kind = array("d"), array("q"), array("q"), array("q")
    matched, pair_request, pair_row = array("b"), array("q"), array("q")
    get = index.get
    with progress_bar(total=total, desc=desc, unit="req") as bar:
        for i, record in enumerate(records):
            deepest = -1
            for j, b in enumerate(record.blocks):
                k = get(b)
                if k is None or position[k] != j + 1:
                    break
                pair_request.append(i)
                pair_row.append(k)
                if closes[k] >= 0:
                    deepest = closes[k]
            time.append(record.timestamp)
            length.append(record.input_length)
            output.append(record.output_length)
            matched.append(deepest >= 0)
            kind.append(type_of_vertex[deepest] if deepest >= 0 else catalogue.default_type)
            if (i + 1) % _CHUNK == 0:
                bar.update(_CHUNK)
    n = len(time)
    lengths = np.asarray(length, dtype=float)
    hit = np.zeros((catalogue.held.shape[0], n))
    req = np.asarray(pair_request, dtype=np.int64)
    row = np.asarray(pair_row, dtype=np.int64)
    ends = catalogue.end[row]
    for s in range(hit.shape[0]):  # the deepest held block's end, per profile
        mine = catalogue.held[s, row]
        np.maximum.at(hit[s], req[mine], ends[mine])
    np.minimum(hit, lengths[None, :], out=hit)
    kinds = assign_subtypes(np.asarray(kind, dtype=np.int64), lengths, catalogue)
    return TraceWorkload(
        np.frombuffer(time, dtype=float).copy(), lengths, np.asarray(output, dtype=float), hit, kinds, np.asarray(matched, dtype=bool)
    )


def decode_per_token(instance: Instance, mean_output: float) -> float:
    """Decode seconds per output token implied by the instance: ``Σ_q p_q D_q / mean output tokens``.

    ``edgeprefix profiles`` sets ``D_q = (mean output tokens of q) × d``, so over the requests
    the instance was built from this returns ``d`` exactly.
    """
    if not (np.isfinite(mean_output) and mean_output > 0):
        raise ValueError(
            f"the trace's mean output length must be > 0 tokens to derive the decode rate, got {mean_output!r}: pass --decode-per-token"
        )
    return float(np.dot(instance.probabilities, instance.decodes) / mean_output)


def load_trace_workload(
    source: str | os.PathLike[str] | Iterable[str],
    instance: Instance,
    *,
    fmt: str = "mooncake",
    block_size: int = DEFAULT_BLOCK_SIZE,
    skip_invalid: bool = False,
    log: SkipLog | None = None,
) -> tuple[Instance, TraceWorkload]:
    """Read a trace through ``instance``: recover missing ``prefixes[].blocks`` from it (one
    extra pass, only when needed), build the catalogue and stream the requests once.

    Returns the instance (with its blocks) and the workload.
    """
    if any(not p.blocks for p in instance.prefixes):
        if not isinstance(source, (str, os.PathLike)):
            source = list(source)  # two passes over an iterable of lines
        instance = recover_blocks(instance, read_trace(source, fmt=fmt, block_size=block_size, skip_invalid=True))
    catalogue = block_catalogue(instance, block_size)
    records = read_trace(source, fmt=fmt, block_size=block_size, skip_invalid=skip_invalid, log=log)
    return instance, trace_workload(records, catalogue)
