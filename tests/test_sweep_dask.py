"""Grid search and sweeps on Dask (docs/model.md §10.3): the gathered CSV is byte-for-byte the serial one."""

from __future__ import annotations

import json

import numpy as np
import pytest

from edgeprefix.benchmarks.sweeps.sweep import Sweep, run_sweep, sweep_csv
from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.cli import main
from edgeprefix.commands.solve import history_csv
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.model.instance import default_instance
from edgeprefix.solvers import solve
from edgeprefix.solvers.distributed import dask_client, grid_search

SWEEP = Sweep(("paper_baseline",), loads=(1.0, 2.0), densities=(0.5, 1.0), seeds=(0, 1), method="random", budget=6)


@pytest.fixture(scope="module")
def client():
    with dask_client(workers=2) as client:
        yield client


def test_sweep_on_dask_writes_the_serial_csv(client):
    serial = sweep_csv(run_sweep(SWEEP))
    assert sweep_csv(run_sweep(SWEEP, client)) == serial
    lines = serial.splitlines()
    assert len(lines) == 1 + 8 and lines[0].startswith("instance,load,density,seed")
    assert lines[1].split(",")[1:4] == ["1.0", "0.5", "0"] and lines[2].split(",")[3] == "1"
    assert lines[1].split(",")[6] != lines[2].split(",")[6]  # another seed, another random search


def test_grid_on_dask_writes_the_serial_history(client):
    problem = placement_problem(synthetic_instance(8, 7, alpha=2.0))
    serial = grid_search(problem, resolution=4, chunk=16)
    spread = grid_search(problem, resolution=4, chunk=16, client=client)
    names = problem.variable_names
    assert history_csv(spread, names) == history_csv(serial, names)
    assert spread.extras["dask_workers"] == 2 and spread.extras["chunks"] == 6 and spread.nfev == 84
    plain = solve(problem, "grid", budget=None, resolution=4, chunk=16)  # warm starts cross chunk boundaries
    np.testing.assert_array_equal(spread.x, plain.x)
    np.testing.assert_allclose(spread.values, plain.values, rtol=0, atol=1e-9)
    assert spread.evaluation is not None and spread.coverage == pytest.approx(plain.coverage, abs=1e-9)


def test_cli_sweep_and_solve_on_a_scheduler_address(client, tmp_path, capsys):
    address = client.scheduler.address
    args = ["sweep", "--loads", "1,2", "--densities", "1", "--seeds", "0", "--resolution", "4"]
    assert main([*args, "--serial", "--out", str(tmp_path / "serial.csv")]) == 0
    assert main([*args, "--dask", address, "--out", str(tmp_path / "dask.csv")]) == 0
    assert (tmp_path / "dask.csv").read_bytes() == (tmp_path / "serial.csv").read_bytes()
    assert main(["solve", "--method", "grid", "--resolution", "5", "--dask", address, "--out", str(tmp_path / "grid")]) == 0
    problem = placement_problem(default_instance())
    expected = history_csv(grid_search(problem, resolution=5), problem.variable_names)
    assert (tmp_path / "grid" / "history.csv").read_text() == expected
    capsys.readouterr()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["sweep", "--loads", "1,-2", "--densities", "1", "--serial"], "sweep field loads must hold positive numbers, got -2.0"),
        (["sweep", "--loads", "1", "--densities", "1", "--method", "spsa", "--serial"], "--method spsa needs --budget N"),
        (["solve", "--method", "spsa", "--workers", "2"], "--workers and --dask apply to the Optuna methods and grid"),
        (["solve", "--method", "grid", "--storage", "x.db"], "--storage applies to the Optuna methods"),
    ],
)
def test_bad_distributed_arguments_exit_2(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_local_cluster_is_skipped_where_it_cannot_pay(monkeypatch):
    from edgeprefix.solvers import distributed

    monkeypatch.setattr(distributed, "usable_cores", lambda: 2)
    assert "2 cores" in distributed.local_cluster_pays(None, 1000, 1.0)  # default size on two cores
    assert "start-up" in distributed.local_cluster_pays(2, 100, 0.005)  # tiny tasks: 0.5 s of work
    assert distributed.local_cluster_pays(2, 100, 1.0) is None  # 100 s of work: two processes win
    monkeypatch.setattr(distributed, "usable_cores", lambda: 1)
    assert "1 worker process(es)" in distributed.local_cluster_pays(4, 100, 1.0)


def test_tiny_grid_with_workers_runs_serially_and_says_so(capsys):
    assert main(["solve", "--method", "grid", "--resolution", "5", "--workers", "2", "--json"]) == 0
    captured = capsys.readouterr()
    assert "running the grid serially" in captured.err and "start-up" in captured.err
    assert json.loads(captured.out)["extras"].get("dask_workers") is None  # no cluster was started


def test_default_sweep_on_two_cores_runs_serially_and_says_so(tmp_path, capsys, monkeypatch):
    from edgeprefix.solvers import distributed

    monkeypatch.setattr(distributed, "usable_cores", lambda: 2)
    args = ["sweep", "--loads", "1,2", "--densities", "1", "--resolution", "4"]
    assert main([*args, "--out", str(tmp_path / "auto.csv")]) == 0
    assert "running the cells serially: 2 cores" in capsys.readouterr().err
    assert main([*args, "--serial", "--out", str(tmp_path / "serial.csv")]) == 0
    assert (tmp_path / "auto.csv").read_bytes() == (tmp_path / "serial.csv").read_bytes()
