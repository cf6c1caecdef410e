"""Partial derivatives of the cell model's coverage (docs/model.md §14.6) against central differences."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.benchmarks.accuracy.quadrature.reference_kernel import QuadReferenceKernel
from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.placement.model.cell import cell_coverage_pairs, cell_load
from edgeprefix.placement.model.cell_gradient import cell_coverage_gradient
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.spatial import AnalyticKernel

INSTANCES = Path(__file__).resolve().parents[1] / "benchmarks" / "instances"
STEP = 1e-7  # central differences; the model is piecewise smooth (table nodes), so the step stays small
MIX_STEP = 1e-8  # π steps of the mix differences of the random instances: see _random_case
FP_TOL = 1e-11  # fixed points of those differences (s)


def _inputs(ev, tau):
    inst, act = ev.instance, ev.active
    net = inst.network
    kw = dict(
        radio_scale=net.radio_scale,
        first_token=inst.first_token_time[act],
        servers=inst.concurrency[act].astype(float),
        mean_service=ev.mean_service[act],
        service_scv=None if ev.service_scv is None else ev.service_scv[act],
    )
    args = {
        "lam": ev.densities[act],
        "offsets": ev.bias[act] / net.radio_scale,
        "work": net.request_intensity * inst.probabilities[None, :] * inst.service_time[act],
        "offered_load": (ev.arrival_rate * ev.mean_service)[act],
    }
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
        queue_free = (
            kernel.truncated(lam, b, alpha, (tau - kw["first_token"]) / kw["radio_scale"], np.zeros_like(b))[0]
            if np.isfinite(tau)
            else kernel.association(lam, b, alpha)
        )
    pairs = cell_coverage_pairs(
        law, tau, offered_load=args["offered_load"], service_scv=args.get("service_scv"), queue_free=queue_free, **kw
    )
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
    grad = cell_coverage_gradient(
        args["lam"],
        args["offsets"],
        args["work"],
        tau,
        offered_load=args["offered_load"],
        service_scv=args.get("service_scv"),
        weights=ev.instance.probabilities,
        alpha=ev.instance.network.radio_exponent,
        **kw,
    )
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
    return evaluate(scaled, mix / total, policy, tol=1e-13, queue_model="cell").coverage()


def _mix_differences(inst, pi, policy, h=1e-7):
    out = np.zeros(pi.size)
    for s in range(pi.size):
        if pi[s] > 0:
            f = [_shifted(inst, pi, policy, s, k * h) for k in (-2, -1, 1, 2)]
            out[s] = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
        else:  # one-sided: the model is defined for π_s ≥ 0
            f = [_shifted(inst, pi, policy, s, k * h) for k in (0, 1, 2, 3)]
            out[s] = (-11 * f[0] + 18 * f[1] - 9 * f[2] + 2 * f[3]) / (6 * h)
    return out


@pytest.mark.parametrize(
    ("name", "policy"),
    [("paper_calibrated", "load_aware"), ("paper_calibrated", "prefix"), ("paper_calibrated", "nearest"), ("medium_forest", "load_aware")],
)
def test_sensitivity_of_the_cell_coverage_in_the_mix(name, policy):
    """``∂P_cov/∂π_s`` under the cell model: the partials (14.10) chained through the mean-field fixed point.

    Steps of 1e-4 cross nodes of the model's tables (measured: up to 8e-4 relative on medium_forest), steps of
    1e-6 still do (2e-6).  At 1e-7 the one-sided differences of the 4 shares at 0 on medium_forest carry the fixed
    point's tolerance (7.9e-7 relative with fixed points to 1e-11 s, 1.6e-8 with 1e-13 s), hence 1e-13 s.
    """
    from edgeprefix.placement.model.sensitivity import sensitivity

    if name == "paper_calibrated":
        inst, mix = load_instance(name).with_network(request_intensity=3.3), None
    else:
        inst = load_instance(INSTANCES / "medium_forest.toml").with_network(request_intensity=2.78)
        mix = json.loads((INSTANCES / "medium_forest.checks.json").read_text())["optimum"]["mix"]
    pi = inst.mix_vector(mix)
    ev = evaluate(inst, pi, policy, tol=1e-13, queue_model="cell")
    sens = sensitivity(ev)
    assert sens.values["coverage"] == pytest.approx(ev.coverage(), abs=1e-9)  # test tiers at share 0 enter at ε
    reference = _mix_differences(inst, pi, policy)
    exact = sens.gradients["coverage"]
    assert np.max(np.abs(exact - reference)) <= 1e-6 * np.max(np.abs(reference))
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
@pytest.mark.parametrize(
    ("policy", "intensity", "factor"), [("load_aware", 3.3, 1.0), ("prefix", 2.4, 2.0), ("load_aware", 3.3, np.inf), ("nearest", 1.0, 0.5)]
)
def test_cell_gradient_at_other_exponents_matches_central_differences(alpha, policy, intensity, factor):
    """α ≠ 2: the void exponent in closed form, the ray extents by the table inverse and ``P1`` by the kernel's quadrature."""
    inst = load_instance("paper_calibrated").with_network(request_intensity=intensity, radio_exponent=alpha)
    ev = evaluate(inst, None, policy, queue_model="cell")
    _check(ev, ev.target * factor)


