"""Progress bars for long work: one tqdm bar on stderr, silent when stderr is not a terminal.

Every loop that can run for more than a couple of seconds (searches, simulations, sweeps,
figure runs) wraps its iterations in :func:`progress_bar`; output sets, tables and JSON go to
stdout, so a bar never mixes with them.  ``EDGEPREFIX_PROGRESS=0`` silences the bars,
``=1`` forces them (for a terminal that does not say it is one).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def bars_enabled() -> bool:
    """Whether bars are shown: stderr is a terminal, unless ``EDGEPREFIX_PROGRESS`` says otherwise."""
    forced = os.environ.get("EDGEPREFIX_PROGRESS")
    if forced in {"0", "1"}:
        return forced == "1"
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


class _Silent:
    """What :func:`progress_bar` returns when bars are off: the same calls, no output."""

    def __init__(self, iterable: Iterable[Any] | None) -> None:
        self._iterable = iterable

    def __iter__(self) -> Iterator[Any]:
        return iter(self._iterable if self._iterable is not None else ())

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: float = 1) -> None:
        return None

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        return None

    def close(self) -> None:
        return None


def progress_bar(iterable: Iterable[T] | None = None, *, total: float | None = None, desc: str = "", unit: str = "it") -> Any:
    """A tqdm bar over ``iterable`` (or a manual one with ``total`` and ``.update(n)``), on stderr.

    Returns an object with tqdm's ``update``, ``set_postfix_str``, ``close`` and context-manager
    protocol whether or not the bar is shown; tqdm is imported only when a bar is drawn.
    """
    if not bars_enabled():
        return _Silent(iterable)
    from tqdm import tqdm  # imported on demand: keeps start-up cheap

    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, leave=False)
