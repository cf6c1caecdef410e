"""Where the numerics are exact: the accepted range of every physical input (docs/model.md §20).

Inputs outside these ranges are refused when the instance is built, with the field named, so a
result can never come from a regime where a closed form overflows or a quadrature loses its
accuracy.  The bounds are wide (thirty decades either side of 1 for every scale), so any
choice of units a user makes fits; they are tight enough that products of a few of them stay
far from the float64 limits (1e±308).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import InstanceError, plain

# The ranges are stated with the fields they bound (one source, also of the JSON Schema); re-exported here.
from edgeprefix.placement.model.instance_fields import MAX_BLOCK_ID as MAX_BLOCK_ID
from edgeprefix.placement.model.instance_fields import MAX_FILTER_BITS as MAX_FILTER_BITS
from edgeprefix.placement.model.instance_fields import MAX_HASHES as MAX_HASHES
from edgeprefix.placement.model.instance_fields import MAX_TOKENS as MAX_TOKENS
from edgeprefix.placement.model.instance_fields import RADIO_EXPONENT_MAX, RADIO_EXPONENT_MIN, SCALE_MAX, SCALE_MIN, Range, field_ranges
from edgeprefix.placement.model.instance_fields import integer_digits as integer_digits

MAX_CONCURRENCY = 10**12  # c_s: Erlang B costs O(1) in c (docs/model.md §16.1); c_s stays exact in int64 and float64
MAX_SIMULATED_SLOTS = 100_000  # the simulators keep one slot per concurrent sequence of every node


def check_scale(field: str, value: float, *, allow_zero: bool = False) -> None:
    """``value`` finite and in ``[SCALE_MIN, SCALE_MAX]`` (or exactly 0 when ``allow_zero``)."""
    if allow_zero and value == 0:
        return
    if not (math.isfinite(value) and SCALE_MIN <= value <= SCALE_MAX):
        zero = "0 or " if allow_zero else ""
        raise InstanceError(
            field, f"must be {zero}a finite number in [{SCALE_MIN:g}, {SCALE_MAX:g}] (docs/model.md §20), got {plain(value)}"
        )


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


# --------------------------------------------------------------------------------------------
# The accepted range of every numeric instance field (docs/model.md §20.2, Table 20.2)
# --------------------------------------------------------------------------------------------
# schema path (``[]`` marks the items of a list) → range, read from the field table
# edgeprefix.placement.model.instance_fields.FORMAT (which the JSON Schema is generated from).
FIELD_RANGES: dict[str, Range] = field_ranges()


def check_field(path: str, field: str, value: float) -> None:
    """Check ``value`` against :data:`FIELD_RANGES` ``[path]``; ``field`` names it in the message (``requests[2].length``)."""
    FIELD_RANGES[path].check(field, value)


def check_instance_ranges(instance: Any) -> None:
    """Every numeric field of an instance in its range of :data:`FIELD_RANGES` (docs/model.md §20.2).

    Run first when an :class:`~edgeprefix.placement.model.instance.Instance` is built, so nothing is
    computed from a value outside its range.  The fields are read by name (no import of the
    instance's types, which import this module).
    """

    def each(section: str, obj: Any, names: tuple[str, ...], where: str | None = None) -> None:
        for name in names:
            value = getattr(obj, name, None)
            if value is not None:
                check_field(f"{section}.{name}", f"{where or section}.{name}", value)

    each("network", instance.network, _names("network"))
    each("gpu", instance.gpu, _names("gpu"))
    for i, tier in enumerate(instance.gpu.tiers):
        each("gpu.tiers[]", tier, _names("gpu.tiers[]"), f"gpu.tiers[{i}]")
    g = instance.prefill
    if hasattr(g, "linear"):
        each("prefill", g, _names("prefill"))
    if hasattr(g, "tokens") and hasattr(g, "seconds"):
        for key in ("tokens", "seconds"):
            for i, value in enumerate(getattr(g, key)):
                check_field(f"prefill.table.{key}[]", f"prefill.table.{key}[{i}]", value)
    for i, p in enumerate(instance.prefixes):
        each("prefixes[]", p, _names("prefixes[]"), f"prefixes[{i}]")
        for j, block in enumerate(p.blocks):
            check_field("prefixes[].blocks[]", f"prefixes[{i}].blocks[{j}]", block)
    for i, q in enumerate(instance.requests):
        each("requests[]", q, _names("requests[]"), f"requests[{i}]")
    each("placement", instance.placement, _names("placement"))
    for section in ("remote", "compression", "serving", "catalogue", "telemetry"):
        obj = getattr(instance, section)
        if obj is not None:
            names = _names(section)
            if section == "catalogue" and math.isinf(obj.bits):  # Catalogue(bits=math.inf): exact, no file form
                names = tuple(n for n in names if n != "bits")
            each(section, obj, names)


def _names(section: str) -> tuple[str, ...]:
    """The fields of ``section`` (a table such as ``gpu`` or ``requests[]``) with a range, not those of its sub-tables or lists."""
    return tuple(rest for key in FIELD_RANGES if key.startswith(section + ".") and not {".", "["} & set(rest := key[len(section) + 1 :]))


# --------------------------------------------------------------------------------------------
# Simulated networks: how many events a simulation can draw (docs/model.md §20.2)
# --------------------------------------------------------------------------------------------
MAX_SIMULATED_EVENTS = 10**9  # requests or churn events of one simulated run (≥ 40 bytes each: 40 GB)
MIN_SIMULATED_REQUESTS = 10.0  # expected measured requests of one run, below which a simulated coverage is undefined


def check_simulated_events(expected: float, field: str, what: str, fix: str) -> None:
    """Refuse a simulation whose expected number of ``what`` (a Poisson mean) is not finite or above
    :data:`MAX_SIMULATED_EVENTS` (numpy's Poisson sampler refuses means above about 9.2e18)."""
    if not (math.isfinite(expected) and expected <= MAX_SIMULATED_EVENTS):
        raise InstanceError(
            field,
            f"the simulated network would draw about {expected:.3g} {what}; at most "
            f"{MAX_SIMULATED_EVENTS:.0e} can be simulated (docs/model.md §20): {fix}",
        )


def check_simulated_network(instance: Any, nodes: float, warmup: float, horizon: float, intensities: tuple[float, ...] = ()) -> None:
    """Before a simulation: the expected requests of a torus of ``nodes`` nodes over ``warmup + horizon`` seconds
    at most :data:`MAX_SIMULATED_EVENTS`, the measured ones at least :data:`MIN_SIMULATED_REQUESTS`, and the
    catalogue's churn events at most :data:`MAX_SIMULATED_EVENTS`; the messages name the fields and options."""
    net = instance.network
    loads = intensities or (net.request_intensity,)
    per_second = nodes / net.edge_density  # the torus's area
    most = max(loads) * per_second * (warmup + horizon)
    check_simulated_events(
        most, "network.edge_density", "requests (Λ × nodes / λ_b × seconds)", "raise λ_b or lower Λ, --nodes or --horizon/--warmup"
    )
    fewest = min(loads) * per_second * horizon
    if not fewest >= MIN_SIMULATED_REQUESTS:
        raise InstanceError(
            "network.edge_density",
            f"the simulated network would measure about {fewest:.3g} requests "
            f"(Λ × nodes / λ_b × horizon); at least {MIN_SIMULATED_REQUESTS:g} are "
            "needed for a coverage (docs/model.md §20): raise --nodes or --horizon, "
            "or lower λ_b",
        )
    cat = getattr(instance, "catalogue", None)
    if cat is not None and cat.churn > 0:
        check_simulated_events(
            cat.churn * nodes * (warmup + horizon),
            "catalogue.churn",
            "churn events (γ × nodes × seconds)",
            "lower catalogue.churn, --nodes or --horizon/--warmup",
        )
