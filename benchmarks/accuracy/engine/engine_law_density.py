"""A density planned on the engine law, simulated on the batching engine, and refined on it (docs/model.md §17.10.2).

``python -m edgeprefix.benchmarks.accuracy.engine.engine_law_density`` plans ``λ_b`` for ``P_cov ≥ ζ`` on
``paper_baseline`` (with the trace-built instance's engine, at ``Λ = 0.9515``, the moderate load of
:mod:`.engine_decisions`; joint with the mix, the 1/10 grid) and on the trace-built ``mooncake_engine`` (its own
``Λ``, one profile ``none``) with the slot law, the engine law with the mean field and the engine law with the cell
model, and simulates the batching-engine network (planned caches, the model workload, ``--router``, routed on the
law that planned it) at each planned density and mix.

The network is large (``--nodes``, default 96 nodes and 70 requests per node on ``paper_baseline``, 120 and 100 on
Mooncake): the coverage of a small torus is not that of the planar network the model describes — at the cell
model's planned density ``paper_baseline`` covers 0.83 with 12 nodes and 0.79–0.80 from 48 nodes on
(``--size-check`` prints that sweep), because a handful of nodes on a torus has a smaller load spread between
the nodes than a Poisson network (docs/model.md §17.10.2).

``--refine`` adds the simulation-refined step: from the cell model's density, the root of the simulated coverage
``C_R(λ_b) = ζ`` over ``R`` replications with common random numbers (replication ``r`` has the same requests,
node positions and arrivals, scaled, at every ``λ_b``), found by a Newton step on the model's slope and then
secant/bisection steps in ``log λ_b``; the density found is then simulated on ``R`` fresh replications (another
seed) whose mean ± SE is the reported, held-out coverage.  Its cost is the number of simulations, printed.  The
search is :func:`edgeprefix.solvers.engine_refine.refined_density`, which ``plan-density --queue-law engine
--refine-on-engine`` runs too.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from edgeprefix.benchmarks.accuracy.engine.engine_runs import SimSize, engine_instance, mean_se, simulate, step_time
from edgeprefix.formulations.density import density_problem
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.solvers.density import plan_density
from edgeprefix.solvers.engine_refine import FRESH_SEED, EngineNetwork, Refined
from edgeprefix.solvers.engine_refine import REFINE_MAX as REFINE_MAX  # the search's constants and step, re-exported
from edgeprefix.solvers.engine_refine import REFINE_TOL as REFINE_TOL
from edgeprefix.solvers.engine_refine import refine as refine
from edgeprefix.solvers.engine_refine import refined_density as engine_refined_density

INSTANCE = Path(__file__).resolve().parents[2] / "instances" / "mooncake_engine.toml"
VORONOI_SHAPE = 3.575  # Gamma shape of a planar Poisson–Voronoi cell's area (mean 1)
INSTANCES = ("paper_baseline", "mooncake_engine")
# Λ of each instance: paper_baseline at 0.5 of its 12-node engine edge (engine_decisions' moderate load), Mooncake its own
INTENSITY = {"paper_baseline": 0.9515}
# the mix: paper_baseline planned jointly with it (1/10 grid); Mooncake one profile, as before
FIXED_MIX = {"mooncake_engine": {"none": 1.0}}
# (nodes, requests per node, replications) of one simulated point: SE about 0.003 at the planned density
SIZE = {"paper_baseline": (96, 70, 40), "mooncake_engine": (120, 100, 20)}
PLANS = (("slots", "meanfield"), ("engine", "meanfield"), ("engine", "cell"))


def cell_averaged_coverage(instance, mix, quantiles: int = 200) -> float:
    """The engine law's coverage averaged over the size-biased cell load (a Gamma law of shape ``k + 1``, scale ``1/k``,
    ``k = 3.575``; the radio distance held at the mean field's; docs/model.md §17.10)."""
    law = stats.gamma(VORONOI_SHAPE + 1.0, scale=1.0 / VORONOI_SHAPE)
    lam = instance.network.request_intensity
    loads = law.ppf((np.arange(quantiles) + 0.5) / quantiles)
    return float(np.mean([evaluate(instance.with_network(request_intensity=lam * x), mix, queue_law="engine").coverage() for x in loads]))


