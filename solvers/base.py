"""The small contract every search method implements (docs/model.md §10.3)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from edgeprefix.solvers.projection import Projection
from edgeprefix.solvers.result import Status
from edgeprefix.solvers.tracking import Problem, Tracker


@dataclass(frozen=True)
class Solver:
    """A search method: its options are the dataclass fields, its capabilities class attributes.

    ``run`` proposes mixes, projects them with ``projection`` and scores them with
    ``tracker.evaluate`` until it is done (returning a :class:`Status`) or the tracker raises
    :class:`edgeprefix.solvers.tracking.StopSearch`.
    """

    name: ClassVar[str] = ""
    STOCHASTIC: ClassVar[bool] = True  # results depend on the seed
    RESUMABLE: ClassVar[bool] = False  # accepts ``storage=`` and resumes a killed run
    NEEDS_BUDGET: ClassVar[bool] = True  # cannot end on its own
    NEEDS_GRADIENT: ClassVar[bool] = False  # asks the problem for exact gradients (``problem.gradient(score)``)

    @classmethod
    def option_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> Solver:
        """Build with ``options``; unknown names raise with the list of valid ones."""
        unknown = sorted(set(options) - set(cls.option_names()))
        if unknown:
            raise ValueError(f"unknown option {unknown[0]!r} for method {cls.name!r} (valid: {list(cls.option_names())})")
        return cls(**options)

    def run(self, problem: Problem, projection: Projection, tracker: Tracker, rng: np.random.Generator) -> Status:
        raise NotImplementedError
