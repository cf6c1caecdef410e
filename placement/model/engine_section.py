"""The optional ``[engine]`` section of an instance: a continuous-batching engine per node (docs/model.md §17).

Without it a node is the model's ``c_s`` FCFS slots.  With it, ``replay --engine batching`` runs
every node as an iteration-level engine: each step a token budget of prefill chunks plus one
decode token per running request, paged KV blocks, admission with a free-block watermark,
preemption by recompute.  Defaults follow vLLM's: 8,192 batched tokens, 256 running sequences,
16-token blocks, 1 % watermark, chunked prefill on.

The step time comes from ``timings`` (a model, hardware and tensor-parallel degree of a timing
table, fitted by the engine room; the shipped table by default) or from explicit
``step_time`` coefficients (seconds).  One of the two is required.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from edgeprefix.placement.errors import InstanceError, plain
from edgeprefix.placement.model.evaluation_registry import QUEUE_LAW_REGISTRY
from edgeprefix.placement.model.instance_fields import find, keys

STEP_TIME_KEYS = tuple(f.name for f in find("engine.step_time").fields)  # base first; the fields come from the field table
_KEYS = set(keys("engine")[1])
QUEUE_LAWS = QUEUE_LAW_REGISTRY.names()  # engine.queue_law: the default of --queue-law (docs/model.md §17.10)


@dataclass(frozen=True)
class EngineSection:
    """Engine and hardware of every node (see the module docstring)."""

    token_budget: int = 8192
    max_running: int = 256
    block_size: int = 16
    watermark: float = 0.01
    chunked_prefill: bool = True
    model: str | None = None
    hardware: str | None = None
    tensor_parallel: int | None = None
    timings_file: str | None = None
    step_time: tuple[tuple[str, float], ...] | None = None
    queue_law: str = "slots"  # the node law the planning commands use without --queue-law (docs/model.md §17.10)

    def __post_init__(self) -> None:
        if self.queue_law not in QUEUE_LAWS:
            raise InstanceError("engine.queue_law", f"must be one of {list(QUEUE_LAWS)}, got {plain(self.queue_law)}")
        for name in ("token_budget", "max_running", "block_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InstanceError(f"engine.{name}", f"must be a positive whole number, got {plain(value)}")
        if not (isinstance(self.watermark, (int, float)) and math.isfinite(self.watermark) and 0 <= self.watermark < 1):
            raise InstanceError("engine.watermark", f"must lie in [0, 1), got {plain(self.watermark)}")
        named = (self.model, self.hardware, self.tensor_parallel)
        if self.step_time is None and any(v is None for v in named):
            raise InstanceError(
                "engine.timings",
                "the engine needs its step time: give [engine.timings] model, hardware "
                "and tensor_parallel (a measured timing table), or [engine.step_time] coefficients",
            )
        if self.step_time is not None:
            unknown = sorted({k for k, _ in self.step_time} - set(STEP_TIME_KEYS))
            if unknown or "base" not in dict(self.step_time):
                raise InstanceError(
                    "engine.step_time", f"needs base (and any of {list(STEP_TIME_KEYS[1:])}), got {sorted(k for k, _ in self.step_time)}"
                )


def engine_from_mapping(data: Any) -> EngineSection:
    """Parse ``[engine]`` (raises :class:`InstanceError` naming the field)."""
    if not isinstance(data, Mapping):
        raise InstanceError("engine", f"must be a table/object, got {type(data).__name__}")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise InstanceError(f"engine.{unknown[0]}", f"unknown field (known: {sorted(_KEYS)})")
    values: dict[str, Any] = {}
    for key in ("token_budget", "max_running", "block_size"):
        if key in data:
            v = data[key]
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            values[key] = v
    if "watermark" in data:
        values["watermark"] = data["watermark"]
    if "queue_law" in data:
        values["queue_law"] = data["queue_law"]
    if "chunked_prefill" in data:
        if not isinstance(data["chunked_prefill"], bool):
            raise InstanceError("engine.chunked_prefill", f"must be true or false, got {plain(data['chunked_prefill'])}")
        values["chunked_prefill"] = data["chunked_prefill"]
    if "timings" in data:
        t = data["timings"]
        if (
            not isinstance(t, Mapping)
            or not {"model", "hardware", "tensor_parallel"} <= set(t)
            or set(t) - {"model", "hardware", "tensor_parallel", "file"}
        ):
            raise InstanceError("engine.timings", "must be a table with model, hardware, tensor_parallel (and optional file)")
        tp = t["tensor_parallel"]
        if isinstance(tp, bool) or not isinstance(tp, (int, float)) or not float(tp).is_integer() or tp < 1:
            raise InstanceError("engine.timings.tensor_parallel", f"must be a positive whole number, got {plain(tp)}")
        values.update(
            model=str(t["model"]),
            hardware=str(t["hardware"]),
            tensor_parallel=int(tp),
            timings_file=None if t.get("file") is None else str(t["file"]),
        )
    if "step_time" in data:
        st = data["step_time"]
        if not isinstance(st, Mapping):
            raise InstanceError("engine.step_time", "must be a table of coefficients (seconds)")
        for k, v in st.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise InstanceError(f"engine.step_time.{k}", f"must be a finite number of seconds >= 0, got {plain(v)}")
        values["step_time"] = tuple((str(k), float(v)) for k, v in st.items())
    return EngineSection(**values)


def engine_to_mapping(section: EngineSection) -> dict[str, Any]:
    """The file form of ``[engine]`` (round-trips through :func:`engine_from_mapping`)."""
    out: dict[str, Any] = {
        "token_budget": section.token_budget,
        "max_running": section.max_running,
        "block_size": section.block_size,
        "watermark": section.watermark,
        "chunked_prefill": section.chunked_prefill,
    }
    if section.model is not None:
        out["timings"] = {"model": section.model, "hardware": section.hardware, "tensor_parallel": section.tensor_parallel}
        if section.timings_file is not None:
            out["timings"]["file"] = section.timings_file
    if section.step_time is not None:
        out["step_time"] = dict(section.step_time)
    if section.queue_law != "slots":
        out["queue_law"] = section.queue_law
    return out
