"""Streaming compressed radix forest of a trace (docs/model.md §9.1).

:class:`ForestBuilder` ingests :class:`~edgeprefix.placement.pipeline.traces.TraceRecord` s one at a time.  It
keeps one compact entry per *unique block* (parent, position, token end, and the aggregates
of the requests that end there) — never raw lines or per-request lists — so memory grows
with the number of distinct prefix blocks, not with the number of requests.
:meth:`ForestBuilder.build` then merges single-child chains (blocks with exactly one child
and no request ending there: they carry the same requests) into the vertices of a frozen
:class:`RadixForest`.

Each vertex ``v`` records: request count ``n_v`` (requests whose path passes through it),
depth ``ℓ_v`` in tokens, depth in blocks, state size ``κ ℓ_v`` (:meth:`RadixForest.state_size`),
first/last seen time, and the sums of input/output lengths of the requests through it and of
those ending at it (enough for ``p̂_v``, ``L_v``, ``L_q`` and ``D_q`` without the raw trace).

Depth in tokens (choice): a block's end is ``j · block_size`` for the ``j``-th block, or the
request's length when its last block is partial; a block takes the smallest end seen over
the requests through it, so ``ℓ_v ≤ L`` for every request through ``v``.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain
from edgeprefix.placement.pipeline.traces import (
    DEFAULT_BLOCK_SIZE,
    SkipLog,
    TraceError,
    TraceRecord,
)

IntArray = npt.NDArray[np.int64]
_INF = array("d", [np.inf])
_NEG_INF = array("d", [-np.inf])
FloatArray = npt.NDArray[np.float64]


class ForestBuilder:
    """Mutable streaming builder; call :meth:`add` per record, then :meth:`build`.

    :meth:`add` is atomic: a record that breaks a rule (a block id seen under two different
    parents, or repeated in one request) raises :class:`TraceError` and changes nothing.
    """

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be a positive integer, got {plain(block_size)}")
        self.block_size = block_size
        self.n_requests = 0
        self.occurrences = 0  # Σ_requests path length in blocks
        self._index: dict[int, int] = {}
        self._ids = array("q")
        self._parent = array("q")
        self._pos = array("q")  # 1-based position (depth in blocks)
        self._end = array("q")  # token end of the block (conservative, see module doc)
        self._ends = array("q")  # requests ending at this block
        self._in = array("d")  # Σ input length of requests ending here
        self._out = array("d")  # Σ output length of requests ending here
        self._first = array("d")
        self._last = array("d")

    def add(self, record: TraceRecord) -> None:
        """Insert one request's block path (validated first, then committed)."""
        blocks = record.blocks
        if not blocks:
            raise TraceError(record.line, "hash_ids", "a request needs at least one block")
        index = self._index
        found = [index.get(b) for b in blocks]
        n_known = 0
        for i in found:
            if i is None:
                break
            n_known += 1
        parent = self._parent
        prev = -1
        for j in range(n_known):
            i = found[j]
            if parent[i] != prev:  # type: ignore[index]
                was = "a root" if parent[i] < 0 else f"parent {self._ids[parent[i]]}"  # type: ignore[index]
                now = "a root" if j == 0 else f"parent {blocks[j - 1]}"
                raise TraceError(record.line, "hash_ids", f"block {blocks[j]} seen under two parents ({was}, now {now})")
            prev = i  # type: ignore[assignment]
        if n_known < len(blocks):
            fresh = blocks[n_known:]
            if any(i is not None for i in found[n_known:]) or len(set(fresh)) != len(fresh):
                j = next(k for k in range(n_known, len(blocks)) if found[k] is not None or blocks[k] in blocks[n_known:k])
                raise TraceError(record.line, "hash_ids", f"block {blocks[j]} seen under two parents (repeated or known elsewhere)")
        # commit
        k = len(blocks) - n_known
        if k:
            size = self.block_size
            first_new = len(self._ids)
            index.update(zip(blocks[n_known:], range(first_new, first_new + k)))
            self._ids.extend(blocks[n_known:])
            parent.append(prev)
            parent.extend(range(first_new, first_new + k - 1))
            self._pos.extend(range(n_known + 1, len(blocks) + 1))
            self._end.extend(range((n_known + 1) * size, (len(blocks) + 1) * size, size))
            zeros = bytes(8 * k)
            self._ends.frombytes(zeros)
            self._in.frombytes(zeros)
            self._out.frombytes(zeros)
            self._first.extend(_INF * k)
            self._last.extend(_NEG_INF * k)
            prev = first_new + k - 1
        last = prev
        end = min(len(blocks) * self.block_size, record.input_length)
        if end < self._end[last]:
            self._end[last] = end
        self._ends[last] += 1
        self._in[last] += record.input_length
        self._out[last] += record.output_length
        if record.timestamp < self._first[last]:
            self._first[last] = record.timestamp
        if record.timestamp > self._last[last]:
            self._last[last] = record.timestamp
        self.n_requests += 1
        self.occurrences += len(blocks)

    def extend(self, records: Iterable[TraceRecord], *, skip_invalid: bool = False, log: SkipLog | None = None) -> None:
        """Add every record; with ``skip_invalid`` a rejected record is skipped and logged."""
        for record in records:
            try:
                self.add(record)
            except TraceError as error:
                if not skip_invalid:
                    raise
                if log is not None:
                    log.record(error)

    @property
    def n_blocks(self) -> int:
        return len(self._ids)

    def release_index(self) -> None:
        """Free the block-id lookup table (about half of the builder's memory) before
        :meth:`build`; no record can be added afterwards."""
        self._index = _Closed()

    def build(self) -> RadixForest:
        """Aggregate subtrees and merge single-child chains into a frozen :class:`RadixForest`."""
        if self.n_requests == 0:
            raise ValueError("the trace has no valid request: cannot build a prefix forest")
        ids = np.array(self._ids, dtype=np.int64)
        parent = np.array(self._parent, dtype=np.int64)
        pos = np.array(self._pos, dtype=np.int64)
        ends = np.array(self._ends, dtype=np.float64)
        end_in = np.array(self._in)
        end_out = np.array(self._out)
        count, sub_in, sub_out = ends.copy(), end_in.copy(), end_out.copy()
        first, last = np.array(self._first), np.array(self._last)
        levels = _levels(pos)
        for members in reversed(levels[2:]):  # deepest first: push each level into its parents
            up = parent[members]
            np.add.at(count, up, count[members])
            np.add.at(sub_in, up, sub_in[members])
            np.add.at(sub_out, up, sub_out[members])
            np.minimum.at(first, up, first[members])
            np.maximum.at(last, up, last[members])
        n_children = np.bincount(parent[parent >= 0], minlength=ids.size)
        kept = (n_children != 1) | (ends > 0)
        top = np.arange(ids.size)  # first block of each block's chain
        vparent = np.full(ids.size, -1, dtype=np.int64)  # nearest kept strict ancestor (block index)
        for members in levels[2:]:
            up = parent[members]
            top[members] = np.where(kept[up], members, top[up])
            vparent[members] = np.where(kept[up], up, vparent[up])
        vertices = np.flatnonzero(kept)  # creation order: parents before children
        renumber = np.full(ids.size, -1, dtype=np.int64)
        renumber[vertices] = np.arange(vertices.size)
        vp = vparent[vertices]
        chain_start, chain_blocks = _chains(ids, parent, pos, kept, levels, renumber)
        return RadixForest(
            block_size=self.block_size,
            n_requests=self.n_requests,
            n_blocks=int(ids.size),
            block_occurrences=int(self.occurrences),
            shared_blocks=int(np.count_nonzero(count >= 2)),
            shared_occurrences=int(count[count >= 2].sum()),
            parent=read_only(np.where(vp >= 0, renumber[np.maximum(vp, 0)], -1)),
            depth=read_only(np.array(self._end, dtype=np.float64)[vertices]),
            depth_blocks=read_only(pos[vertices]),
            count=read_only(count[vertices].astype(np.int64)),
            ends=read_only(ends[vertices].astype(np.int64)),
            first_seen=read_only(first[vertices]),
            last_seen=read_only(last[vertices]),
            input_sum=read_only(sub_in[vertices]),
            output_sum=read_only(sub_out[vertices]),
            end_input_sum=read_only(end_in[vertices]),
            end_output_sum=read_only(end_out[vertices]),
            top_block=read_only(ids[top[vertices]]),
            bottom_block=read_only(ids[vertices]),
            chain_start=read_only(chain_start),
            chain_blocks=read_only(chain_blocks),
        )


