"""The exact gradient in blocks of types (docs/model.md §15.8): the numbers of one block, bounded memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from edgeprefix.benchmarks.workloads.scale_instances import scale_instance
from edgeprefix.placement.model import sensitivity as S
from edgeprefix.placement.model.evaluation import evaluate


@pytest.mark.parametrize("alpha", [2.0, 3.5])
@pytest.mark.parametrize("queue_model", ["meanfield", "cell"])
def test_blocks_of_types_give_the_one_block_gradient(monkeypatch, alpha, queue_model):
    instance = scale_instance(9, 8, alpha=alpha)
    mix = np.array(instance.mix_vector(None))
    mix[2] = 0.0  # a profile at share 0: its test tier's scalar fixed point runs through the blocks too
    mix /= mix.sum()
    ev = evaluate(instance, mix, queue_model=queue_model)
    objectives = ("coverage", "mean_ttft", "max_utilization")
    whole = S.sensitivity(ev, objectives=objectives)
    assert len(S.atom_blocks(8, 9, alpha, 32)) == 1
    per_type = S._atom_bytes_per_type(8, alpha, 32)
    monkeypatch.setattr(S, "GRADIENT_BLOCK_BYTES", 2 * per_type)  # blocks of two types (five blocks)
    assert len(S.atom_blocks(8, 9, alpha, 32)) == 5
    blocked = S.sensitivity(ev, objectives=objectives)
    for name in objectives:
        ref = whole.gradients[name]
        np.testing.assert_allclose(blocked.gradients[name], ref, rtol=0, atol=1e-12 * np.abs(ref).max())
        assert blocked.values[name] == pytest.approx(whole.values[name], rel=1e-14)


def test_the_peak_memory_follows_the_block_not_the_types(monkeypatch):
    """Traced peak (``tracemalloc``: numpy's arrays) of the gradient in one block of 30 types against blocks of one."""
    ev = evaluate(scale_instance(30, 16, alpha=3.5))

    def peak() -> float:
        tracemalloc.start()
        S.sensitivity(ev)
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return float(top)

    per_type = S._atom_bytes_per_type(16, 3.5, 32)
    monkeypatch.setattr(S, "GRADIENT_BLOCK_BYTES", 64 * per_type)
    one_block = peak()
    monkeypatch.setattr(S, "GRADIENT_BLOCK_BYTES", per_type)
    small_blocks = peak()
    assert small_blocks < one_block / 4
    assert one_block <= 30 * per_type  # the size guard's bound per type holds


def test_the_cell_models_void_exponents_in_blocks_of_rows_change_nothing(monkeypatch):
    """Evaluation and gradient of the cell model with (rows, R, T) blocks of a few rows (docs/model.md §16.5)."""
    from edgeprefix.placement.model import cell as C

    instance = scale_instance(5, 7, alpha=3.5)
    ev = evaluate(instance, queue_model="cell")
    whole_cov, whole_grad = ev.coverage(), S.sensitivity(ev).gradients["coverage"]
    monkeypatch.setattr(C, "VOID_BLOCK_ELEMENTS", 3 * 7 * 129)  # three rows of the 129-point tables per block
    blocked = evaluate(instance, queue_model="cell")
    assert abs(blocked.coverage() - whole_cov) <= 1e-14
    np.testing.assert_allclose(S.sensitivity(blocked).gradients["coverage"], whole_grad, rtol=0, atol=1e-12 * np.abs(whole_grad).max())
