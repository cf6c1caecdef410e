"""One BLAS thread for the spatial kernel's many small matrix products (docs/model.md §16.4, (16.11)).

The Newton sums (16.7) are one ``(R × J) · (J × R)`` product per type and segment block, a few
milliseconds each.  A multi-threaded BLAS splits each of them over its threads and the threads
spin between calls: on a shared machine (here 2 cores, load 6–8) that spinning is counted as CPU
time and delays every other process.  Measured on ``scale_instance`` 100 profiles × 20 types,
α = 3.5, cell model, alternating runs: 27.0 and 28.0 s CPU with OpenBLAS's default 2 threads against
4.2 and 3.2 s with one (wall 81–106 s against 10–17 s), with the same coverage to the last digit.
The limit is set with ``threadpoolctl`` (the maintained way to limit a BLAS's threads at run time)
around the kernel's loops only, and lifted after them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def _controller() -> Any:
    from threadpoolctl import ThreadpoolController  # imported on the first product, not at start-up

    return ThreadpoolController()


def single_blas_thread() -> AbstractContextManager[Any]:
    """A context in which every BLAS the process loaded runs on one thread."""
    return _controller().limit(limits=1, user_api="blas")
