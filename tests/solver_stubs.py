"""A cheap stand-in for ``edgeprefix.placement.model.evaluation.evaluate`` used by the solver tests.

``P_cov(π) = 0.9 − ||π − π*||²`` with an interior optimum ``π*``; tier ``s`` has utilisation
``ρ_s = 0.4 + load_s · (1 − π_s)`` for a chosen ``load``, so a tier starved of nodes becomes
unstable and the formulation's penalty applies.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from edgeprefix.placement.model.instance import Instance, PlacementSpec, load_instance


@dataclass(frozen=True)
class StubEvaluation:
    mix: np.ndarray
    value: float
    utilization: np.ndarray
    stable: bool
    fixed_point: SimpleNamespace
    mean_wait: np.ndarray

    def coverage(self, tau=None):
        return self.value


@dataclass
class StubModel:
    """``evaluate`` stand-in; :meth:`differentiate` is its exact ``sensitivity``."""

    optimum: np.ndarray | None = None
    load: float = 0.0
    calls: int = 0

    def __call__(self, instance, mix, policy="load_aware", *, target=None, warm_start=None, **kwargs):
        self.calls += 1
        pi = instance.mix_vector(mix)
        centre = self.centre(pi.size)
        rho = 0.4 + self.load * (1.0 - pi)
        stable = bool(np.all(rho < 1))
        value = 0.9 - float(((pi - centre) ** 2).sum())
        return StubEvaluation(pi, value, rho, stable, SimpleNamespace(converged=True, iterations=1), np.zeros(pi.size))

    def centre(self, n):
        return self.optimum if self.optimum is not None else np.linspace(1.0, 2.0, n) / np.linspace(1.0, 2.0, n).sum()

    def differentiate(self, evaluation, target=None, objectives=("coverage",)):
        pi = evaluation.mix
        top = int(np.argmax(evaluation.utilization))
        slopes = {"coverage": -2.0 * (pi - self.centre(pi.size)), "max_utilization": -self.load * np.eye(pi.size)[top]}
        return SimpleNamespace(gradients={name: slopes[name] for name in objectives})


def baseline() -> Instance:
    return load_instance("paper_baseline")


def unconstrained(instance: Instance | None = None) -> Instance:
    """The instance with only the simplex (no budget, fallback or caps)."""
    instance = instance or baseline()
    return instance.replace(placement=PlacementSpec(target=instance.placement.target))


def with_placement(instance: Instance | None = None, **changes) -> Instance:
    instance = instance or baseline()
    return instance.replace(placement=dataclasses.replace(instance.placement, **changes))
