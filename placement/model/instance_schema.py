"""The JSON Schema of the instance file, and the field reference generated from it.

TOML and JSON instance files share one schema (draft 2020-12), generated from the field table
:data:`edgeprefix.placement.model.instance_fields.FORMAT` (the one source of the instance format,
which the loader reads too) and shipped as package data next to this module: ``edgeprefix
instance schema > placement/model/instance_schema.json`` regenerates the file, and a test checks
that it is current.  The loader :func:`edgeprefix.placement.model.instance.instance_from_mapping`
also checks what a schema cannot state (probabilities summing to 1, known ids, ancestor closure,
depths growing along parents) and names the field path of every error.  Each property carries
two annotations besides ``description`` and ``default``: ``x-unit`` and ``x-symbol`` (the model's
symbol in docs/model.md).  :func:`field_reference` renders them as the table of ``docs/instances.md``.

Only the standard library is imported here, so the CLI can print the schema without numpy.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

from edgeprefix.placement.model.instance_fields import json_schema

SCHEMA_FILE = "instance_schema.json"


def schema_text() -> str:
    """The schema as JSON text, generated from the field table (the shipped file holds the same text)."""
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


def shipped_schema_text() -> str:
    """The schema file as shipped (``placement/model/instance_schema.json``)."""
    return resources.files("edgeprefix.placement.model").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def instance_schema() -> dict[str, Any]:
    """The instance JSON Schema as a dict (generated from the field table)."""
    return json_schema()


@dataclass(frozen=True)
class Field:
    """One row of the field reference: a field path such as ``requests[].length``."""

    path: str
    type: str
    required: bool
    unit: str
    default: str
    symbol: str
    meaning: str


def _type_name(node: dict[str, Any]) -> str:
    kind = node.get("type", "")
    kinds = [kind] if isinstance(kind, str) else list(kind)
    names = []
    for k in kinds:
        if k == "array":
            item = node.get("items", {}).get("type", "")
            names.append(f"array of {'tables' if item == 'object' else item + 's'}" if item else "array")
        elif k == "object" and "additionalProperties" in node and isinstance(node["additionalProperties"], dict):
            names.append("table of id → " + node["additionalProperties"].get("type", "value"))
        elif k == "object":
            names.append("table")
        else:
            names.append(k)
    bounds = []
    for key, sign in (("exclusiveMinimum", ">"), ("minimum", "≥"), ("maximum", "≤")):
        if key in node:
            bounds.append(f"{sign} {node[key]:g}")
    text = " or ".join(names)
    return f"{text} ({', '.join(bounds)})" if bounds else text


def _default(node: dict[str, Any]) -> str:
    if "default" not in node:
        return ""
    return json.dumps(node["default"], ensure_ascii=False)


def _walk(node: dict[str, Any], prefix: str, required: bool, note: str = "") -> Iterator[Field]:
    meaning = " ".join(filter(None, [note, node.get("description", "")]))
    if prefix:
        yield Field(prefix, _type_name(node), required, node.get("x-unit", ""), _default(node), node.get("x-symbol", ""), meaning)
    for branch in node.get("oneOf", ()):
        for key, child in branch.get("properties", {}).items():
            yield from _walk(child, f"{prefix}.{key}", key in branch.get("required", ()), f"({branch.get('title', 'variant')})")
    children = node.get("properties", {})
    kinds = node.get("type", ())
    if "array" in ([kinds] if isinstance(kinds, str) else kinds) and isinstance(node.get("items"), dict):
        children = node["items"].get("properties", {})
        need = node["items"].get("required", ())
        base = f"{prefix}[]"
    else:
        need = node.get("required", ())
        base = prefix
    for key, child in children.items():
        yield from _walk(child, f"{base}.{key}" if base else key, key in need)


def fields(schema: dict[str, Any] | None = None) -> list[Field]:
    """Every field of the schema, depth first in file order."""
    return list(_walk(schema if schema is not None else instance_schema(), "", True))


def field_reference(schema: dict[str, Any] | None = None) -> str:
    """The field reference as a Markdown table (the generated part of ``docs/instances.md``)."""
    rows = [
        "| field | type | required | unit | default | symbol | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in fields(schema):
        cells = [
            f"`{f.path}`",
            f.type,
            "yes" if f.required else "no",
            f.unit,
            f"`{f.default}`" if f.default else "",
            f"`{f.symbol}`" if f.symbol else "",
            f.meaning,
        ]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def schema_node(path: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The schema node of a field path such as ``requests[].length`` or ``prefill.table.tokens[]`` (``[]``: list items).

    A ``oneOf`` (the prefill law) is searched branch by branch.  Raises ``KeyError`` for an unknown path.
    """
    node: dict[str, Any] = schema if schema is not None else instance_schema()
    for part in path.split("."):
        items = part.endswith("[]")
        key = part[:-2] if items else part
        node = _child(node, key)
        if items:
            node = node["items"]
    return node


def _child(node: dict[str, Any], key: str) -> dict[str, Any]:
    if key in node.get("properties", {}):
        return node["properties"][key]
    for branch in node.get("oneOf", ()):
        if key in branch.get("properties", {}):
            return branch["properties"][key]
    raise KeyError(key)