@pytest.mark.parametrize("alpha", [1.0, 6.0])
@pytest.mark.parametrize(("policy", "intensity", "factor"), [("load_aware", 3.3, 1.0), ("nearest", 1.0, 0.5)])
def test_cell_gradient_at_the_ends_of_the_accepted_exponents(alpha, policy, intensity, factor):
    """α = 1 (``2/α = 2``: ``G'`` grows with ``u``) and α = 6 (``2/α = 1/3``, nodes ``x^{12}`` next to each kink)."""
    inst = load_instance("paper_calibrated").with_network(request_intensity=intensity, radio_exponent=alpha)
    ev = evaluate(inst, None, policy, queue_model="cell")
    _check(ev, ev.target * factor)


def _random_case(alpha, load, policy, seed):
    """A random 5-type, 4-profile instance (:func:`synthetic_instance`) and mix at light load (0.3×) or at the load where
    the busiest tier reaches ρ = 0.97; an odd seed puts profile 1 at share 0.

    Step.  The cell model interpolates tables (``P^W``/``1/K`` on 2048 nodes, the ℓ axis, the load nodes' skewness, the
    Voronoi mean, the ray-extent table at α ≠ 2), so it is piecewise smooth with dense kinks: thousands of node loads
    ``ρ_s X`` move with ``π``, and a difference whose step carries one across a table node is off by that piece's
    change of slope, an error that shrinks with the step.  Largest relative error of the 4-point differences
    (fixed points to 1e-11 s) over the 18 interior cases below (α ∈ {2, 2.5, 3.5}, both loads, three policies) and
    the 12 with a share at 0, at h = 1e-4, 1e-5, 1e-6, 3e-7, 1e-8: 2.8e-3, 3.3e-4, 1.1e-6, 2.4e-7, 8.0e-8 (interior)
    and 1.3e-2, 1.1e-4, 5.5e-6, 2.3e-6, 3.0e-7 (share at 0).  At α ≠ 2 a profile leaving share 0 also adds
    breakpoints to the kernel's quadrature, whose value jumps by its error (3.6e-10 at the default nodes: 6.5e-4 on
    a one-sided difference at h = 1e-6), hence 64 nodes with a share at 0, as in tests/test_sensitivity.py.
    """
    instance = synthetic_instance(5, 4, alpha=alpha, seed=seed)
    pi = np.random.default_rng(seed).dirichlet(np.ones(4))
    if seed % 2:
        pi[1] = 0.0
        pi /= pi.sum()
    kernel = AnalyticKernel(nodes=64 if seed % 2 else None)
    lo, hi = 0.05, 50.0
    for _ in range(30):  # Λ where the busiest active tier reaches ρ = 0.97 (bisection on log Λ)
        mid = float(np.sqrt(lo * hi))
        ev = evaluate(instance.with_network(request_intensity=mid), pi, policy, kernel=kernel)
        lo, hi = (mid, hi) if np.max(ev.utilization[ev.active]) < 0.97 else (lo, mid)
    return instance.with_network(request_intensity=lo if load == "heavy" else 0.3 * lo), pi, kernel


def _mix_reference(instance, pi, policy, kernel, h=MIX_STEP):
    """4-point differences of the converged cell coverage in each ``π_s`` (one-sided at share 0)."""

    def value(s, step):
        mix = pi.copy()
        mix[s] += step
        total = mix.sum()
        scaled = instance.with_network(edge_density=instance.network.edge_density * total)
        ev = evaluate(scaled, mix / total, policy, tol=FP_TOL, kernel=kernel, queue_model="cell")
        assert ev.fixed_point is None or ev.fixed_point.converged
        return ev.coverage()

    out = np.zeros(pi.size)
    for s in range(pi.size):
        if pi[s] > 0:
            f = [value(s, k * h) for k in (-2, -1, 1, 2)]
            out[s] = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
        else:
            f = [value(s, k * h) for k in (0, 1, 2, 3)]
            out[s] = (-11 * f[0] + 18 * f[1] - 9 * f[2] + 2 * f[3]) / (6 * h)
    return out


