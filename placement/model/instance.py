"""Instances: the TOML/JSON schema, validation with field paths, and embedded instances.

An :class:`Instance` is frozen; derived arrays (``h_{s,q}``, ``B_s``, ``c_s``, ``g(L_q − h_{s,q})``)
are computed once at construction and are read-only.  Use :meth:`Instance.replace` (or the
``with_*`` helpers) to derive a modified instance.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import tomli_w

from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.errors import InstanceError, MixError, few, plain
from edgeprefix.placement.files import parse_document, read_text
from edgeprefix.placement.model.catalogue import Catalogue
from edgeprefix.placement.model.costs import (
    PiecewiseLinearPrefill,
    PrefillModel,
    QuadraticPrefill,
    RadioCost,
)
from edgeprefix.placement.model.engine_section import EngineSection, engine_from_mapping, engine_to_mapping
from edgeprefix.placement.model.instance_fields import NO_DEFAULT, Field, find, keys
from edgeprefix.placement.model.lengths import expand_type, requests_entries
from edgeprefix.placement.model.profiles import (
    Profile,
    concurrency,
    dominated_profiles,
    hit_depth,
    persistent_memory,
    validate_profiles,
)
from edgeprefix.placement.model.ranges import (
    check_concurrency,
    check_field,
    check_instance_ranges,
    check_radio_exponent,
    check_scale,
    integer_digits,
)
from edgeprefix.placement.model.router import check_router
from edgeprefix.placement.model.serving import (
    Compression,
    MemoryTier,
    RemotePool,
    Serving,
    serving_arrays,
    validate_pool,
    validate_tiers,
)
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.placement.model.workload import (
    Prefix,
    PrefixForest,
    RequestType,
    validate_requests,
)

FloatArray = npt.NDArray[np.float64]
MIX_TOLERANCE = 1e-9  # |Σ_s π_s − 1| allowed
EMBEDDED = ("paper_baseline", "paper_calibrated", "paper_section6")


@dataclass(frozen=True)
class Network:
    """``λ_b`` nodes per unit area, ``Λ`` requests per unit area per second, radio ``ξ``, ``α``."""

    edge_density: float  # λ_b
    request_intensity: float  # Λ
    radio_scale: float  # ξ
    radio_exponent: float = 2.0  # α
    router: str | None = None  # the router the predictions are for (docs/model.md §14); None: each command's default

    def __post_init__(self) -> None:
        for name in ("edge_density", "request_intensity", "radio_scale"):
            check_scale(f"network.{name}", getattr(self, name))
        check_radio_exponent("network.radio_exponent", self.radio_exponent)
        if self.router is not None:
            check_router(self.router)

    @property
    def radio(self) -> RadioCost:
        return RadioCost(self.radio_scale, self.radio_exponent)


@dataclass(frozen=True)
class Gpu:
    """GPU memory ``M``, per-sequence runtime budget ``m_run``, default ``κ`` and the memory tiers
    below HBM (docs/model.md §19.1; none in the paper's model)."""

    memory: float  # M
    runtime_per_sequence: float  # m_run
    kv_per_token: float  # κ
    tiers: tuple[MemoryTier, ...] = ()

    def __post_init__(self) -> None:
        for name in ("memory", "runtime_per_sequence", "kv_per_token"):
            check_scale(f"gpu.{name}", getattr(self, name))
        check_concurrency("gpu.memory", self.memory, self.runtime_per_sequence)
        validate_tiers(self.tiers)


@dataclass(frozen=True)
class PlacementSpec:
    """Constraints and defaults of the placement problems (docs/model.md §10.1)."""

    target: float  # τ_0, seconds
    memory_budget: float | None = None  # B̄
    fallback: str | None = None  # profile id of profile 0
    fallback_min: float = 0.0  # π_min
    max_share: tuple[tuple[str, float], ...] = ()  # π_s^max
    mix: tuple[tuple[str, float], ...] | None = None  # default π for evaluate

    def __post_init__(self) -> None:
        check_scale("placement.target", self.target)
        if self.memory_budget is not None:
            check_scale("placement.memory_budget", self.memory_budget, allow_zero=True)
        if not (np.isfinite(self.fallback_min) and 0.0 <= self.fallback_min <= 1.0):
            raise InstanceError("placement.fallback_min", f"must lie in [0, 1], got {plain(self.fallback_min)}")
        for sid, cap in self.max_share:
            if not (np.isfinite(cap) and 0.0 <= cap <= 1.0):
                raise InstanceError(f"placement.max_share.{sid}", f"must lie in [0, 1], got {plain(cap)}")


def _readonly(array: npt.ArrayLike, dtype: Any = float) -> np.ndarray:
    out = np.array(array, dtype=dtype)
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class Instance:
    """A complete, validated problem instance (network, GPU, prefill, forest, types, profiles).

    Derived read-only arrays (indexed ``[s, q]``):

    - ``hit_depth`` ``h_{s,q}``; ``memory`` ``B_s``; ``concurrency`` ``c_s``;
    - ``residual_prefill`` ``g(L_q − h_{s,q})``; ``full_prefill`` ``g(L_q)`` (``(Q,)``);
    - ``service_time`` ``1/μ_{s,q} = g(L_q − h_{s,q}) + D_q``;
    - ``probabilities`` ``p_q``, ``lengths`` ``L_q``, ``decodes`` ``D_q``;
    - ``service_second_moment`` ``E[S_{s,q}²]`` of a type's occupancy (deterministic prefill, decode of
      SCV ``serving.decode_scv``, eq. (19.17)), read by the M/G/c law (``serving.queue = "mgc"``);
    - ``hbm_memory`` ``B^H_s``, ``first_token_time`` ``T^ft_{s,q}``, ``reused_depth`` ``h̃_{s,q}``,
      ``recomputed_prefill`` ``g(L_q − h̃_{s,q})``: what the model reads; with the serving
      extensions (``gpu.tiers``, ``remote``, ``compression``, ``serving``; docs/model.md §19) they
      and ``memory``/``concurrency``/``service_time`` come from
      :func:`edgeprefix.placement.model.serving.serving_arrays`, without them they are ``B_s``,
      ``g(L_q − h_{s,q})``, ``h_{s,q}`` and ``g(L_q − h_{s,q})``.
    """

    name: str
    network: Network
    gpu: Gpu
    prefill: PrefillModel
    prefixes: tuple[Prefix, ...]
    requests: tuple[RequestType, ...]
    profiles: tuple[Profile, ...]
    placement: PlacementSpec
    # Free-form facts about the instance (e.g. a known optimum); never read by the model.
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)
    remote: RemotePool | None = None
    compression: Compression | None = None
    serving: Serving | None = None
    catalogue: Catalogue | None = None  # docs/model.md §19.7: read by the simulator and the catalogue correction
    engine: EngineSection | None = None  # docs/model.md §17: a continuous-batching engine per node (replay only)
    telemetry: Telemetry | None = None  # docs/model.md §11: the deployment's telemetry age (online router's prediction)

    hit_depth: FloatArray = field(init=False, repr=False, compare=False)
    memory: FloatArray = field(init=False, repr=False, compare=False)
    concurrency: npt.NDArray[np.int64] = field(init=False, repr=False, compare=False)
    residual_prefill: FloatArray = field(init=False, repr=False, compare=False)
    full_prefill: FloatArray = field(init=False, repr=False, compare=False)
    service_time: FloatArray = field(init=False, repr=False, compare=False)
    probabilities: FloatArray = field(init=False, repr=False, compare=False)
    lengths: FloatArray = field(init=False, repr=False, compare=False)
    decodes: FloatArray = field(init=False, repr=False, compare=False)
    hbm_memory: FloatArray = field(init=False, repr=False, compare=False)
    first_token_time: FloatArray = field(init=False, repr=False, compare=False)
    reused_depth: FloatArray = field(init=False, repr=False, compare=False)
    recomputed_prefill: FloatArray = field(init=False, repr=False, compare=False)
    fetch_time: FloatArray = field(init=False, repr=False, compare=False)
    pool_hit: npt.NDArray[np.bool_] = field(init=False, repr=False, compare=False)
    service_second_moment: FloatArray = field(init=False, repr=False, compare=False)
    _default_mix: FloatArray | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        forest = PrefixForest(self.prefixes)
        validate_requests(self.requests, forest)
        validate_profiles(self.profiles, forest)
        check_instance_ranges(self)  # docs/model.md §20.2: nothing below is computed from a value out of range
        check_names(self)
        ids = self.profile_ids
        if self.placement.fallback is not None and self.placement.fallback not in ids:
            raise InstanceError("placement.fallback", f"unknown profile {self.placement.fallback!r} (known: {few(ids)})")
        for sid, _ in self.placement.max_share:
            if sid not in ids:
                raise InstanceError(f"placement.max_share.{sid}", f"unknown profile {sid!r} (known: {few(ids)})")
        h = hit_depth(self.profiles, self.requests, forest)
        memory = persistent_memory(self.profiles, forest, self.gpu.kv_per_token)
        slots = concurrency(memory, self.gpu.memory, self.gpu.runtime_per_sequence)
        lengths = np.array([q.length for q in self.requests], dtype=float)
        decodes = np.array([q.decode for q in self.requests], dtype=float)
        residual = np.asarray(self.prefill(lengths[None, :] - h), dtype=float)
        full = np.asarray(self.prefill(lengths), dtype=float)
        if residual.shape != h.shape or not np.all(np.isfinite(residual)) or np.any(residual < 0):
            raise InstanceError("prefill", "g(n) must return finite nonnegative seconds of the input's shape")
        probe = np.linspace(0.0, float(lengths.max()), 257)
        if np.any(np.diff(np.asarray(self.prefill(probe), dtype=float)) < -1e-12):
            raise InstanceError("prefill", "g(n) must be nondecreasing in the uncached tokens n (docs/model.md §3)")
        values = {
            "hit_depth": _readonly(h),
            "memory": _readonly(memory),
            "concurrency": _readonly(slots, np.int64),
            "residual_prefill": _readonly(residual),
            "full_prefill": _readonly(full),
            "service_time": _readonly(residual + decodes[None, :]),
            "probabilities": _readonly([q.probability for q in self.requests]),
            "lengths": _readonly(lengths),
            "decodes": _readonly(decodes),
        }
        # The paper's model reads the same arrays (docs/model.md §19: the special case).
        values |= {
            "hbm_memory": values["memory"],
            "first_token_time": values["residual_prefill"],
            "reused_depth": values["hit_depth"],
            "recomputed_prefill": values["residual_prefill"],
            "fetch_time": _readonly(np.zeros_like(h)),
            "pool_hit": _readonly(np.zeros(h.shape, bool), bool),
            "service_second_moment": _readonly((residual + decodes[None, :]) ** 2),
        }
        if self.extended:
            if self.remote is not None:
                validate_pool(self.remote, forest)
            ext = serving_arrays(
                forest=forest,
                profiles=self.profiles,
                requests=self.requests,
                hits=h,
                prefill=self.prefill,
                kappa=self.gpu.kv_per_token,
                edge_density=self.network.edge_density,
                tiers=self.gpu.tiers,
                remote=self.remote,
                compression=self.compression,
                serving=self.serving,
            )
            slots = concurrency(ext.hbm_memory, self.gpu.memory, self.gpu.runtime_per_sequence)
            values |= {
                "memory": _readonly(ext.memory),
                "hbm_memory": _readonly(ext.hbm_memory),
                "concurrency": _readonly(slots, np.int64),
                "service_time": _readonly(ext.service_time),
                "first_token_time": _readonly(ext.first_token_time),
                "reused_depth": _readonly(ext.reused_depth),
                "recomputed_prefill": _readonly(ext.recomputed_prefill),
                "fetch_time": _readonly(ext.fetch_time),
                "pool_hit": _readonly(ext.pool_hit, bool),
                "service_second_moment": _readonly(ext.service_second_moment),
            }
        service = values["service_time"]
        if not np.all(service > 0):  # 1/μ_{s,q} = 0 would make μ infinite and the queue undefined
            s_bad, q_bad = (int(v[0]) for v in np.nonzero(~(service > 0)))
            raise InstanceError(
                f"requests[{q_bad}].decode",
                f"request type {self.requests[q_bad].id!r} needs no GPU time on profile {self.profiles[s_bad].id!r} "
                "(its whole input is cached and D_q = 0): give D_q > 0 or a prefill intercept g(0) > 0 (docs/model.md §20)",
            )
        for key, value in values.items():
            object.__setattr__(self, key, value)
        if self.placement.mix is not None:
            default = self.mix_vector(dict(self.placement.mix), field_name="placement.mix")
            default.setflags(write=False)
            object.__setattr__(self, "_default_mix", default)
        if not np.any(slots >= 1):
            raise InstanceError("gpu.memory", "no profile has concurrency c_s >= 1: raise M or lower m_run / κ")

    # -- identities -------------------------------------------------------------------------
    @property
    def profile_ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.profiles)

    @property
    def request_ids(self) -> tuple[str, ...]:
        return tuple(q.id for q in self.requests)

    @property
    def fallback_index(self) -> int | None:
        fb = self.placement.fallback
        return None if fb is None else self.profile_ids.index(fb)

    @property
    def extended(self) -> bool:
        """Whether any serving extension of docs/model.md §19 is present."""
        return bool(self.gpu.tiers) or any(x is not None for x in (self.remote, self.compression, self.serving))

    @property
    def queue_law(self) -> str:
        """``mmc`` (Erlang C, the paper's) or ``mgc`` (docs/model.md §19.6), from ``serving.queue``."""
        return "mmc" if self.serving is None else self.serving.queue

    @property
    def saving(self) -> FloatArray:
        """``Δ_{s,q} = g(L_q) − g(L_q − h̃_{s,q})`` (``h̃ = h`` without a remote pool)."""
        return self.full_prefill[None, :] - self.recomputed_prefill

    @property
    def decode_utilization(self) -> float | None:
        """Decode pool load ``ρ_dec = Λ Σ_q p_q D_q / (λ_b n_dec)`` when disaggregated (eq. (19.13)), else ``None``."""
        if self.serving is None or not self.serving.disaggregated:
            return None
        assert self.serving.decode_slots is not None  # Serving requires it when disaggregated
        demand = self.network.request_intensity * float(self.probabilities @ self.decodes)
        return demand / (self.network.edge_density * float(self.serving.decode_slots))

    def dominated(self) -> npt.NDArray[np.bool_]:
        """Mask of dominated profiles (docs/model.md §9.5; with §19's extensions also no slower)."""
        times = np.concatenate([self.first_token_time, self.service_time], axis=1) if self.extended else None
        return dominated_profiles(self.memory, self.hit_depth, self.concurrency, times)

    # -- mixes ------------------------------------------------------------------------------
    def mix_vector(self, mix: Mapping[str, float] | npt.ArrayLike | None = None, *, field_name: str = "mix") -> FloatArray:
        """Validate a mix ``π`` (mapping by profile id or array in profile order) and return it.

        ``None`` returns the instance's default ``placement.mix``.
        """
        if mix is None:
            if self.placement.mix is None or self._default_mix is None:
                raise MixError(f"{field_name}: the instance has no default mix; pass one (e.g. --mix a=0.5,b=0.5)")
            return self._default_mix.copy()  # validated at construction
        ids = self.profile_ids
        if isinstance(mix, Mapping):
            unknown = [k for k in mix if k not in ids]
            if unknown:
                raise MixError(f"{field_name}: unknown profile {unknown[0]!r} (known: {few(ids)})")
            pi = np.array([float(mix.get(sid, 0.0)) for sid in ids])
        else:
            pi = np.asarray(mix, dtype=float)
            if pi.shape != (len(ids),):
                raise MixError(f"{field_name}: expected {len(ids)} shares in profile order {few(ids)}, got shape {pi.shape}")
        if not np.all(np.isfinite(pi)) or np.any(pi < 0):
            bad = [f"{sid}={share!r}" for sid, share in zip(ids, pi.tolist()) if not (np.isfinite(share) and share >= 0)]
            raise MixError(f"{field_name}: shares must be finite and >= 0, got {few(bad)}")
        if abs(pi.sum() - 1.0) > MIX_TOLERANCE:
            raise MixError(f"{field_name}: shares must sum to 1 (±1e-9), got {plain(pi.sum())}")
        bad = [sid for sid, share, c in zip(ids, pi, self.concurrency) if share > 0 and c < 1]
        if bad:
            raise MixError(f"{field_name}: profile {bad[0]!r} has concurrency c_s < 1 and must get share 0")
        return pi

    # -- derived instances ------------------------------------------------------------------
    def replace(self, **changes: Any) -> Instance:
        """A new validated instance with top-level fields replaced."""
        return dataclasses.replace(self, **changes)

    def with_network(self, **changes: Any) -> Instance:
        """A new instance with network fields replaced (e.g. ``request_intensity=4``)."""
        return self.replace(network=dataclasses.replace(self.network, **changes))

    def with_probabilities(self, probabilities: Mapping[str, float]) -> Instance:
        """A new instance with request probabilities replaced (unnamed types keep theirs).  A type with
        length sub-types (docs/model.md §2.3) may be named by its declared id: its probability is then
        spread over its sub-types by their shares ``w_k``."""
        groups = {q.group for q in self.requests if q.group is not None} - set(self.request_ids)
        unknown = [k for k in probabilities if k not in self.request_ids and k not in groups]
        if unknown:
            raise InstanceError("requests", f"unknown request type {unknown[0]!r} (known: {few(self.request_ids)})")

        def new(q: RequestType) -> float:
            if q.id in probabilities:
                return float(probabilities[q.id])
            if q.group is not None and q.group in probabilities:
                return float(probabilities[q.group]) * q.share
            return q.probability

        requests = tuple(dataclasses.replace(q, probability=new(q)) for q in self.requests)
        return self.replace(requests=requests)


