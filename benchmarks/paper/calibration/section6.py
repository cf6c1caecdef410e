"""The ``paper_section6`` family: free parameters → a 3-profile, 2-type instance and its figure loads.

Unlike :mod:`~edgeprefix.benchmarks.paper.calibration.model` (the seven-parameter family of
``paper_calibrated``, slot counts fixed by design), every number the paper leaves free or only
bounds is a search coordinate here:

- radio ``ξ``; memory ``M`` and the deep profile's persistent memory ``B_deep = κ ℓ_tool``
  (in units of ``m_run = 1``: ``c_s = floor((M − κ ℓ_s)/m_run)`` depends on ``M/m_run`` and
  ``κ/m_run`` only, so ``m_run`` is the unit and not a coordinate);
- prefill ``g(n) = g_0 + a n + b n²`` with ``a``, ``b``, ``g_0`` inside the range of the
  Splitwise fits (:func:`prefill_bounds`);
- decodes ``D_short``, ``D_long``; depths ``ℓ_sys < ℓ_tool``; ``p_short``;
- Fig. 8's mix (the instance's default mix) and Fig. 10's candidate set (memory budget ``B̄``,
  deep cap, fallback minimum ``π_min``).

The two request types keep the paper's 1024 and 4096 tokens, ``α = 2``, ``τ = 0.8 s``,
``λ_b = 1``.  The loads of Figs 7, 9, 10, 11 and 12 (not stated by the paper) are chosen for
each parameter vector by the assessment (:mod:`~edgeprefix.benchmarks.paper.calibration.assess`) and
stored next to the instance as :class:`FigureLoads`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.datasets import SPLITWISE_TIMINGS
from edgeprefix.benchmarks.paper.calibration.targets import FIG7_LOADS, FIG10_LOADS, FIG12_INTENSITY, TARGET
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.errors import InstanceError, plain
from edgeprefix.placement.model.instance import Instance, instance_from_mapping
from edgeprefix.placement.pipeline.calibration import fit_table

NAME = "paper_section6"
SHORT_TOKENS, LONG_TOKENS = 1024, 4096
PROFILES = ("none", "shallow", "deep")


@cache
def prefill_bounds() -> dict[str, tuple[float, float]]:
    """``[min, max]`` of ``a``, ``b``, ``g_0`` over the Splitwise fits with intercept.

    Every (model, hardware, tensor-parallel) group of ``benchmarks/data/splitwise_perf_model.csv``
    is fitted with both weightings (``edgeprefix.placement.pipeline.calibration.fit_table``);
    the box spans the fitted coefficients.
    """
    rows = [row for weighting in ("relative", "absolute") for row in fit_table(SPLITWISE_TIMINGS, weighting=weighting).values()]
    return {key: (min(r[key] for r in rows), max(r[key] for r in rows)) for key in ("linear", "quadratic", "intercept")}


def _box() -> dict[str, tuple[float, float, bool]]:
    """Search box ``name -> (low, high, log scale)`` of :class:`Parameters`."""
    pb = prefill_bounds()
    return {
        "radio_scale": (0.02, 1.5, True),
        "memory": (4.0, 32.0, True),
        "deep_memory": (0.1, 12.0, True),
        "linear": (*pb["linear"], True),
        "quadratic": (*pb["quadratic"], True),
        "intercept": (*pb["intercept"], True),
        "short_decode": (0.05, 5.0, True),
        "long_decode": (0.05, 5.0, True),
        "tool_depth": (512.0, 3840.0, False),
        "system_share": (0.05, 0.98, False),
        "short_probability": (0.1, 0.9, False),
        "mix_deep": (0.05, 0.5, False),
        "mix_none_share": (0.0, 1.0, False),
        "budget_slack": (0.0, 1.0, False),
        "cap_slack": (0.0, 1.0, False),
        "fallback_share": (0.0, 1.0, False),
    }


@dataclass(frozen=True)
class Parameters:
    """One point of the family (seconds, tokens, probabilities; memory in units of ``m_run``).

    radio_scale : ``ξ`` [s per unit distance²].
    memory : ``M``; deep_memory : ``B_deep = κ ℓ_tool`` (so ``κ = deep_memory / tool_depth``).
    linear, quadratic, intercept : ``a``, ``b``, ``g_0`` of ``g(n) = g_0 + a n + b n²``.
    short_decode, long_decode : ``D_q`` [s].
    tool_depth : ``ℓ_tool``; system_share : ``ℓ_sys = system_share · min(ℓ_tool, 1023)``.
    short_probability : ``p_short``.
    mix_deep, mix_none_share : Fig. 8's mix ``π_deep`` and ``π_none = mix_none_share (1 − π_deep)``.
    budget_slack, cap_slack, fallback_share : Fig. 10's candidate set, placed so that Fig. 8's mix
        is always a candidate: ``B̄ = B_8 + budget_slack (B_deep − B_8)`` with ``B_8`` the memory of
        Fig. 8's mix, ``π_deep^max = π_deep + cap_slack (1 − π_deep)``, ``π_min = fallback_share · π_none``.
    """

    radio_scale: float
    memory: float
    deep_memory: float
    linear: float
    quadratic: float
    intercept: float
    short_decode: float
    long_decode: float
    tool_depth: float
    system_share: float
    short_probability: float
    mix_deep: float
    mix_none_share: float
    budget_slack: float
    cap_slack: float
    fallback_share: float

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not math.isfinite(value):
                raise InstanceError(f"section6.{f.name}", f"must be finite, got {plain(value)}")
        box = _box()
        for name, (low, high, _) in box.items():
            value = getattr(self, name)
            if not low * (1 - 1e-9) <= value <= high * (1 + 1e-9):
                raise InstanceError(f"section6.{name}", f"must lie in [{low:.6g}, {high:.6g}], got {plain(value)}")

    # -- derived -----------------------------------------------------------------------------
    @property
    def system_depth(self) -> float:
        """``ℓ_sys`` [tokens]."""
        return self.system_share * min(self.tool_depth, SHORT_TOKENS - 1.0)

    @property
    def kv_per_token(self) -> float:
        """``κ`` (memory units per cached token)."""
        return self.deep_memory / self.tool_depth

    @property
    def mix(self) -> dict[str, float]:
        """Fig. 8's mix (the instance's default)."""
        none = self.mix_none_share * (1.0 - self.mix_deep)
        return {"none": none, "shallow": 1.0 - self.mix_deep - none, "deep": self.mix_deep}

    @property
    def memory_budget(self) -> float:
        """``B̄`` of Fig. 10's candidate set."""
        mix = self.mix
        b8 = mix["shallow"] * self.kv_per_token * self.system_depth + mix["deep"] * self.deep_memory
        return b8 + self.budget_slack * (self.deep_memory - b8)

    @property
    def deep_cap(self) -> float:
        """``π_deep^max`` of Fig. 10's candidate set."""
        return self.mix_deep + self.cap_slack * (1.0 - self.mix_deep)

    @property
    def fallback_min(self) -> float:
        """``π_min`` of Fig. 10's candidate set."""
        return self.fallback_share * self.mix["none"]

    def as_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)

    def natural(self) -> dict[str, Any]:
        """The instance-level numbers of this point (what the TOML and the README report)."""
        return {
            "ξ": self.radio_scale,
            "M": self.memory,
            "m_run": 1.0,
            "κ": self.kv_per_token,
            "a": self.linear,
            "b": self.quadratic,
            "g_0": self.intercept,
            "D_short": self.short_decode,
            "D_long": self.long_decode,
            "ℓ_sys": self.system_depth,
            "ℓ_tool": self.tool_depth,
            "p_short": self.short_probability,
            "mix": self.mix,
            "B̄": self.memory_budget,
            "π_deep^max": self.deep_cap,
            "π_min": self.fallback_min,
        }

    @classmethod
    def from_natural(
        cls,
        *,
        radio_scale: float,
        memory: float,
        deep_memory: float,
        linear: float,
        quadratic: float,
        intercept: float,
        short_decode: float,
        long_decode: float,
        tool_depth: float,
        system_depth: float,
        short_probability: float,
        mix: tuple[float, float, float],
        memory_budget: float,
        deep_cap: float,
        fallback_min: float,
    ) -> Parameters:
        """The point with these instance-level numbers (``mix`` = none, shallow, deep)."""
        none, shallow, deep = mix
        kappa = deep_memory / tool_depth
        b8 = shallow * kappa * system_depth + deep * deep_memory
        return cls(
            radio_scale=radio_scale,
            memory=memory,
            deep_memory=deep_memory,
            linear=linear,
            quadratic=quadratic,
            intercept=intercept,
            short_decode=short_decode,
            long_decode=long_decode,
            tool_depth=tool_depth,
            system_share=system_depth / min(tool_depth, SHORT_TOKENS - 1.0),
            short_probability=short_probability,
            mix_deep=deep,
            mix_none_share=none / (1.0 - deep),
            budget_slack=(memory_budget - b8) / (deep_memory - b8),
            cap_slack=(deep_cap - deep) / (1.0 - deep),
            fallback_share=fallback_min / none,
        )

    def rounded(self, digits: int = 6) -> Parameters:
        """Every coordinate to ``digits`` significant digits (kept inside the box)."""
        box = _box()
        values = {}
        for name, value in self.as_dict().items():
            low, high, _ = box[name]
            values[name] = min(max(float(f"{value:.{digits}g}"), low), high)
        return Parameters(**values)

    # -- the unit cube of the search ---------------------------------------------------------
    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_unit(cls, u: np.ndarray) -> Parameters:
        """The point at ``u ∈ [0, 1]^16`` of the search box (log coordinates where marked)."""
        values = {}
        for (name, (low, high, log)), x in zip(_box().items(), np.clip(np.asarray(u, dtype=float), 0.0, 1.0)):
            values[name] = float(math.exp(math.log(low) + x * (math.log(high) - math.log(low))) if log else low + x * (high - low))
        return cls(**values)

    def to_unit(self) -> np.ndarray:
        out = []
        for name, (low, high, log) in _box().items():
            v = getattr(self, name)
            out.append((math.log(v) - math.log(low)) / (math.log(high) - math.log(low)) if log else (v - low) / (high - low))
        return np.clip(np.array(out), 0.0, 1.0)


