"""Exact sensitivities (docs/model.md §15) against finite differences of the converged model.

``∂J/∂π_s`` holds the other shares fixed (``λ_t = π_t λ_b``), so the perturbed model is the
renormalised mix on the scaled density ``λ_b (1 + h)``.  Interior shares use the 4-point central
difference (error ``O(h⁴)``); a share at 0 the 4-point one-sided one (``O(h³)``), since the model
is defined for ``π_s ≥ 0`` only.  Fixed points are solved to 1e-11 s, so the difference quotients
carry ≈ 1e-8 of round-off: the 1e-6 tolerance leaves three digits of room.  The random
instances avoid seeds with two identical profiles: tied breakpoints make the quadrature map
non-smooth and the robust fixed point stalls near 1e-8 s there (α ≠ 2).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprefix.benchmarks.accuracy.quadrature.reference_kernel import QuadReferenceKernel
from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.cli import main
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.queueing import erlang_c, mean_wait
from edgeprefix.placement.model.sensitivity import sensitivity
from edgeprefix.placement.model.serving import Serving
from edgeprefix.placement.model.spatial import AnalyticKernel
from edgeprefix.placement.model.wait_laws import ErlangCLaw, erlang_c_and_slope, wait_law_for

TOL = 1e-6
FP_TOL = 1e-11
POLICIES = ("load_aware", "prefix", "nearest")
SEEDS = {True: {"light": 0, "heavy": 1}, False: {"light": 6, "heavy": 7}}  # by α == 2; odd seeds put a share at 0


def _value(instance, pi, policy, objective, kernel, s, h):
    mix = pi.copy()
    mix[s] += h
    total = mix.sum()
    scaled = instance.with_network(edge_density=instance.network.edge_density * total)
    ev = evaluate(scaled, mix / total, policy, tol=FP_TOL, kernel=kernel)
    assert ev.fixed_point is None or ev.fixed_point.converged
    if objective == "coverage":
        return ev.coverage()
    if objective == "mean_ttft":
        return ev.mean_ttft
    return float(np.max(ev.utilization[ev.active]))


def finite_difference(instance, pi, policy, objective="coverage", kernel=None):
    out = np.zeros(pi.size)
    for s in range(pi.size):
        if pi[s] > 0:
            h = min(1e-4, pi[s] / 4)
            f = [_value(instance, pi, policy, objective, kernel, s, k * h) for k in (-2, -1, 1, 2)]
            out[s] = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
        else:
            h = 1e-4
            f = [_value(instance, pi, policy, objective, kernel, s, k * h) for k in (0, 1, 2, 3)]
            out[s] = (-11 * f[0] + 18 * f[1] - 9 * f[2] + 2 * f[3]) / (6 * h)
    return out


def relative_error(exact, reference):
    return float(np.max(np.abs(exact - reference)) / np.max(np.abs(reference)))


def near_unstable_intensity(instance, pi, policy, kernel, rho=0.97):
    """Λ at which the busiest active tier reaches ``ρ`` (bisection on log Λ)."""
    lo, hi = 0.05, 50.0
    for _ in range(30):
        mid = float(np.sqrt(lo * hi))
        ev = evaluate(instance.with_network(request_intensity=mid), pi, policy, kernel=kernel)
        lo, hi = (mid, hi) if np.max(ev.utilization[ev.active]) < rho else (lo, mid)
    return lo


def kernel_for(alpha):
    """The evaluation's kernel: exact at α = 2; 64 Gauss–Legendre nodes otherwise, so that the quadrature
    (whose grid gains a breakpoint when a share leaves 0, and whose radio moment enters T̄) stays far below
    the tolerance; at the default nodes interior shares agree to 2e-8 (coverage) and 2e-6 (T̄, α = 3.5)."""
    return AnalyticKernel() if alpha == 2.0 else AnalyticKernel(nodes=64)


def case(alpha, load, policy, seed, kernel=None):
    """A random 5-type, 4-profile instance and mix (one share at 0 for odd seeds) at light or near-unstable load."""
    instance = synthetic_instance(5, 4, alpha=alpha, seed=seed)
    pi = np.random.default_rng(seed).dirichlet(np.ones(4))
    if seed % 2:
        pi[1] = 0.0
        pi /= pi.sum()
    heavy = near_unstable_intensity(instance, pi, policy, kernel)
    return instance.with_network(request_intensity=heavy if load == "heavy" else 0.3 * heavy), pi


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("load", ["light", "heavy"])
@pytest.mark.parametrize("alpha", [2.0, 2.5, 3.5])
def test_coverage_gradient_matches_finite_differences(alpha, load, policy):
    kernel = kernel_for(alpha)
    instance, pi = case(alpha, load, policy, SEEDS[alpha == 2.0][load], kernel)
    ev = evaluate(instance, pi, policy, tol=FP_TOL, kernel=kernel)
    sens = sensitivity(ev)
    assert sens.values["coverage"] == pytest.approx(ev.coverage(), abs=1e-8)
    assert relative_error(sens.gradients["coverage"], finite_difference(instance, pi, policy, kernel=kernel)) <= TOL
    assert sens.entering == tuple(instance.profile_ids[i] for i in np.flatnonzero(pi == 0))
    assert sens.linear_solves == (1 if policy == "load_aware" else 0)


@pytest.mark.parametrize("policy", ["load_aware", "prefix"])
@pytest.mark.parametrize("load", ["light", "heavy"])
@pytest.mark.parametrize("alpha", [2.0, 2.5, 3.5])
def test_mean_ttft_gradient_matches_finite_differences(alpha, load, policy):
    kernel = AnalyticKernel(nodes=64)  # T̄'s radio moment is a quadrature at any α in the evaluation
    instance, pi = case(alpha, load, policy, SEEDS[alpha == 2.0][load], kernel)
    ev = evaluate(instance, pi, policy, tol=FP_TOL, kernel=kernel)
    grad = sensitivity(ev, objectives=("mean_ttft",)).gradients["mean_ttft"]
    reference = finite_difference(instance, pi, policy, "mean_ttft", kernel)
    finite = np.isfinite(grad)  # +inf: a profile entering unstable (T̄ is +inf at any share > 0)
    assert not np.any(np.isfinite(reference[~finite]))
    assert relative_error(grad[finite], reference[finite]) <= TOL


def test_utilization_gradient_and_several_objectives_at_once(baseline):
    pi = np.array([0.3, 0.2, 0.5])
    ev = evaluate(baseline, pi, tol=FP_TOL)
    sens = sensitivity(ev, objectives=("coverage", "max_utilization", "coverage"))
    assert list(sens.gradients) == ["coverage", "max_utilization"] and sens.linear_solves == 2
    assert relative_error(sens.gradients["max_utilization"], finite_difference(baseline, pi, "load_aware", "max_utilization")) <= TOL
    assert sens.values["max_utilization"] == pytest.approx(np.max(ev.utilization))


def test_unstable_tiers_contribute_nothing_and_their_gradient_is_taken_from_above(baseline):
    # prefix routing at Λ = 4 overloads the fallback tier: its pairs count 0 (docs/model.md §5), locally constant
    heavy = baseline.with_network(request_intensity=4.0)
    pi = np.array([0.5, 0.5, 0.0])
    ev = evaluate(heavy, pi, "prefix")
    assert not ev.stable
    grad = sensitivity(ev).gradients["coverage"]
    assert relative_error(grad, finite_difference(heavy, pi, "prefix")) <= TOL
    with pytest.raises(ValueError, match="mean TTFT is infinite"):
        sensitivity(ev, objectives=("mean_ttft",))


def test_a_profile_entering_unstable_makes_mean_ttft_jump():
    # under prefix routing at Λ = 3 a test node of 'deep' is overloaded: T̄ is +inf for any share > 0
    inst = load_instance("paper_baseline").with_network(request_intensity=3.0)
    ev = evaluate(inst, np.array([0.5, 0.5, 0.0]), "prefix")
    assert ev.stable
    grad = sensitivity(ev, objectives=("mean_ttft",)).gradients["mean_ttft"]
    assert np.isposinf(grad[2]) and np.all(np.isfinite(grad[:2]))
    assert not evaluate(inst, np.array([0.5, 0.499, 0.001]), "prefix").stable


@pytest.mark.parametrize("policy", ["load_aware", "prefix"])
@pytest.mark.parametrize("intensity", [1.5, 4.0])
def test_gradients_under_the_mgc_queue_law(intensity, policy):
    # chunked prefill with the M/G/c law (docs/model.md §19.6): C²_s moves with the association
    chunked = load_instance("paper_baseline").replace(serving=Serving(queue="mgc", chunk_size=512, chunk_overhead=0.008, decode_scv=0.5))
    instance = chunked.with_network(request_intensity=intensity)
    for pi, objectives in ((np.array([0.3, 0.2, 0.5]), ("coverage", "mean_ttft")), (np.array([0.5, 0.5, 0.0]), ("coverage",))):
        ev = evaluate(instance, pi, policy, tol=FP_TOL)
        assert ev.service_scv is not None
        sens = sensitivity(ev, objectives=objectives)
        for objective in objectives:
            assert relative_error(sens.gradients[objective], finite_difference(instance, pi, policy, objective)) <= TOL


def test_erlang_c_law_derivatives():
    law = ErlangCLaw()
    a = np.array([0.3, 4.0, 11.5, 30.0, 1e-300])
    c = np.array([1.0, 5.0, 12.0, 33.0, 25.0])
    m = np.array([0.5, 1.2, 0.8, 2.0, 1.0])
    w = law.wait_law(a, c, m)
    assert w.components == 1 and np.all(w.stable)
    np.testing.assert_allclose(w.weight[0], erlang_c(a, c), rtol=1e-12)
    np.testing.assert_allclose(w.decay[0], (c - a) / m, rtol=1e-12)
    np.testing.assert_allclose(w.mean(), mean_wait(a, c, m), rtol=1e-12)
    h = 1e-6 * c
    up, down = law.wait_law(a + h, c, m), law.wait_law(np.maximum(a - h, 0.0), c, m)
    step = (a + h) - np.maximum(a - h, 0.0)
    np.testing.assert_allclose(w.d_weight_da[0], (up.weight - down.weight)[0] / step, rtol=1e-6, atol=1e-12)
    bar = np.linspace(1.0, 2.0, a.size)
    da, dm, ds = w.mean_vjp(bar)
    assert not np.any(ds)  # the M/M/c law does not read the service's C²
    fd_a = (mean_wait(a + h, c, m) - mean_wait(np.maximum(a - h, 0.0), c, m)) / step
    np.testing.assert_allclose(da, bar * fd_a, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(dm, bar * mean_wait(a, c, m) / m, rtol=1e-12)
    pw, slope = erlang_c_and_slope(np.array([1e-310, 0.0]), np.array([25.0, 1.0]))
    assert np.all(np.isfinite(pw)) and np.all(np.isfinite(slope)) and slope[1] == 1.0
    unstable = law.wait_law(np.array([5.0]), np.array([5.0]), np.array([1.0]))
    assert not unstable.stable[0] and np.isinf(unstable.mean()[0])


def test_bad_arguments_name_the_rule(baseline):
    ev = evaluate(baseline)
    with pytest.raises(ValueError, match=r"objectives: each must be one of \['coverage', 'mean_ttft', 'max_utilization'\]"):
        sensitivity(ev, objectives=("ttft",))
    with pytest.raises(ValueError, match="target: τ must be a positive"):
        sensitivity(ev, target=0.0)
    with pytest.raises(ValueError, match="needs the analytic kernel"):
        sensitivity(evaluate(baseline, kernel=QuadReferenceKernel()))
    with pytest.raises(ValueError, match="did not converge"):
        sensitivity(evaluate(baseline.with_network(request_intensity=3.5), method="damped", max_iterations=2))
    with pytest.raises(ValueError, match=r"queue_model: no sensitivities for 'cell' \(valid: \['meanfield', 'mgc', 'engine'\]\)"):
        wait_law_for("cell")
    with pytest.raises(ValueError, match="was not computed"):
        sensitivity(ev).by_profile("mean_ttft")


def test_evaluate_cli_reports_the_gradient(capsys):
    assert main(["evaluate", "--mix", "none=0.5,shallow=0.5", "--gradient", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    ev = evaluate(load_instance("paper_baseline"), {"none": 0.5, "shallow": 0.5})
    assert out["gradient"] == pytest.approx(sensitivity(ev).by_profile(), rel=1e-9)
    assert main(["evaluate", "--gradient"]) == 0
    text = capsys.readouterr().out
    assert "∂P_cov(τ)/∂π_s" in text
    assert main(["evaluate", "--json"]) == 0
    assert "gradient" not in json.loads(capsys.readouterr().out)