MIX_SEPARATORS = ("=", ",")  # --mix id=share,id=share cannot name an id that holds one of these


def check_names(instance: Instance) -> None:
    """The name, every id and every tier name printable (no control character: a terminal would obey an ANSI
    escape, ring on a BEL or break a line on a newline), and profile ids free of ``=`` and ``,`` (which
    ``--mix id=share,…`` cannot express).  Refused with the field and the reason (docs/instances.md)."""

    def printable(where: str, text: str) -> None:
        if not text.isprintable():
            raise InstanceError(where, f"{text!r} holds a control character; names and ids must be printable text")

    printable("name", instance.name)
    ids = {
        "prefixes": [p.id for p in instance.prefixes],
        "requests": [r.id for r in instance.requests],
        "profiles": [s.id for s in instance.profiles],
    }
    for key, items in ids.items():
        for i, item_id in enumerate(items):
            printable(f"{key}[{i}].id", item_id)
    for i, tier in enumerate(instance.gpu.tiers):
        printable(f"gpu.tiers[{i}].name", tier.name)
    for i, s in enumerate(instance.profiles):
        bad = [c for c in MIX_SEPARATORS if c in s.id]
        if bad:
            raise InstanceError(
                f"profiles[{i}].id", f"{s.id!r} holds {bad[0]!r}, which --mix (id=share,id=share) cannot express: rename the profile"
            )


