"""Per-request block sequences for the engine room: from a trace, or drawn from an instance's types.

The replay's :class:`~edgeprefix.placement.pipeline.trace_workload.TraceWorkload` keeps hit
depths, not block ids; a dynamic cache needs the ids.  :class:`BlockTrace` holds them (one tuple
per request, root first), the trace's block size, and the pinned block ids of every profile.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.pipeline.trace_workload import block_catalogue
from edgeprefix.placement.pipeline.traces import read_trace


@dataclass(frozen=True)
class BlockTrace:
    """Block ids per request (``seq[i]``, root first), the trace's tokens per block, pinned ids per profile."""

    seq: tuple[tuple[int, ...], ...]
    block_size: int
    pinned: tuple[frozenset[int], ...]

    def part(self, lo: int, hi: int | None = None) -> BlockTrace:
        return BlockTrace(self.seq[lo:hi], self.block_size, self.pinned)

    def check_engine_block(self, engine_block: int) -> None:
        """The engine's KV block must divide the trace's block (a trace block is whole engine blocks)."""
        if self.block_size % engine_block:
            raise ValueError(
                f"engine.block_size: {engine_block} tokens does not divide the trace's block size "
                f"{self.block_size} (--block-size): pick a divisor such as 16"
            )


def pinned_blocks(instance: Instance, block_size: int) -> tuple[frozenset[int], ...]:
    """The trace block ids each profile holds (needs a trace-built instance with ``prefixes[].blocks``)."""
    cat = block_catalogue(instance, block_size)
    ids = np.empty(cat.blocks, dtype=np.int64)
    for b, k in cat.index.items():
        ids[k] = b
    return tuple(frozenset(ids[cat.held[s]].tolist()) for s in range(cat.held.shape[0]))


def read_block_trace(
    source: str | os.PathLike[str], instance: Instance, *, fmt: str = "mooncake", block_size: int = 512, skip_invalid: bool = False
) -> BlockTrace:
    """The block ids of every request of a trace, in the order the replay reads them."""
    seq = tuple(tuple(r.blocks) for r in read_trace(source, fmt=fmt, block_size=block_size, skip_invalid=skip_invalid))
    return BlockTrace(seq, block_size, pinned_blocks(instance, block_size))


def synthetic_block_trace(instance: Instance, kind: np.ndarray, length: np.ndarray, block_size: int) -> BlockTrace:
    """Block ids for requests drawn from an instance's types: the blocks of the type's prefix path
    (one id per ``block_size`` tokens of every vertex's segment, shared by all requests of every
    type through it), then fresh ids for the request's own tokens beyond the path."""
    ids: dict[str, tuple[int, ...]] = {}
    by_id = {p.id: p for p in instance.prefixes}
    counter = 1

    def path_blocks(vid: str) -> tuple[int, ...]:
        nonlocal counter
        if vid not in ids:
            p = by_id[vid]
            parent = () if p.parent is None else path_blocks(p.parent)
            top = by_id[p.parent].depth if p.parent is not None else 0.0
            n = max(int(np.ceil(p.depth / block_size)) - int(np.ceil(top / block_size)), 0)
            ids[vid] = parent + tuple(range(counter, counter + n))
            counter += n
        return ids[vid]

    types = [path_blocks(q.path[-1]) if q.path else () for q in instance.requests]
    depth = [float(by_id[q.path[-1]].depth) if q.path else 0.0 for q in instance.requests]
    seq = []
    for q, n_tok in zip(kind.tolist(), length.tolist()):
        head = types[q]
        own = max(int(np.ceil(n_tok / block_size)) - int(np.ceil(depth[q] / block_size)), 0)
        seq.append(head + tuple(range(counter, counter + own)))
        counter += own
    pinned = []
    for prof in instance.profiles:
        held: set[int] = set()
        for v in prof.prefixes:
            held.update(path_blocks(v))
        pinned.append(frozenset(held))
    return BlockTrace(tuple(seq), block_size, tuple(pinned))
