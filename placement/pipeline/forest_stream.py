"""Compact streaming builder of the radix forest (docs/model.md §9.1): the same forest as
:class:`~edgeprefix.placement.pipeline.forest.ForestBuilder`, in about 25 bytes per unique block.

The reference builder keeps a Python dict slot and ten 8-byte columns per unique block (about
250 bytes), so a trace whose requests carry private tails grows with its requests.  This builder
reads the records in chunks and keeps, per unique block, only

- its id in a sorted ``int64`` array with its creation index beside it (``int32``),
- its parent's creation index (``int32``),
- its child count, saturated at 2 (``uint8``),

and per request its end block, lengths (``int32``: at most 10⁹ tokens, docs/model.md §20) and arrival time.  A chunk is resolved with numpy: ids
already known are looked up in the sorted array, new ids take creation indices in the order of
their first occurrence (exactly the order the reference builder gives them), and every
occurrence's parent must equal the parent its block was first seen under.  The first record that
breaks that rule gets the reference builder's error (or, with ``skip_invalid``, is skipped: the
records before it are committed and the rest of the chunk is resolved again).

:meth:`StreamForestBuilder.build` uses two facts of the creation order: a block with one child
and no request ending at it was created by a request that went on, so its only child is the next
block index; hence a merged chain is a run of consecutive indices ending at its vertex, a vertex's
own blocks are ``chain_start[v] = V[v−1] + 1 … V[v]`` and the subtree sums run over vertices
only.  Every sum is of integers in float64 (exact), so the result is equal, array for array, to
the reference builder's (tests/test_forest_stream.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain
from edgeprefix.placement.pipeline.forest import RadixForest, read_only
from edgeprefix.placement.pipeline.traces import DEFAULT_BLOCK_SIZE, SkipLog, TraceError, TraceRecord

CHUNK_RECORDS = 8192  # records resolved together
CHUNK_BLOCKS = 1 << 20  # ... or fewer, once their blocks reach this many
MAX_BLOCKS = 2**31 - 1  # creation indices are int32
BUCKETS = 1  # sorted id arrays, by id mod BUCKETS; 1 measured best: at 1.5 M requests the peak of profiles was
# 638 MB with 1, 649 MB with 2, 694 MB with 64 (many small arrays re-allocated per chunk fragment the heap)


class _Column:
    """A growable numpy column (capacity × 1.5): append chunks, read and update in place."""

    def __init__(self, dtype: npt.DTypeLike) -> None:
        self._data = np.zeros(1024, dtype=dtype)
        self.size = 0

    def append(self, values: np.ndarray) -> None:
        end = self.size + values.size
        if end > self._data.size:
            grown = np.zeros(max(end, int(self._data.size * 1.5)), dtype=self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : end] = values
        self.size = end

    @property
    def values(self) -> np.ndarray:
        """A view of the filled part (valid until the next :meth:`append`)."""
        return self._data[: self.size]


class StreamForestBuilder:
    """Chunked, compact builder; :meth:`extend` with records, then :meth:`build` once."""

    def __init__(self, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"block_size must be a positive integer, got {plain(block_size)}")
        self.block_size = block_size
        self.n_requests = 0
        self.occurrences = 0
        # known block ids, sorted, in buckets by id mod BUCKETS, with their creation indices beside them
        self._keys = [np.zeros(0, dtype=np.int64) for _ in range(BUCKETS)]
        self._kidx = [np.zeros(0, dtype=np.int32) for _ in range(BUCKETS)]
        self._parent = _Column(np.int32)  # by creation index; -1 for a root
        self._children = _Column(np.uint8)  # child count, saturated at 2
        # per request, in chunks: end block, path length in blocks, input and output tokens (< 2^31, §20), arrival time
        self._requests: dict[str, list[np.ndarray]] = {"end": [], "blocks": [], "input": [], "output": [], "time": []}
        self._built = False

    @property
    def n_blocks(self) -> int:
        return self._parent.size

    def extend(self, records: Iterable[TraceRecord], *, skip_invalid: bool = False, log: SkipLog | None = None) -> None:
        """Add every record; with ``skip_invalid`` a rejected record is skipped and logged."""
        self._open()
        chunk: list[TraceRecord] = []
        blocks = 0
        for record in records:
            chunk.append(record)
            blocks += len(record.blocks)
            if len(chunk) >= CHUNK_RECORDS or blocks >= CHUNK_BLOCKS:
                self._resolve(chunk, skip_invalid, log)
                chunk, blocks = [], 0
        if chunk:
            self._resolve(chunk, skip_invalid, log)

    def _open(self) -> None:
        if self._built:
            raise RuntimeError("this StreamForestBuilder released its index at build(): create a new builder to add records")

    def _resolve(self, chunk: list[TraceRecord], skip_invalid: bool, log: SkipLog | None) -> None:
        while chunk:
            bad = self._commit(chunk)
            if bad is None:
                return
            if bad:
                if self._commit(chunk[:bad]) is not None:  # pragma: no cover - a valid prefix stays valid
                    raise RuntimeError("forest_stream: a valid prefix of a chunk was refused")
            error = self._explain(chunk[bad])
            if not skip_invalid:
                raise error
            if log is not None:
                log.record(error)
            chunk = chunk[bad + 1 :]

    def _lookup(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(known, index)``: which ids are known and their creation indices (``-1`` where not)."""
        index = np.full(ids.size, -1, dtype=np.int64)
        known = np.zeros(ids.size, dtype=bool)
        bucket = ids % BUCKETS
        order = np.argsort(bucket, kind="stable")
        bounds = np.searchsorted(bucket[order], np.arange(BUCKETS + 1))
        for b in np.flatnonzero(np.diff(bounds)):
            keys = self._keys[b]
            if keys.size == 0:
                continue
            at = order[bounds[b] : bounds[b + 1]]
            loc = np.minimum(np.searchsorted(keys, ids[at]), keys.size - 1)
            hit = keys[loc] == ids[at]
            known[at[hit]] = True
            index[at[hit]] = self._kidx[b][loc[hit]]
        return known, index

    def _commit(self, chunk: list[TraceRecord]) -> int | None:
        """Commit the chunk and return ``None``, or commit nothing and return the first bad record's position."""
        n = len(chunk)
        lengths = np.fromiter((len(r.blocks) for r in chunk), dtype=np.int64, count=n)
        empty = np.flatnonzero(lengths == 0)
        first_bad = int(empty[0]) if empty.size else n
        total = int(lengths.sum())
        flat = np.fromiter(itertools.chain.from_iterable(r.blocks for r in chunk), dtype=np.int64, count=total)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        request = np.repeat(np.arange(n), lengths)
        first_in_request = np.zeros(total, dtype=bool)
        first_in_request[starts[lengths > 0]] = True
        known, index = self._lookup(flat)
        base = self.n_blocks
        fresh = np.flatnonzero(~known)
        new_ids, first, inverse = np.unique(flat[fresh], return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # new blocks in the order of their first occurrence
        rank = np.empty(order.size, dtype=np.int64)
        rank[order] = np.arange(order.size)
        index[fresh] = base + rank[inverse.reshape(-1)]
        if total == 0:
            return first_bad
        seen_under = np.full(total, -1, dtype=np.int64)  # each occurrence's parent: the block before it in its request
        seen_under[1:] = index[:-1]
        seen_under[first_in_request] = -1
        new_parent = seen_under[fresh[first[order]]]  # in creation order
        recorded = np.empty(total, dtype=np.int64)
        recorded[known] = self._parent.values[index[known]]
        recorded[fresh] = new_parent[index[fresh] - base]
        mismatch = np.flatnonzero(recorded != seen_under)
        if mismatch.size:
            first_bad = min(first_bad, int(request[mismatch[0]]))
        if first_bad < n:
            return first_bad
        if base + new_ids.size > MAX_BLOCKS:
            raise ValueError(f"the trace has more than {MAX_BLOCKS} unique blocks: split it or raise --block-size")
        self._parent.append(new_parent.astype(np.int32))
        self._children.append(np.zeros(new_ids.size, dtype=np.uint8))
        parents, counts = np.unique(new_parent[new_parent >= 0], return_counts=True)
        children = self._children.values
        children[parents] = np.minimum(children[parents].astype(np.int64) + counts, 2)
        new_index = (base + rank).astype(np.int32)
        bucket = new_ids % BUCKETS  # new_ids is sorted, so each bucket's part is sorted too
        for b in np.unique(bucket):
            mine = bucket == b
            at = np.searchsorted(self._keys[b], new_ids[mine])
            self._keys[b] = np.insert(self._keys[b], at, new_ids[mine])
            self._kidx[b] = np.insert(self._kidx[b], at, new_index[mine])
        columns = self._requests
        columns["end"].append(index[starts + lengths - 1].astype(np.int32))
        columns["blocks"].append(lengths.astype(np.int32))
        columns["input"].append(np.fromiter((r.input_length for r in chunk), dtype=np.int32, count=n))
        columns["output"].append(np.fromiter((r.output_length for r in chunk), dtype=np.int32, count=n))
        columns["time"].append(np.fromiter((r.timestamp for r in chunk), dtype=np.float64, count=n))
        self.n_requests += n
        self.occurrences += total
        return None

    def _block_id(self, index: int) -> int:
        b = next(b for b in range(BUCKETS) if np.any(self._kidx[b] == index))
        return int(self._keys[b][np.flatnonzero(self._kidx[b] == index)[0]])

    def _column(self, name: str) -> np.ndarray:
        """One per-request column in one array; its chunks are released."""
        parts = self._requests[name]
        whole = np.concatenate(parts) if parts else np.zeros(0)
        parts.clear()
        return whole

    def _explain(self, record: TraceRecord) -> TraceError:
        """The reference builder's error for ``record`` against the committed state."""
        blocks = record.blocks
        if not blocks:
            return TraceError(record.line, "hash_ids", "a request needs at least one block")
        known, index = self._lookup(np.fromiter(blocks, dtype=np.int64, count=len(blocks)))
        n_known = int(np.argmin(known)) if not known.all() else len(blocks)
        parent = self._parent.values
        prev = -1
        for j in range(n_known):
            i = int(index[j])
            if parent[i] != prev:
                was = "a root" if parent[i] < 0 else f"parent {self._block_id(int(parent[i]))}"
                now = "a root" if j == 0 else f"parent {blocks[j - 1]}"
                return TraceError(record.line, "hash_ids", f"block {blocks[j]} seen under two parents ({was}, now {now})")
            prev = i
        j = next(k for k in range(n_known, len(blocks)) if known[k] or blocks[k] in blocks[n_known:k])
        return TraceError(record.line, "hash_ids", f"block {blocks[j]} seen under two parents (repeated or known elsewhere)")

    def build(self) -> RadixForest:
        """The frozen :class:`RadixForest`; the builder's block index is released."""
        self._open()
        if self.n_requests == 0:
            raise ValueError("the trace has no valid request: cannot build a prefix forest")
        self._built = True
        ids = np.empty(self.n_blocks, dtype=np.int64)
        for b in range(BUCKETS):  # released bucket by bucket: no builder can add records after build
            ids[self._kidx[b]] = self._keys[b]
            self._keys[b], self._kidx[b] = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        end = self._column("end").astype(np.int64)
        kept = self._children.values != 1
        kept[end] = True
        vertices = np.flatnonzero(kept)
        del kept
        top = np.concatenate(([0], vertices[:-1] + 1))  # first block of each vertex's chain
        up = self._parent.values[top].astype(np.int64)
        self._parent, self._children = _Column(np.int32), _Column(np.uint8)
        top_block = read_only(ids[top])
        chain = vertices - top + 1
        del top
        vparent = np.searchsorted(vertices, np.maximum(up, 0))
        vparent[up < 0] = -1
        del up
        depth_blocks = _path_sums(chain, vparent)
        bottom_block = read_only(ids[vertices])
        of = np.searchsorted(vertices, end)  # each request's end vertex
        chain_start = np.empty(vertices.size + 1, dtype=np.int64)
        chain_start[0] = 0
        np.add(vertices, 1, out=chain_start[1:])
        del end, vertices
        nv = chain.size
        ends = np.bincount(of, minlength=nv)
        inputs = self._column("input").astype(np.int64)
        end_in = np.bincount(of, weights=inputs, minlength=nv)
        end_out = np.bincount(of, weights=self._column("output"), minlength=nv)
        depth = depth_blocks * float(self.block_size)  # the smallest end over the requests ending there (module doc)
        np.minimum.at(depth, of, np.minimum(self._column("blocks").astype(np.int64) * self.block_size, inputs))
        del inputs
        times = self._column("time")
        first = np.full(nv, np.inf)
        last = np.full(nv, -np.inf)
        np.minimum.at(first, of, times)
        np.maximum.at(last, of, times)
        del times, of
        count, sub_in, sub_out = ends.copy(), end_in.copy(), end_out.copy()
        levels = np.argsort(depth_blocks, kind="stable")
        bounds = np.searchsorted(depth_blocks[levels], np.unique(depth_blocks))
        for lo, hi in zip(bounds[::-1], np.append(bounds[1:], nv)[::-1]):  # deepest first: into the parents
            members = levels[lo:hi]
            members = members[vparent[members] >= 0]
            upv = vparent[members]
            np.add.at(count, upv, count[members])
            np.add.at(sub_in, upv, sub_in[members])
            np.add.at(sub_out, upv, sub_out[members])
            np.minimum.at(first, upv, first[members])
            np.maximum.at(last, upv, last[members])
        del levels
        shared = count >= 2
        return RadixForest(
            block_size=self.block_size,
            n_requests=self.n_requests,
            n_blocks=int(ids.size),
            block_occurrences=int(self.occurrences),
            shared_blocks=int(chain[shared].sum()),
            shared_occurrences=int((count * chain)[shared].sum()),
            parent=read_only(vparent),
            depth=read_only(depth),
            depth_blocks=read_only(depth_blocks),
            count=read_only(count),
            ends=read_only(ends),
            first_seen=read_only(first),
            last_seen=read_only(last),
            input_sum=read_only(sub_in),
            output_sum=read_only(sub_out),
            end_input_sum=read_only(end_in),
            end_output_sum=read_only(end_out),
            top_block=top_block,
            bottom_block=bottom_block,
            chain_start=read_only(chain_start),
            chain_blocks=read_only(ids),
        )


def _path_sums(values: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """``Σ values`` over each vertex and its ancestors (pointer jumping: log₂(depth) vectorised rounds)."""
    total = values.astype(np.int64).copy()
    jump = parent.copy()
    while True:
        live = np.flatnonzero(jump >= 0)
        if live.size == 0:
            return total
        total[live] += total[jump[live]]
        jump[live] = jump[jump[live]]


def stream_forest(
    records: Iterable[TraceRecord], *, block_size: int = DEFAULT_BLOCK_SIZE, skip_invalid: bool = False, log: SkipLog | None = None
) -> RadixForest:
    """:func:`~edgeprefix.placement.pipeline.forest.build_forest` in bounded memory (:class:`StreamForestBuilder`)."""
    builder = StreamForestBuilder(block_size)
    builder.extend(records, skip_invalid=skip_invalid, log=log)
    return builder.build()


__all__: list[Any] = ["StreamForestBuilder", "stream_forest"]