# --------------------------------------------------------------------------------------------
# Mapping <-> Instance.  Which fields a table requires and allows, each field's type and default,
# and the range of every number come from the field table
# (edgeprefix.placement.model.instance_fields.FORMAT); the code below adds the rules across fields.
# --------------------------------------------------------------------------------------------
def _check_section(where: str, data: Any, path: str | None = None) -> None:
    """``data`` a table with the fields of the table at ``path`` (default ``where``) of the field table."""
    _check_keys(where, data, *keys(where if path is None else path))


def section_values(where: str, data: Mapping[str, Any], path: str | None = None, *, skip: AbstractSet[str] = frozenset()) -> dict[str, Any]:
    """The fields of a checked table of values (numbers, flags, strings, lists of ids) read by the types of the
    field table, with the table's defaults for the absent ones: the keyword arguments of the section's dataclass.

    ``where`` names the table in messages (``gpu.tiers[2]``), ``path`` is its path in the field table
    (``gpu.tiers[]``; default ``where``); ``skip``: fields the caller reads itself."""
    out: dict[str, Any] = {}
    for f in find(where if path is None else path).fields:
        if f.name in skip:
            continue
        if f.name in data:
            out[f.name] = _typed(f"{where}.{f.name}", f, data[f.name])
        elif f.default is not NO_DEFAULT and f.default is not None:
            out[f.name] = tuple(f.default) if isinstance(f.default, list) else f.default  # frozen: lists are tuples
    return out


