"""The telemetry-age benchmark's reference: independent networks, and the SE is their spread (benchmarks/README.md §11)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from edgeprefix.benchmarks.accuracy.telemetry import telemetry_age
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter


@pytest.fixture(scope="module")
def tiny():
    inst = load_instance("paper_calibrated").with_network(request_intensity=3.0)
    spec = SimulationSpec(horizon=8.0, warmup=4.0, layout=LayoutSpec(mean_nodes=40.0, counts="exact"))
    return inst, spec, OnlineRouter("load_aware", "telemetry", candidates_per_profile=2), float(inst.placement.target)


def test_the_reference_se_is_the_spread_between_networks(tiny):
    inst, spec, router, tau = tiny
    seeds = np.random.SeedSequence(5).spawn(4)
    cases = [(router, spec), (router, dataclasses.replace(spec, telemetry_delay=2.0))]
    refs = telemetry_age._simulate(inst, cases, seeds, tau)
    for (rt, sp), ref in zip(cases, refs):
        # each network on its own seed, layout and arrivals drawn from it: the same numbers run one by one
        alone = [simulate_network(inst, None, rt, sp, seed=np.random.default_rng(s)).coverage(tau) for s in seeds]
        assert ref.networks == pytest.approx(alone, abs=0.0)
        nets = np.array(ref.networks)
        assert len(set(ref.networks)) == nets.size  # independent networks, not one network repeated
        assert ref.coverage == pytest.approx(nets.mean())
        assert ref.se > 0.0 and ref.se == pytest.approx(nets.std(ddof=1) / math.sqrt(nets.size))
        assert ref.batch_se > 0.0 and ref.batch_se != pytest.approx(ref.se)  # the pooled batch means, kept apart


def test_the_layouts_differ_between_the_reference_networks(tiny):
    inst, spec, router, tau = tiny
    a, b = (simulate_network(inst, None, router, spec, seed=np.random.default_rng(s)) for s in np.random.SeedSequence(5).spawn(2))
    assert not np.array_equal(a.layout.positions, b.layout.positions)


def test_one_network_has_no_between_network_se(tiny):
    inst, spec, router, tau = tiny
    with pytest.raises(ValueError, match="replications"):
        telemetry_age._simulate(inst, [(router, spec)], np.random.SeedSequence(5).spawn(1), tau)


@pytest.mark.parametrize(
    ("argv", "option"),
    [(["--replications", "1"], "--replications"), (["--seed", str(telemetry_age.SEED)], "--seed"), (["--nodes", "3"], "--nodes")],
)
def test_bad_reference_options_are_one_line_errors(capsys, argv, option):
    with pytest.raises(SystemExit) as stop:
        telemetry_age.main(argv)
    assert stop.value.code == 2
    assert option in capsys.readouterr().err.strip().splitlines()[-1]


def test_an_old_reference_json_is_refused(capsys, tmp_path):
    old = tmp_path / "old.json"
    old.write_text('[{"instance": "paper_calibrated", "load": 0.15, "delay": 0, "refresh": 0, "simulated": 0.7, "simulated_se": 0.002}]')
    with pytest.raises(SystemExit) as stop:
        telemetry_age.main(["--reuse-simulation", str(old)])
    assert stop.value.code == 2
    assert "--reuse-simulation" in capsys.readouterr().err.strip().splitlines()[-1]


def test_a_reused_row_keeps_both_ses():
    row = {"simulated": 0.4, "simulated_se": 0.006, "simulated_batch_se": 0.001, "simulated_networks": [0.39, 0.41]}
    ref = telemetry_age._reused(row, "simulated")
    assert (ref.coverage, ref.se, ref.batch_se, ref.networks) == (0.4, 0.006, 0.001, (0.39, 0.41))
    with pytest.raises(ValueError, match="reuse-simulation"):
        telemetry_age._reused({"tier_rule": 0.3, "tier_rule_se": 0.002}, "tier_rule")


def test_the_reference_samples_what_the_sampled_prediction_samples():
    """On the same seeds the reference's first networks are the sampled prediction's networks, bit for bit: the two
    estimate one quantity (docs/model.md (11.19)), and their difference in the benchmark is the draw of the seeds."""
    from edgeprefix.placement.model.sampled_router import predict_sampled
    from edgeprefix.placement.model.telemetry import Telemetry

    inst = load_instance("paper_calibrated").with_network(request_intensity=3.0)
    tau = float(inst.placement.target)
    spec = dataclasses.replace(telemetry_age._spec(inst, 40, 40.0, 30.0), telemetry_delay=1.0)
    router = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    (ref,) = telemetry_age._simulate(inst, [(router, spec)], np.random.SeedSequence(7).spawn(4), tau)
    pred = predict_sampled(inst, None, Telemetry(delay=1.0), target=tau, nodes=40, replications=3, seed=7)
    assert pred.coverage == float(np.mean(ref.networks[:3]))
