"""``--seeds``: one meaning on every command — the seed values themselves, never a count.

``--seeds 0-9`` is the ten seeds 0, 1, …, 9 (an inclusive range), ``--seeds 0,3,7`` those
three, ``--seeds 0-4,10`` mixes both, ``--seeds 5`` is the one seed 5.
"""

from __future__ import annotations

import argparse

SEEDS_HELP = "seed values: a list (0,3,7), an inclusive range (0-9) or both (0-4,10); not a count"
MAX_SEEDS = 10_000  # seeds of one run: every seed is a full run of every cell


def parse_seeds(text: str, option: str = "--seeds") -> tuple[int, ...]:
    """``"0-2,5"`` → ``(0, 1, 2, 5)``; one-line :class:`ValueError` naming ``option`` otherwise."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        low, dash, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise ValueError(f"{option}: expected seeds like 0-9 or 0,3,7 (integers >= 0), got {text!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"{option}: a range A-B needs 0 <= A <= B, got {part!r}")
        if len(seeds) + (last - first + 1) > MAX_SEEDS:  # checked before the range is built (0-100000000000)
            raise ValueError(f"{option}: at most {MAX_SEEDS} seeds per run, got {len(seeds) + last - first + 1} from {part!r}")
        seeds.extend(range(first, last + 1))
    if not seeds:
        raise ValueError(f"{option}: no seed given (e.g. --seeds 0-9)")
    if len(set(seeds)) != len(seeds):
        seen: set[int] = set()
        twice = next(s for s in seeds if s in seen or seen.add(s))  # type: ignore[func-returns-value]
        raise ValueError(f"{option}: seed {twice} is given twice in {text!r}")
    return tuple(seeds)


def seeds_argument(text: str) -> tuple[int, ...]:
    """:func:`parse_seeds` as an argparse ``type`` (its message becomes argparse's error line)."""
    try:
        return parse_seeds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--seeds: ")) from None
