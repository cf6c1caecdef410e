"""Value scores, profile generators, tree knapsack (MILP vs DP), request types, pruning."""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE as MOONCAKE
from edgeprefix.formulations.tree_knapsack import knapsack_model, solve_knapsack
from edgeprefix.placement.model.costs import QuadraticPrefill
from edgeprefix.placement.pipeline.forest import build_forest
from edgeprefix.placement.pipeline.knapsack import knapsack_dp
from edgeprefix.placement.pipeline.profile_generation import (
    FALLBACK_ID,
    eligible_vertices,
    generate_profiles,
    greedy_profile,
    is_ancestor_closed,
    knapsack_profile,
    marginal_values,
    profile_weight,
    prune_dominated,
    request_types,
    value_scores,
)
from edgeprefix.placement.pipeline.traces import (
    TraceRecord,
    read_trace,
    synthetic_records,
)

G = QuadraticPrefill(linear=1.5e-4, quadratic=1.5e-8, intercept=0.04)
KAPPA = 1.0 / 16384
B = 512


def _random_forest(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.array([-1] + [int(rng.integers(-1, i)) if rng.random() < 0.85 else -1 for i in range(1, n)])


@pytest.mark.parametrize("seed", range(12))
def test_knapsack_milp_equals_tree_dp(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 22))
    parent = _random_forest(rng, n)
    weights = rng.integers(1, 20, size=n).astype(float) if seed % 2 else rng.uniform(0.05, 1.0, size=n)
    values = rng.uniform(0.0, 1.0, size=n)
    cap = float(rng.uniform(0.2, 0.6) * weights.sum())
    milp, dp = solve_knapsack(parent, weights, values, cap), knapsack_dp(parent, weights, values, cap)
    assert milp.objective == pytest.approx(dp.objective, rel=1e-9, abs=1e-12)
    for res in (milp, dp):
        chosen = set(res.selected)
        assert all(parent[v] < 0 or parent[v] in chosen for v in chosen)  # x_v <= x_parent(v)
        assert weights[list(chosen)].sum() <= cap * (1 + 1e-9)
        assert values[list(chosen)].sum() == pytest.approx(res.objective)


def test_knapsack_model_is_pure_and_documented() -> None:
    m = knapsack_model([-1, 0, 0], [1.0, 1.0, 2.0], [1.0, 2.0, 3.0], 2.0)
    assert len(m.x) == 3 and len(m.ancestor) == 2 and m.budget.doc and m.ancestor.doc
    with pytest.raises(ValueError, match="parents first"):
        knapsack_model([1, -1], [1.0, 1.0], [1.0, 1.0], 1.0)


def _hand_forest():
    return build_forest(
        [
            TraceRecord(1, 0.0, 4 * B, 10, (1, 2, 3, 4)),
            TraceRecord(2, 1.0, 3 * B - 100, 20, (1, 2, 5)),
            TraceRecord(3, 2.0, 5 * B, 30, (1, 2, 3, 4, 6)),
            TraceRecord(4, 3.0, 2 * B, 40, (1, 2)),
        ]
    )


def test_value_score_and_marginal_values_add_up_to_the_saving() -> None:
    forest = _hand_forest()
    gamma = value_scores(forest, G, KAPPA)
    lv = forest.input_sum / forest.count
    expected = forest.count / 4 * (G(lv) - G(lv - forest.depth)) / (KAPPA * forest.depth)
    np.testing.assert_allclose(gamma, expected)
    val = marginal_values(forest, G)
    lengths = np.array([4 * B, 3 * B - 100, 5 * B, 2 * B], dtype=float)
    paths = [(0, 1), (0, 2), (0, 1, 3), (0,)]  # leaf paths of the four requests
    for profile in [(), (0,), (0, 1), (0, 2), (0, 1, 3), (0, 1, 2, 3)]:
        hits = [max([forest.depth[v] for v in p if v in profile], default=0.0) for p in paths]
        direct = float(np.mean(G(lengths) - G(lengths - np.array(hits))))
        assert sum(val[v] for v in profile) == pytest.approx(direct, rel=1e-12, abs=1e-15)


