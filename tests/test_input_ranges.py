"""The accepted range of every numeric input (docs/model.md §20.2) and the cell model at extreme load (§20.1).

Every case here was a traceback, a NaN or a silently wrong number before: values just inside the old
ranges that made the cell model cast a NaN to an index, fields with no range at all (prefill
coefficients, table entries, block ids, catalogue fields, chunk size), integers too long to read, and
simulations whose Poisson means numpy refuses.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import tomli_w

from edgeprefix.cli import main
from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.cell import cell_load, translated_offsets
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import instance_from_mapping, load_instance
from edgeprefix.placement.model.instance_schema import fields, instance_schema, schema_node
from edgeprefix.placement.model.ranges import FIELD_RANGES, MAX_BLOCK_ID, check_simulated_network

SHARE_TABLES = {"placement.max_share", "placement.mix"}  # checked by the mix rules ([0, 1], sum 1)
# Fields added by the length-resolved types and the engine section: only their schema bounds so far (the
# sub-types a `lengths` table expands into are checked as requests[].length and .decode); listed so that a
# new numeric field without a range fails below.
WITHOUT_RANGE = {
    "requests[].lengths.input[]",
    "requests[].lengths.decode[]",
    "requests[].lengths.weight[]",
    "requests[].lengths.edges[]",  # checked against the inputs: edges[k-1] <= input[k] < edges[k]
    "engine.token_budget",
    "engine.max_running",
    "engine.block_size",
    "engine.watermark",
    "engine.timings.tensor_parallel",
    "engine.step_time.base",
    "engine.step_time.per_prefill_token",
    "engine.step_time.per_attention",
    "engine.step_time.per_sequence",
    "engine.step_time.per_context_token",
}


# -- the schema and the loader agree -----------------------------------------------------------------
def test_the_schema_states_the_loaders_range_of_every_numeric_field():
    schema = instance_schema()
    for path, allowed in FIELD_RANGES.items():
        node = schema_node(path, schema)
        assert node["minimum"] == (0 if allowed.zero else allowed.low), path
        if allowed.infinite:
            assert node.get("maximum", allowed.high) == allowed.high, path
        else:
            assert node["maximum"] == allowed.high, path
        assert "exclusiveMinimum" not in node, path
    numeric = set()
    for f in fields(schema):
        node = schema_node(f.path.replace("[].", "[]."), schema)
        kinds = node.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or ())
        if "array" in kinds and node.get("items", {}).get("type") in ("number", "integer"):
            numeric.add(f.path + "[]")
        elif {"number", "integer"} & set(kinds) and f.path not in SHARE_TABLES:
            numeric.add(f.path)
    assert numeric - WITHOUT_RANGE == set(FIELD_RANGES), "a numeric field without a range (or a range without a field)"


EXTENDED = {  # sections that carry the fields of the cases below (valid as given)
    "serving": {"chunk_size": 512.0},
    "catalogue": {"bits": 64, "hashes": 2, "refresh": 5.0, "churn": 0.01},
    "compression": {"ratio": 2.0},
}
TIERS = [{"name": "dram", "capacity": 0.3, "bandwidth": 50.0, "latency": 0.002}]


@pytest.mark.parametrize(
    "path,value,field",
    [
        ("prefill", {"table": {"tokens": [0, math.inf], "seconds": [0, 1]}}, "prefill.table.tokens[1]"),
        ("prefill", {"table": {"tokens": [0, 1024], "seconds": [0, 1e31]}}, "prefill.table.seconds[1]"),
        ("prefill.intercept", 1e308, "prefill.intercept"),
        ("prefill.linear", 1e31, "prefill.linear"),
        ("prefill.quadratic", 1e31, "prefill.quadratic"),
        ("requests.0.length", 1e12, "requests[0].length"),
        ("prefixes.0.blocks", [2**70], "prefixes[0].blocks[0]"),
        ("prefixes.0.blocks", [MAX_BLOCK_ID + 1], "prefixes[0].blocks[0]"),
        ("serving.chunk_size", 1e-30, "serving.chunk_size"),
        ("catalogue.bits", 10**30, "catalogue.bits"),
        ("catalogue.hashes", 10**6, "catalogue.hashes"),
        ("catalogue.churn", 1e31, "catalogue.churn"),
        ("gpu.tiers.0.latency", 1e31, "gpu.tiers[0].latency"),
        ("compression.ratio", 1e31, "compression.ratio"),
    ],
)
def test_a_value_beyond_its_range_is_refused_naming_the_field(baseline_mapping, path, value, field):
    data = copy.deepcopy(baseline_mapping) | copy.deepcopy(EXTENDED)
    data["gpu"]["tiers"] = copy.deepcopy(TIERS)
    instance_from_mapping(data)  # valid before the change
    node = data
    steps = [int(s) if s.isdigit() else s for s in path.split(".")]
    for step in steps[:-1]:
        node = node[step]
    node[steps[-1]] = value
    with pytest.raises(InstanceError) as info:
        instance_from_mapping(data)
    assert info.value.field == field
    assert "docs/model.md §20" in str(info.value) and "\n" not in str(info.value)


def test_values_at_the_ends_of_the_ranges_still_load(baseline_mapping):
    data = copy.deepcopy(baseline_mapping)
    data["prefixes"][0]["blocks"] = [0, MAX_BLOCK_ID]
    data["catalogue"] = {"bits": 2**53, "hashes": 64}
    data["serving"] = {"chunk_size": 1.0}
    instance_from_mapping(data)


def test_an_infinite_table_entry_no_longer_makes_every_prefill_free(tmp_path, capsys):
    """``tokens = [0, inf]`` interpolated every prefill to 0 s (coverage 0.9987 instead of 0.6678)."""
    text = tomli_w.dumps({**_baseline_toml(), "prefill": {"table": {"tokens": [0.0, math.inf], "seconds": [0.0, 1.0]}}})
    path = tmp_path / "table.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["evaluate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "prefill.table.tokens[1]" in err


def _baseline_toml():
    from edgeprefix.placement.model.instance import instance_to_mapping

    return instance_to_mapping(load_instance("paper_baseline"))


# -- files: integers too long to read, duplicate keys ------------------------------------------------
@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_a_5000_digit_integer_is_one_line_naming_the_field_and_line(tmp_path, capsys, suffix):
    data = _baseline_toml()
    data["gpu"]["memory"] = 77.0
    text = tomli_w.dumps(data) if suffix == ".toml" else json.dumps(data, indent=1)
    path = tmp_path / f"huge{suffix}"
    path.write_text(text.replace("77.0", "1" + "0" * 4999), encoding="utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "77.0" in row)
    assert main(["evaluate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert f"line {line}" in err and "'memory'" in err and "5000 digits" in err and "set_int_max_str_digits" not in err


def test_a_duplicate_key_in_a_json_instance_is_refused(tmp_path, capsys):
    text = json.dumps(_baseline_toml()).replace('"edge_density": 1.0', '"edge_density": 1.0, "edge_density": 2.0', 1)
    path = tmp_path / "dup.json"
    path.write_text(text, encoding="utf-8")
    assert '"edge_density": 2.0' in text
    assert main(["evaluate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "'edge_density' appears twice" in err


# -- the cell model at extreme load --------------------------------------------------------------------
def test_the_cell_model_gives_zero_coverage_where_every_node_is_overloaded(baseline):
    """``Λ = 1e7``: the overloaded tiers' regions are empty up to ℓ = 36 (κ_1 = 0), once a NaN cast to an index."""
    ev = evaluate(baseline.with_network(request_intensity=1e7), queue_model="cell")
    assert ev.coverage_at_target == 0.0
    assert ev.coverage_at_target <= evaluate(baseline.with_network(request_intensity=1e7)).coverage_queue_free(ev.target)


