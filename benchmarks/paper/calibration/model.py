"""The calibrated family of instances: free parameters → a 3-profile, 2-type instance.

Fixed by design (docs/model.md §1–4 and the calibration README): ``α = 2``, ``τ = 0.8 s``, ``λ_b = 1`` (units),
``m_run = 1``, ``M = 12.5`` and ``κ`` chosen so that ``B_deep = 3`` and ``B_shallow = 1``:
``c = (12, 11, 9)`` for (none, shallow, deep) — deep caching costs three concurrency slots and
the deep tier is an M/M/9 queue (Fig. 5).  The system prompt is a third of the deep path
(``ℓ_sys = ℓ_tool / 3``, so ``B_shallow = B_deep / 3``), the two request types have 1024 and
4096 input tokens.  The placement constraints (§10.1) define Fig. 10's candidate set: the
memory budget ``B̄`` is the memory of the paper's high-load mix (none 0.35, shallow 0.5,
deep 0.15), the deep share is capped at 0.2 (the paper's "maximum deep-cache fraction") and
the fallback keeps ``π_min = 0.1``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from edgeprefix.placement.errors import InstanceError, plain
from edgeprefix.placement.model.instance import Instance, instance_from_mapping

MEMORY = 12.5  # M
DEEP_MEMORY = 3.0  # B_deep = κ ℓ_tool
SYSTEM_SHARE = 1.0 / 3.0  # ℓ_sys / ℓ_tool
SHORT_TOKENS, LONG_TOKENS = 1024, 4096
DEFAULT_MIX = {"none": 0.45, "shallow": 0.35, "deep": 0.20}  # Fig. 8's mix = the light-load best
HIGH_LOAD_MIX = {"none": 0.35, "shallow": 0.50, "deep": 0.15}  # the paper's high-load best
DEEP_CAP = 0.20
FALLBACK_MIN = 0.10
TARGET = 0.8


@dataclass(frozen=True)
class Parameters:
    """The free parameters of the calibration (seconds, tokens, probabilities).

    radio_scale : ξ [s per unit distance²].
    linear, quadratic : ``g(n) = a n + b n²``.
    short_decode, long_decode : ``D_q`` [s] of the 1024- and 4096-token types.
    short_probability : ``p_short`` (``p_long = 1 − p_short``).
    tool_depth : ``ℓ_tool`` [tokens], the deep path; ``ℓ_sys = ℓ_tool / 3``.
    """

    radio_scale: float
    linear: float
    quadratic: float
    short_decode: float
    long_decode: float
    short_probability: float
    tool_depth: float

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not (math.isfinite(value) and value > 0):
                raise InstanceError(f"calibration.{f.name}", f"must be > 0, got {plain(value)}")
        if not self.short_probability < 1:
            raise InstanceError("calibration.short_probability", f"must lie in (0, 1), got {plain(self.short_probability)}")
        if not self.tool_depth * SYSTEM_SHARE <= SHORT_TOKENS and self.tool_depth < LONG_TOKENS:
            raise InstanceError(
                "calibration.tool_depth", f"ℓ_sys = ℓ_tool/3 must be <= {SHORT_TOKENS}, got ℓ_tool = {plain(self.tool_depth)}"
            )

    @property
    def system_depth(self) -> float:
        return self.tool_depth * SYSTEM_SHARE

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


def instance_mapping(p: Parameters, *, intensity: float = 3.0, density: float = 1.0, name: str = "paper_calibrated") -> dict[str, Any]:
    """The schema mapping (``edgeprefix.placement.model.instance``) of the calibrated instance."""
    kappa = DEEP_MEMORY / p.tool_depth
    budget = sum(HIGH_LOAD_MIX[s] * b for s, b in (("none", 0.0), ("shallow", kappa * p.system_depth), ("deep", DEEP_MEMORY)))
    return {
        "name": name,
        "network": {"edge_density": density, "request_intensity": intensity, "radio_scale": p.radio_scale, "radio_exponent": 2.0},
        "gpu": {"memory": MEMORY, "runtime_per_sequence": 1.0, "kv_per_token": kappa},
        "prefill": {"linear": p.linear, "quadratic": p.quadratic},
        "prefixes": [{"id": "sys", "depth": p.system_depth}, {"id": "tool", "depth": p.tool_depth, "parent": "sys"}],
        "requests": [
            {"id": "short", "probability": p.short_probability, "length": SHORT_TOKENS, "decode": p.short_decode, "path": ["sys"]},
            {
                "id": "long",
                "probability": 1.0 - p.short_probability,
                "length": LONG_TOKENS,
                "decode": p.long_decode,
                "path": ["sys", "tool"],
            },
        ],
        "profiles": [
            {"id": "none", "prefixes": []},
            {"id": "shallow", "prefixes": ["sys"]},
            {"id": "deep", "prefixes": ["sys", "tool"]},
        ],
        "placement": {
            "target": TARGET,
            "memory_budget": round(budget + 1e-9, 9),
            "fallback": "none",
            "fallback_min": FALLBACK_MIN,
            "max_share": {"deep": DEEP_CAP},
            "mix": dict(DEFAULT_MIX),
        },
    }


def build_instance(p: Parameters, *, intensity: float = 3.0, density: float = 1.0) -> Instance:
    """The validated calibrated instance at ``Λ = intensity``, ``λ_b = density``."""
    return instance_from_mapping(instance_mapping(p, intensity=intensity, density=density))