def test_request_types_group_by_deepest_retained_vertex() -> None:
    forest = _hand_forest()
    types = request_types(forest, [0, 1], decode_per_token=0.05)
    assert types.vertex == (0, 1)
    np.testing.assert_allclose(types.probability, [0.5, 0.5])
    np.testing.assert_allclose(types.length, [(3 * B - 100 + 2 * B) / 2, (4 * B + 5 * B) / 2])
    np.testing.assert_allclose(types.decode, [0.05 * 30, 0.05 * 20])
    none = request_types(forest, [], decode_per_token=0.0)
    assert none.vertex == (-1,) and none.probability.tolist() == [1.0]
    q = request_types(forest, [0, 1], decode_per_token=0.0, length_quantile=1.0)
    np.testing.assert_allclose(q.length, [3 * B - 100, 5 * B])


def _synthetic_forest():
    return build_forest(synthetic_records(1500, n_families=10, system_blocks=2, family_blocks=(2, 8), seed=4))


def test_generated_profiles_are_closed_within_cap_and_supported() -> None:
    forest = _synthetic_forest()
    cap, k_min = 0.3, 5
    ps = generate_profiles(
        forest, G, kappa=KAPPA, gpu_memory=8.0, cap=cap, decode_per_token=0.04, k_min=k_min, max_profiles=5, knapsack=solve_knapsack
    )
    assert ps.profiles[0].id == FALLBACK_ID and ps.vertices[0] == ()
    assert 2 <= len(ps.profiles) <= 5
    for verts, memory in zip(ps.vertices, ps.memory):
        assert is_ancestor_closed(forest, verts)
        assert memory <= cap * (1 + 1e-9)
        assert memory == pytest.approx(profile_weight(forest, verts, KAPPA))
        assert all(forest.count[v] >= k_min for v in verts)
    assert ps.types.probability.sum() == pytest.approx(1.0, abs=1e-12)
    for q in ps.requests:
        depths = {p.id: p.depth for p in ps.prefixes}
        assert all(depths[v] <= q.length for v in q.path)
    assert len(set(ps.vertices)) == len(ps.vertices)  # duplicates removed


def test_knapsack_beats_greedy_and_matches_dp_on_a_trace_forest() -> None:
    forest = build_forest(synthetic_records(300, n_families=6, system_blocks=1, family_blocks=(1, 4), seed=9))
    eligible = eligible_vertices(forest, 2)
    values = marginal_values(forest, G)
    for cap in (0.05, 0.12, 0.3):
        milp = knapsack_profile(forest, values, KAPPA, cap, eligible, knapsack=solve_knapsack)
        dp = knapsack_profile(forest, values, KAPPA, cap, eligible)
        greedy = greedy_profile(forest, value_scores(forest, G, KAPPA), KAPPA, cap, eligible)
        assert values[list(milp)].sum() == pytest.approx(values[list(dp)].sum(), rel=1e-9)
        assert values[list(greedy)].sum() <= values[list(milp)].sum() * (1 + 1e-9)
        assert is_ancestor_closed(forest, greedy) and profile_weight(forest, greedy, KAPPA) <= cap * (1 + 1e-9)


def _brute_force_dominated(memory: np.ndarray, hits: np.ndarray, slots: np.ndarray) -> set[int]:
    out = set()
    for s in range(len(memory)):
        for t in range(len(memory)):
            no_worse = memory[t] <= memory[s] and np.all(hits[t] >= hits[s]) and slots[t] >= slots[s]
            strict = memory[t] < memory[s] or np.any(hits[t] > hits[s]) or slots[t] > slots[s]
            if t != s and no_worse and strict:
                out.add(s)
    return out


