"""Where the numerics are exact: the accepted range of every physical input (docs/model.md §20).

Inputs outside these ranges are refused when the instance is built, with the field named, so a
result can never come from a regime where a closed form overflows or a quadrature loses its
accuracy.  The bounds are wide (thirty decades either side of 1 for every scale), so any
choice of units a user makes fits; they are tight enough that products of a few of them stay
far from the float64 limits (1e±308).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import InstanceError, plain

SCALE_MIN, SCALE_MAX = 1e-30, 1e30  # densities λ_b, intensity Λ, radio scale ξ, memories M, m_run, κ, τ_0, L_q
RADIO_EXPONENT_MIN, RADIO_EXPONENT_MAX = 1.0, 6.0  # α: quadrature error on A_{s,q} < 2e-6 with the default nodes
MAX_CONCURRENCY = 10**12  # c_s: Erlang B costs O(1) in c (docs/model.md §16.1); c_s stays exact in int64 and float64
MAX_SIMULATED_SLOTS = 100_000  # the simulators keep one slot per concurrent sequence of every node


def check_scale(field: str, value: float, *, allow_zero: bool = False) -> None:
    """``value`` finite and in ``[SCALE_MIN, SCALE_MAX]`` (or exactly 0 when ``allow_zero``)."""
    if allow_zero and value == 0:
        return
    if not (math.isfinite(value) and SCALE_MIN <= value <= SCALE_MAX):
        zero = "0 or " if allow_zero else ""
        raise InstanceError(field, f"must be {zero}a finite number in [{SCALE_MIN:g}, {SCALE_MAX:g}] (docs/model.md §20), got {plain(value)}")


def check_radio_exponent(field: str, value: float) -> None:
    """α in ``[RADIO_EXPONENT_MIN, RADIO_EXPONENT_MAX]``."""
    if not (math.isfinite(value) and RADIO_EXPONENT_MIN <= value <= RADIO_EXPONENT_MAX):
        raise InstanceError(
            field,
            f"must lie in [{RADIO_EXPONENT_MIN:g}, {RADIO_EXPONENT_MAX:g}] (path-loss exponents; outside it the "
            f"coverage quadrature is not accurate, docs/model.md §20), got {plain(value)}",
        )


def check_concurrency(field: str, memory: float, runtime_per_sequence: float) -> None:
    """``M / m_run`` (the most slots a profile can get) at most :data:`MAX_CONCURRENCY`."""
    slots = memory / runtime_per_sequence
    if not slots <= MAX_CONCURRENCY:
        raise InstanceError(
            field,
            f"M / m_run = {slots:.4g} concurrent sequences per node; at most {MAX_CONCURRENCY} are supported "
            "(docs/model.md §20): lower gpu.memory or raise gpu.runtime_per_sequence",
        )


def check_simulated_slots(servers: npt.ArrayLike) -> None:
    """The simulators' slots per node (``c_s`` of the simulated profiles) at most :data:`MAX_SIMULATED_SLOTS`."""
    most = int(np.max(np.asarray(servers), initial=0))
    if most > MAX_SIMULATED_SLOTS:
        raise InstanceError(
            "gpu.memory",
            f"c_s = {most} concurrent sequences per node; the simulators keep one slot per sequence and take at most "
            f"{MAX_SIMULATED_SLOTS} (docs/model.md §20): lower gpu.memory or raise gpu.runtime_per_sequence for a simulation",
        )