@dataclass(frozen=True)
class FigureLoads:
    """The loads ``Λ`` the paper does not state (``λ_b = 1``), per figure; the defaults are the
    historical settings of ``paper_calibrated`` (:mod:`~edgeprefix.benchmarks.paper.calibration.targets`).

    fig7 : light, moderate, heavy (uniform cached depth); fig9 : the load of the popularity sweep;
    fig10 : light, moderate, high (best mix; Fig. 11's adaptive gain is read at ``high``);
    fig11 : the loads of the adaptive-vs-fixed curve; fig12 : the demand of the density sweep.
    """

    fig7: tuple[float, ...] = tuple(FIG7_LOADS.values())
    fig9: float = FIG10_LOADS["moderate"]
    fig10: tuple[float, ...] = tuple(FIG10_LOADS.values())
    fig11: tuple[float, ...] = (1.0, 2.0, 3.0, 3.5, 4.0, 4.5, 5.0)
    fig12: float = FIG12_INTENSITY

    def __post_init__(self) -> None:
        for name in ("fig7", "fig10"):
            value = getattr(self, name)
            if len(value) != 3 or not 0 < value[0] < value[1] < value[2]:
                raise ValueError(f"figure loads {name}: need three increasing loads > 0, got {plain(value)}")
        if not self.fig11 or any(x <= 0 for x in self.fig11) or list(self.fig11) != sorted(self.fig11):
            raise ValueError(f"figure loads fig11: need increasing loads > 0, got {plain(self.fig11)}")
        for name in ("fig9", "fig12"):
            if not getattr(self, name) > 0:
                raise ValueError(f"figure loads {name}: need a load > 0, got {plain(getattr(self, name))}")

    @property
    def fig7_labels(self) -> dict[str, float]:
        return dict(zip(("light", "moderate", "heavy"), self.fig7))

    @property
    def fig10_labels(self) -> dict[str, float]:
        return dict(zip(("light", "moderate", "high"), self.fig10))

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FigureLoads:
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"figure loads: unknown key {sorted(unknown)[0]!r}")
        fields: dict[str, Any] = {k: tuple(float(x) for x in v) if isinstance(v, list) else float(v) for k, v in data.items()}
        return cls(**fields)


