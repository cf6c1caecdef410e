"""Instance schema: loading, round trips and one clear error per kind of bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprefix.placement.errors import InstanceError, MixError
from edgeprefix.placement.model.instance import (
    instance_to_mapping,
    load_instance,
    write_instance,
)


def test_embedded_default_matches_the_documented_numbers(baseline):
    assert baseline.name == "paper_baseline"
    assert baseline.profile_ids == ("none", "shallow", "deep")
    # B_s = κ × unique cached tokens; c_s = floor((M − B_s)/m_run)
    np.testing.assert_allclose(baseline.memory, [0.0, 800 * 0.00048, 2250 * 0.00048])
    assert baseline.concurrency.tolist() == [12, 12, 11]
    np.testing.assert_allclose(baseline.mix_vector(), [0.18, 0.54, 0.28])


@pytest.mark.parametrize("suffix", [".toml", ".json"])
def test_round_trip_through_files(baseline, tmp_path, suffix):
    path = tmp_path / f"inst{suffix}"
    write_instance(baseline, path)
    again = load_instance(path)
    assert instance_to_mapping(again) == instance_to_mapping(baseline)
    np.testing.assert_array_equal(again.residual_prefill, baseline.residual_prefill)


def test_arrays_are_read_only(baseline):
    with pytest.raises(ValueError):
        baseline.hit_depth[0, 0] = 1.0


def _expect(build, data, field, words):
    with pytest.raises(InstanceError) as info:
        build(data)
    assert info.value.field == field, str(info.value)
    for word in words:
        assert word in str(info.value)


def test_probabilities_must_sum_to_one(build, baseline_mapping):
    baseline_mapping["requests"][0]["probability"] = 0.4
    _expect(build, baseline_mapping, "requests.probability", ["sum to 1"])


def test_probability_tolerance_is_1e9(build, baseline_mapping):
    baseline_mapping["requests"][0]["probability"] = 0.36 + 5e-10
    build(baseline_mapping)  # within tolerance
    baseline_mapping["requests"][0]["probability"] = 0.36 + 5e-9
    _expect(build, baseline_mapping, "requests.probability", ["sum to 1"])


def test_negative_probability(build, baseline_mapping):
    baseline_mapping["requests"][0]["probability"] = -0.36
    baseline_mapping["requests"][1]["probability"] = 1.36
    _expect(build, baseline_mapping, "requests[0].probability", [">= 0"])


def test_path_must_be_a_root_chain(build, baseline_mapping):
    baseline_mapping["requests"][1]["path"] = ["tool"]
    _expect(build, baseline_mapping, "requests[1].path[0]", ["root-to-leaf", "'sys'"])


def test_depth_must_increase_along_a_path(build, baseline_mapping):
    baseline_mapping["prefixes"][1]["depth"] = 700
    _expect(build, baseline_mapping, "prefixes[1].depth", ["exceed its parent"])


def test_depth_must_not_exceed_request_length(build, baseline_mapping):
    baseline_mapping["requests"][0]["length"] = 500
    _expect(build, baseline_mapping, "requests[0].path[0]", ["exceeds the request length"])


def test_profile_must_be_ancestor_closed(build, baseline_mapping):
    baseline_mapping["profiles"][2]["prefixes"] = ["tool"]
    _expect(build, baseline_mapping, "profiles[2].prefixes", ["ancestor-closed", "'sys'"])


def test_profile_names_unknown_prefix(build, baseline_mapping):
    baseline_mapping["profiles"][1]["prefixes"] = ["nope"]
    _expect(build, baseline_mapping, "profiles[1].prefixes", ["unknown prefix 'nope'"])


@pytest.mark.parametrize("section", ["prefixes", "requests", "profiles"])
def test_duplicate_ids(build, baseline_mapping, section):
    baseline_mapping[section][1]["id"] = baseline_mapping[section][0]["id"]
    _expect(build, baseline_mapping, f"{section}[1].id", ["duplicate"])


@pytest.mark.parametrize(
    "section,key",
    [
        ("network", "edge_density"),
        ("network", "radio_scale"),
        ("network", "radio_exponent"),
        ("network", "request_intensity"),
        ("gpu", "memory"),
    ],
)
@pytest.mark.parametrize("value", [0.0, -1.0])
def test_non_positive_parameters(build, baseline_mapping, section, key, value):
    baseline_mapping[section][key] = value
    _expect(build, baseline_mapping, f"{section}.{key}", ["[1, 6]" if key == "radio_exponent" else "[1e-30, 1e+30]"])


def test_unknown_and_missing_fields(build, baseline_mapping):
    baseline_mapping["network"]["bandwidth"] = 3
    _expect(build, baseline_mapping, "network.bandwidth", ["unknown field"])
    del baseline_mapping["network"]["bandwidth"]
    del baseline_mapping["gpu"]["memory"]
    _expect(build, baseline_mapping, "gpu.memory", ["required"])


def test_wrong_type_names_the_field(build, baseline_mapping):
    baseline_mapping["network"]["edge_density"] = "dense"
    _expect(build, baseline_mapping, "network.edge_density", ["must be a number"])


def test_default_mix_is_validated_at_load(build, baseline_mapping):
    baseline_mapping["placement"]["mix"] = {"none": 0.5, "shallow": 0.6}
    with pytest.raises(MixError, match="placement.mix: shares must sum to 1"):
        build(baseline_mapping)


def test_mix_errors(baseline):
    with pytest.raises(MixError, match="sum to 1"):
        baseline.mix_vector({"none": 0.3, "shallow": 0.3})
    with pytest.raises(MixError, match="unknown profile 'foo'"):
        baseline.mix_vector({"foo": 1.0})
    with pytest.raises(MixError, match=">= 0"):
        baseline.mix_vector({"none": -0.2, "shallow": 1.2})


def test_mix_share_for_profile_without_concurrency(build, baseline_mapping):
    baseline_mapping["prefixes"][1]["kv_per_token"] = 0.0052  # B_deep = 0.384 + 1450·0.0052 > 7.9
    baseline_mapping["gpu"]["memory"] = 8.0
    baseline_mapping["placement"].pop("mix")
    inst = build(baseline_mapping)
    assert inst.concurrency[2] == 0
    with pytest.raises(MixError, match="'deep' has concurrency c_s < 1"):
        inst.mix_vector({"none": 0.5, "deep": 0.5})


def test_json_parse_error_is_clear(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(InstanceError, match="cannot parse the JSON instance"):
        load_instance(path)


def test_missing_file(tmp_path):
    with pytest.raises(InstanceError, match="no such file"):
        load_instance(tmp_path / "absent.toml")


def test_json_and_toml_share_the_schema(baseline, tmp_path):
    data = instance_to_mapping(baseline)
    (tmp_path / "x.json").write_text(json.dumps(data))
    assert instance_to_mapping(load_instance(tmp_path / "x.json")) == data


def test_written_files_get_the_usual_mode(baseline, tmp_path):
    import os
    import stat

    path = tmp_path / "mode.toml"
    write_instance(baseline, path)
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
