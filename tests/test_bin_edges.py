"""Length bins split at the target's threshold lengths (docs/model.md (2.10)): no bin straddles an
edge, so a step at an edge is integrated exactly; the threshold length; the ``profiles`` option."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edgeprefix.cli import main
from edgeprefix.placement.model.costs import QuadraticPrefill
from edgeprefix.placement.model.lengths import length_bins
from edgeprefix.placement.pipeline.calibration import DEFAULT_DECODE_PER_TOKEN, DEFAULT_PREFILL
from edgeprefix.placement.pipeline.forest import build_forest
from edgeprefix.placement.pipeline.profile_generation import generate_profiles
from edgeprefix.placement.pipeline.trace_instance import target_length
from edgeprefix.placement.pipeline.traces import read_trace

SAMPLE = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(100.0, 50_000.0), min_size=2, max_size=60),
    st.integers(1, 9),
    st.lists(st.floats(100.0, 50_000.0), min_size=1, max_size=3),
)
def test_no_bin_straddles_an_edge_so_a_step_there_is_exact(values, parts, edges):
    x = np.asarray(values)
    assume(np.min(np.abs(x[:, None] - np.asarray(edges)[None, :])) > 1e-6)  # a mean of equal values may round past an edge
    w = np.linspace(1.0, 2.0, x.size)
    w = w / w.sum()
    means, paired, weights = length_bins(x, w, parts, 2.0 * x, edges=edges)
    assert weights.size <= parts + len(set(edges)) and weights.sum() == pytest.approx(1.0)
    assert np.all(np.diff(means) > 0)
    assert float(weights @ means) == pytest.approx(float(w @ x), rel=1e-12)
    np.testing.assert_allclose(paired, 2.0 * means, rtol=1e-12)
    for edge in edges:  # the share below each edge is kept: every bin lies on one side of it
        assert float(weights @ (means < edge)) == pytest.approx(float(w @ (x < edge)), abs=1e-12)
    plain = length_bins(x, w, parts, 2.0 * x)
    if not edges or all(np.all(x < e) or np.all(x >= e) for e in edges):  # nothing to split: the bins of (2.8)
        np.testing.assert_array_equal(means, plain[0])


def test_the_plain_bins_can_straddle_an_edge():
    x = np.arange(1.0, 11.0)
    w = np.full(x.size, 0.1)
    means, _, weights = length_bins(x, w, 2)  # bins {1..5}, {6..10}
    assert float(weights @ (means < 4.5)) != pytest.approx(float(w @ (x < 4.5)))
    means, _, weights = length_bins(x, w, 2, edges=[4.5])
    assert weights.size == 3 and float(weights @ (means < 4.5)) == pytest.approx(0.4)


def test_the_target_length_inverts_the_prefill():
    g = QuadraticPrefill(linear=1e-4, quadratic=2e-9, intercept=0.05)
    for tau in (0.2, 1.0, 7.5):
        n = target_length(g, tau)
        assert n is not None and float(g(n)) == pytest.approx(tau, rel=1e-9)
    assert target_length(g, 0.04) == 0.0  # the fixed overhead alone exceeds τ_0
    assert target_length(QuadraticPrefill(linear=0.0, intercept=0.05), 1.0) is None
    with pytest.raises(ValueError, match="target"):
        target_length(g, float("nan"))


def test_profiles_bins_keep_every_types_share_below_each_of_its_thresholds():
    records = list(read_trace(SAMPLE))
    forest = build_forest(records)
    lengths = forest.end_input_sum[forest.ends > 0] / forest.ends[forest.ends > 0]
    threshold = float(np.median(lengths))
    common = {"kappa": 1e-4, "gpu_memory": 4.0, "cap": 1.0, "decode_per_token": DEFAULT_DECODE_PER_TOKEN, "length_bins": 3}
    ps = generate_profiles(forest, DEFAULT_PREFILL, length_threshold=threshold, **common)
    plain = generate_profiles(forest, DEFAULT_PREFILL, **common)
    retained = {v for s in ps.vertices for v in s}
    leaves = np.flatnonzero(forest.ends > 0)
    owner = np.array([next((u for u in reversed(forest.path(int(v))) if u in retained), -1) for v in leaves])
    group = [q.group or q.id for q in ps.requests]
    declared = list(dict.fromkeys(group))  # in the order of ps.types
    straddled = 0
    for k, u in enumerate(ps.types.vertex):
        mine = owner == u
        weight = forest.ends[leaves[mine]] / forest.ends[leaves[mine]].sum()
        cols = [j for j, name in enumerate(group) if name == declared[k]]
        hits = np.unique(ps.hits[:, cols])
        inp, _, w = ps.types.bins[k]
        plain_inp, _, plain_w = plain.types.bins[k]
        for h in hits:
            edge = threshold + h
            assert float(w @ (inp < edge)) == pytest.approx(float(weight @ (lengths[mine] < edge)), abs=1e-12)
            straddled += float(plain_w @ (plain_inp < edge)) != pytest.approx(float(weight @ (lengths[mine] < edge)), abs=1e-12)
    assert straddled > 0  # the plain bins of (2.8) do straddle here: the test can fail


def test_profiles_splits_at_the_target_by_default_and_bad_use_is_one_line(tmp_path, capsys):
    out = tmp_path / "edges.toml"
    assert main(["profiles", "--length-bins", "3", "--out", str(out), "--json"]) == 0
    default = json.loads(capsys.readouterr().out)
    assert main(["profiles", "--length-bins", "3", "--bin-edges-at-target", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == default["requests"]
    assert main(["profiles", "--length-bins", "3", "--no-bin-edges-at-target", "--json"]) == 0
    without = json.loads(capsys.readouterr().out)
    assert default["network"]["target"] == without["network"]["target"]
    count = sum(len(q.get("lengths", {"input": [0]})["input"]) for q in default["requests"])
    assert count > sum(len(q.get("lengths", {"input": [0]})["input"]) for q in without["requests"])
    for bad in (["--bin-edges-at-target", "--length-bins", "1"], ["--recent", "0"], ["--recent", "1.5"]):
        assert main(["profiles", *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and bad[0] in err[0]
    assert main(["profiles", "--length-bins", "1"]) == 0  # the default edges need bins; one length is still fine
    capsys.readouterr()


def test_a_recent_window_builds_from_the_last_requests_of_the_training_part(capsys):
    records = list(read_trace(SAMPLE))
    assert main(["profiles", "--split", "0.5", "--recent", "0.5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    lam = report["intensity"]
    assert lam["trace_requests"] == 50  # the last half of the first 100
    first, last = records[50].timestamp, records[99].timestamp
    assert lam["trace_span_s"] == pytest.approx(last - first, rel=1e-9)