SETTINGS_FILE = "calibrated.json"  # instance name -> {"loads", "parameters", "search"}, next to this module


def figure_loads(name: str) -> FigureLoads:
    """The calibrated figure loads of the embedded instance ``name`` (defaults for any other)."""
    table = _settings()
    return FigureLoads.from_dict(table[name]["loads"]) if name in table else FigureLoads()


def settings_path() -> Path:
    return Path(__file__).resolve().parent / SETTINGS_FILE


def _settings() -> dict[str, Any]:
    text = resources.files("edgeprefix.benchmarks.paper.calibration").joinpath(SETTINGS_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def shipped_parameters(name: str = NAME) -> Parameters:
    """The parameter vector the embedded instance ``name`` was written from."""
    table = _settings()
    if name not in table:
        raise ValueError(f"instance {name!r}: no calibrated parameters in {SETTINGS_FILE} (known: {sorted(table)})")
    return Parameters(**table[name]["parameters"])


def write_settings(name: str, p: Parameters, loads: FigureLoads, search: dict[str, Any]) -> None:
    """Record (atomically) the parameters, figure loads and search of ``name`` in the settings file."""
    path = settings_path()
    table = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    table[name] = {"parameters": p.as_dict(), "loads": loads.as_dict(), "search": search}
    atomic_write_text(path, json.dumps(table, indent=2, ensure_ascii=False) + "\n")


def instance_mapping(p: Parameters, *, intensity: float = 3.0, density: float = 1.0, name: str = NAME) -> dict[str, Any]:
    """The schema mapping (``edgeprefix.placement.model.instance``) of the family's instance."""
    return {
        "name": name,
        "network": {"edge_density": density, "request_intensity": intensity, "radio_scale": p.radio_scale, "radio_exponent": 2.0},
        "gpu": {"memory": p.memory, "runtime_per_sequence": 1.0, "kv_per_token": p.kv_per_token},
        "prefill": {"linear": p.linear, "quadratic": p.quadratic, "intercept": p.intercept},
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
        "profiles": [{"id": "none", "prefixes": []}, {"id": "shallow", "prefixes": ["sys"]}, {"id": "deep", "prefixes": ["sys", "tool"]}],
        "placement": {
            "target": TARGET,
            "memory_budget": p.memory_budget,
            "fallback": "none",
            "fallback_min": p.fallback_min,
            "max_share": {"deep": p.deep_cap},
            "mix": p.mix,
        },
    }


def build_instance(p: Parameters, *, intensity: float = 3.0, density: float = 1.0) -> Instance:
    """The validated instance of ``p`` at ``Λ = intensity``, ``λ_b = density``."""
    return instance_from_mapping(instance_mapping(p, intensity=intensity, density=density))


# The documented start of the search (benchmarks/paper/calibration/README.md, "Search"): the end point of
# the exploratory rounds, rounded to four digits.  The long type meets τ at deep and shallow nodes
# but not at uncached ones (residual prefill 0.43, 0.70, 0.94 s); deep caching costs two slots
# (c = 9, 8, 7); the deep cap is Fig. 8's deep share, so Fig. 10's candidates keep at most 20 % deep.
START = Parameters.from_natural(
    radio_scale=0.2874,
    memory=9.979,
    deep_memory=2.218,
    linear=1.389e-4,
    quadratic=2.034e-8,
    intercept=0.03406,
    short_decode=0.2571,
    long_decode=0.3500,
    tool_depth=1931.0,
    system_depth=799.3,
    short_probability=0.3587,
    mix=(0.7342, 0.0474, 0.2184),
    memory_budget=0.7937,
    deep_cap=0.2184,
    fallback_min=0.32,
)
