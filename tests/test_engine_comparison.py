"""The engine comparison grid (docs/model.md §17.9) runs its cells as Dask tasks with the serial rows."""

from __future__ import annotations

import argparse

import pytest

from edgeprefix.benchmarks.accuracy.engine import engine_comparison as ec
from edgeprefix.solvers.distributed import dask_client


def _args() -> argparse.Namespace:
    return argparse.Namespace(requests=120, model_requests=60, replications=2, nodes=4, seed=7, skip_model=False)


def test_grid_cells_cover_every_workload_and_load() -> None:
    cells = ec.grid_cells(_args())
    assert len(cells) == len(ec.TRACE_LOADS) + len(ec.MODEL_INSTANCES) * len(ec.MODEL_LOAD_SHARES)
    assert [c[2] for c in cells if c[0] == "trace"] == list(ec.TRACE_LOADS)
    assert ec.grid_cells(argparse.Namespace(**{**vars(_args()), "skip_model": True})) == cells[: len(ec.TRACE_LOADS)]


@pytest.mark.slow
def test_engine_comparison_on_dask_gives_the_serial_rows() -> None:
    args = _args()
    cells = [("trace", "", ec.TRACE_LOADS[0]), ("model", str(ec.MODEL_INSTANCES[0]), ec.MODEL_LOAD_SHARES[0])]
    serial = ec.run_grid(args, cells)
    assert len(serial) == 2 * len(ec.ROWS)
    assert [r["row"] for r in serial[: len(ec.ROWS)]] == [name for name, _, _ in ec.ROWS]
    assert serial[0]["workload"].startswith("Mooncake") and serial[-1]["workload"].startswith("model workload")
    with dask_client(workers=1) as client:
        spread = ec.run_grid(args, cells, client)
    assert spread == serial  # the same rows, bit for bit, in the same order
