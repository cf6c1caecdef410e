"""The instance file format, written once: every field's type, range, default, unit, symbol and meaning.

:data:`FORMAT` is the one source of the instance format.  Everything else is derived from it:

- the JSON Schema (draft 2020-12) that TOML and JSON files share, :func:`json_schema`; the shipped
  ``placement/model/instance_schema.json`` is its output (``edgeprefix instance schema >
  placement/model/instance_schema.json`` regenerates it; a test checks it is current), and the field
  reference of ``docs/instances.md`` is rendered from the schema (``edgeprefix instance schema --markdown``);
- the loader (:func:`edgeprefix.placement.model.instance.instance_from_mapping`) takes from it which
  fields each table requires and allows (:func:`keys`) and the type every value must have, and
  :data:`edgeprefix.placement.model.ranges.FIELD_RANGES` the accepted range of every number
  (docs/model.md §20.2), both with one-line errors naming the field.

Only the rules that tie fields together stay in code (probabilities summing to 1, known ids,
ancestor closure, depths growing along parents, exactly one prefill law, a disaggregated node's
decode pool …); where the schema can state them too, a field's ``extra`` carries the JSON Schema
keywords.

Adding a field (a public contract: fields are added, never renamed or removed)
    1. add one :class:`Field` to its table below: the name, the JSON type, ``doc``, ``unit``,
       ``symbol`` (docs/model.md's notation), ``default`` when optional, and ``range=`` for a number;
    2. add the attribute of the same name (with the same default) to the section's frozen dataclass;
       every section but prefill and engine is read with
       :func:`edgeprefix.placement.model.instance.section_values` and needs nothing else (a table or a
       list of numbers inside a section is read by that section's code);
    3. regenerate the schema and the field reference (the two commands above) and explain the
       field in ``docs/instances.md`` if it needs more than its ``doc``;
    4. give it a value in one of the examples of ``tests/test_instance_schema.py`` (a test fails until
       every field of the table is carried by one; the mutation tests then reach it).

Only the standard library is imported here, so the CLI can print the schema without numpy.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from edgeprefix.placement.errors import InstanceError, plain
from edgeprefix.placement.model.evaluation_registry import QUEUE_LAW_REGISTRY, SLOT_QUEUE_REGISTRY
from edgeprefix.placement.model.router import PREDICTION_ROUTERS

# --------------------------------------------------------------------------------------------
# The accepted range of a numeric field (docs/model.md §20.2, Table 20.2)
# --------------------------------------------------------------------------------------------
SCALE_MIN, SCALE_MAX = 1e-30, 1e30  # densities λ_b, intensity Λ, radio scale ξ, memories M, m_run, κ, τ_0, L_q
RADIO_EXPONENT_MIN, RADIO_EXPONENT_MAX = 1.0, 6.0  # α: quadrature error on A_{s,q} < 2e-6 with the default nodes
MAX_TOKENS = 1e9  # L_q, ℓ_v, prefill table sizes, chunk size: 100× the longest context windows of today's models
MAX_BLOCK_ID = 2**63 - 1  # trace block ids are stored as int64
MAX_FILTER_BITS = 2**53  # m: a whole number exact in float64 (and an int64 index of the simulator's filters)
MAX_HASHES = 64  # k: the optimal k = (m/n) ln 2 reaches 64 only at 92 bits per entry


def integer_digits(value: int) -> int:
    """Decimal digits of ``value`` without ``str()`` (which refuses more than 4300 digits)."""
    return max(1, math.floor(abs(value).bit_length() * math.log10(2)) + 1)


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
        if isinstance(value, numbers.Integral):  # exact, also beyond the float range (a 5000-digit integer)
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
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InstanceError(field, f"must be {self.describe()} (docs/model.md §20), got {plain(value)}")
        if not self.contains(value):
            if isinstance(value, numbers.Integral) and abs(int(value)) > 10**30:
                raise InstanceError(
                    field, f"must be {self.describe()} (docs/model.md §20), got an integer of {integer_digits(int(value))} digits"
                )
            raise InstanceError(field, f"must be {self.describe()} (docs/model.md §20), got {plain(value)}")

    def schema(self) -> dict[str, Any]:
        """The range as JSON Schema bounds (``+inf`` has no JSON form: an infinite range has no maximum)."""
        bounds: dict[str, Any] = {"minimum": 0 if self.zero else self.low}
        if not self.infinite:
            bounds["maximum"] = self.high
        return bounds


SCALE = Range()
SCALE_OR_ZERO = Range(zero=True)
SCALE_OR_INF = Range(infinite=True)
SHARE = Range(0.0, 1.0)
TOKENS = Range(SCALE_MIN, MAX_TOKENS)


# --------------------------------------------------------------------------------------------
# A field of the instance format
# --------------------------------------------------------------------------------------------
class _Missing:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _Missing()


@dataclass(frozen=True)
class Field:
    """One field of the instance format: a value, a table (``fields``), a list (``items``) or a choice of tables (``variants``).

    ``type`` is the JSON type (or a tuple of them, e.g. ``("number", "null")``).  ``range`` bounds a number
    (loader and schema alike).  ``extra`` holds further JSON Schema keywords the schema states besides
    (``enum``, ``minItems``, a rule across fields); the loader checks those in code.
    """

    name: str
    type: str | tuple[str, ...]
    doc: str = ""
    unit: str = ""
    symbol: str = ""
    required: bool = False
    default: Any = NO_DEFAULT
    range: Range | None = None
    nonempty: bool = True  # a string must not be empty ("minLength": 1)
    title: str = ""
    items: Field | None = None
    fields: tuple[Field, ...] = ()
    variants: tuple[Field, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def types(self) -> tuple[str, ...]:
        return (self.type,) if isinstance(self.type, str) else self.type

    @property
    def is_table(self) -> bool:
        return bool(self.fields or self.variants)

    def child(self, name: str) -> Field:
        """The field ``name`` of this table (searched through the variants too); ``KeyError`` if none."""
        for f in (*self.fields, *(g for v in self.variants for g in v.fields)):
            if f.name == name:
                return f
        raise KeyError(name)

    def schema(self) -> dict[str, Any]:
        """This field as a JSON Schema node."""
        node: dict[str, Any] = {"type": self.type if isinstance(self.type, str) else list(self.type)}
        if self.title:
            node["title"] = self.title
        if self.doc:
            node["description"] = self.doc
        if "string" in self.types and self.nonempty and "enum" not in self.extra:
            node["minLength"] = 1
        if self.range is not None:
            node |= self.range.schema()
        if self.default is not NO_DEFAULT:
            node["default"] = self.default
        if self.items is not None:
            node["items"] = self.items.schema()
        if self.fields:
            required = [f.name for f in self.fields if f.required]
            if required:
                node["required"] = required
            node["additionalProperties"] = False
            node["properties"] = {f.name: f.schema() for f in self.fields}
        if self.variants:
            node["oneOf"] = [v.schema() for v in self.variants]
        tabular = self.is_table or (self.items is not None and self.items.is_table)
        if self.name and (self.unit or self.symbol or not tabular):
            node["x-unit"] = self.unit
            node["x-symbol"] = self.symbol
        return node | dict(self.extra)


def walk(node: Field, path: str = "") -> Iterator[tuple[str, Field]]:
    """``(path, field)`` of every field below ``node``, depth first; ``[]`` marks the items of a list
    (``requests[].length``, ``prefill.table.tokens[]``); a variant's fields sit at its parent's path."""
    for f in (*node.fields, *(g for v in node.variants for g in v.fields)):
        here = f"{path}.{f.name}" if path else f.name
        yield here, f
        yield from walk(f, here)
        if f.items is not None:
            yield here + "[]", f.items
            yield from walk(f.items, here + "[]")


def find(path: str) -> Field:
    """The field at a path such as ``gpu.tiers[]`` or ``prefill.table`` (``""``: the whole file); ``KeyError`` if none."""
    node = FORMAT
    for part in path.split(".") if path else ():
        items = part.endswith("[]")
        node = node.child(part[:-2] if items else part)
        if items:
            if node.items is None:
                raise KeyError(part)
            node = node.items
    return node


def keys(path: str) -> tuple[frozenset[str], frozenset[str]]:
    """The required and the optional fields of the table at ``path`` (all optional across variants)."""
    node = find(path)
    required = frozenset(f.name for f in node.fields if f.required)
    every = frozenset(f.name for f in node.fields) | frozenset(g.name for v in node.variants for g in v.fields)
    return required, every - required


def field_ranges() -> dict[str, Range]:
    """Path → range of every numeric field that has one (:data:`edgeprefix.placement.model.ranges.FIELD_RANGES`)."""
    return {path: f.range for path, f in walk(FORMAT) if f.range is not None}


def json_schema() -> dict[str, Any]:
    """The instance JSON Schema (draft 2020-12), generated from :data:`FORMAT`."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": "Generated from edgeprefix.placement.model.instance_fields.FORMAT by `edgeprefix instance schema`; do not edit.",
        **FORMAT.schema(),
    }


