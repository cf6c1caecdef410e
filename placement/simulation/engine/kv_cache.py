"""One node's prefix cache: pinned profile blocks and a dynamic LRU radix over KV blocks (docs/model.md §17).

Identity is the trace's block id (one id per ``B`` prompt tokens; equal ids are equal prefixes,
and an id always follows the same predecessor, so a set of ids held by a node answers a
longest-prefix match like a radix tree).  Memory is counted in the engine's KV blocks of ``b``
tokens: a cached trace block costs ``B / b`` of them (``b`` must divide ``B``).

- **pinned** blocks (the plan's profile ``C_s``) are always held and never evicted; their memory
  is the plan's reserve, outside :attr:`PrefixCache.capacity`;
- **dynamic** blocks are referenced by running requests (``refs``, not evictable) or free and
  kept in least-recently-used order (``lru``); only free ones are evicted, oldest first.

Eviction order (documented choice, as vLLM's free-block queue): blocks released together go to
the recent end deepest first, so of one prompt's blocks the leaf is evicted before its parent,
and a parent is never evicted while a cached child remains (a child's use also uses its parent).

``events`` (``None`` or a list) receives ``(time, node, block, +1 | −1)`` for every dynamic block
stored or evicted: the KV events routers subscribe to.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class PrefixCache:
    """Prefix cache of one node.

    Parameters
    ----------
    capacity : engine KV blocks shared by running requests' own blocks and the dynamic cache.
    per_block : engine blocks per trace block (``B / b``).
    pinned : trace block ids held for good (the profile).
    dynamic : whether finished prompts stay cached (LRU); ``False`` is the planned-only cache.
    node : the node's index (stamped on events).
    """

    capacity: int
    per_block: int
    pinned: frozenset[int] = frozenset()
    dynamic: bool = True
    node: int = 0
    events: list[tuple[float, int, int, int]] | None = None
    refs: dict[int, int] = field(default_factory=dict)
    lru: OrderedDict[int, None] = field(default_factory=OrderedDict)
    used: int = 0  # engine blocks owned by running requests (their uncached tokens)
    count: int = 0  # dynamic blocks held (referenced or free)

    def __post_init__(self) -> None:
        if self.capacity < 0 or self.per_block < 1:
            raise ValueError(f"cache: capacity must be >= 0 and per_block >= 1, got {self.capacity}, {self.per_block}")

    @property
    def cached(self) -> int:
        """Engine blocks held by the dynamic cache (referenced or free)."""
        return self.per_block * self.count

    @property
    def free(self) -> int:
        """Engine blocks neither owned by a request nor cached."""
        return self.capacity - self.used - self.per_block * self.count

    @property
    def evictable(self) -> int:
        return self.per_block * len(self.lru)

    def holds(self, block: int) -> bool:
        return block in self.pinned or block in self.refs or block in self.lru

    def match(self, seq: Sequence[int]) -> int:
        """Leading blocks of ``seq`` held (pinned or dynamic)."""
        m = 0
        pinned, refs, lru = self.pinned, self.refs, self.lru
        for b in seq:
            if b in pinned or b in refs or b in lru:
                m += 1
            else:
                break
        return m

    def acquire(self, seq: Sequence[int], m: int, now: float) -> list[int]:
        """Reference the first ``m`` blocks of ``seq`` (a hit); returns the dynamic ones referenced."""
        if not self.dynamic:
            return []
        out = []
        for b in seq[:m]:
            if b in self.pinned:
                continue
            if b in self.lru:
                del self.lru[b]
                self.refs[b] = 1
            else:
                self.refs[b] = self.refs.get(b, 0) + 1
            out.append(b)
        return out

    def store(self, blocks: Sequence[int], now: float) -> list[int]:
        """Cache a prefill's new full blocks as referenced by it; returns those newly stored.

        Their memory moves from the request's own blocks to the cache (the caller lowers
        ``used`` by ``per_block`` per returned block)."""
        if not self.dynamic:
            return []
        out = []
        for b in blocks:
            if b in self.pinned or b in self.lru or b in self.refs:
                continue  # already cached (by another request meanwhile): the request keeps its own copy
            self.refs[b] = 1
            self.count += 1
            out.append(b)
            if self.events is not None:
                self.events.append((now, self.node, b, 1))
        return out

    def release(self, held: Sequence[int], now: float) -> None:
        """Drop one reference of each block in ``held`` (root first); free ones go to the LRU
        deepest first (see the module docstring)."""
        for b in reversed(held):
            n = self.refs.get(b, 0)
            if n > 1:
                self.refs[b] = n - 1
            elif n == 1:
                del self.refs[b]
                self.lru[b] = None

    def make_room(self, blocks: int, now: float) -> bool:
        """Evict free cached blocks, oldest first, until ``blocks`` engine blocks are free."""
        free = self.capacity - self.used - self.per_block * self.count
        if free >= blocks:
            return True
        lru, events, per = self.lru, self.events, self.per_block
        while free < blocks and lru:
            b, _ = lru.popitem(last=False)
            self.count -= 1
            free += per
            if events is not None:
                events.append((now, self.node, b, -1))
        return free >= blocks
