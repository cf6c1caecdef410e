"""``--seeds``: one meaning on every command — the seed values themselves, never a count.

``--seeds 0-9`` is the ten seeds 0, 1, …, 9 (an inclusive range), ``--seeds 0,3,7`` those
three, ``--seeds 0-4,10`` mixes both, ``--seeds 5`` is the one seed 5.
"""

from __future__ import annotations

import argparse

SEEDS_HELP = "seed values: a list (0,3,7), an inclusive range (0-9) or both (0-4,10); not a count"


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
        seeds.extend(range(first, last + 1))
    if not seeds:
        raise ValueError(f"{option}: no seed given (e.g. --seeds 0-9)")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{option}: seed {next(s for s in seeds if seeds.count(s) > 1)} is given twice in {text!r}")
    return tuple(seeds)


def seeds_argument(text: str) -> tuple[int, ...]:
    """:func:`parse_seeds` as an argparse ``type`` (its message becomes argparse's error line)."""
    try:
        return parse_seeds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--seeds: ")) from None
