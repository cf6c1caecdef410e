"""Give freed array memory back to the system at once (glibc), for commands whose peak matters.

glibc's ``malloc`` serves a request below its *mmap threshold* from the heap, and raises that
threshold (up to 32 MiB) each time a larger mapped block is freed.  A command that allocates
and frees many arrays of a few MiB (``edgeprefix profiles`` on a trace of millions of requests:
chunk temporaries, per-vertex columns) then keeps them in a fragmented heap it cannot shrink,
so its resident memory grows well above what it holds: about 100 MB at 1.5 M requests
(benchmarks/README.md, "Peak memory of ``edgeprefix profiles``").  :func:`map_large_blocks`
fixes the threshold (``mallopt(M_MMAP_THRESHOLD, …)``, a documented glibc call): every
block above it is mapped on its own and unmapped when freed.  The results do not change; on a
system without glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

M_MMAP_THRESHOLD = -3  # glibc <malloc.h>
MAP_ABOVE = 256 * 1024  # bytes: blocks from here up are mapped on their own (glibc's default before it adapts: 128 KiB)


def map_large_blocks(threshold: int = MAP_ABOVE) -> bool:
    """Serve every allocation of ``threshold`` bytes or more by its own mapping (glibc only).

    Returns whether the setting took effect (``False`` off Linux or without glibc's ``mallopt``).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, int(threshold)))
