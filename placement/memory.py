"""Refuse work that cannot fit in memory, up front and with a message (instead of a MemoryError).

:func:`check_memory` compares an estimate of the bytes a computation allocates at once with the
memory this machine has available (``MemAvailable`` of ``/proc/meminfo``, else physical memory).
"""

from __future__ import annotations

import os
from typing import Any

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


# Fitted to the peak resident memory of ``evaluate --json`` above the import + load floor (docs/model.md §20,
# (20.5); benchmarks/README.md, "The size guard"): a fixed part, the (S, S, Q) arrays, and a part that grows as
# S^2.5 (the fixed point's and the report's per-pair work at many profiles).
EVALUATION_BASE = 244 * 2.0**20  # bytes: scipy's work arrays and the report, measured 187–289 MiB on small instances
PER_TRIPLE = 19.0  # bytes per (s, s', q): about 2.4 float64 arrays of S² Q entries
PER_TIER_POWER = 28.0  # bytes per S^2.5


def evaluation_bytes(tiers: int, types: int, alpha: float, policy: str) -> float:
    """Bytes an evaluation with ``tiers`` active profiles and ``types`` request types takes at its peak
    (docs/model.md §20, (20.5)); 0 for the ``nearest`` policy at α = 2 (``O(S Q)`` only, never refused).

    ``EVALUATION_BASE + 19 S² Q + 28 S^2.5`` bytes and, at α ≠ 2, two float64 arrays of one block of the
    quadrature grid (at most ``2²²`` numbers each, docs/model.md §16.4): within 1.5× of the measured peak on
    every size of benchmarks/README.md ("The size guard"), 50 × 75 to 3 000 × 10 and 500 × 2 000.
    """
    if policy == "nearest" and alpha == 2.0:
        return 0.0
    from edgeprefix.placement.model.association import default_nodes
    from edgeprefix.placement.model.spatial import BLOCK_ELEMENTS

    s, q = float(tiers), float(types)
    grid = 0.0 if alpha == 2.0 else 8.0 * 2 * min(BLOCK_ELEMENTS, s * s * q * default_nodes(alpha))
    return EVALUATION_BASE + PER_TRIPLE * s * s * q + PER_TIER_POWER * s**2.5 + grid


def evaluation_estimate(instance: Any, mix: Any, policy: str) -> float:
    """:func:`evaluation_bytes` of evaluating ``mix`` (``None``: the instance's) on ``instance`` under ``policy``:
    its active profiles and request types (what a command asks before it starts, e.g. for a progress bar)."""
    active = int((instance.mix_vector(mix) > 0).sum())
    return evaluation_bytes(active, len(instance.requests), instance.network.radio_exponent, policy)
