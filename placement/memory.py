"""Refuse work that cannot fit in memory, up front and with a message (instead of a MemoryError).

:func:`check_memory` compares an estimate of the bytes a computation allocates at once with the
memory this machine has available (``MemAvailable`` of ``/proc/meminfo``, else physical memory).
"""

from __future__ import annotations

import os

from edgeprefix.placement.errors import InstanceError

GIB = 2.0**30
FRACTION = 0.8  # share of the available memory a single computation may take


def available_bytes() -> float:
    """Bytes of memory available to a new allocation (Linux ``MemAvailable``; else total physical memory)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return float("inf")


def check_memory(needed: float, field: str, what: str, fix: str) -> None:
    """Raise :class:`InstanceError` on ``field`` when ``needed`` bytes exceed :data:`FRACTION` of the available memory."""
    have = available_bytes()
    if needed > FRACTION * have:
        raise InstanceError(
            field, f"{what} needs about {needed / GIB:.3g} GiB of memory, this machine has {have / GIB:.3g} GiB available: {fix}"
        )