def test_the_cell_model_at_a_dense_network_equals_the_queue_free_coverage(baseline):
    """``λ_b = 1e30``: the cost axis (1e-29 long) was rounded away next to offsets of 0.08 (docs/model.md §20, (20.4))."""
    dense = baseline.with_network(edge_density=1e30)
    cell = evaluate(dense, queue_model="cell")
    mean_field = evaluate(dense)
    assert math.isfinite(cell.coverage_at_target)
    assert cell.coverage_at_target == pytest.approx(mean_field.coverage_queue_free(cell.target), abs=1e-9)


def test_the_translation_leaves_ordinary_offsets_untouched_bit_for_bit():
    lam = np.array([0.2, 0.5, 0.3])
    b = np.array([[0.5, 4.0], [0.08, 2.8], [0.09, 1.2]])
    assert translated_offsets(lam, b) is b
    shifted = translated_offsets(lam * 1e30, b)
    assert np.array_equal(shifted, b - b.min(axis=0))
    grouped = translated_offsets(lam * 1e30, b, np.array([0, 0, 1]))
    assert np.array_equal(grouped[2], np.zeros(2)) and np.array_equal(grouped[:2], b[:2] - b[:2].min(axis=0))


def test_a_tier_no_request_reaches_gets_a_finite_load_law():
    lam = np.array([0.18, 0.54, 0.28])
    b = np.array([[4.462e9, 4.462e9], [4.46199e9, 4.46199e9], [9.3e9, 9.3e9]])  # tiers 0 and 2 beyond every query
    law = cell_load(lam, b, 2.0, np.full((3, 2), 1e7))
    for values in (law.variance, law.skewness, law.conditional_variance, law.tail, law.request_mean):
        assert np.all(np.isfinite(values))
    assert np.all(law.tail[2] == 1.0) and law.request_mean[2] == 1.0


