"""The cell-load model on random instances it was not fitted on (docs/model.md §14.10).

Run ``python -m edgeprefix.benchmarks.accuracy.cell.cell_out_of_sample [--draws 8] [--fractions 0.35,0.7,0.85,0.95] [--out DIR]``.

The constants of the cell model (``K``, ``δ_0``) were fitted on the three instances of
``cell_validation``; this benchmark reports on others.  Each *draw* is a seeded random instance
(:func:`edgeprefix.benchmarks.workloads.synthetic.synthetic_instance`: a root → tool → document forest,
request types on its paths, nested profiles) with path-loss exponent ``α ~ U[2, 4]``, 3–10
profiles and 4–12 request types.  Its mix is optimised (the gradient method, mean-field
load-aware coverage) under a share cap on the profile the unconstrained optimum uses most
(60 % of its share at the budgeted optimum) and a memory budget (80 % of the unconstrained
optimum's memory), so the
constraints bind at the mix that is validated.  Each mix is then simulated at fractions of its
load-aware stability edge with the tier rule and the mean-field advertised delays (the routing the
cell model assumes), with ``cell_validation``'s replications, control variate and standard error,
and compared with the cell model's coverage.  Nothing here is fitted: the numbers are out of sample.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from edgeprefix.benchmarks.accuracy.cell.cell_validation import Case, validate_case
from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.model.cell import ACCURACY_LIMIT, accuracy_region
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.simulation.compare import VALIDATION_SPEC
from edgeprefix.solvers.api import solve

FRACTIONS = (0.35, 0.7, 0.85, 0.95)
CAP_SHARE = 0.6  # the cap on the most used profile, as a share of its unconstrained optimum
BUDGET_SHARE = 0.8  # the memory budget, as a share of the unconstrained optimum's memory
SOLVER_BUDGET = 60  # evaluations of the gradient method per solve
ACTIVE_TOL = 1e-4


@dataclass(frozen=True)
class Draw:
    """One random instance, its constrained optimum and which constraints bind there."""

    index: int
    alpha: float
    case: Case
    cap_profile: str
    cap: float
    budget: float
    cap_active: bool
    budget_active: bool

    @property
    def profiles(self) -> int:
        return len(self.case.instance.profiles)

    @property
    def active(self) -> int:
        """Profiles with a positive share at the validated mix (the tiers the models see)."""
        return int(np.count_nonzero(np.asarray(self.case.mix) > 1e-9))


def draw_parameters(index: int, seed: int) -> tuple[float, int, int, int]:
    """``(α, |S|, |Q|, instance seed)`` of draw ``index`` (reproducible from ``seed``)."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, index]))
    alpha = float(rng.uniform(2.0, 4.0))
    profiles = int(rng.integers(3, 11))
    types = int(rng.integers(4, 13))
    return round(alpha, 3), profiles, types, int(rng.integers(2**31))


def _optimum(inst: Instance) -> np.ndarray:
    result = solve(placement_problem(inst), "gradient", budget=SOLVER_BUDGET, seed=0, certificate=False)
    return np.asarray(result.x, dtype=float)


def draw_base(index: int, seed: int = 0) -> Instance:
    """The unconstrained random instance of draw ``index``."""
    alpha, n_profiles, n_types, inst_seed = draw_parameters(index, seed)
    return synthetic_instance(n_types, n_profiles, alpha=alpha, seed=inst_seed, name=f"draw{index}")


