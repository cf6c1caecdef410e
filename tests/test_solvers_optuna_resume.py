"""A study in SQLite storage resumes with every earlier trial kept (docs/model.md §10.3, Optuna)."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from solver_stubs import StubModel, baseline

from edgeprefix.formulations.placement import placement_problem
from edgeprefix.solvers import Status, solve
from edgeprefix.solvers.optuna_common import SOFTMAX_RANGE


@pytest.fixture()
def stub():
    return StubModel(optimum=np.array([0.3, 0.3, 0.4]))


@pytest.mark.parametrize("method", ["tpe", "cmaes"])
def test_resumed_study_keeps_its_earlier_trials(tmp_path, stub, method):
    problem = placement_problem(baseline(), evaluator=stub)
    storage = str(tmp_path / "study.db")
    first = solve(problem, method, budget=8, seed=3, storage=storage)
    calls = stub.calls
    second = solve(problem, method, budget=12, seed=3, storage=storage)
    assert second.nfev == 12 and second.extras["resumed_trials"] == 8
    np.testing.assert_allclose(second.points[:8], first.points)
    np.testing.assert_allclose(second.values[:8], first.values)
    assert stub.calls - calls in (4, 5)  # only the new trials (+1 re-scoring the best when it is an old one)
    assert second.fun >= first.fun


def test_killed_run_loses_no_completed_evaluation(tmp_path, stub):
    problem = placement_problem(baseline(), evaluator=stub)
    storage = str(tmp_path / "study.db")
    stopped = solve(problem, "tpe", budget=30, seed=5, storage=storage, callback=lambda p: p.nfev >= 7)
    assert stopped.status is Status.CALLBACK_STOP and stopped.nfev == 7
    # a trial asked but never told, as a killed process leaves it
    study = optuna.load_study(study_name="edgeprefix", storage=f"sqlite:///{storage}")
    orphan = study.ask()
    for name in ("v_none", "v_shallow", "v_deep"):  # TPE proposes in softmax coordinates
        orphan.suggest_float(name, -SOFTMAX_RANGE, SOFTMAX_RANGE)
    # a trial nobody claimed counts as dead once its grace period has passed
    resumed = solve(problem, "tpe", budget=10, seed=5, storage=storage, heartbeat_interval=1, grace_period=2)
    assert resumed.extras["resumed_trials"] == 7 and resumed.nfev == 10
    np.testing.assert_allclose(resumed.points[:7], stopped.points)
    states = [t.state for t in optuna.load_study(study_name="edgeprefix", storage=f"sqlite:///{storage}").trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == 10
    assert states.count(optuna.trial.TrialState.FAIL) == 1  # the orphan, re-proposed as a new trial
