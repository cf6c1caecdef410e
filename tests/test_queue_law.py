"""The M/G/c queue law and chunked prefill (docs/model.md §19.6): Erlang C as the special case, the
Pollaczek–Khinchine limit, hand-computed values, the advertised delay's continuity and slopes, the
event simulator against known closed forms, evaluate's service SCV and exact Jacobian, the
instance fields and their errors."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from edgeprefix.benchmarks.accuracy.extensions.queue_and_catalogue import INSTANCES, NAMES, instance_mappings
from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model import pipeline as pipeline_module
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, load_instance, write_instance
from edgeprefix.placement.model.mgc import (
    mgc_advertised_wait,
    mgc_advertised_wait_and_slopes,
    mgc_decay,
    mgc_mean_wait,
    mgc_mean_wait_and_derivatives,
    mgc_waiting_cdf,
    variability_factor,
)
from edgeprefix.placement.model.queueing import advertised_wait_and_slope, erlang_c, mean_wait, waiting_cdf
from edgeprefix.placement.model.serving import ChunkedPrefill, Serving
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.mmc import ServiceLaw, simulate_mgc
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.reference import md1_wait_cdf, mg1_closed_forms

GRID_C = [1, 2, 5, 12, 40]


# ---------------------------------------------------------------------------------------------
# The law
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("c", GRID_C)
def test_unit_scv_gives_back_erlang_c_exactly(c):
    a = np.linspace(0.0, 1.3 * c, 157)
    m = np.full_like(a, 1.7)
    wait, slope, _ = mgc_advertised_wait_and_slopes(a, c, m, 1.0)
    w0, s0 = advertised_wait_and_slope(a, np.full_like(a, c), m)
    np.testing.assert_array_equal(wait, w0)
    np.testing.assert_array_equal(slope, s0)
    np.testing.assert_array_equal(mgc_mean_wait(a, c, m, 1.0), mean_wait(a, c, m))
    np.testing.assert_array_equal(variability_factor(a, c, 1.0), np.ones_like(a))
    stable = a < c
    np.testing.assert_array_equal(mgc_decay(a[stable], c, m[stable], 1.0), (c - a[stable]) / m[stable])
    np.testing.assert_array_equal(mgc_waiting_cdf(0.3, a, c, m, 1.0), waiting_cdf(0.3, erlang_c(a, c), (c - a) / m))


@pytest.mark.parametrize("scv", [0.0, 0.5, 3.0])
def test_one_server_is_pollaczek_khinchine(scv):
    rho, m = 0.8, 2.0
    expected = rho * (1.0 + scv) * m / (2.0 * (1.0 - rho))  # λ E[S²] / (2 (1 − ρ))
    assert mgc_mean_wait(rho, 1, m, scv) == pytest.approx(expected, rel=1e-12)
    assert mg1_closed_forms(rho / m, m, scv)["mean_wait"] == pytest.approx(expected, rel=1e-12)
    assert variability_factor(rho, 1, scv) == pytest.approx((1.0 + scv) / 2.0, rel=1e-14)
    assert mgc_decay(rho, 1, m, scv) == pytest.approx(rho / expected, rel=1e-12)  # θ = P^W / W̄, P^W = ρ


def test_cosmetatos_interpolation_by_hand():
    # c = 4, ρ = 0.7: A = 3 (√24 − 2) / 64 = 0.1358896, F = A · 0.3 / 0.7 = 0.0582384, k = (1 + F)/2
    k = 0.5 * (1.0 + 3.0 * (math.sqrt(24.0) - 2.0) / 64.0 * 0.3 / 0.7)
    assert k == pytest.approx(0.5291192, abs=1e-7)
    assert variability_factor(2.8, 4, 0.0) == pytest.approx(k, rel=1e-14)  # M/D/4: K = k
    assert variability_factor(2.8, 4, 0.5) == pytest.approx(1.5 * k / (k + 0.5), rel=1e-14)  # 0.7712
    assert variability_factor(2.8, 4, 3.0) == pytest.approx(4.0 * k / (6.0 * k - 2.0), rel=1e-14)
    w_mm = erlang_c(2.8, 4) * 1.0 / 1.2
    assert mgc_mean_wait(2.8, 4, 1.0, 0.0) == pytest.approx(k * w_mm, rel=1e-14)


def test_light_traffic_keeps_the_deterministic_wait_below_erlang_c():
    # c = 16, ρ = 0.2: Cosmetatos' F = 0.42 · 0.8 / 0.2 > 1 would put M/D/c above M/M/c; k is capped at 1
    assert float(variability_factor(3.2, 16, 0.0)) == 1.0
    assert float(variability_factor(3.2, 16, 5.0)) == 1.0
    assert float(variability_factor(12.8, 16, 0.0)) < 1.0


@pytest.mark.parametrize("c", GRID_C)
@pytest.mark.parametrize("scv", [0.0, 0.3, 2.5])
def test_the_advertised_delay_is_continuous_increasing_and_its_slopes_are_exact(c, scv):
    a = np.linspace(0.01 * c, 1.25 * c, 400)
    wait, slope, d_scv = mgc_advertised_wait_and_slopes(a, c, 1.3, scv)
    assert np.all(np.isfinite(wait)) and np.all(np.diff(wait) > 0) and np.all(slope > 0)
    assert np.max(np.abs(np.diff(wait))) < 0.05 * max(1.0, float(wait.max()))  # no jump, including at ρ_clip
    h = 1e-6 * c
    fd = (mgc_advertised_wait(a + h, c, 1.3, scv) - mgc_advertised_wait(a - h, c, 1.3, scv)) / (2 * h)
    kinks = np.abs(a - 0.99 * c) < 2 * h  # ρ_clip: one-sided slopes differ in the last digits
    np.testing.assert_allclose(fd[~kinks], slope[~kinks], rtol=2e-5, atol=1e-12)
    hs = 1e-6
    fd_s = (mgc_advertised_wait(a, c, 1.3, scv + hs) - mgc_advertised_wait(a, c, 1.3, max(scv - hs, 0.0))) / (scv + hs - max(scv - hs, 0.0))
    np.testing.assert_allclose(fd_s, d_scv, rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(mgc_advertised_wait(a, c, 2.6, scv), 2.0 * wait, rtol=1e-13)  # linear in 1/μ


def test_mean_wait_derivatives_match_finite_differences():
    a, c, m, s = np.array([0.5, 3.0, 9.5]), np.array([1.0, 4.0, 12.0]), np.array([1.0, 0.7, 2.2]), np.array([0.0, 0.6, 2.0])
    w, dw_da, dw_dm, dw_ds = mgc_mean_wait_and_derivatives(a, c, m, s)
    np.testing.assert_allclose(w, mgc_mean_wait(a, c, m, s), rtol=1e-14)
    h = 1e-6
    np.testing.assert_allclose(dw_da, (mgc_mean_wait(a + h, c, m, s) - mgc_mean_wait(a - h, c, m, s)) / (2 * h), rtol=1e-6)
    np.testing.assert_allclose(dw_dm, (mgc_mean_wait(a, c, m + h, s) - mgc_mean_wait(a, c, m - h, s)) / (2 * h), rtol=1e-6)
    np.testing.assert_allclose(
        dw_ds, (mgc_mean_wait(a, c, m, s + h) - mgc_mean_wait(a, c, m, np.maximum(s - h, 0))) / (s + h - np.maximum(s - h, 0)), rtol=1e-5
    )
    with pytest.raises(ValueError, match="offered_load"):
        mgc_mean_wait_and_derivatives(5.0, 4.0, 1.0, 0.5)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="^scv"):
        mgc_mean_wait(1.0, 2, 1.0, -0.1)
    with pytest.raises(ValueError, match="^scv"):
        mgc_advertised_wait(1.0, 2, 1.0, np.nan)
    with pytest.raises(ValueError, match="^rho_clip"):
        mgc_advertised_wait(1.0, 2, 1.0, 0.5, rho_clip=1.0)
    assert np.isinf(mgc_mean_wait(2.0, 2, 1.0, 0.5)) and mgc_decay(2.5, 2, 1.0, 0.5) < 0  # unstable: W̄ = ∞, θ ≤ 0


# ---------------------------------------------------------------------------------------------
# The M/G/c event simulator against closed forms
# ---------------------------------------------------------------------------------------------
def _batch_se(x, batches=50):
    means = np.array([b.mean() for b in np.array_split(np.asarray(x, dtype=float), batches)])
    return means.std(ddof=1) / np.sqrt(batches)


def test_md1_matches_pollaczek_khinchine_and_erlangs_exact_waiting_law():
    res = simulate_mgc(0.7, ServiceLaw("deterministic", 1.0, 0.0), 1, 300_000, seed=4)
    closed = mg1_closed_forms(0.7, 1.0, 0.0)  # W̄ = 0.7 / (2 · 0.3) = 7/6
    assert closed["mean_wait"] == pytest.approx(7.0 / 6.0)
    assert abs(res.mean_wait - closed["mean_wait"]) < 5 * res.mean_wait_standard_error()
    assert abs(res.wait_probability - 0.7) < 5 * res.wait_probability_standard_error()
    grid = np.linspace(0.0, 8.0, 321)
    empirical = np.searchsorted(np.sort(res.waits), grid, side="right") / res.waits.size
    # the ECDF's largest error is at most a few batch standard errors of the atom
    assert np.max(np.abs(empirical - md1_wait_cdf(grid, 0.7, 1.0))) < 5 * _batch_se(res.waits > 0) + 2e-3
    # the two-moment law is the mean's, not the shape's: measured ≈ 0.06 here (docs/model.md §19.6)
    assert 0.02 < res.kolmogorov < 0.09 and res.kolmogorov < res.kolmogorov_mmc


def test_md1_exact_cdf_by_hand():
    # F(0) = 1 − ρ; F(x) = (1 − ρ) e^{ρx} for x < 1; F(1) = (1 − ρ) e^{ρ}
    np.testing.assert_allclose(md1_wait_cdf([0.0, 0.5, 1.0], 0.7, 1.0), [0.3, 0.3 * math.exp(0.35), 0.3 * math.exp(0.7)])
    with pytest.raises(ValueError, match="^w"):
        md1_wait_cdf(11.0, 0.7, 1.0)


def test_two_point_single_server_matches_pollaczek_khinchine():
    law = ServiceLaw("two_point", 2.0, 0.5)
    res = simulate_mgc(0.3, law, 1, 300_000, seed=6)  # ρ = 0.6
    closed = mg1_closed_forms(0.3, 2.0, 0.5)
    assert abs(res.mean_wait - closed["mean_wait"]) < 5 * res.mean_wait_standard_error()
    assert res.approx_mean_wait == pytest.approx(closed["mean_wait"], rel=1e-12)


@pytest.mark.parametrize(
    "law",
    [
        ServiceLaw("deterministic", 1.5, 0.0),
        ServiceLaw("two_point", 1.5, 0.5),
        ServiceLaw("two_point", 1.5, 3.0),
        ServiceLaw("lognormal", 1.5, 2.0),
        ServiceLaw("exponential", 1.5, 1.0),
    ],
)
def test_service_laws_have_their_mean_and_scv(law):
    n = 400_000
    x = law.sample(n, np.random.default_rng(1))
    assert np.all(x >= 0)
    if law.scv == 0:
        assert np.all(x == law.mean)
        return
    scv = x.var() / x.mean() ** 2
    # tolerances: 5 standard errors of the sample mean and of the SCV (over 100 independent batches)
    assert abs(x.mean() - law.mean) < 5 * x.std() / np.sqrt(n)
    batches = np.array([b.var() / b.mean() ** 2 for b in np.array_split(x, 100)])
    assert abs(scv - law.scv) < 5 * batches.std(ddof=1) / np.sqrt(batches.size)


def test_multi_server_errors_are_within_the_measured_table():
    res = simulate_mgc(0.8 * 8, ServiceLaw("deterministic", 1.0, 0.0), 8, 300_000, seed=2)
    assert abs(res.wait_probability - res.approx_wait_probability) < 0.05  # Erlang C's P^W: measured ≤ 0.03
    assert abs(res.approx_mean_wait / res.mean_wait - 1) < 0.1 < abs(res.erlang_mean_wait / res.mean_wait - 1)
    assert res.kolmogorov < res.kolmogorov_mmc


def test_service_law_errors_name_the_field():
    with pytest.raises(ValueError, match="^kind"):
        ServiceLaw("gamma", 1.0)
    with pytest.raises(ValueError, match="^scv"):
        ServiceLaw("deterministic", 1.0, 0.5)
    with pytest.raises(ValueError, match="^arrival_rate"):
        simulate_mgc(2.0, ServiceLaw("deterministic", 1.0, 0.0), 2)


# ---------------------------------------------------------------------------------------------
# Chunked prefill and the instance fields
# ---------------------------------------------------------------------------------------------
def base():
    return load_instance("paper_baseline")


def test_chunked_prefill_by_hand():
    inst = base()
    g = inst.prefill
    chunked = ChunkedPrefill(g, 512.0, 0.008)
    np.testing.assert_allclose(
        chunked([0.0, 1.0, 512.0, 513.0, 1846.0]), [0.0, g(1.0) + 0.008, g(512.0) + 0.008, g(513.0) + 0.016, g(1846.0) + 4 * 0.008]
    )
    served = inst.replace(serving=Serving(chunk_size=512.0, chunk_overhead=0.008))
    deep, long = inst.profile_ids.index("deep"), inst.request_ids.index("long")
    assert served.first_token_time[deep, long] == pytest.approx(g(4096 - 2250) + 4 * 0.008)
    assert served.service_time[deep, long] == pytest.approx(g(4096 - 2250) + 4 * 0.008 + 0.7)
    np.testing.assert_array_equal(served.saving, inst.saving)  # the compute saved is g's, not the schedule's
    assert evaluate(served).coverage_at_target < evaluate(inst).coverage_at_target


def test_an_instance_without_the_new_fields_is_unchanged():
    inst = base()
    same = inst.replace(serving=Serving(queue="mmc", decode_scv=0.7))  # Erlang C ignores the decode's SCV
    for name in ("first_token_time", "service_time", "concurrency"):
        np.testing.assert_array_equal(getattr(same, name), getattr(inst, name))
    a, b = evaluate(inst).to_dict(), evaluate(same).to_dict()
    b.pop("serving")
    assert a == b


def test_the_service_scv_and_the_waits_of_evaluate_by_hand():
    inst = base().replace(serving=Serving(queue="mgc", decode_scv=0.5))
    ev = evaluate(inst)
    act = ev.active
    p, a = inst.probabilities, ev.association[act]
    omega = p * a / (p * a).sum(axis=1, keepdims=True)  # ω_{s,q}
    mean = (omega * inst.service_time[act]).sum(axis=1)
    second = (omega * (inst.service_time[act] ** 2 + 0.5 * inst.decodes**2)).sum(axis=1)
    np.testing.assert_allclose(ev.mean_service[act], mean, rtol=1e-13)
    np.testing.assert_allclose(ev.service_scv[act], second / mean**2 - 1.0, rtol=1e-10)
    work = ev.utilization[act] * inst.concurrency[act]
    np.testing.assert_allclose(ev.mean_wait[act], mgc_mean_wait(work, inst.concurrency[act], mean, ev.service_scv[act]), rtol=1e-12)
    np.testing.assert_allclose(ev.decay[act], ev.wait_probability[act] / ev.mean_wait[act], rtol=1e-12)
    assert ev.fixed_point.converged and ev.fixed_point.method == "robust:newton"
    report = ev.to_dict()["serving"]
    assert report["queue"] == "mgc" and report["service_scv"]["deep"] == pytest.approx(ev.service_scv[2])


def test_unit_service_scv_evaluates_as_erlang_c():
    # one request type: C_S² = c_D² D² / (T + D)², so c_D² = ((T + D) / D)² gives C_S² = 1
    inst = base().with_probabilities({"short": 0.0, "long": 1.0})
    long = inst.request_ids.index("long")
    t_plus_d = inst.service_time[:, long]
    assert np.allclose(t_plus_d - inst.residual_prefill[:, long], 0.7)
    ratio = (t_plus_d[0] / 0.7) ** 2  # the same for every profile only if T is: use one active profile
    mix = {"none": 1.0}
    mgc = inst.replace(serving=Serving(queue="mgc", decode_scv=ratio))
    ev, ref = evaluate(mgc, mix), evaluate(inst, mix)
    assert ev.service_scv[0] == pytest.approx(1.0, abs=1e-12)
    assert ev.coverage_at_target == pytest.approx(ref.coverage_at_target, abs=1e-12)
    assert ev.mean_wait[0] == pytest.approx(ref.mean_wait[0], rel=1e-10)


def test_newton_sees_the_exact_jacobian_of_the_mgc_fixed_point(monkeypatch):
    captured = {}
    original = pipeline_module.solve_fixed_point

    def spy(fn, start, **kwargs):
        captured["fn"], captured["jacobian"] = fn, kwargs.get("jacobian")
        return original(fn, start, **kwargs)

    monkeypatch.setattr(pipeline_module, "solve_fixed_point", spy)
    inst = (
        base()
        .with_network(request_intensity=4.0)
        .replace(serving=Serving(queue="mgc", decode_scv=0.5, chunk_size=512.0, chunk_overhead=0.008))
    )
    ev = evaluate(inst)
    fn, jac = captured["fn"], captured["jacobian"]
    w = ev.advertised_wait[ev.active] * 1.3 + 0.01  # away from the operating point
    value, matrix = jac(w)
    np.testing.assert_allclose(value, fn(w), rtol=1e-13)
    h = 1e-6
    fd = np.column_stack([(fn(w + h * e) - fn(w - h * e)) / (2 * h) for e in np.eye(w.size)])
    np.testing.assert_allclose(matrix, fd, rtol=2e-5, atol=1e-8)


@pytest.mark.parametrize(
    "section,field",
    [
        ({"queue": "mg1"}, "serving.queue"),
        ({"queue": "mgc", "chunk_size": 0.0}, "serving.chunk_size"),
        ({"chunk_overhead": 0.01}, "serving.chunk_overhead"),
        ({"queue": "mgc", "decode_scv": -1.0}, "serving.decode_scv"),
        ({"queue": 3}, "serving.queue"),
        ({"chunk": 512}, "serving.chunk"),
    ],
)
def test_bad_serving_fields_name_their_field(section, field):
    data = instance_to_mapping(base())
    data["serving"] = section
    with pytest.raises(InstanceError) as err:
        instance_from_mapping(data)
    assert str(err.value).startswith(field)


def test_the_serving_section_may_give_only_the_queue_law():
    data = instance_to_mapping(base())
    data["serving"] = {"queue": "mgc"}
    inst = instance_from_mapping(data)
    assert inst.serving.mode == "colocated" and inst.queue_law == "mgc"
    assert instance_to_mapping(inst)["serving"] == {"mode": "colocated", "handoff_latency": 0.0, "queue": "mgc"}


@pytest.mark.parametrize("name", NAMES)
def test_the_benchmark_instances_are_the_generated_ones_and_round_trip(name, tmp_path):
    shipped = load_instance(INSTANCES / f"{name}.toml")
    assert instance_to_mapping(shipped) == instance_to_mapping(instance_from_mapping(instance_mappings()[name]))
    for suffix in (".toml", ".json"):
        path = tmp_path / f"copy{suffix}"
        write_instance(shipped, path)
        assert instance_to_mapping(load_instance(path)) == instance_to_mapping(shipped)


def test_the_simulator_serves_the_instance_law():
    inst = load_instance(INSTANCES / "serving_chunked.toml")
    ev = evaluate(inst)
    spec = SimulationSpec(horizon=30.0, warmup=5.0, service="instance", layout=LayoutSpec(mean_nodes=60.0, counts="exact"))
    res = simulate_network(inst, None, analytical_router(ev), spec, seed=2)
    served = res.node >= 0
    profile, kind = res.profile[served], res.request_type[served]
    np.testing.assert_allclose(res.prefill[served], inst.first_token_time[profile, kind])  # chunked prefill
    decode = res.service[served] - inst.first_token_time[profile, kind]  # D_q X, E X = 1, Var X = 0.5
    x = decode / inst.decodes[kind]
    assert abs(x.mean() - 1.0) < 5 * x.std() / np.sqrt(x.size)
    assert abs(x.var() - 0.5) < 0.1
    exact = inst.replace(serving=dataclasses.replace(inst.serving, decode_scv=0.0))
    flat = simulate_network(exact, None, analytical_router(evaluate(exact)), spec, seed=2)
    ok = flat.node >= 0
    np.testing.assert_allclose(flat.service[ok], exact.service_time[flat.profile[ok], flat.request_type[ok]])


def test_the_documented_queue_and_catalogue_sections_load():
    import re
    import tomllib
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "instances.md").read_text(encoding="utf-8")
    block = re.findall(r"```toml\n(.*?)```", doc, re.DOTALL)
    sections = tomllib.loads(next(b for b in block if "chunk_size" in b))
    data = instance_to_mapping(base())
    data.update(sections)
    inst = instance_from_mapping(data)
    assert inst.queue_law == "mgc" and inst.serving.chunk_size == 512 and inst.catalogue.bits == 8


def test_the_queue_law_benchmark_in_smoke_mode(tmp_path):
    from edgeprefix.benchmarks.accuracy.extensions.queue_and_catalogue import mgc_figure, mgc_rows, mgc_table

    rows = mgc_rows(customers=40_000, servers=(1, 4), loads=(0.7,))
    assert len(rows) == 6 and {r["law"] for r in rows} == {"deterministic", "two_point", "lognormal"}
    for r in rows:
        if r["law"] != "lognormal":  # the law beats plain Erlang C on the mean wait and the CDF
            assert abs(r["w_err_mgc"]) < abs(r["w_err_mmc"]) and r["ks_mgc"] < r["ks_mmc"]
    one = [r for r in rows if r["c"] == 1]  # c = 1: the law is Pollaczek–Khinchine, as is Allen–Cunneen
    assert all(r["w_err_mgc"] == pytest.approx(r["w_err_ac"], abs=1e-12) for r in one)
    text = mgc_table(rows)
    assert "deterministic: max |P^W err|" in text and text.count("\n") == len(rows) + 3
    mgc_figure(rows, tmp_path / "law.png")
    assert (tmp_path / "law.png").stat().st_size > 10_000


def test_a_grid_solve_on_the_chunked_instance():
    from edgeprefix.formulations.placement import placement_problem
    from edgeprefix.solvers.api import solve

    inst = load_instance(INSTANCES / "serving_chunked.toml")
    result = solve(placement_problem(inst), "grid", budget=None, resolution=10)
    again = evaluate(inst, result.x)
    assert result.success and again.stable and again.coverage_at_target == pytest.approx(result.coverage, abs=1e-9)
    assert result.coverage >= evaluate(inst).coverage_at_target - 1e-12
