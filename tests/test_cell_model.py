"""The cell-load queue model (docs/model.md §14): closed-form limits, plumbing, and the simulation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprefix.cli import main
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.cell import SECTORS, cell_load, standard_nodes
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network


@pytest.fixture(scope="module")
def calibrated():
    return load_instance("paper_calibrated")


def test_single_tier_is_the_voronoi_gamma_law():
    """One tier, one type: the ray work is exponential, so v = 1/K, γ = 2/√K, and the conditional mean is
    the Poisson–Voronoi one, M(v) = φ_V(πλv) (equal offsets: θ = 1, eq. (14.13))."""
    from edgeprefix.placement.model.cell import voronoi_mean

    lam = np.array([0.7])
    law = cell_load(lam, np.zeros((1, 1)), 2.0, np.array([[2.0]]))
    assert law.variance[0] == pytest.approx(1.0 / SECTORS, rel=5e-3)
    assert law.skewness[0] == pytest.approx(2.0 / np.sqrt(SECTORS), rel=2e-2)
    v = np.array([[[0.0, 0.3, 1.0, 2.5]]])
    np.testing.assert_allclose(law.conditional_mean(v)[0, 0], voronoi_mean(np.pi * lam[0] * v[0, 0])[0], rtol=5e-3)


def test_equal_biases_give_one_law_for_every_tier():
    """Nearest routing: every tier's region is a Poisson–Voronoi cell of the superposition."""
    lam = np.array([0.45, 0.35, 0.2])
    law = cell_load(lam, np.zeros((3, 2)), 2.0, np.array([[1.0, 2.0], [0.5, 1.5], [0.3, 0.9]]))
    np.testing.assert_allclose(law.variance, 1.0 / SECTORS, rtol=5e-3)


def test_standard_nodes_are_the_bin_centroids_of_the_pearson_law():
    """Node j is E[Z | Z in the j-th of J equal-probability bins] (eq. (14.6)), checked by quadrature."""
    from scipy import integrate, stats

    z = standard_nodes(np.array([0.0, 0.5, 2.0]), 8)
    np.testing.assert_allclose(z.mean(axis=1), 0.0, atol=1e-12)
    assert np.all(z.var(axis=1) < 1.0) and np.all(np.diff(z, axis=1) > 0)
    for row, gamma in ((1, 0.5), (2, 2.0)):
        k = 4.0 / gamma**2
        law = stats.gamma(k)
        edges = law.ppf(np.linspace(0.0, 1.0, 9))
        centroids = [
            8 * integrate.quad(lambda g: (g - k) / np.sqrt(k) * law.pdf(g), lo, hi, epsabs=1e-13)[0]
            for lo, hi in zip(edges[:-1], edges[1:])
        ]
        np.testing.assert_allclose(z[row], centroids, atol=1e-8)
    normal = stats.norm.ppf(np.linspace(0.0, 1.0, 9))
    expected = 8 * (stats.norm.pdf(normal[:-1]) - stats.norm.pdf(normal[1:]))
    np.testing.assert_allclose(z[0], expected, atol=1e-12)


def test_meanfield_is_the_default_and_unchanged(calibrated):
    base = evaluate(calibrated)
    named = evaluate(calibrated, queue_model="meanfield")
    assert base.queue_model == "meanfield"
    assert named.coverage() == base.coverage()
    np.testing.assert_array_equal(named.coverage_by_pair(), base.coverage_by_pair())


def test_cell_keeps_the_operating_point_and_lowers_heavy_load_coverage(calibrated):
    mf = evaluate(calibrated)
    cell = evaluate(calibrated, queue_model="cell")
    np.testing.assert_array_equal(cell.advertised_wait, mf.advertised_wait)  # same routing equilibrium
    np.testing.assert_array_equal(cell.association, mf.association)
    assert cell.coverage_queue_free() == mf.coverage_queue_free()
    assert cell.coverage() < mf.coverage() - 0.1  # Λ = 3: the per-node load spread costs > 0.1
    assert 0.0 < cell.coverage() <= cell.max_coverage <= 1.0