@dataclass(frozen=True)
class Case:
    """One instance of the table: the instance (with an engine), its ``Λ``, the fixed mix (``None``: planned jointly)."""

    instance: Instance
    intensity: float
    mix: dict[str, float] | None


def case(name: str) -> Case:
    inst = engine_instance(name)
    return Case(inst, float(INTENSITY.get(name, inst.network.request_intensity)), FIXED_MIX.get(name))


def plan(c: Case, reliability: float, law: str, queue_model: str) -> tuple[float, float, np.ndarray]:
    """``plan-density --reliability ζ --queue-law law --queue-model queue_model``: density, predicted coverage, mix."""
    base = c.instance.with_network(request_intensity=c.intensity)
    kw: dict[str, Any] = {"queue_model": queue_model}
    if law != "slots":
        kw["queue_law"] = law
    if c.mix is not None:
        p = plan_density(density_problem(base, reliability, mix=c.mix, **kw))
    else:
        p = plan_density(density_problem(base, reliability, **kw), method="grid")
    mix = c.instance.mix_vector(p.mix) if isinstance(p.mix, dict) else np.asarray(p.mix, dtype=float)
    return float(p.edge_density), float(p.coverage), mix


def model_coverage(c: Case, mix: np.ndarray, density: float, law: str = "engine", queue_model: str = "cell") -> float:
    at = c.instance.with_network(edge_density=float(density), request_intensity=c.intensity)
    kw: dict[str, Any] = {} if law == "slots" else {"queue_law": law}
    return float(evaluate(at, mix, "load_aware", target=at.placement.target, queue_model=queue_model, **kw).coverage_at_target)


def simulated(c: Case, mix: np.ndarray, density: float, size: SimSize, router: str, route_law: str, step: Any) -> list[float]:
    """Per replication, the batching-engine network's coverage at ``density`` (common random numbers: ``size.seed``)."""
    at = c.instance.with_network(edge_density=float(density))
    return [r.coverage() for r in simulate(at, mix, c.intensity, size, router=router, step=step, route_law=route_law)]


def network(c: Case, mix: np.ndarray, router: str, step: Any) -> EngineNetwork:
    """The engine network of ``c`` at its ``Λ`` with ``mix``, simulated with ``router`` routed on the engine law."""
    return EngineNetwork(c.instance.with_network(request_intensity=c.intensity), np.asarray(mix, dtype=float), step, router)


def refined_density(c: Case, mix: np.ndarray, start: float, reliability: float, size: SimSize, router: str, step: Any) -> Refined:
    """The simulation-refined density from ``start`` (module docstring), and its held-out simulation:
    :func:`edgeprefix.solvers.engine_refine.refined_density`, what ``plan-density --refine-on-engine`` runs."""
    return engine_refined_density(network(c, mix, router, step), start, reliability, size)


def _mix_text(c: Case, mix: np.ndarray) -> str:
    """The mix's non-zero shares by profile id."""
    return ", ".join(f"{pid}={x:.2g}" for pid, x in zip(c.instance.profile_ids, mix) if x > 0)


