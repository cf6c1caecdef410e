"""Trace readers: Mooncake-style block-hash JSONL and token-id JSONL (docs/model.md §9.1).

Both readers are streaming generators: they read one line at a time, never keep raw lines,
and yield one :class:`TraceRecord` per request with its source line number.  A request is
reduced to its sequence of *block ids* (``hash_ids``): identical ids mean an identical
reusable prefix block of ``block_size`` tokens, so a request's prefix path in the forest is
its block-id list.

Depth in tokens (choice, documented): block ``j`` (1-based) of a request of ``L`` input
tokens ends at token ``min(j · block_size, L)``; only the last block of a request may be
partial.  The forest (``edgeprefix.placement.pipeline.forest``) gives a block the smallest end seen over all
requests through it, so a vertex's depth never exceeds the length of any request below it.

Malformed lines raise :class:`TraceError` naming the line number, or with
``skip_invalid=True`` are skipped and counted in a :class:`SkipLog`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
import os
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.placement.errors import plain
from edgeprefix.placement.files import DuplicateKeyError, huge_integer, unique_keys
from edgeprefix.placement.model.ranges import MAX_BLOCK_ID, MAX_TOKENS

FORMATS = ("mooncake", "tokens")
DEFAULT_BLOCK_SIZE = 512  # tokens per KV block of the Mooncake trace
MAX_SKIP_EXAMPLES = 5
MAX_TIMESTAMP = 1e12  # seconds (31 700 years): the largest arrival time a trace line may give (docs/model.md §20)
MAX_TRACE_TOKENS = int(MAX_TOKENS)  # input and output tokens of one request, as requests[].length of an instance


class TraceError(ValueError):
    """A trace line breaks a rule; ``line`` is its 1-based line number (0 if unknown).

    ``field`` names the offending JSON field (or ``""``) and ``reason`` the broken rule with
    the bad value.
    """

    def __init__(self, line: int, field: str, reason: str) -> None:
        self.line = line
        self.field = field
        self.reason = reason
        where = (f" line {line}" if line else "") + (f", field {field!r}" if field else "")
        super().__init__(f"trace{where}: {reason}")


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One request of a trace.

    Parameters
    ----------
    line : 1-based source line number.
    timestamp : arrival time in seconds (Mooncake stores milliseconds).
    input_length : ``L`` input tokens of the request.
    output_length : output tokens (``D_q = output_length × decode time per token``).
    blocks : block ids along the request's prefix path, root first; ``len(blocks) ==
        ceil(input_length / block_size)``.
    """

    line: int
    timestamp: float
    input_length: int
    output_length: int
    blocks: tuple[int, ...]


@dataclass
class SkipLog:
    """Counts of skipped lines (``skip_invalid=True``) with the first few errors as examples."""

    skipped: int = 0
    by_field: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def record(self, error: TraceError) -> None:
        self.skipped += 1
        self.by_field[error.field or "line"] += 1
        if len(self.examples) < MAX_SKIP_EXAMPLES:
            self.examples.append(str(error))


def _check_block_size(block_size: int) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a positive integer, got {plain(block_size)}")
    return block_size


def iter_lines(source: str | os.PathLike[str] | Iterable[str]) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, text)`` from a path (``.gz`` allowed) or an iterable of strings."""
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_file():
            raise TraceError(0, "", f"file {str(path)!r} does not exist")
        opener = gzip.open if path.suffix == ".gz" else open
        number = 0
        try:
            with opener(path, "rt", encoding="utf-8") as handle:
                for number, text in enumerate(handle, start=1):
                    yield number, text
        except UnicodeDecodeError as exc:
            raise TraceError(
                number + 1, "", f"file {str(path)!r} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x}); save it as UTF-8"
            ) from None
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise TraceError(
                number + 1, "", f"file {str(path)!r} is not a complete gzip file ({exc}): re-download or re-compress it"
            ) from None
        except OSError as exc:
            raise TraceError(0, "", f"cannot read file {str(path)!r} ({exc.strerror or exc})") from None
    else:
        yield from enumerate(source, start=1)


def _int_field(line: int, obj: dict[str, Any], name: str, *, minimum: int, maximum: int = MAX_TRACE_TOKENS) -> int:
    if name not in obj:
        raise TraceError(line, name, "required field is missing")
    value = obj[name]
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(line, name, f"must be an integer, got {_short(value)}")
    if not minimum <= value <= maximum:
        raise TraceError(line, name, f"must be an integer in [{minimum}, {maximum:.0e}] (docs/model.md §20), got {_short(value)}")
    return value


def _short(value: Any) -> str:
    """``plain(value)`` cut to 60 characters (an absurd value stays one short line)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**40:
        return f"an integer of about {abs(value).bit_length() * 0.30103:.0f} digits"
    text = plain(value)
    return text if len(text) <= 60 else text[:55] + " …" + text[-2:]