def draw_instance(index: int, seed: int = 0) -> Draw:
    """Draw ``index``: the instance with a binding share cap and memory budget, at its constrained optimum."""
    base = draw_base(index, seed)
    alpha = float(base.network.radio_exponent)
    memory = np.asarray(base.memory, dtype=float)
    ids = base.profile_ids
    budget = round(BUDGET_SHARE * float(_optimum(base) @ memory), 4)
    budgeted = replace(base, placement=replace(base.placement, memory_budget=budget, mix=None))
    free = _optimum(budgeted)  # the budget binds; now cap the profile this optimum uses most
    usable = [s for s in range(len(ids)) if ids[s] != base.placement.fallback]
    top = max(usable, key=lambda s: free[s])
    cap = round(CAP_SHARE * float(free[top]), 4)
    inst = replace(budgeted, placement=replace(budgeted.placement, max_share=((ids[top], cap),)))
    mix = _optimum(inst)
    service = float((inst.probabilities * inst.service_time.mean(axis=0)).sum())
    spec = replace(
        VALIDATION_SPEC, warmup=max(VALIDATION_SPEC.warmup, 40.0 * service), horizon=max(VALIDATION_SPEC.horizon, 40.0 * service)
    )
    return Draw(
        index,
        alpha,
        Case(f"draw{index}", inst, mix, spec),
        ids[top],
        cap,
        budget,
        bool(mix[top] >= cap - ACTIVE_TOL),
        bool(mix @ memory >= budget * (1.0 - ACTIVE_TOL)),
    )


def run_draw(
    draw: Draw,
    *,
    fractions=FRACTIONS,
    se_target: float = 0.01,
    nodes: float = 300.0,
    max_reps: int = 12,
    seed: int = 0,
    warmup: float | None = None,
    horizon: float | None = None,
) -> list[dict]:
    """The simulated rows of ``draw`` (load-aware), with the draw's facts and the note ``evaluate`` prints."""
    rows = validate_case(
        draw.case,
        se_target=se_target,
        max_reps=max_reps,
        seed=seed,
        nodes=nodes,
        fractions=fractions,
        policies=("load_aware",),
        warmup=warmup,
        horizon=horizon,
    )
    out = []
    for row in rows:
        region = accuracy_region(draw.alpha, draw.profiles, row["max_utilization"])
        out.append(
            row
            | {
                "draw": draw.index,
                "alpha": draw.alpha,
                "profiles": draw.profiles,
                "types": len(draw.case.instance.requests),
                "active": draw.active,
                "cap_active": draw.cap_active,
                "budget_active": draw.budget_active,
                "accuracy_note": region,
            }
        )
    return out