def test_slow_decompression_under_the_cell_model_is_finite(baseline_mapping):
    data = copy.deepcopy(baseline_mapping)
    data["compression"] = {"ratio": 2.0, "decompress_per_token": 10.0}
    inst = instance_from_mapping(data)
    ev = evaluate(inst, queue_model="cell")
    assert 0.0 <= ev.coverage_at_target <= ev.coverage_queue_free(ev.target) + 1e-12


@pytest.mark.slow
@pytest.mark.parametrize(
    "option",
    [
        ["--density", "1e30", "--method", "gradient"],  # the cell model's exact gradient
        ["--intensity", "1e7", "--method", "random", "--budget", "4"],
    ],
)
def test_solve_with_the_cell_model_at_extreme_load_exits_cleanly(capsys, option):
    code = main(["solve", *option, "--queue-model", "cell", "--json"])
    out = capsys.readouterr()
    assert code in (0, 1), out.err  # 1: no evaluated mix was stable (every node overloaded), stated on stderr
    assert "Traceback" not in out.err and "Warning" not in out.err
    report = json.loads(out.out)
    assert 0.0 <= report["coverage"] <= 1.0


@pytest.mark.slow
def test_plan_density_with_the_cell_model_at_extreme_density_is_one_line(capsys):
    """An IndexError traceback before; now the search itself reports why it cannot bracket λ_b."""
    code = main(["plan-density", "--density", "1e30", "--queue-model", "cell", "--reliability", "0.9"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "Traceback" not in err and "Warning" not in err
    assert err.startswith("edgeprefix plan-density: error:")


# -- simulations: Poisson means numpy refuses, and networks with no request to measure ----------------
@pytest.mark.parametrize(
    "changes,field",
    [
        ({"network": {"edge_density": 1e-30}}, "network.edge_density"),  # "lam value too large"
        ({"network": {"edge_density": 1e30}}, "network.edge_density"),  # no request: a NaN coverage
        ({"catalogue": {"bits": 1024, "hashes": 2, "refresh": 1.0, "churn": 1e30}}, "catalogue.churn"),
    ],
)
def test_a_simulation_out_of_reach_is_refused_before_it_starts(baseline_mapping, changes, field):
    data = copy.deepcopy(baseline_mapping)
    for section, values in changes.items():
        data.setdefault(section, {}).update(values)
    inst = instance_from_mapping(data)
    with pytest.raises(InstanceError) as info:
        check_simulated_network(inst, 50, 1.0, 5.0, (1.0, 2.0, 3.0))
    assert info.value.field == field


def test_an_ordinary_simulation_passes_the_check(baseline):
    check_simulated_network(baseline, 50, 1.0, 5.0, (1.0, 2.0, 3.0))


@pytest.mark.parametrize(
    "section,values,field",
    [
        ("network", {"edge_density": 1e-30}, "network.edge_density"),
        ("catalogue", {"bits": 1024, "hashes": 2, "refresh": 1.0, "churn": 1e30}, "catalogue.churn"),
        ("catalogue", {"bits": 10**30, "hashes": 2}, "catalogue.bits"),  # "high is out of bounds for int64"
    ],
)
def test_validate_refuses_numpy_errors_as_range_errors(tmp_path, capsys, baseline_mapping, section, values, field):
    data = copy.deepcopy(baseline_mapping)
    data.setdefault(section, {}).update(values)
    path = tmp_path / "x.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    assert main(["validate", str(path), "--nodes", "50", "--horizon", "5", "--warmup", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"error: {field}:" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    "section,key,value", [("requests", "decode", 1e30), ("prefill", "intercept", 1e30), ("compression", "decompress_per_token", 1e30)]
)
def test_validate_on_an_extreme_but_accepted_instance_prints_no_nan(tmp_path, capsys, baseline_mapping, section, key, value):
    data = copy.deepcopy(baseline_mapping)
    if section == "requests":
        data["requests"][0][key] = value
    elif section == "compression":
        data["compression"] = {"ratio": 1e30, key: value}
    else:
        data[section][key] = value
    path = tmp_path / "x.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    code = main(
        [
            "validate",
            str(path),
            "--nodes",
            "50",
            "--horizon",
            "5",
            "--warmup",
            "1",
            "--samples",
            "2000",
            "--customers",
            "2000",
            "--replications",
            "1",
            "--intensities",
            "1",
            "--no-online",
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "nan" not in (out.out + out.err).lower() and "Warning" not in out.err and "Traceback" not in out.err
