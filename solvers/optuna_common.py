"""What the Optuna methods and their shared-study workers both use: the trial attributes,
the search box of the decision ``z``, storage URLs and a quiet Optuna context."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import optuna

from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.tracking import Problem

MIX_ATTR, COVERAGE_ATTR, FEASIBLE_ATTR = "mix", "coverage", "feasible"


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Silence Optuna's per-trial INFO logs and experimental warnings for the run only."""
    previous = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield
    finally:
        optuna.logging.set_verbosity(previous)


def storage_url(path: str | Path) -> str:
    """SQLite URL of a study file (its folder is created); a database URL passes through."""
    if "://" in str(path):
        return str(path)
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{target}"


@dataclass(frozen=True)
class SearchBox:
    """The bounding box ``[lower, upper]`` of the decision ``z`` (shape ``(n,)``) that samplers explore."""

    lower: np.ndarray
    upper: np.ndarray
    names: tuple[str, ...]

    @classmethod
    def of(cls, problem: Problem, projection: Projection) -> SearchBox:
        cons = projection.constraints
        k = problem.dimension
        lower = np.where(np.isfinite(cons.lower[:k]), cons.lower[:k], 0.0)
        upper = np.where(np.isfinite(cons.upper[:k]), cons.upper[:k], 1.0)
        return cls(lower, upper, tuple(problem.variable_names))

    def suggest(self, trial: optuna.Trial) -> np.ndarray:
        """``z`` proposed by ``trial``: one ``z_<profile>`` parameter per free coordinate."""
        z = self.lower.copy()
        for i in np.flatnonzero(self.upper > self.lower):
            z[i] = trial.suggest_float(f"z_{self.names[i]}", float(self.lower[i]), float(self.upper[i]))
        return z
