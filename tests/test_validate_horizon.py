"""``validate`` warns when its measured horizon is shorter than 10 mean service times (docs/model.md §20):
with ``decode = 1e30`` the simulated coverage (0.31) was a transient against an analytical 0, unsaid."""

from __future__ import annotations

import copy
import json

import tomli_w
from validate_fixtures import fast_validate_args

from edgeprefix.cli import main
from edgeprefix.commands.validate import short_horizon_warning
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import default_instance, instance_from_mapping, instance_to_mapping

FAST = [*fast_validate_args("1"), "--no-online", "--nodes", "40", "--samples", "2000", "--customers", "2000"]


def _run(instance, capsys, *extra):
    code = main(["validate", *instance, *FAST, *extra, "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out), [line for line in out.err.splitlines() if "warning" in line]


def test_a_horizon_shorter_than_a_service_time_is_warned_on_stderr_and_in_json(tmp_path, capsys):
    data = copy.deepcopy(instance_to_mapping(default_instance()))
    data["requests"][0]["decode"] = 1e30
    path = tmp_path / "slow.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    report, lines = _run([str(path)], capsys)
    assert len(lines) == 1 and lines[0].startswith("edgeprefix validate: warning: the measured span is ")
    assert "mean service times (< 10" in lines[0] and "--horizon" in lines[0]
    assert report["warnings"] == [lines[0].removeprefix("edgeprefix validate: warning: ")]


def test_a_normal_small_run_is_not_warned(capsys):
    report, lines = _run([], capsys, "--horizon", "20")  # 20 s: about 12 mean service times of 1.63 s
    assert lines == [] and report["warnings"] == []


def test_the_threshold_is_ten_mean_service_times():
    instance = default_instance()
    tau = instance.placement.target
    ev = evaluate(instance, None, "load_aware", target=tau)
    mean = float((instance.probabilities * (ev.association * instance.service_time).sum(axis=0)).sum())  # Σ_q p_q Σ_s A/μ
    assert 1.0 < mean < 3.0  # decode 0.7–2.25 s plus prefill
    assert short_horizon_warning(instance, None, 10.01 * mean, tau) is None
    assert "9.99 mean service times" in short_horizon_warning(instance, None, 9.99 * mean, tau)
    slow = instance_to_mapping(instance)
    slow["requests"][1]["decode"] = 1e6
    assert short_horizon_warning(instance_from_mapping(slow), None, 80.0, tau) is not None