def _size(name: str, nodes: float | None, per_node: int | None, replications: int | None, seed: int) -> SimSize:
    n, per, reps = SIZE.get(name, (96, 70, 40))
    n = int(nodes) if nodes is not None else n
    per = per_node if per_node is not None else per
    reps = replications if replications is not None else reps
    return SimSize(int(n * per), reps, float(n), seed)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--instances", default=",".join(INSTANCES), help=f"instances (default {','.join(INSTANCES)})")
    ap.add_argument("--reliability", type=float, default=0.8)
    ap.add_argument("--router", choices=("online", "tier"), default="online", help="router of the engine network (default online)")
    ap.add_argument("--nodes", type=float, default=None, help="expected nodes of the simulated network (default per instance: 96, 120)")
    ap.add_argument("--per-node", type=int, default=None, help="requests per node and replay (default per instance: 70, 100)")
    ap.add_argument("--replications", type=int, default=None, help="replications (default per instance: 40, 20)")
    ap.add_argument("--seed", type=int, default=11, help="seed of the common random numbers (default 11)")
    ap.add_argument("--refine", action="store_true", help="add the simulation-refined density (module docstring)")
    ap.add_argument("--size-check", default="", help="comma-separated node counts: the cell plan simulated at each (e.g. 12,48,96,192)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if args.replications is not None and args.replications < 2:
        ap.error(f"--replications: at least 2 for a standard error, got {args.replications}")
    if args.per_node is not None and args.per_node < 10:
        ap.error(f"--per-node: at least 10 requests per node, got {args.per_node}")
    if not 0.0 < args.reliability < 1.0:
        ap.error(f"--reliability: a share in (0, 1), got {args.reliability}")
    try:
        checks = [int(x) for x in args.size_check.split(",") if x.strip()]
        cases = [(n.strip(), case(n.strip())) for n in args.instances.split(",") if n.strip()]
    except ValueError as exc:
        ap.error(str(exc))
    t0, c0 = time.perf_counter(), time.process_time()
    zeta = args.reliability
    for name, c in cases:
        size = _size(name, args.nodes, args.per_node, args.replications, args.seed)
        step = step_time(c.instance)
        print(
            f"\n{name}: Λ = {c.intensity:.6g}, ζ = {zeta}, router {args.router}, {size.nodes:g} nodes, {size.requests} requests × "
            f"{size.replications} replications, seed {size.seed}; mix {'planned jointly (1/10 grid)' if c.mix is None else c.mix}"
        )
        print("| plan | planned λ_b | mix | predicted coverage | engine network ± SE | sim − ζ |")
        print("|---|---|---|---|---|---|")
        cell_plan = None
        for law, qm in PLANS:
            density, predicted, mix = plan(c, zeta, law, qm)
            sims = simulated(c, mix, density, size, args.router, law, step)
            m, se = mean_se(sims)
            label = law + (", cell model" if qm == "cell" else (", mean field" if law == "engine" else ""))
            print(f"| {label} | {density:.4g} | {_mix_text(c, mix)} | {predicted:.4f} | {m:.4f} ± {se:.4f} | {m - zeta:+.4f} |")
            if (law, qm) == ("engine", "cell"):
                cell_plan = (density, mix)
        assert cell_plan is not None
        if args.refine:
            r = refined_density(c, cell_plan[1], cell_plan[0], zeta, size, args.router, step)
            m, se = mean_se(r.held_out)
            print(
                f"| engine, cell model, refined on the engine ({r.simulations} simulations) | {r.density:.4g} | "
                f"{_mix_text(c, cell_plan[1])} | {model_coverage(c, cell_plan[1], r.density):.4f} (model) | {m:.4f} ± {se:.4f} "
                f"(fresh seed {size.seed + FRESH_SEED}) | {m - zeta:+.4f} |"
            )
            print("root search (λ_b, simulated coverage, seed " + f"{size.seed}): " + ", ".join(f"({d:.4g}, {y:.4f})" for d, y in r.points))
        for n in checks:
            s = SimSize(int(n * (size.requests / size.nodes)), size.replications, float(n), size.seed)
            m, se = mean_se(simulated(c, cell_plan[1], cell_plan[0], s, args.router, "engine", step))
            print(f"size check: the cell plan on {n} nodes ({s.requests} requests × {s.replications}): {m:.4f} ± {se:.4f}")
    print(f"wall time {time.perf_counter() - t0:.0f} s, CPU {time.process_time() - c0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