def test_pruning_removes_exactly_the_dominated_profiles() -> None:
    forest = _synthetic_forest()
    fam = [int(v) for v in forest.children(0) if forest.count[v] >= 2]
    a, b = fam[0], fam[1]
    named = [
        ("none", ()),
        ("root", (0,)),
        ("a", (0, a)),
        ("b", (0, b)),
        ("ab", (0, a, b)),
        ("a_deep", tuple(sorted({0, a, *[c for c in forest.children(a) if forest.count[c] >= 1][:2]}))),
    ]
    from edgeprefix.placement.pipeline.profile_generation import (
        assemble,
        profile_metrics,
    )

    for type_vertices in (None, [0, a], [0]):
        kept, removed = prune_dominated(forest, named, kappa=KAPPA, gpu_memory=4.0, type_vertices=type_vertices)
        types_from = named if type_vertices is None else [("t", tuple(type_vertices))]
        _, requests, _, _ = assemble(forest, types_from, decode_per_token=0.0)
        prefixes, _, profiles, _ = assemble(forest, named, decode_per_token=0.0)
        memory, hits, slots = profile_metrics(prefixes, requests, profiles, KAPPA, 4.0)
        expected = {named[i][0] for i in _brute_force_dominated(memory, hits, slots)}
        assert set(removed) == expected
        assert [k[0] for k in kept] == [n for n, _ in named if n not in expected]
    # with coarse types (only the root is a type vertex) every profile beyond "root" is dominated by it
    _, removed = prune_dominated(forest, named, kappa=KAPPA, gpu_memory=4.0, type_vertices=[0])
    assert set(removed) == {"a", "b", "ab", "a_deep"}
    # with the finest types nothing distinct is dominated (each cached vertex is some type's deepest)
    _, removed = prune_dominated(forest, named, kappa=KAPPA, gpu_memory=4.0)
    assert removed == []


def test_mooncake_profiles_closed_and_within_cap() -> None:
    forest = build_forest(read_trace(MOONCAKE))
    gpu_memory, cap = 33.5, 2.0
    ps = generate_profiles(
        forest,
        G,
        kappa=KAPPA,
        gpu_memory=gpu_memory,
        cap=cap,
        decode_per_token=0.0445,
        ladder=(1.0, 0.5),
        n_families=1,
        knapsack=solve_knapsack,
    )
    assert ps.profiles[0].id == FALLBACK_ID
    for verts, memory in zip(ps.vertices, ps.memory):
        assert is_ancestor_closed(forest, verts) and memory <= cap * (1 + 1e-9)
        assert all(forest.count[v] >= 2 for v in verts)
    assert ps.concurrency.min() >= 1
    assert any(0 in v for v in ps.vertices)  # block 0 (shared by every request) is worth caching


@pytest.mark.parametrize("seed", range(3))
def test_deepest_marked_ancestor_matches_a_plain_walk(seed: int) -> None:
    from edgeprefix.placement.pipeline.profile_generation import _deepest_marked

    rng = np.random.default_rng(seed)
    parent = _random_forest(rng, 300)
    marked = rng.random(300) < 0.2
    expected = []
    for v in range(300):
        u = v
        while u >= 0 and not marked[u]:
            u = int(parent[u])
        expected.append(u)
    assert _deepest_marked(parent, marked).tolist() == expected


def test_mooncake_knapsack_milp_equals_dp() -> None:
    forest = build_forest(read_trace(MOONCAKE))
    eligible = eligible_vertices(forest, 2)
    values = marginal_values(forest, G)
    milp = knapsack_profile(forest, values, KAPPA, 0.5, eligible, knapsack=solve_knapsack)
    dp = knapsack_profile(forest, values, KAPPA, 0.5, eligible)
    assert values[list(milp)].sum() == pytest.approx(values[list(dp)].sum(), rel=1e-9)
    assert profile_weight(forest, milp, KAPPA) <= 0.5 * (1 + 1e-9)