def _chains(
    ids: IntArray, parent: IntArray, pos: IntArray, kept: np.ndarray, levels: list[IntArray], renumber: IntArray
) -> tuple[IntArray, IntArray]:
    """Every vertex's own blocks in CSR form (``chain_start``, ``chain_blocks``), root side first.

    A block belongs to the vertex that ends its single-child chain: a kept block owns itself,
    a merged one (exactly one child, no request ending there) has its child's owner.
    """
    only_child = np.full(ids.size, -1, dtype=np.int64)
    has_parent = parent >= 0
    only_child[parent[has_parent]] = np.flatnonzero(has_parent)  # unique where it is read: one child
    owner = np.arange(ids.size)
    for members in reversed(levels[1:]):  # deepest first: a merged block takes its child's owner
        merged = members[~kept[members]]
        owner[merged] = owner[only_child[merged]]
    vertex = renumber[owner]
    order = np.lexsort((pos, vertex))
    start = np.zeros(int(kept.sum()) + 1, dtype=np.int64)
    np.cumsum(np.bincount(vertex, minlength=start.size - 1), out=start[1:])
    return start, ids[order]


class _Closed(dict):
    """Stands in for the released block index: adding after release is an error."""

    def get(self, key: object, default: object = None) -> object:
        raise RuntimeError("this ForestBuilder released its index (build_forest): create a new builder to add records")