def test_light_load_limit_is_the_mean_field(calibrated):
    light = calibrated.with_network(request_intensity=0.05)
    for policy in ("load_aware", "prefix", "nearest"):
        assert evaluate(light, policy=policy, queue_model="cell").coverage() == pytest.approx(
            evaluate(light, policy=policy).coverage(), abs=2e-3
        )


def test_cell_coverage_is_monotone_in_tau_and_smooth_in_the_mix(calibrated):
    ev = evaluate(calibrated, queue_model="cell")
    curve = ev.coverage(np.linspace(0.2, 3.0, 15))
    assert np.all(np.diff(curve) >= -1e-3)  # radial quadrature error (docs/model.md §14)
    assert ev.ttft_quantile(0.4) == pytest.approx(float(np.interp(0.4, curve, np.linspace(0.2, 3.0, 15))), abs=0.1)
    h = 1e-3
    base = np.array([0.45, 0.35, 0.2])
    d = np.array([1.0, -1.0, 0.0])
    f = [evaluate(calibrated, base + k * h * d, queue_model="cell").coverage() for k in (-1, 0, 1)]
    assert abs(f[2] - 2 * f[1] + f[0]) < 5e-5  # no jumps: second difference at the scale of h²


def test_unknown_queue_model_is_one_clear_error(calibrated, capsys):
    with pytest.raises(ValueError, match="queue_model"):
        evaluate(calibrated, queue_model="exact")
    with pytest.raises(ValueError, match="queue_model"):
        placement_problem(calibrated, queue_model="exact")
    assert main(["evaluate", "--queue-model", "exact"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--queue-model" in err[0]


def test_json_echoes_the_queue_model(capsys):
    assert main(["evaluate", "paper_calibrated", "--queue-model", "cell", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queue_model"] == "cell"
    assert out["coverage"] == pytest.approx(evaluate(load_instance("paper_calibrated"), queue_model="cell").coverage())
    assert main(["solve", "paper_calibrated", "--queue-model", "cell", "--budget", "6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queue_model"] == "cell"
    assert (
        main(
            [
                "plan-density",
                "paper_calibrated",
                "--reliability",
                "0.6",
                "--mix",
                "none=0.45,shallow=0.35,deep=0.2",
                "--queue-model",
                "cell",
                "--json",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    assert plan["queue_model"] == "cell" and plan["coverage"] >= 0.6


@pytest.mark.slow
def test_cell_matches_the_network_simulation_where_the_mean_field_does_not(calibrated):
    """Λ = 3, load-aware (Theorem 1's tier rule): the mean field is > 0.1 too high; the cell
    model is within 0.015 + 2 SE of the simulation (4 networks of 1000 nodes)."""
    spec = SimulationSpec(horizon=80.0, warmup=60.0, layout=LayoutSpec(mean_nodes=1000.0, counts="exact"))
    mf = evaluate(calibrated)
    cell = evaluate(calibrated, queue_model="cell")
    seeds = np.random.SeedSequence(7).spawn(4)
    covs = [simulate_network(calibrated, None, analytical_router(mf), spec, seed=np.random.default_rng(s)).coverage(0.8) for s in seeds]
    sim, se = float(np.mean(covs)), float(np.std(covs, ddof=1) / 2.0)
    assert abs(cell.coverage() - sim) <= 0.015 + 2.0 * se
    assert mf.coverage() - sim > 0.1


def test_simulation_objective_uses_common_random_numbers(calibrated):
    """Scoring a mix twice on the fixed seed set gives the same number; another mix differs."""
    from edgeprefix.formulations.simulated import SimulationSettings

    settings = SimulationSettings(seeds=(3,), nodes=60.0, horizon=10.0, warmup=5.0)
    problem = placement_problem(calibrated.with_network(request_intensity=2.0), simulation=settings)
    a = problem.score(np.array([0.45, 0.35, 0.2])).coverage
    assert a == problem.score(np.array([0.45, 0.35, 0.2])).coverage
    assert 0.0 < a < 1.0
    assert problem.score(np.array([0.8, 0.0, 0.2])).coverage != a


def test_solve_objective_simulation_cli(capsys):
    assert (
        main(
            [
                "solve",
                "paper_calibrated",
                "--objective",
                "simulation",
                "--method",
                "grid",
                "--resolution",
                "5",
                "--sim-seeds",
                "0",
                "--sim-nodes",
                "60",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["scored_by"] == "simulation" and out["feasible"]
    assert main(["solve", "--objective", "oracle"]) == 2
    assert "--objective" in capsys.readouterr().err


def test_validation_benchmark_smoke():
    """One small cell of the benchmark: structure, and the control variate's estimate is a coverage."""
    from edgeprefix.benchmarks.accuracy.cell.cell_validation import benchmark_case, validate_case

    rows = validate_case(
        benchmark_case("paper_calibrated"), se_target=0.05, max_reps=3, nodes=100.0, fractions=(0.35,), policies=("nearest",)
    )
    (row,) = rows
    assert {"intensity", "policy", "simulated", "simulated_se", "meanfield", "cell"} <= set(row)
    assert 0.0 < row["simulated"] < 1.0 and row["replications"] == 3
    assert row["cell"] < row["meanfield"]


def test_validate_json_has_the_coverage_table(capsys):
    assert (
        main(
            [
                "validate",
                "paper_calibrated",
                "--intensities",
                "2",
                "--samples",
                "2000",
                "--customers",
                "500",
                "--nodes",
                "60",
                "--horizon",
                "6",
                "--warmup",
                "3",
                "--replications",
                "1",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    table = report["coverage_table"]
    assert [row["policy"] for row in table] == ["load_aware", "prefix", "nearest"]
    for row in table:
        base = {"intensity", "policy", "simulated", "simulated_se", "meanfield", "cell"}
        online = {"online", "online_se", "online_predicted"}  # the online router's columns (docs/model.md §11)
        assert set(row) == base | online
        assert (row["online"] is not None) == (row["policy"] == "load_aware")  # the online router runs on load-aware rows
        assert row["cell"] < row["meanfield"]
    load_aware = next(r for r in report["coverage"] if r["policy"] == "load_aware")
    assert 0.0 < load_aware["online"] <= 1.0  # the online router ran on the same networks


def test_batched_evaluation_carries_the_cell_model():
    """evaluate_batch and score_many batch the (mean-field) fixed point under the cell model too."""
    from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
    from edgeprefix.placement.model.batch import evaluate_batch

    inst = load_benchmark("medium_forest")
    rng = np.random.default_rng(3)
    mixes = rng.dirichlet(np.ones(len(inst.profiles)), size=4)
    mixes[:, inst.concurrency < 1] = 0.0
    mixes /= mixes.sum(axis=1, keepdims=True)
    batch = evaluate_batch(inst, mixes, queue_model="cell")
    assert not batch.fallback.any()
    singles = [evaluate(inst, m, queue_model="cell").coverage() for m in mixes]
    np.testing.assert_allclose(batch.coverage, singles, atol=1e-9)
    assert all(ev.queue_model == "cell" for ev in batch.evaluations)
    mean_field = evaluate_batch(inst, mixes).coverage
    assert np.all(batch.coverage < mean_field)  # the load spread costs coverage at this load
    problem = placement_problem(inst, queue_model="cell")
    scores = problem.score_many(list(mixes))
    np.testing.assert_allclose([s.coverage for s in scores], singles, atol=1e-9)


def test_voronoi_mean_is_the_poisson_voronoi_conditional_mean():
    """φ_V(t) = λ E[|C| | x ∈ C] at t = πλ|x|² (eq. (14.12)): quadrature of the two-point void probability."""
    from numpy.polynomial.laguerre import laggauss
    from numpy.polynomial.legendre import leggauss

    from edgeprefix.placement.model.cell import voronoi_mean

    radial, radial_w = leggauss(160)
    angle, angle_w = leggauss(160)

    def exact(t):  # λ = 1, nucleus at 0, x on the axis; y ∈ C iff no point in D(y, |y|), given none in D(x, |x|)
        r = np.sqrt(t / np.pi)
        top = max(4.0, 2.5 * r + 2.5)
        rr, wr = 0.5 * top * (radial + 1), 0.5 * top * radial_w
        th, wt = np.pi * (angle + 1), np.pi * angle_w
        y = np.stack([rr[:, None] * np.cos(th)[None, :], rr[:, None] * np.sin(th)[None, :]], axis=-1)
        r1, r2 = np.linalg.norm(y, axis=-1), r
        d = np.linalg.norm(y - np.array([r, 0.0]), axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            a1 = np.clip((d**2 + r1**2 - r2**2) / (2 * d * r1), -1, 1)
            a2 = np.clip((d**2 + r2**2 - r1**2) / (2 * d * r2), -1, 1)
            lens = (
                r1**2 * np.arccos(a1)
                + r2**2 * np.arccos(a2)
                - 0.5 * np.sqrt(np.maximum((-d + r1 + r2) * (d + r1 - r2) * (d - r1 + r2) * (d + r1 + r2), 0.0))
            )
        lens = np.where(d <= np.abs(r1 - r2), np.pi * np.minimum(r1, r2) ** 2, lens)
        return float((np.exp(-(np.pi * r1**2 - lens)) * rr[:, None] * wr[:, None] * wt[None, :]).sum())

    for k in (8, 15, 32):  # table nodes t = 36 (k/64)²: the stored values; between nodes the interpolation
        t = 36.0 * (k / 64) ** 2
        assert voronoi_mean(np.array(t))[0] == pytest.approx(exact(t), abs=1e-4)  # the test rule (160²) is within 1e-4
    assert voronoi_mean(np.array(0.5))[0] == pytest.approx(exact(0.5), abs=1e-3)
    nodes, weights = laggauss(60)
    assert float(weights @ voronoi_mean(nodes)[0]) == pytest.approx(1.2802, abs=5e-4)  # 1 + Var of the cell area


def test_equal_offsets_take_the_voronoi_conditional_mean():
    """θ = 1 when every tier has the same offset for a type (eq. (14.13)); strong bias leaves the closure."""
    from edgeprefix.placement.model.cell import voronoi_weight

    lam = np.array([0.45, 0.35, 0.2])
    np.testing.assert_allclose(voronoi_weight(lam, np.zeros((3, 2))), 1.0)
    assert np.all(voronoi_weight(lam, np.array([[0.0, 0.0], [5.0, 5.0], [10.0, 10.0]])) < 1e-3)


def test_the_mixes_of_a_batch_share_one_cell_call():
    """The batch's cell coverage is one call with the mixes' tiers side by side (``groups``): row for row
    the one-mix values, also with different active sets and under nearest routing."""
    from edgeprefix.benchmarks.optimisers.compare_runs import load_benchmark
    from edgeprefix.placement.model.batch import evaluate_batch

    inst = load_benchmark("mooncake_large")
    rng = np.random.default_rng(5)
    mixes = rng.dirichlet(np.ones(len(inst.profiles)), size=3)
    mixes[0, :5] = 0.0
    mixes[2, 7:] = 0.0
    mixes /= mixes.sum(axis=1, keepdims=True)
    for policy in ("load_aware", "nearest"):
        batch = evaluate_batch(inst, mixes, policy, queue_model="cell")
        singles = [evaluate(inst, m, policy, queue_model="cell").coverage() for m in mixes]
        np.testing.assert_allclose(batch.coverage, singles, atol=1e-9)
        assert len(set(np.round(batch.coverage, 6))) == 3


@pytest.mark.parametrize("policy", ["load_aware", "prefix", "nearest"])
def test_quadrature_is_within_its_documented_error(monkeypatch, calibrated, policy):
    """32 ℓ nodes, 16 radial nodes, 24 load bins, 10 variance nodes vs (256, 96, 128, 48): ≤ 2.1e-3 (docs/model.md §14)."""
    import edgeprefix.placement.model.cell as cell_module

    inst = calibrated.with_network(request_intensity=3.3)
    mf = evaluate(inst, None, policy)
    taus = (0.4, 0.8, 1.6)

    def coverages():
        ev = evaluate(inst, None, policy, queue_model="cell", warm_start=mf.advertised_wait)
        return np.array([ev.coverage(t) for t in taus])

    default = coverages()
    for name, value in (("RAY_NODES", 256), ("RADIAL_NODES", 96), ("LOAD_NODES", 128), ("LTV_NODES", 48)):
        monkeypatch.setattr(cell_module, name, value)
    reference = coverages()
    assert np.max(np.abs(default - reference)) <= 2.1e-3
    assert np.max(np.abs(default - reference)) > 0.0  # the rules do differ