# --------------------------------------------------------------------------------------------
# The format.  One Field per field; see "Adding a field" above.
# --------------------------------------------------------------------------------------------
FORMAT = Field(
    "",
    "object",
    doc="A problem instance of edgeprefix: network, GPU, prefill law, prefix forest, request types, cache profiles and placement constraints. TOML and JSON files share this schema. The loader (edgeprefix.placement.model.instance) is the authority: it also checks the rules a schema cannot state (probabilities summing to 1, known ids, ancestor closure, depths growing along parents).",
    title="edgeprefix instance",
    fields=(
        Field("name", "string", doc="Instance name, shown in every report.", default="instance"),
        Field(
            "network",
            "object",
            doc="The edge network and its traffic (docs/model.md §1, §3).",
            required=True,
            fields=(
                Field(
                    "edge_density",
                    "number",
                    doc="Density of edge GPU nodes (a Poisson point process).",
                    unit="nodes / area",
                    symbol="λ_b",
                    required=True,
                    range=SCALE,
                ),
                Field(
                    "request_intensity",
                    "number",
                    doc="Spatial intensity of requests.",
                    unit="requests / area / s",
                    symbol="Λ",
                    required=True,
                    range=SCALE,
                ),
                Field(
                    "radio_scale",
                    "number",
                    doc="Radio cost per distance^α: T_com(r) = ξ r^α.",
                    unit="s / distance^α",
                    symbol="ξ",
                    required=True,
                    range=SCALE,
                ),
                Field(
                    "radio_exponent",
                    "number",
                    doc="Exponent of the radio cost.",
                    symbol="α",
                    default=2.0,
                    range=Range(RADIO_EXPONENT_MIN, RADIO_EXPONENT_MAX),
                ),
                Field(
                    "router",
                    "string",
                    doc="The router the predictions are for (docs/model.md §14): tier (Theorem 1's tier-level rule, the cell model) or online (a router that sees each node's queue, the mean-field model of eq. (39)). Absent: each command's default (online for evaluate, solve, plan-density, migrate and validate; tier for replay); --router overrides it.",
                    symbol="router",
                    extra={"enum": list(PREDICTION_ROUTERS)},
                ),
            ),
        ),
        Field(
            "gpu",
            "object",
            doc="Memory of one edge node; c_s = floor((M − B_s) / m_run) (docs/model.md §3); with tiers, B_s becomes the HBM part B^H_s (docs/model.md §19.1).",
            required=True,
            fields=(
                Field(
                    "memory",
                    "number",
                    doc="GPU memory available to KV states per node.",
                    unit="memory units",
                    symbol="M",
                    required=True,
                    range=SCALE,
                ),
                Field(
                    "runtime_per_sequence",
                    "number",
                    doc="Runtime memory of one active sequence.",
                    unit="memory units",
                    symbol="m_run",
                    required=True,
                    range=SCALE,
                ),
                Field(
                    "kv_per_token",
                    "number",
                    doc="Persistent memory per cached token (default for every prefix).",
                    unit="memory units / token",
                    symbol="κ",
                    required=True,
                    range=SCALE,
                ),
                Field(
                    "tiers",
                    "array",
                    doc="Memory tiers below HBM on every node, fastest first (docs/model.md §19.1). A profile's states fill them deepest first: HBM keeps max(0, B_s − Σ_k C_k), the rest sits in the tiers in order. Absent or empty: the paper's single HBM tier.",
                    default=[],
                    items=Field(
                        "",
                        "object",
                        fields=(
                            Field("name", "string", doc="Unique tier name (e.g. dram, ssd).", symbol="k", required=True),
                            Field(
                                "capacity",
                                "number",
                                doc="Memory for KV states in this tier per node; 0 gives the paper's model.",
                                unit="memory units",
                                symbol="C_k",
                                required=True,
                                range=SCALE_OR_ZERO,
                            ),
                            Field(
                                "bandwidth",
                                "number",
                                doc="Fetch bandwidth into HBM.",
                                unit="memory units / s",
                                symbol="b_k",
                                required=True,
                                range=SCALE_OR_INF,
                            ),
                            Field(
                                "latency",
                                "number",
                                doc="Fixed time of a fetch from this tier.",
                                unit="s",
                                symbol="ℓ_k",
                                default=0.0,
                                range=SCALE_OR_ZERO,
                            ),
                            Field(
                                "pipelined",
                                "boolean",
                                doc="Fetch overlaps the prefill layer by layer (time max(fetch, prefill)); false: fetch then prefill.",
                                symbol="pipelined_k",
                                default=False,
                            ),
                        ),
                    ),
                ),
            ),
        ),
        Field(
            "prefill",
            "object",
            doc="Prefill time g(n) of n uncached tokens (docs/model.md §3): either the quadratic law or a measured table.",
            required=True,
            variants=(
                Field(
                    "",
                    "object",
                    doc="g(n) = g_0 + a n + b n² for n > 0, g(0) = 0.",
                    title="quadratic law",
                    fields=(
                        Field(
                            "linear", "number", doc="Seconds per token.", unit="s / token", symbol="a", required=True, range=SCALE_OR_ZERO
                        ),
                        Field(
                            "quadratic",
                            "number",
                            doc="Seconds per token² (attention).",
                            unit="s / token²",
                            symbol="b",
                            default=0.0,
                            range=SCALE_OR_ZERO,
                        ),
                        Field(
                            "intercept",
                            "number",
                            doc="Fixed per-request overhead.",
                            unit="s",
                            symbol="g_0",
                            default=0.0,
                            range=SCALE_OR_ZERO,
                        ),
                    ),
                ),
                Field(
                    "",
                    "object",
                    doc="g interpolated linearly in measured points, last slope extended, g(0) = 0.",
                    title="measured table",
                    fields=(
                        Field(
                            "table",
                            "object",
                            doc="Measured prefill times.",
                            symbol="g",
                            required=True,
                            fields=(
                                Field(
                                    "tokens",
                                    "array",
                                    doc="Input sizes, strictly increasing.",
                                    unit="tokens",
                                    symbol="n",
                                    required=True,
                                    items=Field("", "number", range=Range(SCALE_MIN, MAX_TOKENS, zero=True)),
                                    extra={"minItems": 2},
                                ),
                                Field(
                                    "seconds",
                                    "array",
                                    doc="Prefill time of each size, nondecreasing.",
                                    unit="s",
                                    symbol="g(n)",
                                    required=True,
                                    items=Field("", "number", range=SCALE_OR_ZERO),
                                    extra={"minItems": 2},
                                ),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        Field(
            "prefixes",
            ("array", "null"),
            doc="Vertices of the prefix forest (docs/model.md §2.1); may be empty.",
            default=[],
            items=Field(
                "",
                "object",
                fields=(
                    Field("id", "string", doc="Unique vertex id.", symbol="v", required=True),
                    Field(
                        "depth",
                        "number",
                        doc="Cumulative tokens from the root; larger than the parent's.",
                        unit="tokens",
                        symbol="ℓ_v",
                        required=True,
                        range=TOKENS,
                    ),
                    Field(
                        "parent", ("string", "null"), doc="Parent vertex id; absent (or null) for a root.", symbol="parent(v)", default=None
                    ),
                    Field(
                        "kv_per_token",
                        ("number", "null"),
                        doc="This vertex's persistent memory per token, overriding gpu.kv_per_token.",
                        unit="memory units / token",
                        symbol="κ_v",
                        range=SCALE,
                    ),
                    Field(
                        "blocks",
                        "array",
                        doc="Block ids of the trace that make up this vertex's own segment (after its parent), root side first; written by edgeprefix profiles, read by trace replay to find the blocks a node holds (docs/model.md §17).",
                        unit="block ids",
                        symbol="blocks(v)",
                        default=[],
                        items=Field("", "integer", range=Range(0, MAX_BLOCK_ID, whole=True)),
                        extra={"uniqueItems": True},
                    ),
                ),
            ),
        ),
        Field(
            "requests",
            "array",
            doc="Request types (docs/model.md §2.1); probabilities sum to 1.",
            required=True,
            items=Field(
                "",
                "object",
                fields=(
                    Field("id", "string", doc="Unique request-type id.", symbol="q", required=True),
                    Field("probability", "number", doc="Probability of the type.", symbol="p_q", required=True, range=SHARE),
                    Field("length", "number", doc="Input length.", unit="tokens", symbol="L_q", required=True, range=TOKENS),
                    Field(
                        "decode",
                        "number",
                        doc="GPU occupancy beyond prefill (decode and other work).",
                        unit="s",
                        symbol="D_q",
                        required=True,
                        range=SCALE_OR_ZERO,
                    ),
                    Field(
                        "path",
                        "array",
                        doc="Prefix ids from a root down along child links; no deeper than length.",
                        symbol="P_q",
                        default=[],
                        items=Field("", "string"),
                    ),
                    Field(
                        "lengths",
                        "object",
                        doc="Length distribution of the type's requests as weighted sub-types (docs/model.md §2.3); absent: one length L_q, the paper's model. length (and decode, when lengths.decode is given) must be the weighted means.",
                        symbol="(L_{q,k}, D_{q,k}, w_{q,k})",
                        fields=(
                            Field(
                                "input",
                                "array",
                                doc="Input length of each sub-type; none shorter than the path's depth.",
                                unit="tokens",
                                symbol="L_{q,k}",
                                required=True,
                                items=Field("", "number", extra={"exclusiveMinimum": 0}),
                                extra={"minItems": 1},
                            ),
                            Field(
                                "decode",
                                "array",
                                doc="Occupancy beyond prefill of each sub-type (default: decode for all).",
                                unit="s",
                                symbol="D_{q,k}",
                                items=Field("", "number", extra={"minimum": 0}),
                                extra={"minItems": 1},
                            ),
                            Field(
                                "weight",
                                "array",
                                doc="Share of the type's requests in each sub-type, normalised to sum 1 (default: equal).",
                                symbol="w_{q,k}",
                                items=Field("", "number", extra={"minimum": 0}),
                                extra={"minItems": 1},
                            ),
                            Field(
                                "edges",
                                "array",
                                doc="Input lengths between consecutive sub-types' bins, one fewer than input, increasing: "
                                "sub-type k holds edges[k-1] <= L < edges[k], and a replayed request takes the sub-type whose "
                                "bin holds its length (docs/model.md (2.8); written by edgeprefix profiles). Absent: the "
                                "sub-type of nearest length.",
                                unit="tokens",
                                symbol="e_{q,k}",
                                items=Field("", "number"),
                            ),
                        ),
                    ),
                ),
            ),
            extra={"minItems": 1},
        ),
        Field(
            "profiles",
            "array",
            doc="Cache profiles (docs/model.md §2.2).",
            required=True,
            items=Field(
                "",
                "object",
                fields=(
                    Field("id", "string", doc="Unique profile id.", symbol="s", required=True),
                    Field(
                        "prefixes",
                        "array",
                        doc="Cached prefix ids, closed under parents (empty: the uncached profile).",
                        symbol="C_s",
                        default=[],
                        items=Field("", "string"),
                    ),
                ),
            ),
            extra={"minItems": 1},
        ),
        Field(
            "placement",
            "object",
            doc="Target, constraints and default mix of the placement problems (docs/model.md §10.1).",
            required=True,
            fields=(
                Field("target", "number", doc="TTFT target of the coverage objective.", unit="s", symbol="τ_0", required=True, range=SCALE),
                Field(
                    "memory_budget",
                    ("number", "null"),
                    doc="Bound on the fleet-average persistent memory Σ_s π_s B_s; absent: none.",
                    unit="memory units",
                    symbol="B̄",
                    range=SCALE_OR_ZERO,
                ),
                Field("fallback", ("string", "null"), doc="Profile id of the uncached fallback profile.", symbol="profile 0"),
                Field(
                    "fallback_min",
                    "number",
                    doc="Least share of the fallback profile.",
                    unit="share of nodes",
                    symbol="π_min",
                    default=0.0,
                    range=SHARE,
                ),
                Field(
                    "max_share",
                    "object",
                    doc="Caps on the shares of named profiles (others: 1).",
                    unit="share of nodes",
                    symbol="π_s^max",
                    extra={"additionalProperties": {"type": "number", "minimum": 0, "maximum": 1}},
                ),
                Field(
                    "mix",
                    ("object", "null"),
                    doc="Default mix used when none is given; shares sum to 1.",
                    unit="share of nodes",
                    symbol="π",
                    extra={"additionalProperties": {"type": "number", "minimum": 0}},
                ),
            ),
        ),
        Field(
            "metadata",
            "object",
            doc="Free-form facts about the instance that the model never reads (e.g. the known optimum of a generated benchmark instance, docs/model.md §18).",
            extra={"additionalProperties": True},
        ),
        Field(
            "remote",
            "object",
            doc="A remote KV pool (docs/model.md §19.2): a node lacking a state may fetch the pool's deeper prefix and prefill the rest, when that is faster than a full local prefill. Reachability: exactly one of density and per_node.",
            fields=(
                Field(
                    "prefixes",
                    "array",
                    doc="Prefix ids held by the pool, closed under parents.",
                    symbol="R",
                    required=True,
                    items=Field("", "string"),
                ),
                Field(
                    "bandwidth",
                    "number",
                    doc="Pool link bandwidth (per node with per_node; per pool site with density).",
                    unit="memory units / s",
                    symbol="b_R",
                    required=True,
                    range=SCALE_OR_INF,
                ),
                Field("latency", "number", doc="Fixed time of a pool fetch.", unit="s", symbol="ℓ_R", default=0.0, range=SCALE_OR_ZERO),
                Field(
                    "density",
                    "number",
                    doc="Pool sites per unit area; each shares its bandwidth among the λ_b / λ_R nodes of its region.",
                    unit="sites / area",
                    symbol="λ_R",
                    range=SCALE,
                ),
                Field(
                    "per_node",
                    "boolean",
                    doc="Every node has its own pool link of the given bandwidth.",
                    symbol="per_node",
                    extra={"const": True},
                ),
                Field(
                    "interference",
                    "number",
                    doc="Slowdown of the node's prefill of a pool-assisted request: factor 1 + ι (default: ShadowServe's measured 1.38× TTFT gap).",
                    symbol="ι",
                    default=0.38,
                    range=SCALE_OR_ZERO,
                ),
                Field("pipelined", "boolean", doc="Pool fetch overlaps the prefill layer by layer.", symbol="pipelined_R", default=False),
            ),
            extra={"oneOf": [{"title": "regional pools", "required": ["density"]}, {"title": "a link per node", "required": ["per_node"]}]},
        ),
        Field(
            "compression",
            "object",
            doc="Compressed KV states (docs/model.md §19.3): every stored state (HBM, tiers, pool) takes κ / ratio; a reused token costs a decompression time.",
            fields=(
                Field(
                    "ratio",
                    "number",
                    doc="Compression ratio of stored states: κ becomes κ / r. 1: uncompressed.",
                    symbol="r",
                    required=True,
                    range=Range(RADIO_EXPONENT_MIN, SCALE_MAX),
                ),
                Field(
                    "decompress_per_token",
                    "number",
                    doc="Decompression time per reused token.",
                    unit="s / token",
                    symbol="d",
                    default=0.0,
                    range=SCALE_OR_ZERO,
                ),
                Field(
                    "quality_loss",
                    "number",
                    doc="Quality loss of a request served from a compressed state, reported (times the share of such requests), never optimised.",
                    symbol="ε",
                    default=0.0,
                    range=SHARE,
                ),
            ),
        ),
        Field(
            "serving",
            "object",
            doc="How a node serves (docs/model.md §19.4, §19.6): colocated or disaggregated prefill/decode (disaggregated: the node's slots serve prefill only, decode runs in a separate pool, and the first token waits for the KV hand-off), chunked prefill, and the queue law (Erlang C or M/G/c).",
            fields=(
                Field(
                    "mode",
                    "string",
                    doc="colocated (the paper's model) or disaggregated.",
                    symbol="mode",
                    default="colocated",
                    extra={"enum": ["colocated", "disaggregated"]},
                ),
                Field(
                    "decode_slots",
                    "number",
                    doc="Decode-pool sequence slots per edge node (required when disaggregated).",
                    unit="slots / node",
                    symbol="n_dec",
                    range=SCALE,
                ),
                Field(
                    "handoff_bandwidth",
                    "number",
                    doc="KV hand-off bandwidth to the decode pool (required when disaggregated).",
                    unit="memory units / s",
                    symbol="b_H",
                    range=SCALE_OR_INF,
                ),
                Field(
                    "handoff_latency",
                    "number",
                    doc="Fixed time of the KV hand-off.",
                    unit="s",
                    symbol="ℓ_H",
                    default=0.0,
                    range=SCALE_OR_ZERO,
                ),
                Field(
                    "queue",
                    "string",
                    doc="Queue law of a node: mmc (Erlang C, the paper's) or mgc (M/G/c: Erlang C's waiting probability, the mean wait scaled by the service's variability, a two-moment waiting law).",
                    symbol="queue",
                    default="mmc",
                    extra={"enum": list(SLOT_QUEUE_REGISTRY.names())},
                ),
                Field(
                    "chunk_size",
                    "number",
                    doc="Chunked prefill: tokens per chunk (one chunk per iteration, as in Sarathi-Serve). Absent: unchunked.",
                    unit="tokens",
                    symbol="C",
                    range=Range(RADIO_EXPONENT_MIN, MAX_TOKENS),
                ),
                Field(
                    "chunk_overhead",
                    "number",
                    doc="Extra time per prefill chunk: g_C(n) = g(n) + δ ⌈n / C⌉ (needs chunk_size).",
                    unit="s / chunk",
                    symbol="δ",
                    default=0.0,
                    range=SCALE_OR_ZERO,
                ),
                Field(
                    "decode_scv",
                    "number",
                    doc="Squared coefficient of variation of a type's decode occupancy (0: deterministic per type); enters the service SCV of the M/G/c law and the simulator's instance law.",
                    symbol="c_D²",
                    default=0.0,
                    range=SCALE_OR_ZERO,
                ),
            ),
            extra={
                "if": {"required": ["mode"], "properties": {"mode": {"const": "disaggregated"}}},
                "then": {"required": ["decode_slots", "handoff_bandwidth"]},
                "else": {"not": {"anyOf": [{"required": ["decode_slots"]}, {"required": ["handoff_bandwidth"]}]}},
                "dependentRequired": {"chunk_overhead": ["chunk_size"]},
            },
        ),
        Field(
            "catalogue",
            "object",
            doc="The prefix catalogue the router reads (docs/model.md §19.7): a Bloom filter per node advertises the prefixes it holds, refreshed every refresh seconds while nodes change state at rate churn. Absent: an exact, fresh catalogue (the paper's). Read by the network simulator and reported by evaluate (the catalogue block); the planning model itself assumes the exact catalogue.",
            fields=(
                Field(
                    "bits",
                    "integer",
                    doc="Size of each node's Bloom filter.",
                    unit="bits",
                    symbol="m",
                    required=True,
                    range=Range(RADIO_EXPONENT_MIN, MAX_FILTER_BITS, whole=True),
                ),
                Field(
                    "hashes",
                    "integer",
                    doc="Hash functions per key (salted per node).",
                    symbol="k",
                    required=True,
                    range=Range(RADIO_EXPONENT_MIN, float(MAX_HASHES), whole=True),
                ),
                Field(
                    "refresh",
                    "number",
                    doc="Period between catalogue refreshes; 0: the catalogue follows every change at once.",
                    unit="s",
                    symbol="T_r",
                    default=0.0,
                    range=SCALE_OR_ZERO,
                ),
                Field(
                    "churn",
                    "number",
                    doc="State changes per node per second: a node re-draws its profile from the mix (0: the placement never changes, so staleness cannot arise).",
                    unit="1 / s",
                    symbol="γ",
                    default=0.0,
                    range=SCALE_OR_ZERO,
                ),
            ),
        ),
        Field(
            "engine",
            "object",
            doc="A continuous-batching engine per node (docs/model.md §17), read by replay --engine batching only: each step a token budget of prefill chunks plus one decode token per running request, paged KV blocks, admission with a watermark, preemption by recompute; the step time is fitted to a measured timing table or given as coefficients. Absent: the node is c_s FCFS slots.",
            fields=(
                Field(
                    "token_budget",
                    "integer",
                    doc="Tokens one engine step schedules (prefill chunks plus one per decoding request).",
                    unit="tokens",
                    symbol="B_tok",
                    default=8192,
                    extra={"minimum": 1},
                ),
                Field(
                    "max_running",
                    "integer",
                    doc="Requests running at once.",
                    unit="requests",
                    symbol="n_run",
                    default=256,
                    extra={"minimum": 1},
                ),
                Field(
                    "block_size",
                    "integer",
                    doc="Tokens per KV block; must divide the trace's block size.",
                    unit="tokens",
                    symbol="b",
                    default=16,
                    extra={"minimum": 1},
                ),
                Field(
                    "watermark",
                    "number",
                    doc="Share of the KV blocks an admission must leave free.",
                    symbol="w",
                    default=0.01,
                    extra={"exclusiveMaximum": 1, "minimum": 0},
                ),
                Field(
                    "chunked_prefill",
                    "boolean",
                    doc="Split prompts longer than the budget left across steps.",
                    symbol="chunked",
                    default=True,
                ),
                Field(
                    "queue_law",
                    "string",
                    doc="The node law the planning commands use when --queue-law is not given: slots (c_s FCFS slots, the law of serving.queue) or engine (the law fitted to this engine, docs/model.md §17.10).",
                    symbol="law",
                    default="slots",
                    extra={"enum": list(QUEUE_LAW_REGISTRY.names())},
                ),
                Field(
                    "timings",
                    "object",
                    doc="The measured timing table to fit the step time to (the shipped Splitwise table by default).",
                    fields=(
                        Field(
                            "model",
                            "string",
                            doc="Model column of the table (llama2-70b, bloom-176b).",
                            symbol="model",
                            required=True,
                            nonempty=False,
                        ),
                        Field(
                            "hardware",
                            "string",
                            doc="Hardware column (a100-80gb, h100-80gb, h100-80gb-pcap).",
                            symbol="hardware",
                            required=True,
                            nonempty=False,
                        ),
                        Field(
                            "tensor_parallel",
                            "integer",
                            doc="Tensor-parallel degree (2, 4 or 8).",
                            unit="GPUs",
                            symbol="TP",
                            required=True,
                            extra={"minimum": 1},
                        ),
                        Field("file", "string", doc="Another timing table with the same columns.", symbol="file", nonempty=False),
                    ),
                ),
                Field(
                    "step_time",
                    "object",
                    doc="Explicit step-time coefficients instead of timings.",
                    fields=(
                        Field("base", "number", doc="Time of an empty step.", unit="s", symbol="t_0", required=True, extra={"minimum": 0}),
                        Field(
                            "per_prefill_token", "number", doc="Per prefill token.", unit="s / token", symbol="t_P", extra={"minimum": 0}
                        ),
                        Field(
                            "per_attention",
                            "number",
                            doc="Per prefill attention unit (chunk × context).",
                            unit="s / token²",
                            symbol="t_A",
                            extra={"minimum": 0},
                        ),
                        Field(
                            "per_sequence", "number", doc="Per decoding request.", unit="s / request", symbol="t_b", extra={"minimum": 0}
                        ),
                        Field(
                            "per_context_token",
                            "number",
                            doc="Per context token a decoding request attends to.",
                            unit="s / token",
                            symbol="t_K",
                            extra={"minimum": 0},
                        ),
                    ),
                ),
            ),
            extra={"oneOf": [{"required": ["timings"]}, {"required": ["step_time"]}]},
        ),
        Field(
            "telemetry",
            "object",
            doc="How old the queue telemetry the online router acts on is (docs/model.md §11): every read shows each node's queue as it was delay seconds ago, and the board is rewritten every refresh seconds. Absent: fresh telemetry (eq. (39)'s assumption). Read by the online router's prediction (evaluate, solve, plan-density, migrate, validate, replay); --telemetry-delay and --telemetry-refresh override it.",
            fields=(
                Field(
                    "delay",
                    "number",
                    doc="Continuous telemetry delay: a read shows the node's running plus queued requests as they were this long ago.",
                    unit="s",
                    symbol="D",
                    default=0.0,
                    range=SCALE_OR_ZERO,
                ),
                Field(
                    "refresh",
                    "number",
                    doc="Period of the telemetry board; 0: every read is current (up to the delay).",
                    unit="s",
                    symbol="Δt",
                    default=0.0,
                    range=SCALE_OR_ZERO,
                ),
            ),
        ),
    ),
)