def _levels(pos: IntArray) -> list[IntArray]:
    """Block indices grouped by position: ``levels[d]`` holds the blocks at depth ``d``."""
    order = np.argsort(pos, kind="stable")
    bounds = np.searchsorted(pos[order], np.arange(1, int(pos.max()) + 2))
    return [np.empty(0, dtype=np.int64)] + [order[bounds[d] : bounds[d + 1]] for d in range(bounds.size - 1)]


def read_only(values: np.ndarray) -> np.ndarray:
    values = np.ascontiguousarray(values)
    values.setflags(write=False)
    return values


@dataclass(frozen=True)
class RadixForest:
    """Compressed radix forest of a trace; every array is indexed by vertex ``v`` (parents
    first, ``parent[v] < v``).

    Attributes
    ----------
    parent : parent vertex, ``-1`` for a root.
    depth : ``ℓ_v`` in tokens (cumulative from the root).
    depth_blocks : depth in blocks.
    count : ``n_v``, requests whose path passes through ``v`` (``p̂_v = n_v / N``).
    ends : requests whose path ends at ``v`` (every request ends at a vertex).
    first_seen, last_seen : arrival times (s) of the first/last request through ``v``.
    input_sum, output_sum : Σ input / output tokens of the requests through ``v``.
    end_input_sum, end_output_sum : the same over the requests ending at ``v``.
    top_block, bottom_block : first and last block id of the merged chain (its hash ids).
    chain_start, chain_blocks : every block id of every vertex's own segment, in CSR form
        (:meth:`chain`); empty when the forest was built without them.
    """

    block_size: int
    n_requests: int
    n_blocks: int
    block_occurrences: int
    shared_blocks: int
    shared_occurrences: int
    parent: IntArray
    depth: FloatArray
    depth_blocks: IntArray
    count: IntArray
    ends: IntArray
    first_seen: FloatArray
    last_seen: FloatArray
    input_sum: FloatArray
    output_sum: FloatArray
    end_input_sum: FloatArray
    end_output_sum: FloatArray
    top_block: IntArray
    bottom_block: IntArray
    chain_start: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    chain_blocks: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64), repr=False)
    _child_start: IntArray = field(init=False, repr=False, compare=False)
    _child_index: IntArray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # children in CSR form: the children of v are _child_index[_child_start[v]:_child_start[v + 1]]
        index: Any = np.int32 if self.n_vertices < 2**31 else np.int64  # half the memory on a trace-sized forest
        has_parent = np.flatnonzero(self.parent >= 0).astype(index)
        order = has_parent[np.argsort(self.parent[has_parent], kind="stable")]
        start = np.zeros(self.n_vertices + 1, dtype=index)
        np.cumsum(np.bincount(self.parent[has_parent], minlength=self.n_vertices), out=start[1:])
        object.__setattr__(self, "_child_start", read_only(start))
        object.__setattr__(self, "_child_index", read_only(order))

    @property
    def n_vertices(self) -> int:
        return int(self.parent.size)

    @property
    def ids(self) -> tuple[str, ...]:
        """Vertex ids ``h<bottom block id>`` (hashes only: docs/model.md §9.6)."""
        return tuple(f"h{b}" for b in self.bottom_block.tolist())

    def vertex_id(self, v: int) -> str:
        """``ids[v]`` without building every vertex's id (a trace-sized forest has millions)."""
        return f"h{int(self.bottom_block[v])}"

    @property
    def roots(self) -> tuple[int, ...]:
        return tuple(np.flatnonzero(self.parent < 0).tolist())

    def children(self, v: int) -> tuple[int, ...]:
        """Child vertices of ``v`` in creation order."""
        return tuple(self._child_index[self._child_start[v] : self._child_start[v + 1]].tolist())

    @property
    def parent_depth(self) -> FloatArray:
        """``ℓ_{parent(v)}`` (0 for a root)."""
        return np.where(self.parent >= 0, self.depth[np.maximum(self.parent, 0)], 0.0)

    @property
    def segment(self) -> FloatArray:
        """Own tokens of ``v``: ``ℓ_v − ℓ_{parent(v)}``."""
        return self.depth - self.parent_depth

    def state_size(self, kappa: float) -> FloatArray:
        """State size ``κ ℓ_v`` of the whole prefix ending at ``v``."""
        return kappa * self.depth

    @property
    def mean_length(self) -> FloatArray:
        """``L_v``: mean input length of the requests through ``v``."""
        return self.input_sum / self.count

    @property
    def popularity(self) -> FloatArray:
        """``p̂_v = n_v / N``."""
        return self.count / self.n_requests

    def path(self, v: int) -> tuple[int, ...]:
        """Vertices from the root down to ``v`` inclusive."""
        chain = [v]
        while self.parent[chain[-1]] >= 0:
            chain.append(int(self.parent[chain[-1]]))
        return tuple(reversed(chain))

    def chain(self, v: int) -> tuple[int, ...]:
        """Block ids of ``v``'s own segment (from ``top_block`` to ``bottom_block``), root side first;
        ``()`` when the forest carries no chains."""
        if self.chain_start.size == 0:
            return ()
        return tuple(self.chain_blocks[self.chain_start[v] : self.chain_start[v + 1]].tolist())

    def vertex_of_block(self, block: int) -> int:
        """The vertex whose chain ends with ``block`` (``KeyError`` if none)."""
        hits = np.flatnonzero(self.bottom_block == block)
        if hits.size == 0:
            raise KeyError(block)
        return int(hits[0])

    def depth_histogram(self, edges: npt.ArrayLike | None = None) -> tuple[FloatArray, IntArray]:
        """Histogram of request input lengths by their leaf's depth (tokens): ``(edges, counts)``.

        Counts requests (not vertices) by the depth of the vertex they end at.
        """
        if edges is None:
            top = max(float(self.depth.max()), 1.0)
            edges = np.unique(np.concatenate(([0.0], 2.0 ** np.arange(9, np.ceil(np.log2(top)) + 1))))
        edges = np.asarray(edges, dtype=float)
        counts, _ = np.histogram(self.depth, bins=edges, weights=self.ends)
        return edges, counts.astype(np.int64)

    def summary(self) -> dict[str, object]:
        """Forest summary: requests, vertices, blocks, reuse and the depth histogram."""
        edges, counts = self.depth_histogram()
        shared_vertices = int(np.count_nonzero(self.count >= 2))
        lifetime = (self.last_seen - self.first_seen)[self.count >= 2]  # useful lifetime of reusable states
        return {
            "requests": self.n_requests,
            "vertices": self.n_vertices,
            "roots": len(self.roots),
            "leaves": int(np.count_nonzero(self.ends > 0)),
            "block_size": self.block_size,
            "unique_blocks": self.n_blocks,
            "block_occurrences": self.block_occurrences,
            "shared_block_fraction": self.shared_blocks / self.n_blocks,
            "shared_occurrence_fraction": self.shared_occurrences / self.block_occurrences,
            "shared_vertices": shared_vertices,
            "max_depth_tokens": float(self.depth.max()),
            "median_shared_lifetime_s": float(np.median(lifetime)) if lifetime.size else 0.0,
            "mean_input_length": float(self.input_sum[list(self.roots)].sum() / self.n_requests),
            "depth_histogram": {
                "edges": edges.tolist(),
                "requests": counts.tolist(),
            },
        }


def build_forest(
    records: Iterable[TraceRecord],
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    skip_invalid: bool = False,
    log: SkipLog | None = None,
) -> RadixForest:
    """Stream ``records`` into a :class:`ForestBuilder` and build the :class:`RadixForest`
    (the reference builder; ``edgeprefix profiles`` builds the same forest in bounded memory with
    :func:`edgeprefix.placement.pipeline.forest_stream.stream_forest`, docs/model.md §9.8)."""
    builder = ForestBuilder(block_size)
    builder.extend(records, skip_invalid=skip_invalid, log=log)
    builder.release_index()
    return builder.build()
