"""A progress bar for one long computation the size guard accepted, advanced by its block loops.

The size guard (:mod:`edgeprefix.placement.memory`, docs/model.md §20) estimates the memory of an
evaluation before it starts; the same estimate tells a long run from a short one, since the work
grows with the same ``|S|² |Q|`` arrays (benchmarks/README.md, "The size guard": 500 × 2 000
profiles × types, about 9 GiB, ran 352 s).  A command wraps the run in :func:`long_work`; when
the estimate reaches :data:`LONG_WORK_BYTES` it opens one bar (``placement/progress.py``: on
stderr, only on a terminal or with ``EDGEPREFIX_PROGRESS=1``), and every loop over blocks of
request types (the spatial kernels, the gradient's atoms) calls :func:`advance` after each block.
A short run draws nothing, and stdout (tables, JSON) is never touched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from edgeprefix.placement.progress import progress_bar

LONG_WORK_BYTES = 2.0**30  # a size-guard estimate from here up (about 30 s of work and more, see the module doc) gets a bar
_BAR: ContextVar[Any] = ContextVar("edgeprefix_long_work_bar", default=None)
T = TypeVar("T")


@contextlib.contextmanager
def long_work(estimate: float, desc: str) -> Iterator[bool]:
    """Draw a bar of type blocks done while the body runs if ``estimate`` (bytes, the size guard's) is at
    least :data:`LONG_WORK_BYTES`; yields whether it did.  Nested calls share the outer bar."""
    if estimate < LONG_WORK_BYTES or _BAR.get() is not None:
        yield False
        return
    with progress_bar(desc=desc, unit=" type blocks") as bar:
        token = _BAR.set(bar)
        try:
            yield True
        finally:
            _BAR.reset(token)


def advance(blocks: int = 1) -> None:
    """Count ``blocks`` blocks of request types as done on the open bar (nothing without one)."""
    bar = _BAR.get()
    if bar is not None:
        bar.update(blocks)


def blocks_done(blocks: Iterable[T]) -> Iterator[T]:
    """``blocks`` unchanged, each counted (:func:`advance`) once the loop body that took it is done."""
    for block in blocks:
        yield block
        advance()
