"""Partial derivatives of the cell model's coverage (docs/model.md §14.6) against central differences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.placement.model.cell import cell_coverage_pairs, cell_load
from edgeprefix.placement.model.cell_gradient import cell_coverage_gradient
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance

INSTANCES = Path(__file__).resolve().parents[1] / "benchmarks" / "instances"
STEP = 1e-7  # central differences; the model is piecewise smooth (table nodes), so the step stays small


def _inputs(ev, tau):
    inst, act = ev.instance, ev.active
    net = inst.network
    kw = dict(radio_scale=net.radio_scale, first_token=inst.first_token_time[act], servers=inst.concurrency[act].astype(float),
              mean_service=ev.mean_service[act], service_scv=None if ev.service_scv is None else ev.service_scv[act])
    args = {"lam": ev.densities[act], "offsets": ev.bias[act] / net.radio_scale,
            "work": net.request_intensity * inst.probabilities[None, :] * inst.service_time[act],
            "offered_load": (ev.arrival_rate * ev.mean_service)[act]}
    if kw["service_scv"] is not None:
        args["service_scv"] = kw.pop("service_scv")
    else:
        kw.pop("service_scv")
    return args, kw


def _coverage(inst, tau, kw, args):
    law = cell_load(args["lam"], args["offsets"], 2.0, args["work"])
    pairs = cell_coverage_pairs(law, tau, offered_load=args["offered_load"], service_scv=args.get("service_scv"), **kw)
    return float((inst.probabilities * pairs).sum())


def _check(ev, tau):
    args, kw = _inputs(ev, tau)
    grad = cell_coverage_gradient(args["lam"], args["offsets"], args["work"], tau, offered_load=args["offered_load"],
                                  service_scv=args.get("service_scv"), weights=ev.instance.probabilities, **kw)
    assert grad.value == pytest.approx(_coverage(ev.instance, tau, kw, args), abs=1e-14)
    extra = {"mean_service": kw.pop("mean_service")}
    rng = np.random.default_rng(7)
    for name in [*args, "mean_service"]:
        base = args[name] if name in args else extra[name]
        for _ in range(2):
            d = rng.standard_normal(base.shape)
            values = []
            for sign in (1.0, -1.0):
                moved = dict(args)
                kw_moved = dict(kw, **extra)
                if name in args:
                    moved[name] = base + sign * STEP * d
                else:
                    kw_moved[name] = base + sign * STEP * d
                values.append(_coverage(ev.instance, tau, kw_moved, moved))
            fd = (values[0] - values[1]) / (2 * STEP)
            analytic = float((getattr(grad, name) * d).sum())
            assert abs(fd - analytic) <= 1e-6 * abs(analytic) + 1e-9, (name, fd, analytic)


@pytest.mark.parametrize(("policy", "intensity", "factor"), [("load_aware", 3.3, 1.0), ("prefix", 2.4, 2.0), ("load_aware", 3.3, np.inf)])
def test_cell_gradient_matches_central_differences_paper_calibrated(policy, intensity, factor):
    inst = load_instance("paper_calibrated").with_network(request_intensity=intensity)
    ev = evaluate(inst, None, policy, queue_model="cell")
    _check(ev, ev.target * factor)


def test_cell_gradient_matches_central_differences_medium_forest():
    inst = load_instance(INSTANCES / "medium_forest.toml").with_network(request_intensity=2.78)
    mix = json.loads((INSTANCES / "medium_forest.checks.json").read_text())["optimum"]["mix"]
    for policy in ("load_aware", "nearest"):
        ev = evaluate(inst, mix, policy, queue_model="cell")
        _check(ev, ev.target)


def test_cell_gradient_of_the_mgc_law():
    """Under ``[serving] queue = "mgc"`` the node's decay is the M/G/c one: C²_s has a partial derivative."""
    ev = evaluate(load_instance(INSTANCES / "serving_chunked.toml"), None, "load_aware", queue_model="cell")
    assert ev.service_scv is not None
    grad = ev.cell_gradient()
    assert grad.service_scv is not None and np.all(grad.service_scv < 0)  # a more variable service waits longer: coverage falls
    _check(ev, ev.target)


def test_evaluation_cell_gradient_is_the_coverage_and_refuses_other_exponents():
    inst = load_instance("paper_calibrated")
    ev = evaluate(inst, None, queue_model="cell")
    assert ev.cell_gradient().value == pytest.approx(ev.coverage(), abs=1e-14)
    other = evaluate(inst.with_network(radio_exponent=2.5), None, queue_model="cell")
    with pytest.raises(ValueError, match="radio_exponent"):
        other.cell_gradient()
