"""Profiles: hit depth, persistent memory without double counting, concurrency, dominance."""

from __future__ import annotations

import numpy as np

from edgeprefix.placement.model.profiles import (
    Profile,
    concurrency,
    dominated_profiles,
    hit_depth,
    persistent_memory,
)
from edgeprefix.placement.model.workload import Prefix, PrefixForest, RequestType

FOREST = PrefixForest(
    (
        Prefix("root", 100),
        Prefix("a", 300, "root"),
        Prefix("b", 350, "root", kv_per_token=2.0),
        Prefix("a1", 600, "a"),
    )
)
TYPES = (
    RequestType("qa", 0.5, 1000, 0.1, ("root", "a", "a1")),
    RequestType("qb", 0.3, 400, 0.1, ("root", "b")),
    RequestType("plain", 0.2, 200, 0.1, ()),
)
PROFILES = (
    Profile("empty"),
    Profile("root", ("root",)),
    Profile("a-branch", ("root", "a", "a1")),
    Profile("both", ("root", "a", "b")),
)


def test_hit_depth_is_the_deepest_shared_vertex():
    h = hit_depth(PROFILES, TYPES, FOREST)
    np.testing.assert_array_equal(h, [[0, 0, 0], [100, 100, 0], [600, 100, 0], [300, 350, 0]])


def test_memory_counts_each_segment_once_with_overrides():
    kappa = 1.0
    memory = persistent_memory(PROFILES, FOREST, kappa)
    # root 100; a adds 200; a1 adds 300; b adds 250 tokens at κ_b = 2
    np.testing.assert_allclose(memory, [0, 100, 100 + 200 + 300, 100 + 200 + 2 * 250])


def test_concurrency_floors_and_clips():
    np.testing.assert_array_equal(concurrency(np.array([0.0, 1.5, 9.9, 12.0]), 10.0, 1.0), [10, 8, 0, 0])


def test_dominance_marks_exactly_the_dominated():
    memory = np.array([0.0, 1.0, 1.0, 2.0])
    hits = np.array([[0, 0], [5, 5], [5, 4], [5, 5]], dtype=float)
    slots = np.array([10, 9, 9, 9])
    # 2 is dominated by 1 (same memory/concurrency, deeper hit); 3 by 1 (more memory)
    assert dominated_profiles(memory, hits, slots).tolist() == [False, False, True, True]
    # identical profiles do not dominate each other
    assert not dominated_profiles(np.ones(4), hits[[1, 1, 1, 1]], slots[[1, 1, 1, 1]]).any()
