"""Where the numerics are exact: the accepted range of every physical input (docs/model.md §20).

Inputs outside these ranges are refused when the instance is built, with the field named, so a
result can never come from a regime where a closed form overflows or a quadrature loses its
accuracy.  The bounds are wide (thirty decades either side of 1 for every scale), so any
choice of units a user makes fits; they are tight enough that products of a few of them stay
far from the float64 limits (1e±308).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

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
MAX_TOKENS = 1e9  # L_q, ℓ_v, prefill table sizes, chunk size: 100× the longest context windows of today's models
MAX_BLOCK_ID = 2**63 - 1  # trace block ids are stored as int64
MAX_FILTER_BITS = 2**53  # m: a whole number exact in float64 (and an int64 index of the simulator's filters)
MAX_HASHES = 64  # k: the optimal k = (m/n) ln 2 reaches 64 only at 92 bits per entry


@dataclass(frozen=True)
class Range:
    """A closed range ``[low, high]`` of one numeric field, optionally with exactly 0 and/or ``+inf`` besides."""

    low: float = SCALE_MIN
    high: float = SCALE_MAX
    zero: bool = False  # exactly 0 is also accepted (an extension switched off)
    infinite: bool = False  # +inf is accepted in Python (an unlimited bandwidth, an exact catalogue)
    whole: bool = False  # a whole number

    def describe(self) -> str:
        """The range in words, e.g. ``0 or a finite number in [1e-30, 1e+30]``."""
        kind = "a whole number" if self.whole else "a finite number"
        extra = ("0 or " if self.zero else "") + ("inf or " if self.infinite else "")

        def show(x: float) -> str:
            return str(x) if isinstance(x, int) else f"{x:g}"

        return f"{extra}{kind} in [{show(self.low)}, {show(self.high)}]"

    def contains(self, value: float) -> bool:
        if isinstance(value, (int, np.integer)):  # exact, also beyond the float range (a 5000-digit integer)
            return (self.zero and value == 0) or self.low <= int(value) <= self.high
        if self.zero and value == 0:
            return True
        if self.infinite and value == math.inf:
            return True
        if not (math.isfinite(value) and self.low <= value <= self.high):
            return False
        return not self.whole or float(value).is_integer()

    def check(self, field: str, value: float) -> None:
        """Raise :class:`InstanceError` on ``field`` unless ``value`` lies in the range."""
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InstanceError(field, f"must be {self.describe()} (docs/model.md §20), got {plain(value)}")
        if not self.contains(value):
            if isinstance(value, (int, np.integer)) and abs(int(value)) > 10**30:
                raise InstanceError(
                    field, f"must be {self.describe()} (docs/model.md §20), got an integer of {integer_digits(int(value))} digits"
                )
            raise InstanceError(field, f"must be {self.describe()} (docs/model.md §20), got {plain(value)}")


def integer_digits(value: int) -> int:
    """Decimal digits of ``value`` without ``str()`` (which refuses more than 4300 digits)."""
    return max(1, math.floor(abs(value).bit_length() * math.log10(2)) + 1)


_SCALE = Range()
_SCALE_OR_ZERO = Range(zero=True)
_SCALE_OR_INF = Range(infinite=True)
_SHARE = Range(0.0, 1.0)
_TOKENS = Range(SCALE_MIN, MAX_TOKENS)

# schema path (``[]`` marks the items of a list) → range; tests/test_instance_schema.py checks that
# placement/model/instance_schema.json states the same bounds.
FIELD_RANGES: dict[str, Range] = {
    "network.edge_density": _SCALE,
    "network.request_intensity": _SCALE,
    "network.radio_scale": _SCALE,
    "network.radio_exponent": Range(RADIO_EXPONENT_MIN, RADIO_EXPONENT_MAX),
    "gpu.memory": _SCALE,
    "gpu.runtime_per_sequence": _SCALE,
    "gpu.kv_per_token": _SCALE,
    "gpu.tiers[].capacity": _SCALE_OR_ZERO,
    "gpu.tiers[].bandwidth": _SCALE_OR_INF,
    "gpu.tiers[].latency": _SCALE_OR_ZERO,
    "prefill.linear": _SCALE_OR_ZERO,
    "prefill.quadratic": _SCALE_OR_ZERO,
    "prefill.intercept": _SCALE_OR_ZERO,
    "prefill.table.tokens[]": Range(SCALE_MIN, MAX_TOKENS, zero=True),
    "prefill.table.seconds[]": _SCALE_OR_ZERO,
    "prefixes[].depth": _TOKENS,
    "prefixes[].kv_per_token": _SCALE,
    "prefixes[].blocks[]": Range(0, MAX_BLOCK_ID, whole=True),
    "requests[].probability": _SHARE,
    "requests[].length": _TOKENS,
    "requests[].decode": _SCALE_OR_ZERO,
    "placement.target": _SCALE,
    "placement.memory_budget": _SCALE_OR_ZERO,
    "placement.fallback_min": _SHARE,
    "remote.bandwidth": _SCALE_OR_INF,
    "remote.latency": _SCALE_OR_ZERO,
    "remote.density": _SCALE,
    "remote.interference": _SCALE_OR_ZERO,
    "compression.ratio": Range(1.0, SCALE_MAX),
    "compression.decompress_per_token": _SCALE_OR_ZERO,
    "compression.quality_loss": _SHARE,
    "serving.decode_slots": _SCALE,
    "serving.handoff_bandwidth": _SCALE_OR_INF,
    "serving.handoff_latency": _SCALE_OR_ZERO,
    "serving.chunk_size": Range(1.0, MAX_TOKENS),
    "serving.chunk_overhead": _SCALE_OR_ZERO,
    "serving.decode_scv": _SCALE_OR_ZERO,
    "catalogue.bits": Range(1, MAX_FILTER_BITS, whole=True),  # inf (an exact catalogue) is Python-only, see below
    "catalogue.hashes": Range(1.0, float(MAX_HASHES), whole=True),
    "catalogue.refresh": _SCALE_OR_ZERO,
    "catalogue.churn": _SCALE_OR_ZERO,
    "telemetry.delay": _SCALE_OR_ZERO,
    "telemetry.refresh": _SCALE_OR_ZERO,
}


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

    each("network", instance.network, ("edge_density", "request_intensity", "radio_scale", "radio_exponent"))
    each("gpu", instance.gpu, ("memory", "runtime_per_sequence", "kv_per_token"))
    for i, tier in enumerate(instance.gpu.tiers):
        each("gpu.tiers[]", tier, ("capacity", "bandwidth", "latency"), f"gpu.tiers[{i}]")
    g = instance.prefill
    if hasattr(g, "linear"):
        each("prefill", g, ("linear", "quadratic", "intercept"))
    if hasattr(g, "tokens") and hasattr(g, "seconds"):
        for key in ("tokens", "seconds"):
            for i, value in enumerate(getattr(g, key)):
                check_field(f"prefill.table.{key}[]", f"prefill.table.{key}[{i}]", value)
    for i, p in enumerate(instance.prefixes):
        each("prefixes[]", p, ("depth", "kv_per_token"), f"prefixes[{i}]")
        for j, block in enumerate(p.blocks):
            check_field("prefixes[].blocks[]", f"prefixes[{i}].blocks[{j}]", block)
    for i, q in enumerate(instance.requests):
        each("requests[]", q, ("probability", "length", "decode"), f"requests[{i}]")
    each("placement", instance.placement, ("target", "memory_budget", "fallback_min"))
    for section in ("remote", "compression", "serving", "catalogue", "telemetry"):
        obj = getattr(instance, section)
        if obj is not None:
            names = tuple(key.split(".", 1)[1] for key in FIELD_RANGES if key.startswith(section + "."))
            if section == "catalogue" and math.isinf(obj.bits):  # Catalogue(bits=math.inf): exact, no file form
                names = tuple(n for n in names if n != "bits")
            each(section, obj, names)


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