def _timestamp(line: int, obj: dict[str, Any], *, scale: float) -> float:
    value = obj.get("timestamp", 0)
    unit = "milliseconds" if scale != 1.0 else "seconds"
    top = MAX_TIMESTAMP / scale
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 <= value <= top
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        raise TraceError(line, "timestamp", f"must be a number of {unit} in [0, {top:.0e}] (docs/model.md §20), got {_short(value)}")
    return float(value) * scale


def _parse_object(line: int, text: str) -> dict[str, Any] | None:
    if not text.strip():
        return None
    try:
        obj = json.loads(text, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as exc:
        raise TraceError(line, "", f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    except DuplicateKeyError as exc:
        raise TraceError(line, "", str(exc)) from None
    except ValueError as exc:  # an integer longer than Python reads (sys.get_int_max_str_digits())
        if "digits" not in str(exc):
            raise
        raise TraceError(line, "", huge_integer(text).split(": ", 1)[-1]) from None
    except RecursionError:
        raise TraceError(line, "", "JSON nested too deeply (a trace line is one flat object)") from None
    if not isinstance(obj, dict):
        raise TraceError(line, "", f"must be a JSON object, got {type(obj).__name__}")
    return obj


def parse_mooncake_line(line: int, text: str, *, block_size: int = DEFAULT_BLOCK_SIZE) -> TraceRecord | None:
    """Parse one Mooncake JSONL line (``None`` for a blank line); raise :class:`TraceError`."""
    obj = _parse_object(line, text)
    if obj is None:
        return None
    timestamp = _timestamp(line, obj, scale=1e-3)
    length = _int_field(line, obj, "input_length", minimum=1)
    output = _int_field(line, obj, "output_length", minimum=0)
    if "hash_ids" not in obj:
        raise TraceError(line, "hash_ids", "required field is missing")
    ids = obj["hash_ids"]
    if not isinstance(ids, list) or not set(map(type, ids)) <= {int}:
        raise TraceError(line, "hash_ids", "must be a list of integers")
    if ids and not (0 <= min(ids) and max(ids) <= MAX_BLOCK_ID):
        bad = next(v for v in ids if not 0 <= v <= MAX_BLOCK_ID)
        raise TraceError(line, "hash_ids", f"block ids must lie in [0, 2^63 − 1], got {bad}")
    expected = -(-length // block_size)
    if len(ids) != expected:
        raise TraceError(
            line,
            "hash_ids",
            f"len(hash_ids) must equal ceil(input_length / {block_size}) = {expected}, got {len(ids)}",
        )
    return TraceRecord(line, timestamp, length, output, tuple(ids))


def token_block_ids(tokens: Iterable[int], block_size: int) -> tuple[int, ...]:
    """Chain-hash token ids into block ids: block ``j``'s id hashes block ``j−1``'s id and its
    own tokens (BLAKE2b, 63 bits), so equal ids mean equal whole prefixes.  ``block_size=1``
    gives a token-level forest."""
    arr = np.fromiter(tokens, dtype=np.int64)
    ids: list[int] = []
    parent = b"\x00" * 8
    for start in range(0, arr.size, block_size):
        digest = hashlib.blake2b(parent + arr[start : start + block_size].tobytes(), digest_size=8).digest()
        ids.append(int.from_bytes(digest, "little") >> 1)
        parent = digest
    return tuple(ids)


def parse_tokens_line(line: int, text: str, *, block_size: int = DEFAULT_BLOCK_SIZE) -> TraceRecord | None:
    """Parse one token-id JSONL line: ``tokens`` (list of ints), optional ``output_length``
    (default 0) and ``timestamp`` (seconds, default 0); every number in its range (docs/model.md §20)."""
    obj = _parse_object(line, text)
    if obj is None:
        return None
    if "tokens" not in obj:
        raise TraceError(line, "tokens", "required field is missing")
    tokens = obj["tokens"]
    if not isinstance(tokens, list) or not tokens:
        raise TraceError(line, "tokens", "must be a non-empty list of token ids")
    if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= MAX_BLOCK_ID for t in tokens):
        raise TraceError(line, "tokens", "every token id must be an integer in [0, 2^63 − 1]")
    output = _int_field(line, obj, "output_length", minimum=0) if "output_length" in obj else 0
    timestamp = _timestamp(line, obj, scale=1.0)
    return TraceRecord(line, timestamp, len(tokens), output, token_block_ids(tokens, block_size))


_PARSERS = {"mooncake": parse_mooncake_line, "tokens": parse_tokens_line}


def read_trace(
    source: str | os.PathLike[str] | Iterable[str],
    *,
    fmt: str = "mooncake",
    block_size: int = DEFAULT_BLOCK_SIZE,
    skip_invalid: bool = False,
    log: SkipLog | None = None,
) -> Iterator[TraceRecord]:
    """Stream the records of a trace (path, ``.gz`` path, or iterable of JSONL strings).

    Parameters
    ----------
    fmt : ``"mooncake"`` (``timestamp`` ms, ``input_length``, ``output_length``, ``hash_ids``)
        or ``"tokens"`` (``tokens`` list, hashed into blocks of ``block_size`` tokens).
    block_size : tokens per block (512 for the Mooncake trace; 1 = token-level for tokens).
    skip_invalid : skip malformed lines (counted in ``log``) instead of raising.
    """
    if fmt not in _PARSERS:
        raise ValueError(f"unknown trace format {fmt!r} (valid: {list(FORMATS)})")
    _check_block_size(block_size)
    parse = _PARSERS[fmt]
    last: TraceRecord | None = None  # the previous accepted record: timestamps must not decrease
    for number, text in iter_lines(source):
        try:
            record = parse(number, text, block_size=block_size)
            if record is not None and last is not None and record.timestamp < last.timestamp:
                raise TraceError(
                    number,
                    "timestamp",
                    f"{record.timestamp:.6g} s is earlier than line {last.line}'s "
                    f"{last.timestamp:.6g} s: the trace must be in time order (sort it by timestamp)",
                )
        except TraceError as error:
            if not skip_invalid:
                raise
            if log is not None:
                log.record(error)
            continue
        if record is not None:
            last = record
            yield record


def with_progress(
    records: Iterable[TraceRecord], *, total: int | None = None, desc: str = "trace", every: int = 4096
) -> Iterator[TraceRecord]:
    """``records`` unchanged, drawing a progress bar of the requests read (``placement.progress``; ``total``
    when known, else the count and the rate), updated every ``every`` records so the bar costs nothing."""
    from edgeprefix.placement.progress import progress_bar

    with progress_bar(total=total, desc=desc, unit=" requests") as bar:
        pending = 0
        for record in records:
            yield record
            pending += 1
            if pending == every:
                bar.update(pending)
                pending = 0
        bar.update(pending)


def synthetic_records(
    n_requests: int,
    *,
    n_families: int = 50,
    system_blocks: int = 2,
    family_blocks: tuple[int, int] = (1, 8),
    tail_blocks: tuple[int, int] = (1, 12),
    block_size: int = DEFAULT_BLOCK_SIZE,
    output_mean: float = 300.0,
    rate: float = 5.0,
    zipf: float = 1.1,
    seed: int | np.random.Generator | None = 0,
) -> Iterator[TraceRecord]:
    """A synthetic Mooncake-like stream: shared system prompt → family prefix → private tail.

    Every request starts with ``system_blocks`` shared blocks (ids ``0..``), then its family's
    fixed prefix (family popularity Zipf(``zipf``)), then a private tail of fresh blocks.  The
    known forest is: one root chain, one child per used family, one leaf per request.
    Generated lazily (nothing is held), so ``n_requests = 10**6`` streams in bounded memory.
    """
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_families + 1) ** zipf
    weights /= weights.sum()
    fam_len = rng.integers(family_blocks[0], family_blocks[1] + 1, size=n_families)
    fam_start = system_blocks + np.concatenate(([0], np.cumsum(fam_len)[:-1]))
    next_id = int(system_blocks + fam_len.sum())
    system = tuple(range(system_blocks))
    t = 0.0
    chunk = 4096
    done = 0
    while done < n_requests:
        m = min(chunk, n_requests - done)
        fams = rng.choice(n_families, size=m, p=weights)
        tails = rng.integers(tail_blocks[0], tail_blocks[1] + 1, size=m)
        partial = rng.integers(1, block_size + 1, size=m)
        outputs = rng.poisson(output_mean, size=m)
        gaps = rng.exponential(1.0 / rate, size=m)
        for i in range(m):
            f = int(fams[i])
            tail = int(tails[i])
            blocks = system + tuple(range(int(fam_start[f]), int(fam_start[f] + fam_len[f]))) + tuple(range(next_id, next_id + tail))
            next_id += tail
            length = (len(blocks) - 1) * block_size + int(partial[i])
            t += float(gaps[i])
            done += 1
            yield TraceRecord(done, t, length, int(outputs[i]), blocks)


def record_to_mooncake_json(record: TraceRecord) -> str:
    """Serialise a record as one Mooncake JSONL line (timestamp in integer milliseconds)."""
    return json.dumps(
        {
            "timestamp": int(round(record.timestamp * 1000)),
            "input_length": record.input_length,
            "output_length": record.output_length,
            "hash_ids": list(record.blocks),
        }
    )


def lines_of(text: str) -> Iterator[str]:
    """The lines of an in-memory JSONL string (for tests and embedded samples)."""
    return iter(io.StringIO(text))
