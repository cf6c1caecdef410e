"""Known-optimum instances: classical geographic caching as an exact special case (docs/model.md §18)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from edgeprefix.benchmarks.optimisers.classical import (
    ClassicalSpec,
    classical_instance,
    closed_form_coverage,
    convex_optimum,
    coverage_of_marginals,
    mix_with_marginals,
    popularity,
    suite,
    water_filling,
)
from edgeprefix.cli import main
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance


def _random_feasible_mix(instance, rng: np.random.Generator) -> np.ndarray:
    x = rng.dirichlet(np.full(len(instance.profiles), 0.5))
    x[instance.concurrency < 1] = 0.0
    x /= x.sum()
    fb = instance.fallback_index
    if fb is not None:
        x *= 1.0 - instance.placement.fallback_min
        x[fb] += instance.placement.fallback_min
    return x


SPECS = [
    ClassicalSpec(6, 2, zipf=0.9, reach=2.0),
    ClassicalSpec(5, 2, zipf=1.1, reach=3.0, fallback_min=0.2),
    ClassicalSpec(6, 2, zipf=0.7, reach=2.5, sizes=(1, 2, 3, 1, 2, 3), memory_budget=0.5),
    ClassicalSpec(5, 2, zipf=0.8, reach=3.0, max_share=0.12),
    ClassicalSpec(6, 2, zipf=0.8, reach=3.0, sizes=(1, 2, 3, 1, 2, 3), node_capacity=4, fallback_min=0.1),
]


@pytest.mark.parametrize("alpha, tol", [(2.0, 1e-12), (1.5, 1e-7), (2.7, 1e-7), (3.5, 1e-7)])
@pytest.mark.parametrize(
    "spec", SPECS, ids=lambda s: f"J{s.files}K{s.cache}" + ("cap" if s.max_share else "") + ("mem" if s.memory_budget else "")
)
def test_evaluate_equals_the_closed_form_at_random_mixes(spec: ClassicalSpec, alpha: float, tol: float) -> None:
    inst = classical_instance(ClassicalSpec(**{**spec.__dict__, "alpha": alpha}))
    rng = np.random.default_rng(7)
    for _ in range(4):
        x = _random_feasible_mix(inst, rng)
        ev = evaluate(inst, x)
        assert ev.stable and ev.fixed_point.converged
        assert abs(ev.coverage_at_target - closed_form_coverage(inst, x)) <= tol
        assert abs(ev.coverage_queue_free(inst.placement.target) - ev.coverage_at_target) <= tol  # queueing vanishes


@pytest.mark.parametrize(
    "spec", SPECS, ids=lambda s: f"J{s.files}K{s.cache}" + ("cap" if s.max_share else "") + ("mem" if s.memory_budget else "")
)
def test_known_optimum_is_attained_and_not_beaten(spec: ClassicalSpec) -> None:
    inst = classical_instance(spec)
    meta = inst.metadata
    best = meta["known_optimum"]
    mix = inst.mix_vector(meta["optimal_mix"])
    ev = evaluate(inst, mix)
    assert ev.coverage_at_target == pytest.approx(best, abs=1e-9)
    a = np.array([meta["optimal_marginals"][f"f{j}"] for j in range(spec.files)])
    assert coverage_of_marginals(inst.probabilities, a, spec.reach) == pytest.approx(best, abs=1e-12)
    # the mix meets every linear constraint of the placement problem
    from edgeprefix.formulations.placement import placement_problem

    cons = placement_problem(inst).constraints
    assert np.all(cons.A_ub @ mix <= cons.b_ub + 1e-9) and np.allclose(cons.A_eq @ mix, cons.b_eq, atol=1e-12)
    assert np.all(mix <= np.nan_to_num(cons.upper, posinf=1.0) + 1e-12)
    rng = np.random.default_rng(3)
    for _ in range(40):
        x = _random_feasible_mix(inst, rng)
        if np.all(cons.A_ub @ x <= cons.b_ub + 1e-12) and np.all(x <= np.nan_to_num(cons.upper, posinf=1.0)):
            assert closed_form_coverage(inst, x) <= best + 1e-12


def test_water_filling_meets_its_kkt_conditions_and_the_convex_program() -> None:
    p = popularity(8, 0.9)
    res = water_filling(p, 2.5, 3.0)
    a = res.marginals
    assert a.sum() == pytest.approx(3.0, abs=1e-12) and np.all((a >= 0) & (a <= 1))
    slope = 2.5 * p * np.exp(-2.5 * a)
    free = (a > 1e-9) & (a < 1 - 1e-9)
    assert free.sum() >= 2 and np.ptp(slope[free]) <= 1e-9  # equal marginal gain on free files
    assert np.all(slope[a >= 1 - 1e-9] >= slope[free].min() - 1e-9)  # full files gain more
    assert np.all(slope[a <= 1e-9] <= slope[free].max() + 1e-9)  # empty files gain less
    for spec in (SPECS[1], SPECS[2]):
        inst = classical_instance(spec)
        value, pi = convex_optimum(inst)
        assert value == pytest.approx(inst.metadata["known_optimum"], abs=1e-8)


def test_budgeted_water_filling_binds_the_budget_with_a_positive_multiplier() -> None:
    p = popularity(6, 0.7)
    w = np.array([1, 2, 3, 1, 2, 3], dtype=float)
    free = water_filling(p, 2.5, 2.0)
    tight = water_filling(p, 2.5, 2.0, weights=w, budget=0.8 * float(w @ free.marginals))
    assert tight.eta > 0 and float(w @ tight.marginals) == pytest.approx(0.8 * float(w @ free.marginals), rel=1e-9)
    assert tight.value < free.value
    with pytest.raises(ValueError, match="below the least weight"):
        water_filling(p, 2.5, 2.0, weights=w, budget=1.0)


@pytest.mark.parametrize("seed", range(5))
def test_systematic_sampling_has_the_requested_marginals(seed: int) -> None:
    rng = np.random.default_rng(seed)
    files, cache = 9, 4
    a = water_filling(rng.dirichlet(np.ones(files)), float(rng.uniform(0.5, 5.0)), float(cache)).marginals
    mix = mix_with_marginals(a, cache)
    assert len(mix) <= files + 1 and sum(mix.values()) == pytest.approx(1.0, abs=1e-12)
    got = np.zeros(files)
    for subset, share in mix.items():
        assert len(set(subset)) == cache
        got[list(subset)] += share
    assert np.allclose(got, a, atol=1e-12)
    with pytest.raises(ValueError, match="sum to K"):
        mix_with_marginals(0.5 * a, cache)


def test_capped_optimum_is_global_against_a_dense_search() -> None:
    inst = classical_instance(SPECS[3])
    best = inst.metadata["known_optimum"]
    # every pair of profiles at the cap plus the remainder spread evenly: a structured search
    ids = inst.profile_ids
    cap = SPECS[3].max_share
    values = []
    for combo in itertools.combinations(range(len(ids)), int(1 / cap)):
        x = np.zeros(len(ids))
        x[list(combo)] = cap
        rest = 1 - x.sum()
        x[[i for i in range(len(ids)) if i not in combo]] += rest / (len(ids) - len(combo))
        if x.max() <= cap + 1e-12:
            values.append(closed_form_coverage(inst, x))
    assert values and max(values) <= best + 1e-12


def test_metadata_round_trips_through_the_file(tmp_path) -> None:
    inst = classical_instance(ClassicalSpec(5, 2, zipf=1.0, reach=2.0, fallback_min=0.1))
    path = tmp_path / "c.toml"
    from edgeprefix.placement.model.instance import write_instance

    write_instance(inst, path)
    back = load_instance(path)
    assert back.metadata["known_optimum"] == inst.metadata["known_optimum"]
    assert back.metadata["optimal_mix"] == pytest.approx(inst.metadata["optimal_mix"])
    assert back.metadata["spec"]["fallback_min"] == 0.1


def test_the_suite_spans_6_to_300_profiles() -> None:
    sizes = [len(classical_instance(spec).profiles) for spec in suite(0)]
    assert sizes == [6, 15, 45, 120, 300]


def test_large_instance_evaluates_to_its_optimum() -> None:
    inst = classical_instance(suite(0)[-1])
    ev = evaluate(inst, inst.metadata["optimal_mix"])
    assert ev.coverage_at_target == pytest.approx(inst.metadata["known_optimum"], abs=1e-9)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"files": 1, "cache": 1}, "files"),
        ({"files": 5, "cache": 5}, "cache"),
        ({"files": 5, "cache": 2, "reach": 0.0}, "reach"),
        ({"files": 5, "cache": 2, "sizes": (1, 2)}, "sizes"),
        ({"files": 5, "cache": 2, "node_capacity": 1.0}, "node_capacity"),
        ({"files": 40, "cache": 5}, "C(J, K)"),
    ],
)
def test_bad_specs_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("(", r"\(").replace(")", r"\)")):
        ClassicalSpec(**kwargs)


def test_cli_writes_the_instance_and_reports_the_optimum(tmp_path, capsys) -> None:
    out = tmp_path / "classical.toml"
    code = main(
        ["benchmark-instance", "classical", "--files", "6", "--cache", "2", "--zipf", "0.9", "--reach", "2", "--out", str(out), "--json"]
    )
    captured = capsys.readouterr()
    assert code == 0 and f"wrote {out}" in captured.err
    payload = json.loads(captured.out)
    assert payload["profiles"] == 15 and payload["optimum_method"] == "water-filling"
    inst = load_instance(out)
    assert inst.metadata["known_optimum"] == pytest.approx(payload["known_optimum"], abs=1e-15)
    code = main(["benchmark-instance", "classical", "--files", "6", "--cache", "6"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cache" in err


def test_the_written_instance_meets_the_published_schema() -> None:
    import jsonschema

    from edgeprefix.placement.model.instance import instance_to_mapping
    from edgeprefix.placement.model.instance_schema import instance_schema

    mapping = instance_to_mapping(classical_instance(ClassicalSpec(5, 2, fallback_min=0.1, max_share=0.3)))
    jsonschema.validate(mapping, instance_schema())
    assert mapping["metadata"]["optimum_method"] == "convex program"
