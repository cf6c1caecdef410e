"""The instance format, written once in the field table ``instance_fields.FORMAT``: the shipped JSON Schema
is the one generated from it, valid, accepts every shipped instance and rejects what the loader rejects;
every field of the table is read by the loader, and every bad value (missing, retyped, out of range,
unknown) is one line naming its field; docs/instances.md is generated from it; ``edgeprefix instance
show|schema`` round-trips."""

from __future__ import annotations

import copy
import json
import re
import tomllib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from edgeprefix.cli import main
from edgeprefix.commands import instance as instance_command
from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.instance import (
    EMBEDDED,
    instance_from_mapping,
    instance_to_mapping,
    load_instance,
)
from edgeprefix.placement.model.instance_fields import FORMAT, NO_DEFAULT, find, json_schema, walk
from edgeprefix.placement.model.instance_schema import field_reference, fields, instance_schema, schema_text, shipped_schema_text
from edgeprefix.placement.model.ranges import FIELD_RANGES

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "instances.md"
VALIDATOR = jsonschema.Draft202012Validator(instance_schema())


def embedded_text(name: str) -> str:
    return resources.files("edgeprefix.placement").joinpath("data", f"{name}.toml").read_text(encoding="utf-8")


def shipped() -> list[tuple[str, dict[str, Any]]]:
    out = [(name, tomllib.loads(embedded_text(name))) for name in EMBEDDED]
    out += [(p.name, tomllib.loads(p.read_text(encoding="utf-8"))) for p in sorted((ROOT / "benchmarks" / "instances").glob("*.toml"))]
    return out


def schema_errors(data: Any) -> list[str]:
    return [e.message for e in VALIDATOR.iter_errors(data)]


def test_the_schema_is_a_valid_draft_2020_12_schema():
    schema = instance_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert json.loads(schema_text()) == schema == json_schema()


def test_the_shipped_schema_file_is_the_one_generated_from_the_field_table():
    assert shipped_schema_text() == schema_text(), (
        "placement/model/instance_schema.json is stale: run `edgeprefix instance schema > placement/model/instance_schema.json`"
    )


def test_the_command_lists_the_loaders_embedded_instances():
    assert instance_command.EMBEDDED == EMBEDDED


@pytest.mark.parametrize("name,data", shipped(), ids=[name for name, _ in shipped()])
def test_every_shipped_instance_is_valid(name, data):
    assert len(shipped()) >= 5  # two embedded, three benchmark instances
    assert schema_errors(data) == []
    instance = instance_from_mapping(data)  # and the loader agrees
    assert schema_errors(json.loads(json.dumps(instance_to_mapping(instance)))) == []