def _typed(where: str, f: Field, value: Any) -> Any:
    """``value`` read as the type of field ``f`` (one-line :class:`InstanceError` naming ``where`` otherwise)."""
    if value is None and "null" in f.types:
        return None
    if "enum" in f.extra:
        if value not in f.extra["enum"]:
            raise InstanceError(where, f"must be one of {list(f.extra['enum'])}, got {value!r}")
        return value
    if "number" in f.types or "integer" in f.types:
        return _number(where, value)
    if "boolean" in f.types:
        return _flag(where, value)
    if "string" in f.types:
        if not f.nonempty and isinstance(value, str):
            return value
        return _string(where, value)
    if f.items is not None and f.items.types == ("string",):
        return _string_list(where, value)
    raise TypeError(f"{where}: a {f.type} field has no generic reader; read it in its section's code")


def _check_tree(where: str, data: Any, path: str | None = None) -> None:
    """The fields of every table from ``where`` down and the type of every string, by the field table
    (for a section whose own parser reads the values, e.g. ``[engine]``)."""
    path = where if path is None else path
    _check_section(where, data, path)
    for f in find(path).fields:
        if f.name in data:
            if f.fields:
                _check_tree(f"{where}.{f.name}", data[f.name], f"{path}.{f.name}")
            elif f.types == ("string",):
                _typed(f"{where}.{f.name}", f, data[f.name])


