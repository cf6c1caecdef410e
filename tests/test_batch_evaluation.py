"""Batched evaluation (docs/model.md §16) against one mix at a time, and its wiring into the solvers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.errors import MixError
from edgeprefix.placement.model import batch as batch_module
from edgeprefix.placement.model.batch import BATCH_METHOD, evaluate_batch
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import default_instance, load_instance
from edgeprefix.placement.model.spatial import AnalyticKernel
from edgeprefix.solvers import solve
from edgeprefix.solvers.grid import feasible_lattice
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.tracking import StopSearch, Tracker

INSTANCES = Path(__file__).resolve().parents[1] / "benchmarks" / "instances"
TOL = 1e-9  # the fixed point's tolerance on W̄ (seconds)


def random_mixes(instance, count: int, seed: int, zeros: float = 0.3) -> np.ndarray:
    """Dirichlet mixes with some shares set to zero (mixed supports in one batch), on profiles with c_s ≥ 1."""
    rng = np.random.default_rng(seed)
    allowed = instance.concurrency >= 1
    mixes = rng.dirichlet(np.ones(len(instance.profiles)), size=count) * allowed
    mixes[rng.random(mixes.shape) < zeros] = 0.0
    mixes[:, int(np.argmax(allowed))] += 1e-3  # never all zero
    return mixes / mixes.sum(axis=1, keepdims=True)


def assert_same_as_single(instance, mixes, policy="load_aware", **kwargs):
    batch = evaluate_batch(instance, mixes, policy, **kwargs)
    assert len(batch) == len(mixes)
    for mix, ev, cov in zip(mixes, batch.evaluations, batch.coverage):
        single = evaluate(instance, mix, policy, **kwargs)
        assert cov == pytest.approx(single.coverage(), abs=10 * TOL)
        assert ev.coverage() == pytest.approx(cov, abs=1e-14)  # the Evaluation agrees with the batch's own number
        np.testing.assert_array_equal(ev.active, single.active)
        np.testing.assert_allclose(ev.advertised_wait, single.advertised_wait, rtol=0, atol=10 * TOL)
        np.testing.assert_allclose(ev.association, single.association, rtol=0, atol=10 * TOL)
        np.testing.assert_allclose(ev.utilization, single.utilization, rtol=1e-8, atol=0)
        np.testing.assert_allclose(ev.wait_probability, single.wait_probability, rtol=1e-7, atol=1e-12)
        assert ev.stable == single.stable and ev.capacity_condition == single.capacity_condition
        if single.fixed_point is not None:
            assert ev.fixed_point.converged and ev.fixed_point.residual <= TOL * max(1.0, np.nanmax(np.abs(ev.advertised_wait)))
    return batch


@pytest.mark.parametrize("policy", ["load_aware", "prefix", "nearest"])
def test_paper_baseline_lattice_matches_single_evaluations(policy):
    instance = default_instance()
    points = feasible_lattice(placement_problem(instance).constraints, 10)
    batch = assert_same_as_single(instance, points, policy)
    assert not batch.fallback.any()


def test_mixed_supports_on_medium_forest_match_and_follow_the_single_iterates():
    instance = load_instance(INSTANCES / "medium_forest.toml")
    mixes = random_mixes(instance, 60, seed=1)
    batch = assert_same_as_single(instance, mixes)
    for mix, ev in zip(mixes, batch.evaluations):
        assert ev.fixed_point.method == BATCH_METHOD
        single = evaluate(instance, mix)
        # the same Newton iterates: the same number of map evaluations as the single-mix solver
        assert ev.fixed_point.evaluations == single.fixed_point.evaluations


def test_quadrature_path_at_alpha_2_5(monkeypatch):
    monkeypatch.setattr(batch_module, "BATCH_QUADRATURE", True)  # the folded layout, off by default
    instance = synthetic_instance(6, 5, alpha=2.5, seed=3)
    batch = assert_same_as_single(instance, random_mixes(instance, 12, seed=2))
    assert batch.route == "batched"


def test_alpha_other_than_2_runs_one_mix_at_a_time_and_says_so():
    instance = synthetic_instance(6, 5, alpha=3.5, seed=3)
    mixes = random_mixes(instance, 4, seed=2)
    batch = evaluate_batch(instance, mixes)
    assert batch.fallback.all() and batch.route.startswith("loop: α ≠ 2")
    for mix, cov in zip(mixes, batch.coverage):
        assert cov == evaluate(instance, mix).coverage()
    assert evaluate_batch(default_instance(), random_mixes(default_instance(), 3, seed=1)).route == "batched"


def test_many_servers_and_warm_starts():
    inst = default_instance()
    big = inst.replace(gpu=dataclasses.replace(inst.gpu, memory=1e5))  # c_s ~ 1e5: the O(1) Erlang B
    mixes = random_mixes(big, 10, seed=4)
    assert_same_as_single(big, mixes)
    warm = evaluate(inst, mixes[0]).advertised_wait
    assert_same_as_single(inst, mixes, warm_start=np.nan_to_num(warm))


def test_unstable_mixes_are_reported_like_the_single_path():
    instance = default_instance().with_network(request_intensity=6.0)  # heavy load: some mixes overload a tier
    mixes = random_mixes(instance, 30, seed=5, zeros=0.5)
    batch = assert_same_as_single(instance, mixes)
    assert any(not ev.stable for ev in batch.evaluations) and any(ev.stable for ev in batch.evaluations)


def test_a_failed_batched_iteration_falls_back_to_the_robust_solver(monkeypatch):
    instance = default_instance()
    mixes = random_mixes(instance, 6, seed=6)
    monkeypatch.setattr(batch_module, "MAX_STEPS", 0)  # no Newton step allowed: every mix falls back
    batch = evaluate_batch(instance, mixes)
    assert batch.fallback.all()
    for mix, ev, cov in zip(mixes, batch.evaluations, batch.coverage):
        single = evaluate(instance, mix)
        assert ev.fixed_point.method == single.fixed_point.method != BATCH_METHOD
        assert cov == single.coverage()  # the single-mix robust solver, bit for bit


def test_other_kernels_and_the_damped_method_run_one_mix_at_a_time():
    instance = default_instance()
    mixes = random_mixes(instance, 3, seed=7)

    @dataclasses.dataclass(frozen=True)
    class Kernel(AnalyticKernel):
        pass

    for kwargs in ({"kernel": Kernel()}, {"method": "damped"}):
        batch = evaluate_batch(instance, mixes, **kwargs)
        assert batch.fallback.all()
        for mix, cov in zip(mixes, batch.coverage):
            assert cov == evaluate(instance, mix, **kwargs).coverage()


def test_bad_input_names_the_row_and_the_field():
    instance = default_instance()
    mixes = random_mixes(instance, 3, seed=8)
    mixes[1, 0] += 0.5
    with pytest.raises(MixError, match=r"mixes\[1\]: shares must sum to 1"):
        evaluate_batch(instance, mixes)
    with pytest.raises(ValueError, match="warm_start: expected shape"):
        evaluate_batch(instance, random_mixes(instance, 3, seed=8), warm_start=np.zeros(7))
    with pytest.raises(ValueError, match="target"):
        evaluate_batch(instance, random_mixes(instance, 3, seed=8), target=-1.0)


def test_tracker_batches_respect_budget_and_callback():
    problem = placement_problem(load_instance(INSTANCES / "medium_forest.toml"))
    points = feasible_lattice(problem.constraints, 10)[:20]
    tracker = Tracker(problem, budget=7)
    scores = tracker.evaluate_many(points)
    assert len(scores) == 7 and tracker.nfev == 7  # only what the budget allows
    with pytest.raises(StopSearch) as stop:
        tracker.evaluate_many(points)
    assert stop.value.status is Status.BUDGET_EXHAUSTED
    seen = []
    tracker = Tracker(problem, budget=None, callback=lambda progress: seen.append(progress.nfev) or progress.nfev == 5)
    with pytest.raises(StopSearch) as stop:
        tracker.evaluate_many(points)
    assert stop.value.status is Status.CALLBACK_STOP and seen == [1, 2, 3, 4, 5] and tracker.nfev == 5
    one_by_one = Tracker(problem, budget=None)
    for p in points:
        one_by_one.evaluate(p)
    together = Tracker(problem, budget=None)
    together.evaluate_many(points)
    np.testing.assert_allclose(together.values, one_by_one.values, rtol=0, atol=10 * TOL)


def test_batched_solvers_find_what_the_unbatched_ones_find():
    problem = placement_problem(load_instance(INSTANCES / "medium_forest.toml"))

    class OneByOne:  # the problem without score_many: the tracker scores point by point
        def __getattr__(self, name):
            if name == "score_many":
                raise AttributeError(name)
            return getattr(problem, name)

    for method, budget, options in (("grid", None, {"resolution": 8}), ("random", 40, {}), ("qmc", 40, {})):
        batched = solve(problem, method, budget=budget, seed=3, **options)
        plain = solve(OneByOne(), method, budget=budget, seed=3, **options)
        np.testing.assert_array_equal(batched.points, plain.points)  # the same proposals
        np.testing.assert_allclose(batched.values, plain.values, rtol=0, atol=10 * TOL)
        np.testing.assert_array_equal(batched.x, plain.x)


def test_random_search_proposals_do_not_depend_on_the_chunk():
    problem = placement_problem(default_instance())
    a = solve(problem, "random", budget=30, seed=2, chunk=7)
    b = solve(problem, "random", budget=30, seed=2, chunk=64)
    np.testing.assert_array_equal(a.points, b.points)
    with pytest.raises(ValueError, match="random option chunk must be a positive integer"):
        solve(problem, "random", budget=3, chunk=0)
