"""``replay`` and ``validate`` in the engine room (docs/model.md §17.9): options, JSON keys, bad input."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from edgeprefix.cli import main
from edgeprefix.commands import replay as replay_command
from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, load_instance, write_instance
from edgeprefix.placement.simulation.engine import names

SAMPLE = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")
ENGINE_KEYS = {"engine", "cache", "hit_rate_blocks", "ttft_p50", "ttft_p90", "ttft_p99", "preemptions", "node_load_cv"}
TIMINGS = {"model": "llama2-70b", "hardware": "h100-80gb", "tensor_parallel": 8}


@pytest.fixture(scope="module")
def instances(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("engine")
    plain = folder / "sample.toml"
    assert main(["profiles", str(SAMPLE), "--out", str(plain), "--json"]) == 0 or plain.exists()
    data = instance_to_mapping(load_instance(plain))
    out = {"plain": plain}
    for name, engine in (("engine", {"timings": TIMINGS}), ("bad_block", {"timings": TIMINGS, "block_size": 48})):
        path = folder / f"{name}.toml"
        write_instance(instance_from_mapping({**data, "engine": engine}), path)
        out[name] = path
    path = folder / "no_timings.toml"
    text = plain.read_text(encoding="utf-8") + "\n[engine]\nblock_size = 16\n"
    path.write_text(text, encoding="utf-8")
    out["no_timings"] = path
    return out


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict | None, str]:
    code = main(["replay", str(SAMPLE), *argv])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 and "--json" in argv else None), err


def test_the_cli_choices_are_the_engine_room_names() -> None:
    assert replay_command.PRODUCTION_ROUTERS == names.PRODUCTION_ROUTERS
    assert replay_command.ENGINES == names.ENGINES and replay_command.CACHES == names.CACHES


def test_slots_and_planned_leave_every_number_as_it_was(instances, capsys) -> None:
    base = ["--instance", str(instances["plain"]), "--nodes", "8", "--json", "--router", "online"]
    code, plain, _ = _run(capsys, *base)
    code2, explicit, _ = _run(capsys, *base, "--engine", "slots", "--cache", "planned", "--telemetry-delay", "0")
    assert code == code2 == 0
    assert plain == explicit
    assert ENGINE_KEYS <= set(plain) and plain["engine"] == "slots" and plain["preemptions"] == 0


@pytest.mark.parametrize("router", ["dynamo", "sglang", "llm-d", "vllm-prefix", "vllm-kv", "online"])
def test_batching_engine_with_lru_reports_the_engine_keys(instances, capsys, router: str) -> None:
    code, report, err = _run(
        capsys,
        "--instance",
        str(instances["engine"]),
        "--nodes",
        "6",
        "--engine",
        "batching",
        "--cache",
        "lru",
        "--router",
        router,
        "--telemetry-delay",
        "0.1",
        "--json",
    )
    assert code == 0, err
    assert ENGINE_KEYS <= set(report) and report["engine"] == "batching" and report["cache"] == "lru"
    assert report["router"] == router and 0 <= report["hit_rate_blocks"] <= 1
    assert report["ttft_p50"] <= report["ttft_p90"] <= report["ttft_p99"]


@pytest.mark.parametrize(
    ("instance", "argv", "needle"),
    [
        ("plain", ["--router", "nginx"], "--router"),
        ("plain", ["--engine", "turbo"], "--engine"),
        ("plain", ["--cache", "fifo"], "--cache"),
        ("plain", ["--engine", "batching"], "--engine batching"),
        ("no_timings", ["--engine", "batching"], "engine.timings"),
        ("bad_block", ["--engine", "batching"], "engine.block_size"),
        ("plain", ["--telemetry-delay", "-1", "--router", "online"], "--telemetry-delay"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_field(instances, capsys, instance: str, argv: list[str], needle: str) -> None:
    with pytest.raises(SystemExit) as info:
        code = main(["replay", str(SAMPLE), "--instance", str(instances[instance]), "--nodes", "6", *argv])
        raise SystemExit(code)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


@pytest.mark.parametrize(
    ("instance", "argv", "needle"),
    [
        ("plain", ["--router", "nginx"], "--router"),
        ("plain", ["--engine", "turbo"], "--engine"),
        ("plain", ["--cache", "fifo"], "--cache"),
        ("plain", ["--engine", "batching"], "--engine batching"),
        ("no_timings", ["--engine", "batching"], "engine.timings"),
        ("bad_block", ["--engine", "batching"], "engine.block_size"),
        ("plain", ["--cache", "lru"], "--cache"),
        ("plain", ["--router", "dynamo"], "--router dynamo"),
    ],
)
def test_validate_bad_engine_input_exits_2_with_one_line_before_any_replay(
    instances, capsys, monkeypatch, instance: str, argv: list[str], needle: str
) -> None:
    """The engine options are checked before the validation runs: a replay reached would fail the test."""
    from edgeprefix.commands import validate as validate_command

    def no_replay(*args: object, **kwargs: object) -> None:
        raise AssertionError("the validation ran before the engine options were checked")

    monkeypatch.setattr(validate_command, "_association", no_replay)
    with pytest.raises(SystemExit) as info:
        code = main(["validate", str(instances[instance]), "--samples", "200", *argv])
        raise SystemExit(code)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_validate_replays_the_model_workload_on_engine_nodes(instances, capsys) -> None:
    code = main(
        [
            "validate",
            str(instances["engine"]),
            "--samples",
            "500",
            "--customers",
            "500",
            "--intensities",
            "1",
            "--replications",
            "2",
            "--nodes",
            "20",
            "--horizon",
            "5",
            "--warmup",
            "2",
            "--no-online",
            "--engine",
            "batching",
            "--cache",
            "planned+lru",
            "--router",
            "llm-d",
            "--engine-requests",
            "400",
            "--json",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    eng = json.loads(out)["engine"]
    assert eng["engine"] == "batching" and eng["router"] == "llm-d" and len(eng["rows"]) == 1
    row = eng["rows"][0]
    assert 0 <= row["coverage_engine"] <= 1 and 0 <= row["coverage_analytical"] <= 1