def _engine_from(data: Any) -> EngineSection:
    _check_tree("engine", data)
    return engine_from_mapping(data)


def _check_keys(where: str, data: Any, required: AbstractSet[str], optional: AbstractSet[str] = frozenset()) -> None:
    if not isinstance(data, Mapping):
        raise InstanceError(where, f"must be a table/object, got {type(data).__name__}")
    unknown = sorted(set(data) - required - optional)
    if unknown:
        raise InstanceError(f"{where}.{unknown[0]}" if where else unknown[0], f"unknown field (allowed: {sorted(required | optional)})")
    missing = sorted(required - set(data))
    if missing:
        raise InstanceError(f"{where}.{missing[0]}" if where else missing[0], "required field is missing")


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters (messages stay one short line)."""
    text = plain(value)
    return text if len(text) <= limit else text[: limit - 5] + " …" + text[-2:]


def _number(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InstanceError(where, f"must be a number, got {_short(value)}")
    try:
        return float(value)
    except OverflowError:  # only an int is out of the float range
        assert isinstance(value, int)
        raise InstanceError(where, f"must be a number within the float range, got an integer of {integer_digits(value)} digits") from None


def _string(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InstanceError(where, f"must be a non-empty string, got {plain(value)}")
    return value


def _string_list(where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InstanceError(where, f"must be a list of ids, got {plain(value)}")
    return tuple(_string(f"{where}[{i}]", v) for i, v in enumerate(value))


def _block_list(where: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in value):
        raise InstanceError(where, f"must be a list of integer block ids, got {value!r}")
    return tuple(value)


def _share_table(where: str, value: Any) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, Mapping):
        raise InstanceError(where, f"must be a table of profile id -> share, got {plain(value)}")
    return tuple((str(k), _number(f"{where}.{k}", v)) for k, v in value.items())


def _prefill_from(data: Mapping[str, Any]) -> PrefillModel:
    _check_section("prefill", data)
    if "table" in data:
        if set(data) - {"table"}:
            raise InstanceError("prefill.table", "give either a table or linear/quadratic/intercept, not both")
        table = data["table"]
        _check_section("prefill.table", table)
        for key in ("tokens", "seconds"):
            if not isinstance(table[key], list):
                raise InstanceError(f"prefill.table.{key}", f"must be a list of numbers, got {_short(table[key])}")
        tokens = tuple(_number(f"prefill.table.tokens[{i}]", v) for i, v in enumerate(table["tokens"]))
        seconds = tuple(_number(f"prefill.table.seconds[{i}]", v) for i, v in enumerate(table["seconds"]))
        return PiecewiseLinearPrefill(tokens, seconds)
    if "linear" not in data:
        raise InstanceError("prefill.linear", "required field is missing")
    return QuadraticPrefill(
        linear=_number("prefill.linear", data["linear"]),
        quadratic=_number("prefill.quadratic", data.get("quadratic", 0.0)),
        intercept=_number("prefill.intercept", data.get("intercept", 0.0)),
    )


def _flag(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InstanceError(where, f"must be true or false, got {value!r}")
    return value


def _tiers_from(data: Any) -> tuple[MemoryTier, ...]:
    if not isinstance(data, list):
        raise InstanceError("gpu.tiers", "must be a list of tables ([[gpu.tiers]])")
    out = []
    for i, t in enumerate(data):
        _check_section(f"gpu.tiers[{i}]", t, "gpu.tiers[]")
        out.append(MemoryTier(**section_values(f"gpu.tiers[{i}]", t, "gpu.tiers[]")))
    return tuple(out)


def _remote_from(data: Any) -> RemotePool:
    _check_section("remote", data)
    if ("density" in data) == ("per_node" in data):
        raise InstanceError("remote.density", "give exactly one reachability: density = <pool sites per area> or per_node = true")
    if "per_node" in data and _flag("remote.per_node", data["per_node"]) is not True:
        raise InstanceError("remote.per_node", "must be true (or give density instead)")
    return RemotePool(**section_values("remote", data, skip={"per_node"}))


def _compression_from(data: Any) -> Compression:
    _check_section("compression", data)
    return Compression(**section_values("compression", data))


def _serving_from(data: Any) -> Serving:
    _check_section("serving", data)
    if "chunk_overhead" in data and "chunk_size" not in data:
        raise InstanceError("serving.chunk_overhead", "needs serving.chunk_size (tokens per chunk)")
    return Serving(**section_values("serving", data))


def _catalogue_from(data: Any) -> Catalogue:
    _check_section("catalogue", data)
    values = section_values("catalogue", data)
    for key in ("bits", "hashes"):
        if not float(values[key]).is_integer():
            raise InstanceError(f"catalogue.{key}", f"must be a whole number, got {plain(data[key])}")
        if isinstance(data[key], int) and data[key] > 2**53:  # beyond float64's whole numbers: checked before rounding
            check_field(f"catalogue.{key}", f"catalogue.{key}", data[key])
    return Catalogue(**values | {"hashes": int(values["hashes"])})


def _telemetry_from(data: Any) -> Telemetry:
    _check_section("telemetry", data)
    values = section_values("telemetry", data)
    for key in data:
        if values[key] < 0:
            raise InstanceError(f"telemetry.{key}", f"must be >= 0 seconds, got {plain(data[key])}")
    return Telemetry(**values)


def _items(key: str, data: Any) -> list[Mapping[str, Any]]:
    if not isinstance(data, list) or not data:
        raise InstanceError(key, "must be a non-empty list of tables")
    for i, item in enumerate(data):
        _check_section(f"{key}[{i}]", item, f"{key}[]")
    return data


def instance_from_mapping(data: Mapping[str, Any]) -> Instance:
    """Build and validate an :class:`Instance` from a parsed TOML/JSON mapping."""
    _check_section("", data)
    for section in ("network", "gpu", "placement"):
        _check_section(section, data[section])
    net, gpu, plc = data["network"], data["gpu"], data["placement"]
    network = Network(**section_values("network", net))
    gpu_spec = Gpu(**section_values("gpu", gpu, skip={"tiers"}), tiers=_tiers_from(gpu["tiers"]) if "tiers" in gpu else ())
    prefixes = tuple(
        Prefix(
            **section_values(f"prefixes[{i}]", p, "prefixes[]", skip={"blocks"}),
            blocks=_block_list(f"prefixes[{i}].blocks", p.get("blocks", [])),
        )
        for i, p in enumerate(_items("prefixes", data["prefixes"]) if data.get("prefixes") else [])
    )
    requests = tuple(
        RequestType(**section_values(f"requests[{i}]", q, "requests[]", skip={"lengths"}))
        for i, q in enumerate(_items("requests", data["requests"]))
    )
    if any("lengths" in q for q in data["requests"]):  # length-resolved types expand into sub-types (docs/model.md §2.3)
        requests = tuple(
            sub
            for i, (q, entry) in enumerate(zip(requests, data["requests"]))
            for sub in (expand_type(f"requests[{i}]", q, entry["lengths"]) if "lengths" in entry else (q,))
        )
    profiles = tuple(
        Profile(**section_values(f"profiles[{i}]", s, "profiles[]")) for i, s in enumerate(_items("profiles", data["profiles"]))
    )
    placement = PlacementSpec(
        **section_values("placement", plc, skip={"max_share", "mix"}),
        max_share=_share_table("placement.max_share", plc.get("max_share", {})),
        mix=None if plc.get("mix") is None else _share_table("placement.mix", plc["mix"]),
    )
    name = _string("name", data.get("name", "instance"))
    metadata = data.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise InstanceError("metadata", f"must be a table/object, got {type(metadata).__name__}")
    return Instance(
        name,
        network,
        gpu_spec,
        _prefill_from(data["prefill"]),
        prefixes,
        requests,
        profiles,
        placement,
        metadata=dict(metadata),
        remote=_remote_from(data["remote"]) if "remote" in data else None,
        compression=_compression_from(data["compression"]) if "compression" in data else None,
        serving=_serving_from(data["serving"]) if "serving" in data else None,
        catalogue=_catalogue_from(data["catalogue"]) if "catalogue" in data else None,
        engine=_engine_from(data["engine"]) if "engine" in data else None,
        telemetry=_telemetry_from(data["telemetry"]) if "telemetry" in data else None,
    )


def instance_to_mapping(instance: Instance) -> dict[str, Any]:
    """The schema mapping of an instance (round-trips through :func:`instance_from_mapping`)."""
    g = instance.prefill
    if isinstance(g, QuadraticPrefill):
        prefill: dict[str, Any] = {"linear": g.linear, "quadratic": g.quadratic}
        if g.intercept:
            prefill["intercept"] = g.intercept
    elif isinstance(g, PiecewiseLinearPrefill):
        prefill = {"table": {"tokens": list(g.tokens), "seconds": list(g.seconds)}}
    else:
        raise InstanceError("prefill", f"cannot serialise a custom prefill model {type(g).__name__}")
    plc = instance.placement
    placement: dict[str, Any] = {"target": plc.target, "fallback_min": plc.fallback_min}
    if plc.memory_budget is not None:
        placement["memory_budget"] = plc.memory_budget
    if plc.fallback is not None:
        placement["fallback"] = plc.fallback
    if plc.max_share:
        placement["max_share"] = dict(plc.max_share)
    if plc.mix is not None:
        placement["mix"] = dict(plc.mix)

    def prefix_entry(p: Prefix) -> dict[str, Any]:
        entry: dict[str, Any] = {"id": p.id, "depth": p.depth}
        if p.parent is not None:
            entry["parent"] = p.parent
        if p.kv_per_token is not None:
            entry["kv_per_token"] = p.kv_per_token
        if p.blocks:
            entry["blocks"] = list(p.blocks)
        return entry

    gpu = dataclasses.asdict(instance.gpu)
    if not gpu["tiers"]:
        del gpu["tiers"]
    out: dict[str, Any] = {
        "name": instance.name,
        "network": {k: v for k, v in dataclasses.asdict(instance.network).items() if k != "router" or v is not None},
        "gpu": gpu,
        "prefill": prefill,
    }
    if instance.prefixes:
        out["prefixes"] = [prefix_entry(p) for p in instance.prefixes]
    out["requests"] = requests_entries(instance.requests)  # sub-types collapse into lengths tables (docs/model.md §2.3)
    out["profiles"] = [{"id": s.id, "prefixes": list(s.prefixes)} for s in instance.profiles]
    out["placement"] = placement
    if instance.metadata:
        out["metadata"] = dict(instance.metadata)
    if instance.remote is not None:
        remote = {k: v for k, v in dataclasses.asdict(instance.remote).items() if v is not None}
        remote["prefixes"] = list(instance.remote.prefixes)
        if instance.remote.density is None:
            remote["per_node"] = True
        out["remote"] = remote
    if instance.compression is not None:
        out["compression"] = dataclasses.asdict(instance.compression)
    if instance.catalogue is not None:
        cat = instance.catalogue
        if np.isinf(cat.bits):
            raise InstanceError("catalogue.bits", "an exact catalogue (bits = inf) has no file form; drop [catalogue]")
        out["catalogue"] = {"bits": int(cat.bits), "hashes": int(cat.hashes), "refresh": cat.refresh, "churn": cat.churn}
    if instance.engine is not None:
        out["engine"] = engine_to_mapping(instance.engine)
    if instance.telemetry is not None:
        out["telemetry"] = dataclasses.asdict(instance.telemetry)
    if instance.serving is not None:
        defaults = {"queue": "mmc", "chunk_overhead": 0.0, "decode_scv": 0.0}  # written only when set
        out["serving"] = {
            k: v for k, v in dataclasses.asdict(instance.serving).items() if v is not None and not (k in defaults and v == defaults[k])
        }
    return out


def parse_instance_text(text: str, *, fmt: str) -> Instance:
    """Parse TOML (``fmt='toml'``) or JSON text into a validated instance."""
    try:
        data = parse_document(text, fmt, "instance", "instance")
    except ValueError as exc:
        raise InstanceError("", str(exc)) from None
    return instance_from_mapping(data)


def load_instance(source: str | os.PathLike[str] | None = None) -> Instance:
    """Load an instance from a ``.toml``/``.json`` file, or an embedded one by name.

    ``None`` gives the embedded default ``paper_baseline``.
    """
    if source is None:
        source = "paper_baseline"
    text_source = str(source)
    if text_source in EMBEDDED:
        text = resources.files("edgeprefix.placement").joinpath("data", f"{text_source}.toml").read_text(encoding="utf-8")
        return parse_instance_text(text, fmt="toml")
    path = Path(source)
    if not path.is_file():
        raise InstanceError("instance", f"no such file {text_source!r} (or embedded instance; known: {list(EMBEDDED)})")
    fmt = "json" if path.suffix.lower() == ".json" else "toml"
    try:
        text = read_text(path, "instance file")
        data = parse_document(text, fmt, f"instance file {text_source!r}", "instance")
    except ValueError as exc:
        raise InstanceError("", str(exc)) from None
    return instance_from_mapping(data)


def default_instance() -> Instance:
    """The embedded ``paper_baseline`` instance."""
    return load_instance("paper_baseline")


def write_instance(instance: Instance, path: str | os.PathLike[str]) -> None:
    """Write an instance as TOML (or JSON when the suffix is ``.json``), atomically."""
    data = instance_to_mapping(instance)
    text = json.dumps(data, indent=2) + "\n" if str(path).lower().endswith(".json") else tomli_w.dumps(data)
    atomic_write_text(path, text)