def render(rows: list[dict]) -> str:
    head = (
        f"{'draw':>4}{'α':>7}{'|S|':>5}{'|Q|':>5}{'caps':>6}{'load':>6}{'Λ':>9}{'sim':>8}{'± SE':>8}{'n':>4}"
        f"{'cell':>8}{'error':>8}{'mean f.':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        caps = ("c" if r["cap_active"] else "-") + ("b" if r["budget_active"] else "-")
        lead = f"{r['draw']:>4}{r['alpha']:>7.3f}{r['profiles']:>5}{r['types']:>5}{caps:>6}{r['load_fraction']:>6.2f}{r['intensity']:>9.4g}"
        if "simulated" not in r:
            lines.append(lead + f"  mean field unstable (max ρ = {r['max_utilization']:.3f}): not simulated")
            continue
        lines.append(
            lead + f"{r['simulated']:>8.4f}{r['simulated_se']:>8.4f}{r['replications']:>4d}{r['cell']:>8.4f}"
            f"{r['cell'] - r['simulated']:>+8.4f}{r['meanfield']:>8.4f}"
        )
    lines.append(summary(rows))
    return "\n".join(lines)


def summary(rows: list[dict]) -> str:
    """Worst error and where; errors over the limit by region (load fraction, α, |S|)."""
    done = [r for r in rows if "simulated" in r]
    if not done:
        return "no simulated cell"
    err = np.array([r["cell"] - r["simulated"] for r in done])
    worst = done[int(np.argmax(np.abs(err)))]
    over = [r for r, e in zip(done, err) if abs(e) > ACCURACY_LIMIT]
    lines = [
        f"max |cell − sim| = {np.abs(err).max():.4f} (draw {worst['draw']}, α = {worst['alpha']:.3f}, "
        f"|S| = {worst['profiles']}, load {worst['load_fraction']:.2f} of the edge); mean error {err.mean():+.4f}; "
        f"{len(over)} of {len(done)} cells over {ACCURACY_LIMIT}"
    ]
    for label, key in (("load fraction", "load_fraction"), ("|S|", "profiles")):
        groups = sorted({r[key] for r in done})
        parts = [f"{g:g}: {max(abs(r['cell'] - r['simulated']) for r in done if r[key] == g):.4f}" for g in groups]
        lines.append(f"max |error| by {label}: " + ", ".join(parts))
    for lo, hi in ((2.0, 2.5), (2.5, 3.0), (3.0, 3.5), (3.5, 4.0)):
        sel = [abs(r["cell"] - r["simulated"]) for r in done if lo <= r["alpha"] < hi or (hi == 4.0 and r["alpha"] == 4.0)]
        if sel:
            lines.append(f"max |error| for α in [{lo}, {hi}): {max(sel):.4f} over {len(sel)} cells")
    return "\n".join(lines)


def to_csv(rows: list[dict]) -> str:
    keys = [
        "draw",
        "alpha",
        "profiles",
        "types",
        "active",
        "cap_active",
        "budget_active",
        "load_fraction",
        "intensity",
        "simulated",
        "simulated_se",
        "replications",
        "cell",
        "meanfield",
    ]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgeprefix.benchmarks.accuracy.cell.cell_out_of_sample", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--draws", type=int, default=8, help="random instances (default 8)")
    parser.add_argument("--first", type=int, default=0, help="index of the first draw (default 0)")
    parser.add_argument(
        "--indices", default=None, metavar="I,...", help="these draw indices instead of --first/--draws (e.g. a held-out set chosen by α)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws and of the simulations")
    parser.add_argument(
        "--fractions", default=",".join(map(str, FRACTIONS)), metavar="F,...", help="loads as fractions of the load-aware stability edge"
    )
    parser.add_argument("--nodes", type=float, default=300.0, help="nodes on the simulated torus (default 300)")
    parser.add_argument("--se", type=float, default=0.01, help="target standard error of each simulated cell")
    parser.add_argument("--max-reps", type=int, default=12, help="most replications per cell")
    parser.add_argument("--warmup", type=float, default=None, help="discarded seconds (default max(60, 40 × mean service))")
    parser.add_argument("--horizon", type=float, default=None, help="measured seconds (default max(80, 40 × mean service))")
    parser.add_argument("--out", type=Path, default=None, help="folder for cell_out_of_sample.json and .csv")
    args = parser.parse_args(argv)
    if args.draws < 1:
        parser.error("--draws: must be at least 1")
    fractions = tuple(float(f) for f in args.fractions.split(",") if f.strip())
    if not fractions or any(not 0.0 < f < 1.0 for f in fractions):
        parser.error("--fractions: give fractions in (0, 1), e.g. 0.35,0.7,0.95")
    indices = range(args.first, args.first + args.draws)
    if args.indices is not None:
        try:
            indices = [int(i) for i in args.indices.split(",") if i.strip()]  # type: ignore[assignment]
        except ValueError:
            parser.error("--indices: give non-negative integers, e.g. 19,29,30")
        if not indices or min(indices) < 0:
            parser.error("--indices: give non-negative integers, e.g. 19,29,30")
    rows: list[dict] = []
    for index in indices:
        draw = draw_instance(index, args.seed)
        new = run_draw(
            draw,
            fractions=fractions,
            se_target=args.se,
            nodes=args.nodes,
            max_reps=args.max_reps,
            seed=args.seed,
            warmup=args.warmup,
            horizon=args.horizon,
        )
        rows += new
        print(render(new), flush=True)
        if args.out is not None:  # partial results survive an interrupted run
            atomic_write_text(args.out / "cell_out_of_sample.json", json.dumps(rows, indent=2) + "\n")
            atomic_write_text(args.out / "cell_out_of_sample.csv", to_csv(rows))
    print(render(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