def test_an_instance_written_by_profiles_is_valid(tmp_path, capsys):
    out = tmp_path / "trace.toml"
    assert main(["profiles", "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    data = tomllib.loads(out.read_text(encoding="utf-8"))
    assert schema_errors(data) == []
    load_instance(out)


def test_the_documented_example_loads():
    toml = re.search(r"```toml\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL).group(1)
    data = tomllib.loads(toml)
    assert schema_errors(data) == []
    assert instance_from_mapping(data).name == "two-tier"


# ---------------------------------------------------------------------------------------------
# Mutations: drop every required field, retype every field, add an unknown field at every level
# ---------------------------------------------------------------------------------------------
def _split(path: str) -> list[str | int]:
    steps: list[str | int] = []
    for part in path.split("."):
        if part.endswith("[]"):
            steps += [part[:-2], 0]
        else:
            steps.append(part)
    return steps


def _locate(data: dict[str, Any], steps: list[str | int]) -> tuple[Any, str | int] | None:
    """The container and key of ``steps`` in ``data`` (the first list item that has the key)."""
    node: Any = data
    for i, step in enumerate(steps[:-1]):
        if step == 0 and isinstance(node, list):
            rest = steps[i + 1 :]
            for item in node:
                found = _locate(item, rest) if isinstance(item, dict) else None
                if found is not None:
                    return found
            return None
        if not isinstance(node, dict) or step not in node:
            return None
        node = node[step]
    return (node, steps[-1]) if isinstance(node, dict) and steps[-1] in node else None


def _wrong_value(value: Any) -> Any:
    if isinstance(value, bool) or isinstance(value, (int, float)):
        return "not a number"
    if isinstance(value, str):
        return 1.5
    return "not a table or list"


def examples() -> list[tuple[str, dict[str, Any]]]:
    """paper_baseline, and a variant with a prefill table and a per-prefix κ_v (every optional field)."""
    base = tomllib.loads(embedded_text("paper_baseline"))
    variant = copy.deepcopy(base)
    variant["prefill"] = {"table": {"tokens": [0, 1024, 4096], "seconds": [0.0, 0.2, 1.2]}}
    variant["prefixes"][1]["kv_per_token"] = 0.0005
    variant["prefixes"][1]["blocks"] = [7, 8]  # a trace vertex's own blocks (trace replay)
    variant["name"] = "variant"
    instance_from_mapping(variant)  # both are valid
    extended = copy.deepcopy(base)  # every field of the serving extensions (docs/model.md §19)
    extended["gpu"]["tiers"] = [{"name": "dram", "capacity": 0.3, "bandwidth": 50.0, "latency": 0.002, "pipelined": True}]
    extended["remote"] = {"prefixes": ["sys"], "bandwidth": 5.0, "latency": 0.01, "per_node": True, "interference": 0.2, "pipelined": False}
    extended["compression"] = {"ratio": 2.0, "decompress_per_token": 1e-6, "quality_loss": 0.01}
    extended["serving"] = {
        "mode": "disaggregated",
        "decode_slots": 8.0,
        "handoff_bandwidth": 100.0,
        "handoff_latency": 0.001,
        "queue": "mgc",
        "chunk_size": 512.0,
        "chunk_overhead": 0.005,
        "decode_scv": 0.5,
    }
    extended["catalogue"] = {"bits": 64, "hashes": 2, "refresh": 5.0, "churn": 0.01}
    extended["telemetry"] = {"delay": 1.0, "refresh": 2.0}
    extended["network"]["router"] = "tier"
    extended["prefill"]["intercept"] = 0.01
    extended["metadata"] = {"optimum": 0.5}
    instance_from_mapping(extended)
    engine = copy.deepcopy(base)  # an engine with a timing table, length sub-types, regional pools
    engine["engine"] = {
        "token_budget": 4096,
        "max_running": 64,
        "block_size": 16,
        "watermark": 0.02,
        "chunked_prefill": False,
        "queue_law": "engine",
        "timings": {"model": "llama2-70b", "hardware": "a100-80gb", "tensor_parallel": 4, "file": "timings.csv"},
    }
    engine["requests"][0]["lengths"] = {"input": [900.0, 1148.0], "decode": [2.0, 2.5], "weight": [1.0, 1.0], "edges": [1000.0]}
    engine["remote"] = {"prefixes": ["sys"], "bandwidth": 5.0, "density": 0.1}
    engine["serving"] = {"mode": "disaggregated", "decode_slots": 8.0, "handoff_bandwidth": 100.0}
    instance_from_mapping(engine)
    step = copy.deepcopy(base)  # an engine with explicit step-time coefficients
    step["engine"] = {
        "step_time": {"base": 0.01, "per_prefill_token": 1e-5, "per_attention": 1e-9, "per_sequence": 1e-4, "per_context_token": 1e-7}
    }
    instance_from_mapping(step)
    return [("", base), ("table: ", variant), ("serving: ", extended), ("engine: ", engine), ("step: ", step)]


def test_the_examples_carry_every_field_of_the_table():
    """So that the mutations below reach every field, and a field added to the table but not read by the loader
    (or not held by its dataclass) fails here: every example loads."""
    carried = {
        path.removesuffix("[]") for path, _ in walk(FORMAT) for _, data in examples() if _locate(data, _split(path.removesuffix("[]")))
    }
    assert {path.removesuffix("[]") for path, _ in walk(FORMAT)} - carried == set()


def mutations() -> Iterator[tuple[str, dict[str, Any]]]:
    for label, base in examples():
        for name, data in _mutations(base):
            yield label + name, data


def _mutations(base: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for field in fields():
        steps = _split(field.path)
        place = _locate(base, steps)
        if place is None:
            continue
        if field.required:
            data = copy.deepcopy(base)
            container, key = _locate(data, steps)  # type: ignore[misc]
            del container[key]
            yield f"drop {field.path}", data
        data = copy.deepcopy(base)
        container, key = _locate(data, steps)  # type: ignore[misc]
        container[key] = _wrong_value(container[key])
        yield f"retype {field.path}", data
        if isinstance(place[0][place[1]], (int, float)) and not isinstance(place[0][place[1]], bool):
            data = copy.deepcopy(base)
            container, key = _locate(data, steps)  # type: ignore[misc]
            container[key] = True
            yield f"boolean {field.path}", data
    for where in ("", *(path for path, f in walk(FORMAT) if f.is_table)):  # every table of the format
        data = copy.deepcopy(base)
        node: Any = data
        for step in _split(where) if where else []:
            node = node.get(step) if isinstance(node, dict) else node[step]
            if node is None:
                break  # an optional section this example does not have
        if node is None:
            continue
        node["unknown_field"] = 1.0
        yield f"unknown field in {where or 'the top level'}", data


MUTATIONS = list(mutations())


def test_the_mutations_cover_every_field_of_the_example():
    names = {name for name, _ in MUTATIONS}
    assert "drop network.radio_scale" in names and "retype requests[].path" in names
    assert "retype prefixes[].parent" in names and "boolean prefill.linear" in names
    assert {"table: drop prefill.table.seconds", "table: retype prefill.table.tokens", "table: boolean prefixes[].kv_per_token"} <= names
    assert len(MUTATIONS) > 120
    assert {
        "serving: drop gpu.tiers[].bandwidth",
        "serving: boolean remote.latency",
        "serving: retype serving.mode",
        "serving: unknown field in gpu.tiers[]",
        "serving: retype remote.per_node",
    } <= names
    assert {
        "serving: retype serving.queue",
        "serving: boolean serving.chunk_size",
        "serving: retype serving.decode_scv",
        "serving: drop catalogue.bits",
        "serving: drop catalogue.hashes",
        "serving: boolean catalogue.refresh",
        "serving: unknown field in catalogue",
        "serving: retype telemetry.delay",
        "serving: unknown field in telemetry",
    } <= names


@pytest.mark.parametrize("label,data", examples(), ids=[label or "base" for label, _ in examples()])
def test_every_field_of_the_examples_is_written_back(label, data):
    """What the loader reads, the writer writes: an instance read from every example round-trips."""
    instance = instance_from_mapping(data)
    again = instance_from_mapping(json.loads(json.dumps(instance_to_mapping(instance))))
    assert again == instance and again.metadata == instance.metadata


def named_field(name: str) -> str:
    """The field path (a regular expression: ``[]`` any index) a mutation's one-line error must name."""
    match = re.fullmatch(r"(?:\w+: )?(drop|retype|boolean|unknown field in) (.*)", name)
    assert match is not None, name
    kind, path = match.groups()
    if kind == "unknown field in":
        path = "unknown_field" if path == "the top level" else path + ".unknown_field"
    if kind == "drop" and path == "prefill.table":
        path = "prefill.linear"  # no law left: the first law's required field is missing
    return re.escape(path).replace(r"\[\]", r"\[\d+\]")


@pytest.mark.parametrize("name,data", MUTATIONS, ids=[name for name, _ in MUTATIONS])
def test_the_schema_rejects_what_the_loader_rejects_in_one_line_naming_the_field(name, data):
    with pytest.raises(InstanceError) as info:
        instance_from_mapping(data)
    assert re.fullmatch(named_field(name), info.value.field), str(info.value)
    assert str(info.value).startswith(info.value.field + ": ") and "\n" not in str(info.value)
    assert schema_errors(data), f"the schema accepts {name}"


def beyond(path: str) -> list[Any]:
    """Values just outside the range of the numeric field ``path``: below it, above it, not whole."""
    allowed = FIELD_RANGES[path]
    out: list[Any] = [-1.0 if allowed.low >= 0 else allowed.low * 10]
    if not allowed.infinite:
        out.append(allowed.high + 1 if allowed.whole else allowed.high * 10)
    if allowed.whole:
        out.append(allowed.low + 0.5)
    return out


OUT_OF_RANGE = [(path, value) for path in FIELD_RANGES for value in beyond(path)]


@pytest.mark.parametrize("path,value", OUT_OF_RANGE, ids=[f"{p}={v!r}" for p, v in OUT_OF_RANGE])
def test_every_numeric_field_out_of_its_range_is_one_line_naming_the_field(path, value):
    """A property of the field table: for each ranged field (in the first example that carries it), a value
    outside the range is refused in one line naming the field (the section's own check may come first)."""
    base = next(data for _, data in examples() if _locate(data, _split(path.removesuffix("[]"))))
    data = copy.deepcopy(base)
    steps = _split(path.removesuffix("[]"))
    container, key = _locate(data, steps)  # type: ignore[misc]
    if path.endswith("[]"):
        container, key = container[key], 0
    container[key] = value
    with pytest.raises(InstanceError) as info:
        instance_from_mapping(data)
    section, leaf = path.split(".", 1)[0].removesuffix("[]"), path.rsplit(".", 1)[-1].removesuffix("[]")
    assert info.value.field.startswith(section) and leaf in info.value.field, str(info.value)
    assert str(info.value).startswith(info.value.field + ": ") and "\n" not in str(info.value)
    assert schema_errors(data), f"the schema accepts {path} = {value!r}"


def test_the_enumerations_of_the_table_are_the_codes():
    from edgeprefix.placement.model import engine_section, serving
    from edgeprefix.placement.model.router import PREDICTION_ROUTERS

    assert tuple(find("network.router").extra["enum"]) == PREDICTION_ROUTERS
    assert tuple(find("serving.mode").extra["enum"]) == serving.SERVING_MODES
    assert tuple(find("serving.queue").extra["enum"]) == serving.QUEUE_LAWS
    assert tuple(find("engine.queue_law").extra["enum"]) == engine_section.QUEUE_LAWS


@pytest.mark.parametrize(
    "path",
    [
        "network",
        "gpu",
        "gpu.tiers[]",
        "prefixes[]",
        "requests[]",
        "profiles[]",
        "placement",
        "remote",
        "compression",
        "serving",
        "catalogue",
        "telemetry",
    ],
)
def test_a_dataclass_built_in_python_has_the_defaults_of_a_file(path):
    """The sections the loader reads generically take the table's defaults; their dataclasses state the same."""
    import dataclasses

    from edgeprefix.placement.model import catalogue, instance, profiles, serving, telemetry, workload

    cls = {
        "network": instance.Network,
        "gpu": instance.Gpu,
        "gpu.tiers[]": serving.MemoryTier,
        "prefixes[]": workload.Prefix,
        "requests[]": workload.RequestType,
        "profiles[]": profiles.Profile,
        "placement": instance.PlacementSpec,
        "remote": serving.RemotePool,
        "compression": serving.Compression,
        "serving": serving.Serving,
        "catalogue": catalogue.Catalogue,
        "telemetry": telemetry.Telemetry,
    }[path]
    own = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    own |= {f.name: f.default_factory() for f in dataclasses.fields(cls) if f.default_factory is not dataclasses.MISSING}
    table = {
        f.name: tuple(f.default) if isinstance(f.default, list) else f.default for f in find(path).fields if f.default is not NO_DEFAULT
    }
    assert {k: own.get(k) for k in table} == table
    assert {f.name for f in find(path).fields} - {"per_node", "lengths"} <= {f.name for f in dataclasses.fields(cls)}


# ---------------------------------------------------------------------------------------------
# docs/instances.md and the CLI
# ---------------------------------------------------------------------------------------------
def test_the_field_reference_in_the_docs_is_the_generated_one():
    text = DOC.read_text(encoding="utf-8")
    generated = re.search(r"<!-- BEGIN FIELD REFERENCE[^>]*-->\n(.*?)<!-- END FIELD REFERENCE -->", text, re.DOTALL)
    assert generated is not None, "docs/instances.md lost its generated field reference"
    assert generated.group(1) == field_reference(), "docs/instances.md is stale: paste `edgeprefix instance schema --markdown`"


def test_the_field_reference_names_every_property_with_its_unit_and_symbol():
    rows = {f.path: f for f in fields()}
    assert rows["network.edge_density"].symbol == "λ_b" and rows["network.edge_density"].required
    assert rows["prefill.intercept"].default == "0.0" and rows["prefill.intercept"].symbol == "g_0"
    assert rows["requests[].length"].unit == "tokens" and rows["placement.target"].unit == "s"
    leaves = [f for f in fields() if "table" not in f.type and "array of tables" not in f.type]
    assert all(f.meaning for f in fields())
    assert all(f.symbol for f in leaves if f.path != "name")


def test_show_prints_the_embedded_instance_as_shipped(capsys):
    assert main(["instance", "show", "paper_calibrated"]) == 0
    assert capsys.readouterr().out == embedded_text("paper_calibrated")


@pytest.mark.parametrize("extra", [[], ["--intensity", "4", "--density", "2"]])
def test_show_round_trips_through_toml_and_json(tmp_path, capsys, extra):
    source = tmp_path / "source.json"
    source.write_text(json.dumps(instance_to_mapping(load_instance("paper_baseline"))), encoding="utf-8")
    assert main(["instance", "show", str(source), *extra]) == 0
    toml_text = capsys.readouterr().out
    assert toml_text.startswith("# paper_baseline: printed by `edgeprefix instance show`")
    expected = instance_to_mapping(load_instance("paper_baseline"))
    if extra:
        expected["network"].update(request_intensity=4.0, edge_density=2.0)
    back = tmp_path / "back.toml"
    back.write_text(toml_text, encoding="utf-8")
    assert instance_to_mapping(load_instance(back)) == expected
    assert main(["instance", "show", str(back), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == expected


def test_show_of_an_embedded_name_loads_back(tmp_path, capsys):
    assert main(["instance", "show"]) == 0
    path = tmp_path / "start.toml"
    path.write_text(capsys.readouterr().out, encoding="utf-8")
    assert instance_to_mapping(load_instance(path)) == instance_to_mapping(load_instance("paper_baseline"))


def test_schema_command_prints_the_schema_and_the_reference(capsys):
    assert main(["instance", "schema"]) == 0
    assert json.loads(capsys.readouterr().out) == instance_schema()
    assert main(["instance", "schema", "--markdown"]) == 0
    assert capsys.readouterr().out == field_reference()


def test_show_of_a_missing_instance_exits_2_with_one_line(capsys):
    assert main(["instance", "show", "no_such_instance"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no_such_instance" in err[0] and "paper_baseline" in err[0]


def test_the_command_module_imports_no_numpy():
    import subprocess
    import sys

    code = "import sys, edgeprefix.commands.instance; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def test_the_schema_is_generated_without_numpy():
    """The field table is standard library only: ``edgeprefix instance schema`` needs no numpy."""
    import subprocess
    import sys

    code = (
        "import sys; from edgeprefix.placement.model.instance_schema import schema_text, field_reference; "
        "schema_text(); field_reference(); print('numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"
