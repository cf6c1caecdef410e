"""The spatial kernel in blocks of types (docs/model.md §16): the same numbers, bounded memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.placement.model import spatial
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.spatial import AnalyticKernel, column_blocks


def kernel_outputs(lam, b, alpha):
    kernel = AnalyticKernel()
    u_cut = np.linspace(0.1, 2.0, b.size).reshape(b.shape)
    tilt = np.linspace(0.0, 30.0, b.size).reshape(b.shape)
    return [
        kernel.association(lam, b, alpha),
        *kernel.association_jacobian(lam, b, alpha),
        *kernel.truncated(lam, b, alpha, u_cut, tilt),
        *kernel.moments(lam, b, alpha),
        np.array(kernel.error(lam, b, alpha)),
    ]


@pytest.mark.parametrize("alpha", [2.0, 2.5, 3.5])
def test_blocks_give_the_numbers_of_one_call(monkeypatch, alpha):
    rng = np.random.default_rng(0)
    lam = rng.uniform(0.1, 1.0, size=6)
    b = rng.uniform(0.0, 3.0, size=(6, 23))
    whole = kernel_outputs(lam, b, alpha)
    monkeypatch.setattr(spatial, "BLOCK_ELEMENTS", 700)  # a few types per block
    assert len(column_blocks(23, 6 * 6 * 20)) > 3
    for one, blocked in zip(whole, kernel_outputs(lam, b, alpha)):
        np.testing.assert_array_equal(blocked, one)


def test_one_density_per_column_equals_the_shared_density():
    rng = np.random.default_rng(1)
    lam = rng.uniform(0.1, 1.0, size=5)
    b = rng.uniform(0.0, 3.0, size=(5, 9))
    for alpha in (2.0, 3.0):
        for shared, per_column in zip(kernel_outputs(lam, b, alpha), kernel_outputs(np.repeat(lam[:, None], 9, axis=1), b, alpha)):
            np.testing.assert_allclose(per_column, shared, rtol=1e-14, atol=1e-300)


def test_the_report_of_a_large_instance_stays_within_the_block_memory(monkeypatch):
    inst = synthetic_instance(40, 30, alpha=2.5, seed=0)
    ev = evaluate(inst)
    peaks = {}
    for name, block in (("blocked", 1 << 14), ("one block", 1 << 40)):
        monkeypatch.setattr(spatial, "BLOCK_ELEMENTS", block)
        monkeypatch.setattr(spatial, "CACHE_BLOCK_ELEMENTS", block)  # α ≠ 2 blocks are also capped at the cache size
        fresh = evaluate(inst, warm_start=ev.advertised_wait)
        tracemalloc.start()
        fresh.mean_distance_by_pair  # the (S, Q, nodes) moments of the report
        fresh.coverage(inst.placement.target)
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    # one block holds ~8 arrays of S·Q·J = 30·40·600 doubles (≈ 6 MB each); blocks of 2^14 numbers hold kilobytes
    assert peaks["one block"] > 30e6
    assert peaks["blocked"] < 4e6
