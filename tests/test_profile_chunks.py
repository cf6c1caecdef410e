"""The per-vertex passes of profile generation in bounded chunks give the whole-forest numbers, bit for bit."""

from __future__ import annotations

import platform

import numpy as np
import pytest

from edgeprefix.placement.heap import map_large_blocks
from edgeprefix.placement.model.costs import QuadraticPrefill
from edgeprefix.placement.pipeline import profile_generation as pg
from edgeprefix.placement.pipeline.forest_stream import stream_forest
from edgeprefix.placement.pipeline.traces import synthetic_records

G = QuadraticPrefill(linear=1.5e-4, quadratic=1.5e-8, intercept=0.04)
KAPPA = 1.0 / 16384


@pytest.fixture(scope="module")
def forest() -> pg.RadixForest:
    return stream_forest(synthetic_records(600, n_families=9, seed=3))


def _whole_value_scores(forest: pg.RadixForest) -> np.ndarray:
    """eq. (48) over every vertex at once (the formula before the chunked pass)."""
    length = forest.mean_length
    saved = G(length) - G(np.maximum(length - forest.depth, 0.0))
    return forest.popularity * saved / forest.state_size(KAPPA)


def _whole_marginal_values(forest: pg.RadixForest) -> np.ndarray:
    """§9.3c level by level over whole arrays (the pass before the chunked one)."""
    leaves = np.flatnonzero(forest.ends > 0)
    weight = forest.ends[leaves] / forest.n_requests
    length = forest.end_input_sum[leaves] / forest.ends[leaves]
    total = np.zeros(forest.n_vertices)
    parent_depth = forest.parent_depth
    pos, v = np.arange(leaves.size), leaves.copy()
    while pos.size:
        lq = length[pos]
        gain = G(lq - parent_depth[v]) - G(np.maximum(lq - forest.depth[v], 0.0))
        np.add.at(total, v, weight[pos] * gain)
        up = forest.parent[v]
        pos, v = pos[up >= 0], up[up >= 0]
    return total


@pytest.mark.parametrize("chunk", [1, 7, 1 << 18])
def test_chunked_passes_equal_the_whole_forest_pass(forest: pg.RadixForest, chunk: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pg, "CHUNK", chunk)
    assert np.array_equal(pg.value_scores(forest, G, KAPPA), _whole_value_scores(forest))
    assert np.array_equal(pg.marginal_values(forest, G), _whole_marginal_values(forest))
    idx = np.arange(forest.n_vertices)[::3]
    assert np.array_equal(pg._segment(forest, idx), forest.segment[idx])


def test_generated_profiles_do_not_depend_on_the_chunk(forest: pg.RadixForest, monkeypatch: pytest.MonkeyPatch) -> None:
    def run() -> pg.ProfileSet:
        return pg.generate_profiles(forest, G, kappa=KAPPA, gpu_memory=4.0, cap=1.0, decode_per_token=0.04, length_bins=4)

    whole = run()
    monkeypatch.setattr(pg, "CHUNK", 5)
    chunked = run()
    assert chunked.profiles == whole.profiles and chunked.requests == whole.requests and chunked.prefixes == whole.prefixes
    assert np.array_equal(chunked.hits, whole.hits) and np.array_equal(chunked.memory, whole.memory)


def test_large_blocks_are_mapped_under_glibc() -> None:
    assert map_large_blocks() is (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc")