@pytest.mark.parametrize("policy", ["load_aware", "prefix", "nearest"])
@pytest.mark.parametrize("load", ["light", "heavy"])
@pytest.mark.parametrize("alpha", [2.0, 2.5, 3.5])
def test_cell_mix_gradient_matches_differences_of_the_converged_model(alpha, load, policy):
    """``∂P_cov/∂π_s`` under the cell model at every α: relative error ≤ 1e-6 (measured ≤ 8.0e-8 on these cases)."""
    from edgeprefix.placement.model.sensitivity import sensitivity

    instance, pi, kernel = _random_case(alpha, load, policy, seed=6)
    ev = evaluate(instance, pi, policy, tol=FP_TOL, kernel=kernel, queue_model="cell")
    sens = sensitivity(ev)
    assert sens.values["coverage"] == pytest.approx(ev.coverage(), abs=1e-12)
    reference = _mix_reference(instance, pi, policy, kernel)
    assert np.max(np.abs(sens.gradients["coverage"] - reference)) <= 1e-6 * np.max(np.abs(reference))


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["load_aware", "prefix"])
@pytest.mark.parametrize("load", ["light", "heavy"])
@pytest.mark.parametrize("alpha", [2.0, 2.5, 3.5])
def test_cell_mix_gradient_with_a_share_at_zero(alpha, load, policy):
    """A profile at share 0 enters as a test tier (docs/model.md §15.4): one-sided differences agree within 1e-6
    (measured ≤ 3e-7)."""
    from edgeprefix.placement.model.sensitivity import sensitivity

    instance, pi, kernel = _random_case(alpha, load, policy, seed=7)
    ev = evaluate(instance, pi, policy, tol=FP_TOL, kernel=kernel, queue_model="cell")
    sens = sensitivity(ev)
    assert sens.entering == (instance.profile_ids[1],)
    assert sens.values["coverage"] == pytest.approx(ev.coverage(), abs=1e-9)  # the test tier enters at ε = 1e-10
    reference = _mix_reference(instance, pi, policy, kernel)
    assert np.max(np.abs(sens.gradients["coverage"] - reference)) <= 1e-6 * np.max(np.abs(reference))


def test_evaluate_gradient_with_the_cell_model_at_alpha_2_5_on_the_command_line(tmp_path, capsys):
    """``evaluate --gradient --queue-model cell`` at α = 2.5 prints the exact gradient instead of refusing."""
    from edgeprefix.cli import main
    from edgeprefix.placement.model.instance import write_instance

    inst = load_instance("paper_calibrated").with_network(radio_exponent=2.5)
    path = tmp_path / "alpha25.toml"
    write_instance(inst, path)
    assert main(["evaluate", str(path), "--queue-model", "cell", "--gradient", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queue_model"] == "cell" and set(out["gradient"]) == {"none", "shallow", "deep"}
    pi = inst.mix_vector(None)
    h = MIX_STEP
    for s, profile in enumerate(inst.profile_ids):
        f = [_shifted(inst, pi, "load_aware", s, k * h) for k in (-2, -1, 1, 2)]
        reference = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
        assert out["gradient"][profile] == pytest.approx(reference, rel=1e-6)
    assert main(["evaluate", str(path), "--queue-model", "cell", "--gradient"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    last = lines[lines.index(next(line for line in lines if line.startswith("∂P_cov"))) + 2].split()  # header, names, values
    assert [float(x) for x in last] == pytest.approx([out["gradient"][p] for p in inst.profile_ids], abs=1e-5)


@pytest.mark.parametrize("alpha", [1.5, 2.5, 3.5, 6.0])
def test_the_queue_free_mass_is_the_kernels_quadrature_and_its_reverse_pass_its_derivative(alpha):
    """``P1`` (and ``A`` at ``τ = ∞``) equal the kernel's numbers exactly; ``(λ̄, b̄)`` are the derivative of that
    quadrature (its nodes move with the breakpoints and ``y_max``), not the quadrature of the derivative."""
    from edgeprefix.placement.model.association import default_nodes
    from edgeprefix.placement.model.cell_gradient_power import _mass

    rng = np.random.default_rng(1)
    lam, b = rng.uniform(0.5, 2.0, 4), rng.uniform(0.0, 1.0, (4, 5))
    u_cut = rng.uniform(0.05, 1.5, (4, 5))
    u_cut[0, 0] = 0.0  # a window that is empty: its cut point ties with its own breakpoint
    kernel, nodes = AnalyticKernel(), default_nodes(alpha)
    assert np.array_equal(_mass(lam, b, alpha, u_cut, nodes)[0], kernel.truncated(lam, b, alpha, u_cut, np.zeros_like(b))[0])
    assert np.array_equal(_mass(lam, b, alpha, None, nodes)[0], kernel.association(lam, b, alpha))
    bar = rng.standard_normal(b.shape)
    h = 1e-6
    for cut in (u_cut, None):
        _, lam_bar, b_bar = _mass(lam, b, alpha, cut, nodes, bar)

        def j(lam_, b_, cut=cut):
            return float((bar * _mass(lam_, b_, alpha, cut, nodes)[0]).sum())

        d_lam, d_b = rng.standard_normal(lam.shape), rng.standard_normal(b.shape)
        fd_lam = (j(lam + h * d_lam, b) - j(lam - h * d_lam, b)) / (2 * h)
        fd_b = (j(lam, b + h * d_b) - j(lam, b - h * d_b)) / (2 * h)
        assert lam_bar @ d_lam == pytest.approx(fd_lam, rel=1e-7)
        assert float((b_bar * d_b).sum()) == pytest.approx(fd_b, rel=1e-7)
