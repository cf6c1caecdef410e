"""One node's scheduler: the continuous-batching engine and its FCFS-slot limit (docs/model.md §17).

:class:`BatchingNode` — an iteration-level engine in the manner of vLLM and Sarathi-Serve:

- a step schedules, in order, one decode token for every decoding request, the next prefill
  chunk of every request still in prefill, then new requests from the FCFS waiting queue while
  the step's token budget, ``max_running`` and the KV memory allow (chunked prefill: a prompt
  longer than the budget left is split; without chunking a prompt runs whole, alone if need be);
- a new request's prefix hit is matched against the node's cache when it is admitted; its
  uncached tokens (prompt, and the tokens generated before a preemption) take KV blocks, and it
  is admitted only if the free blocks left stay above the watermark (free cached blocks are
  evicted, oldest first, to make room — never its own hit blocks, which it references first);
- the step that finishes a prompt emits its first token (TTFT ends there); its new full prompt
  blocks enter the dynamic cache (:mod:`.kv_cache`); each later step emits one token;
- when a decode step finds no block for a growing request, the most recently admitted running
  request is preempted by recompute (its blocks freed, back to the head of the queue);
- the step's time is :class:`~.step_time.StepTime` of its batch.  Runs of decode-only steps
  between two events (an arrival, a completion) are advanced at once, in closed form, never
  token by token; an arrival cuts a run at the end of the step in progress.

:class:`SlotNode` — the model's node (docs/model.md §5): ``c`` slots, FCFS, each request served
alone for ``g(L − h) + d · output`` whatever the batch, no chunking; its first token at
``start + g(L − h)``.  With the planned cache it reproduces the FCFS-slot replay exactly.

Both keep per-request state in one shared :class:`Requests` and append to a node's load
history (:mod:`.board` reads it for telemetry).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from edgeprefix.placement.simulation.engine.kv_cache import PrefixCache
from edgeprefix.placement.simulation.engine.step_time import StepTime

INF = float("inf")


@dataclass
class Requests:
    """Per-request inputs and outcomes shared by all nodes (plain lists: read one at a time).

    ``seq[i]`` are the trace block ids of request ``i`` (root first), ``full[i]`` how many of them
    are whole blocks of ``trace_block`` tokens; ``pinned_hit[s][i]`` its hit depth on the
    profile ``s`` (tokens).
    """

    length: list[int]
    output: list[int]
    seq: Sequence[Sequence[int]]
    full: list[int]
    trace_block: int
    pinned_hit: Sequence[Sequence[float]]
    first_token: list[float] = field(default_factory=list)
    finish: list[float] = field(default_factory=list)
    start: list[float] = field(default_factory=list)
    hit: list[float] = field(default_factory=list)
    blocks_hit: list[int] = field(default_factory=list)
    preemptions: int = 0
    rejected: list[bool] = field(default_factory=list)
    # engine state
    rem: list[int] = field(default_factory=list)
    ctx: list[int] = field(default_factory=list)
    own: list[int] = field(default_factory=list)
    gen: list[int] = field(default_factory=list)
    held: list[list[int]] = field(default_factory=list)
    order: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.length)
        for name in ("first_token", "finish", "start"):
            setattr(self, name, [INF] * n)
        self.hit = [0.0] * n
        self.blocks_hit = [0] * n
        self.rejected = [False] * n
        for name in ("rem", "ctx", "own", "gen", "order"):
            setattr(self, name, [0] * n)
        self.held = [[] for _ in range(n)]


class _Node:
    """What both node kinds share: index, profile, cache, queue, load history."""

    def __init__(self, index: int, profile: int, cache: PrefixCache, reqs: Requests, on_finish: Callable[[int, int, float], None]):
        self.index = index
        self.profile = profile
        self.cache = cache
        self.reqs = reqs
        self.waiting: deque[int] = deque()
        self.on_finish = on_finish
        self.history_t: list[float] = [0.0]
        self.history_n: list[int] = [0]  # requests in system (waiting + running)
        self.history_q: list[int] = [0]  # waiting
        self.served = 0
        self.next_time = INF
        self.version = 0
        self.keep_history = True  # False: only the current load is read (fresh telemetry)

    def running(self) -> int:  # pragma: no cover - defined by the subclasses
        raise NotImplementedError

    def _record(self, now: float) -> None:
        n = len(self.waiting) + self.running()
        q = len(self.waiting)
        if self.history_t[-1] == now or not self.keep_history:
            self.history_n[-1], self.history_q[-1] = n, q
        else:
            self.history_t.append(now)
            self.history_n.append(n)
            self.history_q.append(q)

    def _hit(self, i: int) -> tuple[float, int]:
        """Hit tokens and matched cache blocks of request ``i`` on this node now."""
        r = self.reqs
        pinned = r.pinned_hit[self.profile][i] if self.cache.pinned or not self.cache.dynamic else 0.0
        if not self.cache.dynamic:  # the planned cache: the profile's exact depth, in whole trace blocks
            return float(pinned), min(-(-int(pinned) // r.trace_block), len(r.seq[i]))
        seq = r.seq[i]
        m = self.cache.match(seq)
        return max(float(pinned), float(min(m * r.trace_block, r.length[i]))), m


class SlotNode(_Node):
    """``c`` FCFS slots, batch-independent service (see the module docstring)."""

    def __init__(
        self,
        index: int,
        profile: int,
        cache: PrefixCache,
        reqs: Requests,
        on_finish: Callable[[int, int, float], None],
        slots: int,
        prefill: Callable[[float], float],
        decode: Sequence[float],
        unit: Sequence[float],
    ):
        super().__init__(index, profile, cache, reqs, on_finish)
        self.slots = slots
        self.prefill = prefill
        self.decode = decode
        self.unit = unit
        self.busy: list[tuple[float, int]] = []  # (finish time, request)

    def running(self) -> int:
        return len(self.busy)

    def arrive(self, i: int, now: float) -> None:
        self.waiting.append(i)
        self._admit(now)
        self._record(now)

    def _admit(self, now: float) -> None:
        r = self.reqs
        while self.waiting and len(self.busy) < self.slots:
            i = self.waiting.popleft()
            h, m = self._hit(i)
            held = self.cache.acquire(r.seq[i], m, now) if m else []
            r.held[i] = held
            r.hit[i], r.blocks_hit[i] = h, m
            g = float(self.prefill(r.length[i] - h))
            u = self.unit[i]
            r.start[i] = now
            r.first_token[i] = now + g
            done = now + u * (g + self.decode[i])
            heapq.heappush(self.busy, (done, i))
        self.next_time = self.busy[0][0] if self.busy else INF

    def advance(self, until: float) -> None:
        """Finish every request due by ``until`` and start the queued ones on the freed slots."""
        r = self.reqs
        while self.busy and self.busy[0][0] <= until:
            done, i = heapq.heappop(self.busy)
            r.finish[i] = done
            full = r.full[i]
            m = r.blocks_hit[i]
            if self.cache.dynamic and full > m:
                if self.cache.make_room(self.cache.per_block * (full - m), done):
                    r.held[i] += self.cache.store(r.seq[i][m:full], done)
            self.cache.release(r.held[i], done)
            r.held[i] = []
            self.served += 1
            self.on_finish(self.index, i, done)
            self._admit(done)
            self._record(done)
        self.next_time = self.busy[0][0] if self.busy else INF


@dataclass
class _Plan:
    start: float
    end: float
    chunks: list[tuple[int, int]]  # (request, prefill tokens this step)
    steps: int  # decode steps (1 when the step has prefill chunks)
    batch: int  # decoding requests
    context: int  # their context tokens at the start
    reserved: int  # KV blocks reserved for the decode tokens


class BatchingNode(_Node):
    """A continuous-batching engine (see the module docstring)."""

    def __init__(
        self,
        index: int,
        profile: int,
        cache: PrefixCache,
        reqs: Requests,
        on_finish: Callable[[int, int, float], None],
        step: StepTime,
        *,
        token_budget: int,
        max_running: int,
        block_size: int,
        watermark: float,
        chunked: bool,
    ):
        super().__init__(index, profile, cache, reqs, on_finish)
        self.step = step
        self.budget = token_budget
        self.max_running = max_running
        self.bs = block_size
        self.watermark = int(watermark * cache.capacity + 0.999999)
        self.chunked = chunked
        self.prefilling: list[int] = []
        self.decoding: list[int] = []
        self.plan: _Plan | None = None
        self.admitted = 0

    def running(self) -> int:
        return len(self.prefilling) + len(self.decoding)

    def _blocks(self, tokens: int) -> int:
        return -(-tokens // self.bs)

    def arrive_many(self, ids: Sequence[int], now: float) -> None:
        """Requests arriving together (a static batch): one step sees them all."""
        self.waiting.extend(ids)
        if self.plan is None:
            self._schedule(now)
        self._record(now)

    def arrive(self, i: int, now: float) -> None:
        self.waiting.append(i)
        if self.plan is None:
            self._schedule(now)
        else:
            self._cut(now)
        self._record(now)

    def _cut(self, now: float) -> None:
        """End a decode run at the step in progress at ``now`` (new work is seen at the next step)."""
        p = self.plan
        if p is None or p.chunks or p.steps <= 1 or now >= p.end:
            return
        done = self.step.decode_steps_done(now - p.start, p.batch, p.context, p.steps)
        k = done + 1
        if k >= p.steps:
            return
        need = self._decode_need(k)
        self.cache.used -= p.reserved - need
        p.reserved = need
        p.steps = k
        p.end = p.start + self.step.decode_run(k, p.batch, p.context)
        self.next_time = p.end
        self.version += 1

    def _decode_need(self, k: int) -> int:
        """KV blocks the decoding requests need for ``k`` more tokens each."""
        bs = self.bs
        owns = list(map(self.reqs.own.__getitem__, self.decoding))
        if k == 1:
            return sum(1 for o in owns if o % bs == 0)
        return sum((o + k - 1) // bs - (o - 1) // bs for o in owns)

    def _preempt_last(self, now: float) -> bool:
        """Preempt the most recently admitted running request (recompute); False if none."""
        r = self.reqs
        pool = self.prefilling + self.decoding
        if not pool:
            return False
        i = max(pool, key=lambda x: r.order[x])
        (self.prefilling if i in self.prefilling else self.decoding).remove(i)
        self.cache.used -= self._blocks(r.own[i])
        self.cache.release(r.held[i], now)
        r.held[i] = []
        r.own[i] = 0
        r.preemptions += 1
        self.waiting.appendleft(i)
        return True

    def _admit_one(self, i: int, now: float) -> bool | None:
        """Admit the head of the queue: True admitted, False rejected (never fits), None blocked."""
        r = self.reqs
        h, m = self._hit(i)
        tokens = r.length[i] + r.gen[i]
        own = max(tokens - int(h), 1)
        need = self._blocks(own)
        cache = self.cache
        if need + self.watermark > cache.capacity:
            r.rejected[i] = True  # can never fit on this node
            self.waiting.popleft()
            self.on_finish(self.index, i, now)
            return False
        if cache.free - need < self.watermark:
            # the request's own hit blocks are not room: evicting them for it would leave a phantom hit
            hit_free = sum(1 for b in r.seq[i][:m] if b in cache.lru) if m and cache.dynamic else 0
            if cache.free + cache.per_block * (len(cache.lru) - hit_free) - need < self.watermark:
                return None
        self.waiting.popleft()
        r.held[i] = cache.acquire(r.seq[i], m, now) if m else []
        if cache.free - need < self.watermark:
            cache.make_room(need + self.watermark, now)  # fits: checked above, its hit blocks now referenced
        r.hit[i], r.blocks_hit[i] = h, m
        r.own[i] = own
        cache.used += need
        r.rem[i] = own
        r.ctx[i] = tokens - own
        if r.start[i] == INF:
            r.start[i] = now
        self.admitted += 1
        r.order[i] = self.admitted
        self.prefilling.append(i)
        return True

    def _schedule(self, now: float) -> None:
        """Plan the step starting at ``now`` (or go idle)."""
        r = self.reqs
        cache = self.cache
        need = 0
        # a token for every decoding request: find its blocks, preempting if memory runs out
        while self.decoding:
            need = self._decode_need(1)
            if need == 0 or cache.make_room(need, now):
                break
            if not self._preempt_last(now):
                break
        rem = r.rem
        if self.waiting:
            left = self.budget - len(self.decoding) - sum(rem[i] for i in self.prefilling)
            while self.waiting and self.running() < self.max_running and (left > 0 or not self.running()):
                i = self.waiting[0]
                status = self._admit_one(i, now)
                if status is None:
                    break
                if status:
                    left -= rem[i]
            if self.decoding:
                need = self._decode_need(1)  # a preemption inside admission may have changed it
        chunks: list[tuple[int, int]] = []
        if self.prefilling:
            budget = self.budget - len(self.decoding)
            for i in self.prefilling:
                if budget <= 0:
                    break
                c = min(rem[i], budget) if self.chunked else rem[i]
                if not self.chunked and chunks and c > budget:
                    break
                chunks.append((i, c))
                budget -= c
        b = len(self.decoding)
        if not chunks and b == 0:
            self.plan = None
            self.next_time = INF
            return
        ctx = r.ctx
        context = sum(map(ctx.__getitem__, self.decoding))
        if chunks:
            steps = 1
            prefill = sum(c for _, c in chunks)
            attention = sum(c * (ctx[i] + c) for i, c in chunks)
            duration = self.step(prefill, attention, b, context, len(chunks))
        else:
            out, gen = r.output, r.gen
            steps = max(min(map(int.__sub__, map(out.__getitem__, self.decoding), map(gen.__getitem__, self.decoding))), 1)
            avail = cache.capacity - cache.used - cache.per_block * cache.count + cache.per_block * len(cache.lru)
            need = self._decode_need(steps) if steps > 1 else need
            if need > avail:
                lo, hi = 1, steps  # largest k whose blocks fit (need(1) fits: ensured above)
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if self._decode_need(mid) <= avail:
                        lo = mid
                    else:
                        hi = mid - 1
                steps = lo
                need = self._decode_need(steps)
            duration = self.step.decode_run(steps, b, context)
        if need:
            cache.make_room(need, now)
            cache.used += need
        self.plan = _Plan(now, now + duration, chunks, steps, b, context, need)
        self.next_time = self.plan.end
        self.version += 1

    def advance(self, until: float) -> None:
        """Complete every planned step ending by ``until``, planning the next one each time."""
        while self.plan is not None and self.plan.end <= until:
            end = self.plan.end
            self._complete(self.plan)
            self._schedule(end)

    def _complete(self, p: _Plan) -> None:
        r = self.reqs
        now = p.end
        k = p.steps
        finished: list[int] = []
        for i in self.decoding:
            r.gen[i] += k
            r.ctx[i] += k
            r.own[i] += k
            if r.gen[i] >= r.output[i]:
                finished.append(i)
        bs = self.bs
        for i, c in p.chunks:
            r.rem[i] -= c
            r.ctx[i] += c
            if r.rem[i] > 0:
                continue
            self.prefilling.remove(i)
            m, full = r.blocks_hit[i], r.full[i]
            if self.cache.dynamic and full > m:
                stored = self.cache.store(r.seq[i][m:full], now)
                if stored:
                    r.held[i] = r.held[i] + stored
                    before = -(-r.own[i] // bs)
                    r.own[i] = max(r.own[i] - len(stored) * r.trace_block, 0)
                    self.cache.used -= before - -(-r.own[i] // bs)
            r.gen[i] += 1
            if r.first_token[i] == INF:
                r.first_token[i] = now
            if r.gen[i] >= r.output[i]:
                finished.append(i)
            else:
                self.decoding.append(i)
        for i in finished:
            if i in self.decoding:
                self.decoding.remove(i)
            self.cache.used -= -(-r.own[i] // bs)
            r.own[i] = 0
            self.cache.release(r.held[i], now)
            r.held[i] = []
            r.finish[i] = now
            self.served += 1
            self.on_finish(self.index, i, now)
        self.plan = None
        if finished or p.chunks:
            self._record(now)


def make_node(kind: str, **kwargs: Any) -> _Node:
    """``"slots"`` → :class:`SlotNode`, ``"batching"`` → :class:`BatchingNode`."""
    return SlotNode(**kwargs) if kind == "slots" else BatchingNode(**kwargs)
