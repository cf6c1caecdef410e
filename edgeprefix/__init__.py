"""edgeprefix: spatial prefix caching for wireless edge LLM inference.

The public API, imported on first use so that ``import edgeprefix`` (and the CLI's start-up)
stays cheap::

    import edgeprefix as ep

    inst = ep.load_instance()                      # the embedded paper_baseline
    ev = ep.evaluate(inst, {"none": 0.3, "shallow": 0.5, "deep": 0.2})
    ev.coverage(0.8)
    result = ep.solve(ep.placement_problem(inst), method="spsa", budget=300, seed=0)

Layers (imports point one way): ``edgeprefix.placement`` (the model) ← ``edgeprefix.formulations``
(problems) ← ``edgeprefix.solvers`` (methods) ← ``edgeprefix.benchmarks`` (experiments) ← this
facade and the CLI.  The model reference is ``docs/model.md``.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from edgeprefix._version import __version__

# Imported from a source checkout (its root first on sys.path, as ``python -m ...`` run there puts
# it): the sub-packages that the wheel installs inside this package sit beside this folder, so
# resolve them there too, exactly as pyproject.toml's package-dir maps them.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_ROOT, "pyproject.toml")) and os.path.isfile(os.path.join(_ROOT, "placement", "__init__.py")):
    __path__.append(_ROOT)  # noqa: F821 (a package's __path__)

# name → module that defines it
_EXPORTS: dict[str, str] = {
    # the model
    "Instance": "edgeprefix.placement.model.instance",
    "load_instance": "edgeprefix.placement.model.instance",
    "default_instance": "edgeprefix.placement.model.instance",
    "write_instance": "edgeprefix.placement.model.instance",
    "instance_from_mapping": "edgeprefix.placement.model.instance",
    "Evaluation": "edgeprefix.placement.model.evaluation",
    "evaluate": "edgeprefix.placement.model.evaluation",
    "evaluate_batch": "edgeprefix.placement.model.batch",
    "POLICIES": "edgeprefix.placement.model.policies",
    "sensitivity": "edgeprefix.placement.model.sensitivity",
    "InstanceError": "edgeprefix.placement.errors",
    "MixError": "edgeprefix.placement.errors",
    # problems
    "placement_problem": "edgeprefix.formulations.placement",
    "PlacementProblem": "edgeprefix.formulations.placement",
    "density_problem": "edgeprefix.formulations.density",
    "DensityPlanningProblem": "edgeprefix.formulations.density",
    "load_migration": "edgeprefix.formulations.migration",
    "MigrationProblem": "edgeprefix.formulations.migration",
    # methods
    "solve": "edgeprefix.solvers.api",
    "Result": "edgeprefix.solvers.result",
    "Status": "edgeprefix.solvers.result",
    "certify": "edgeprefix.solvers.polish",
    "Certificate": "edgeprefix.solvers.certificate",
    "method_names": "edgeprefix.solvers.registry",
    "plan_density": "edgeprefix.solvers.density",
    "DensityPlan": "edgeprefix.solvers.density",
    "solve_migration": "edgeprefix.solvers.migration",
    "MigrationSolution": "edgeprefix.solvers.migration",
}

__all__ = [
    "__version__",
    "Certificate",
    "DensityPlan",
    "DensityPlanningProblem",
    "Evaluation",
    "Instance",
    "InstanceError",
    "MigrationProblem",
    "MigrationSolution",
    "MixError",
    "POLICIES",
    "PlacementProblem",
    "Result",
    "Status",
    "certify",
    "default_instance",
    "density_problem",
    "evaluate",
    "evaluate_batch",
    "instance_from_mapping",
    "load_instance",
    "load_migration",
    "method_names",
    "placement_problem",
    "plan_density",
    "sensitivity",
    "solve",
    "solve_migration",
    "write_instance",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'edgeprefix' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and IDEs; never executed
    from edgeprefix.formulations.density import DensityPlanningProblem, density_problem
    from edgeprefix.formulations.migration import MigrationProblem, load_migration
    from edgeprefix.formulations.placement import PlacementProblem, placement_problem
    from edgeprefix.placement.errors import InstanceError, MixError
    from edgeprefix.placement.model.batch import evaluate_batch
    from edgeprefix.placement.model.evaluation import Evaluation, evaluate
    from edgeprefix.placement.model.instance import (
        Instance,
        default_instance,
        instance_from_mapping,
        load_instance,
        write_instance,
    )
    from edgeprefix.placement.model.policies import POLICIES
    from edgeprefix.placement.model.sensitivity import sensitivity
    from edgeprefix.solvers.api import solve
    from edgeprefix.solvers.certificate import Certificate
    from edgeprefix.solvers.density import DensityPlan, plan_density
    from edgeprefix.solvers.migration import MigrationSolution, solve_migration
    from edgeprefix.solvers.polish import certify
    from edgeprefix.solvers.registry import method_names
    from edgeprefix.solvers.result import Result, Status
