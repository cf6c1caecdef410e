"""The benchmark instances of the optimiser comparison (docs/model.md §10.1) and how they are made.

Run ``python -m edgeprefix.benchmarks.optimisers.compare_instances [--out DIR] [--skip-large]`` to (re)build the three
files of ``benchmarks/instances/``:

- ``paper_baseline.toml`` — the embedded instance, written with :func:`write_instance`;
- ``medium_forest.toml`` — :func:`edgeprefix.benchmarks.workloads.synthetic.synthetic_instance` (10 types, 7
  profiles, ``α = 2``, ``Λ = 2``, seed 0) with a memory budget ``B̄`` and a fallback floor
  ``π_min`` chosen so that both bind at the optimum (checked by :func:`constraint_activity`);
  it has no default mix, so searches start from the projected uniform mix;
- ``mooncake_large.toml`` — the profiles command on the Mooncake conversation trace
  (:data:`LARGE_PROFILES_ARGS`).

``medium_forest.checks.json`` records the activity check (optimum, and for each constraint the
optimum with that constraint dropped) so that the tests can re-verify it with a few evaluations.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from edgeprefix.benchmarks.datasets import MOONCAKE_TRACE
from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.formulations.tree_knapsack import solve_knapsack
from edgeprefix.placement.model.instance import (
    Gpu,
    Instance,
    PlacementSpec,
    atomic_write_text,
    default_instance,
    write_instance,
)
from edgeprefix.placement.pipeline.calibration import (
    DEFAULT_DECODE_PER_TOKEN,
    DEFAULT_PREFILL,
    LLAMA2_70B,
    Deployment,
)
from edgeprefix.placement.pipeline.forest import build_forest
from edgeprefix.placement.pipeline.profile_generation import generate_profiles
from edgeprefix.placement.pipeline.trace_instance import instance_from_profiles
from edgeprefix.placement.pipeline.traces import read_trace
from edgeprefix.solvers import solve

INSTANCES_DIR = Path(__file__).resolve().parents[1] / "instances"

MEDIUM_SEED = 0
MEDIUM_TYPES = 10
MEDIUM_PROFILES = 7
MEDIUM_INTENSITY = 2.0  # Λ
MEDIUM_MEMORY_BUDGET = 1.2  # B̄ (the optimum under π_min alone uses Σ π_s B_s ≈ 1.39; with no constraint ≈ 2.5)
MEDIUM_FALLBACK_MIN = 0.45  # π_min (the optimum under B̄ alone has π_0 ≈ 0.39; with no constraint 0)
LARGE_PROFILES = {"max_profiles": 14, "families": 12}
LARGE_PROFILES_ARGS = ("--max-profiles", "14", "--families", "12", "--name", "mooncake_large")  # the same, as CLI flags
ACTIVITY_BUDGET = 400
ACTIVITY_SEEDS = (0, 1, 2)
ACTIVITY_METHODS = ("cmaes", "spsa")


@dataclass(frozen=True)
class ConstraintActivity:
    """Whether one linear constraint of §10.1 binds at the optimum.

    Attributes
    ----------
    name : ``memory_budget`` (``Σ_s π_s B_s ≤ B̄``) or ``fallback`` (``π_0 ≥ π_min``).
    bound : ``B̄`` or ``π_min``.
    at_optimum : ``Σ_s π_s B_s`` or ``π_0`` at the constrained optimum.
    slack : distance of ``at_optimum`` to ``bound`` (0 when tight).
    optimum, relaxed : best coverage ``P_cov(τ_0)`` with and without this constraint.
    relaxed_mix : the best mix without it (it violates the constraint when active).
    """

    name: str
    bound: float
    at_optimum: float
    slack: float
    optimum: float
    relaxed: float
    relaxed_mix: tuple[float, ...]

    @property
    def gain(self) -> float:
        """``relaxed − optimum``: the coverage the constraint costs."""
        return self.relaxed - self.optimum

    def active(self, tol: float = 1e-3, min_gain: float = 1e-3) -> bool:
        """Tight at the optimum and dropping it raises the optimum by at least ``min_gain``."""
        return self.slack <= tol and self.gain >= min_gain


def medium_forest() -> Instance:
    """The medium synthetic instance (no default mix: a search starts from the projected uniform mix)."""
    base = synthetic_instance(MEDIUM_TYPES, MEDIUM_PROFILES, alpha=2.0, intensity=MEDIUM_INTENSITY, seed=MEDIUM_SEED, name="medium_forest")
    spec = PlacementSpec(
        target=base.placement.target, memory_budget=MEDIUM_MEMORY_BUDGET, fallback="none", fallback_min=MEDIUM_FALLBACK_MIN, mix=None
    )
    return base.replace(placement=spec)


def best_mix(instance: Instance, *, budget: int = ACTIVITY_BUDGET) -> tuple[float, np.ndarray]:
    """Best feasible coverage and mix over :data:`ACTIVITY_METHODS` × :data:`ACTIVITY_SEEDS`."""
    problem = placement_problem(instance)
    runs = [solve(problem, m, budget=budget, seed=s) for m in ACTIVITY_METHODS for s in ACTIVITY_SEEDS]
    best = max((r for r in runs if r.success), key=lambda r: r.coverage)
    return best.coverage, np.asarray(best.x)


def _without(instance: Instance, name: str) -> Instance:
    spec = instance.placement
    if name == "memory_budget":
        spec = PlacementSpec(spec.target, None, spec.fallback, spec.fallback_min, spec.max_share, spec.mix)
    elif name == "fallback":
        spec = PlacementSpec(spec.target, spec.memory_budget, spec.fallback, 0.0, spec.max_share, spec.mix)
    else:
        raise ValueError(f"constraint name must be 'memory_budget' or 'fallback', got {name!r}")
    return instance.replace(placement=spec)


def constraint_activity(
    instance: Instance, optimum: tuple[float, np.ndarray], *, budget: int = ACTIVITY_BUDGET
) -> list[ConstraintActivity]:
    """Check that ``B̄`` and ``π_min`` bind: tight at ``optimum`` and costly (relaxing them helps)."""
    coverage, mix = optimum
    spec = instance.placement
    out = []
    for name, bound, value in (
        ("memory_budget", spec.memory_budget, float(mix @ instance.memory)),
        ("fallback", spec.fallback_min, float(mix[instance.fallback_index])),
    ):
        assert bound is not None  # both constraints are set on the instances checked here
        relaxed_cov, relaxed_mix = best_mix(_without(instance, name), budget=budget)
        out.append(
            ConstraintActivity(name, float(bound), value, abs(float(bound) - value), coverage, relaxed_cov, tuple(relaxed_mix.tolist()))
        )
    return out


def build_medium(out: Path) -> list[ConstraintActivity]:
    """Write ``medium_forest.toml`` (default mix = constrained optimum) and its checks JSON."""
    inst = medium_forest()
    coverage, mix = best_mix(inst)
    activity = constraint_activity(inst, (coverage, mix))
    write_instance(inst, out / "medium_forest.toml")
    payload = {
        "optimum": {"coverage": coverage, "mix": dict(zip(inst.profile_ids, mix.tolist()))},
        "constraints": [{**asdict(a), "gain": a.gain, "active": a.active()} for a in activity],
        "search": {"methods": list(ACTIVITY_METHODS), "seeds": list(ACTIVITY_SEEDS), "budget": ACTIVITY_BUDGET},
    }
    atomic_write_text(out / "medium_forest.checks.json", json.dumps(payload, indent=2) + "\n")
    return activity


def build_large(out: Path, trace: Path = MOONCAKE_TRACE) -> int:
    """``mooncake_large.toml``: what ``edgeprefix profiles TRACE`` with :data:`LARGE_PROFILES_ARGS`
    writes (the command's defaults: the embedded Llama-2-70B / 4 × A100 calibration, a memory cap of
    25 % of ``M``, ``k_min = 2``, the HiGHS tree knapsack)."""
    deployment = Deployment(gpu_bytes=4 * 80e9, model=LLAMA2_70B, sequence_tokens=16384.0)
    gpu = Gpu(**deployment.normalised())
    forest = build_forest(read_trace(trace))
    profile_set = generate_profiles(
        forest,
        DEFAULT_PREFILL,
        kappa=gpu.kv_per_token,
        gpu_memory=gpu.memory,
        cap=0.25 * gpu.memory,
        decode_per_token=DEFAULT_DECODE_PER_TOKEN,
        max_profiles=LARGE_PROFILES["max_profiles"],
        k_min=2,
        n_families=LARGE_PROFILES["families"],
        knapsack=solve_knapsack,
    )
    instance = instance_from_profiles(profile_set, DEFAULT_PREFILL, gpu, name="mooncake_large")
    write_instance(instance, out / "mooncake_large.toml")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgeprefix.benchmarks.optimisers.compare_instances", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, default=INSTANCES_DIR)
    parser.add_argument("--skip-large", action="store_true", help="do not rebuild the Mooncake instance")
    args = parser.parse_args(argv)
    write_instance(default_instance(), args.out / "paper_baseline.toml")
    for a in build_medium(args.out):
        print(
            f"{a.name}: bound {a.bound:g}, at optimum {a.at_optimum:.4f}, optimum {a.optimum:.4f}, "
            f"relaxed {a.relaxed:.4f} (gain {a.gain:+.4f}) → {'ACTIVE' if a.active() else 'not active'}",
            file=sys.stderr,
        )
    return 0 if args.skip_large else build_large(args.out)


if __name__ == "__main__":
    raise SystemExit(main())
