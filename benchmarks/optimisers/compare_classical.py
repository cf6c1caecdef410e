"""The classical known-optimum suite in the optimiser comparison (docs/model.md §18.5, §10.3).

``edgeprefix compare --suite classical --seed S`` writes the five instances of
:func:`edgeprefix.benchmarks.optimisers.classical.suite` (6, 15, 45, 120 and 300 profiles; Zipf exponent and
reach drawn from ``S``) as instance files carrying their exact ``P*`` and compares the optimisers
on them; :func:`edgeprefix.benchmarks.optimisers.compare.run_comparison` reads ``P*`` from each file's
metadata, so success is measured against the water-filling optimum, not against the best run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from edgeprefix.benchmarks.optimisers.classical import ClassicalSpec, classical_instance, suite
from edgeprefix.placement.model.instance import write_instance

SUITES = ("classical",)
SUITE_METHODS = ("gradient", "slsqp-fd", "de", "cmaes", "spsa", "random")
SUITE_BUDGETS = (30, 100, 300)


def profiles_of(spec: ClassicalSpec) -> int:
    """``C(J, K)``: the profiles of a member without fallback."""
    return math.comb(spec.files, spec.cache)


def suite_specs(seed: int, profiles: Sequence[int] | None = None) -> list[ClassicalSpec]:
    """The members of the suite drawn with ``seed``, restricted to the given numbers of profiles."""
    specs = suite(seed)
    if profiles is None:
        return specs
    sizes = [profiles_of(s) for s in specs]
    bad = [p for p in profiles if p not in sizes]
    if bad or not profiles:
        raise ValueError(f"--profiles: each must be one of the suite's sizes {sizes}, got {list(profiles)}")
    return [s for s in specs if profiles_of(s) in set(profiles)]


def write_suite(seed: int, folder: Path, profiles: Sequence[int] | None = None) -> tuple[str, ...]:
    """Write the suite's instances as ``folder/classical_J<J>_K<K>.toml``; returns their paths."""
    paths = []
    for spec in suite_specs(seed, profiles):
        instance = classical_instance(spec)
        path = Path(folder) / f"{instance.name}.toml"
        write_instance(instance, path)
        paths.append(str(path))
    return tuple(paths)
