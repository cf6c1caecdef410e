"""Partial derivatives of the cell model's coverage (docs/model.md §14.6) against central differences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.benchmarks.reference_kernel import QuadReferenceKernel
from edgeprefix.placement.model.cell import cell_coverage_pairs, cell_load
from edgeprefix.placement.model.cell_gradient import cell_coverage_gradient
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.spatial import AnalyticKernel

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
    """The cell coverage as the evaluation computes it (at α ≠ 2 normalised to the kernel's ``P1``, eq. (14.14))."""
    alpha = inst.network.radio_exponent
    law = cell_load(args["lam"], args["offsets"], alpha, args["work"])
    queue_free = None
    if alpha != 2.0:
        kernel, lam, b = AnalyticKernel(), args["lam"], args["offsets"]
        queue_free = (kernel.truncated(lam, b, alpha, (tau - kw["first_token"]) / kw["radio_scale"], np.zeros_like(b))[0]
                      if np.isfinite(tau) else kernel.association(lam, b, alpha))
    pairs = cell_coverage_pairs(law, tau, offered_load=args["offered_load"], service_scv=args.get("service_scv"),
                                queue_free=queue_free, **kw)
    return float((inst.probabilities * pairs).sum())


def _keeping_ties(b, cut, d):
    """``d`` made equal on tiers whose offsets ``b_{s,q}`` or cut points ``cut_{s,q} = b_{s,q} + u_cut`` tie within a type.

    At ``α ≠ 2`` the kernel's quadrature of ``P1`` is not differentiable across a tie of its breakpoints (the
    sort order flips: the one-sided slopes differ, and a tier that starts inside a segment is not polynomial
    there); along directions that keep the ties it is, and those are the only ones the mix moves ``b`` in
    (``prefix`` and ``nearest`` do not move ``b``; exchangeable tiers share one advertised delay).
    """
    out = d.copy()
    for q in range(b.shape[1]):
        label = np.arange(b.shape[0])
        for keys in (b[:, q], cut[:, q]):
            for s in range(b.shape[0]):
                for t in range(s):
                    if keys[s] == keys[t]:
                        label[label == label[s]] = label[t]
        out[:, q] = d[label, q]
    return out


def _check(ev, tau):
    args, kw = _inputs(ev, tau)
    grad = cell_coverage_gradient(args["lam"], args["offsets"], args["work"], tau, offered_load=args["offered_load"],
                                  service_scv=args.get("service_scv"), weights=ev.instance.probabilities,
                                  alpha=ev.instance.network.radio_exponent, **kw)
    assert grad.value == pytest.approx(_coverage(ev.instance, tau, kw, args), abs=1e-14)
    if np.isfinite(tau):
        assert grad.value == pytest.approx(ev.coverage(tau), abs=1e-14)
    extra = {"mean_service": kw.pop("mean_service")}
    rng = np.random.default_rng(7)
    for name in [*args, "mean_service"]:
        base = args[name] if name in args else extra[name]
        for _ in range(2):
            d = rng.standard_normal(base.shape)
            if name == "offsets" and ev.instance.network.radio_exponent != 2.0:
                cut = base + np.maximum((tau - kw["first_token"]) / kw["radio_scale"], 0.0) if np.isfinite(tau) else base
                d = _keeping_ties(base, cut, d)
                if np.all(d == d[:1]):  # only translations keep every tie (prefix: all cut points sit at τ/ξ)
                    assert abs(float((grad.offsets * d).sum())) <= 1e-12  # J depends on differences of b only
                    continue
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


def test_evaluation_cell_gradient_is_the_coverage_at_every_exponent():
    inst = load_instance("paper_calibrated")
    ev = evaluate(inst, None, queue_model="cell")
    assert ev.cell_gradient().value == pytest.approx(ev.coverage(), abs=1e-14)
    for alpha, nodes in ((2.5, None), (3.5, 48)):  # P1 on the evaluation's own kernel nodes
        other = evaluate(inst.with_network(radio_exponent=alpha), None, queue_model="cell", kernel=AnalyticKernel(nodes=nodes))
        assert other.cell_gradient().value == pytest.approx(other.coverage(), abs=1e-14)
        assert other.cell_gradient(2.0 * other.target).value == pytest.approx(other.coverage(2.0 * other.target), abs=1e-14)
    reference = evaluate(inst.with_network(radio_exponent=2.5), None, queue_model="cell", kernel=QuadReferenceKernel())
    with pytest.raises(ValueError, match=r"^kernel: the cell model's partials at radio_exponent ≠ 2 .*got QuadReferenceKernel$"):
        reference.cell_gradient()


def _shifted(inst, pi, policy, s, h):
    """The cell coverage with ``π_s`` moved by ``h`` and the other shares held (renormalised on ``λ_b (1 + h)``)."""
    mix = pi.copy()
    mix[s] += h
    total = mix.sum()
    scaled = inst.with_network(edge_density=inst.network.edge_density * total)
    return evaluate(scaled, mix / total, policy, tol=1e-11, queue_model="cell").coverage()


def _mix_differences(inst, pi, policy, h=1e-6):
    out = np.zeros(pi.size)
    for s in range(pi.size):
        if pi[s] > 0:
            f = [_shifted(inst, pi, policy, s, k * h) for k in (-2, -1, 1, 2)]
            out[s] = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
        else:  # one-sided: the model is defined for π_s ≥ 0
            f = [_shifted(inst, pi, policy, s, k * h) for k in (0, 1, 2, 3)]
            out[s] = (-11 * f[0] + 18 * f[1] - 9 * f[2] + 2 * f[3]) / (6 * h)
    return out


@pytest.mark.parametrize(("name", "policy"), [("paper_calibrated", "load_aware"), ("paper_calibrated", "prefix"),
                                               ("paper_calibrated", "nearest"), ("medium_forest", "load_aware")])
def test_sensitivity_of_the_cell_coverage_in_the_mix(name, policy):
    """``∂P_cov/∂π_s`` under the cell model: the partials (14.10) chained through the mean-field fixed point.

    Steps of 1e-4 cross nodes of the model's tables (measured: up to 8e-4 relative on medium_forest);
    at 1e-6 the 4-point differences agree within 2e-6 (fixed points solved to 1e-11 s), hence 1e-5.
    """
    from edgeprefix.placement.model.sensitivity import sensitivity

    if name == "paper_calibrated":
        inst, mix = load_instance(name).with_network(request_intensity=3.3), None
    else:
        inst = load_instance(INSTANCES / "medium_forest.toml").with_network(request_intensity=2.78)
        mix = json.loads((INSTANCES / "medium_forest.checks.json").read_text())["optimum"]["mix"]
    pi = inst.mix_vector(mix)
    ev = evaluate(inst, pi, policy, tol=1e-11, queue_model="cell")
    sens = sensitivity(ev)
    assert sens.values["coverage"] == pytest.approx(ev.coverage(), abs=1e-9)  # test tiers at share 0 enter at ε
    reference = _mix_differences(inst, pi, policy)
    exact = sens.gradients["coverage"]
    assert np.max(np.abs(exact - reference)) <= 1e-5 * np.max(np.abs(reference))
    mean_field = sensitivity(evaluate(inst, pi, policy, tol=1e-11)).gradients["coverage"]
    assert np.max(np.abs(exact - mean_field)) > 1e-3  # a different objective, not the mean field's gradient


def test_evaluate_gradient_with_the_cell_model_on_the_command_line(capsys):
    from edgeprefix.cli import main

    assert main(["evaluate", "paper_calibrated", "--queue-model", "cell", "--gradient", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queue_model"] == "cell" and set(out["gradient"]) == {"none", "shallow", "deep"}
    ev = evaluate(load_instance("paper_calibrated"), None, queue_model="cell")
    pi = ev.mix.copy()
    h = 1e-6
    up = _shifted(ev.instance, pi, "load_aware", 2, h)
    down = _shifted(ev.instance, pi, "load_aware", 2, -h)
    assert out["gradient"]["deep"] == pytest.approx((up - down) / (2 * h), rel=1e-4)


@pytest.mark.parametrize("alpha", [2.5, 3.5])
@pytest.mark.parametrize(("policy", "intensity", "factor"), [("load_aware", 3.3, 1.0), ("prefix", 2.4, 2.0), ("load_aware", 3.3, np.inf),
                                                             ("nearest", 1.0, 0.5)])
def test_cell_gradient_at_other_exponents_matches_central_differences(alpha, policy, intensity, factor):
    """α ≠ 2: the void exponent in closed form, the ray extents by the table inverse and ``P1`` by the kernel's quadrature."""
    inst = load_instance("paper_calibrated").with_network(request_intensity=intensity, radio_exponent=alpha)
    ev = evaluate(inst, None, policy, queue_model="cell")
    _check(ev, ev.target * factor)
