"""Mean-field vs cell-load coverage against the network simulation (docs/model.md §14).

Run ``python -m edgeprefix.benchmarks.accuracy.cell.cell_validation [--instances A,B] [--se 0.005] [--out DIR]``.

For each instance and each of the three policies, six loads from light to the policy's
stability edge ``Λ_edge`` (the largest ``Λ`` at which its mean-field operating point keeps every
tier stable; 15 % … 95 % of it), it prints the simulated coverage (Theorem 1's tier rule with the evaluation's
advertised delays, i.e. exactly the routing both models assume) with its standard error,
eq. (39) (``meanfield``) and the cell model (``cell``), and their errors.  Replications are
independent networks and arrivals, the same seeds for every policy (common random numbers),
added until the standard error is at most ``--se`` (at least 3 replications); the queue-free
coverage of each simulated network, whose expectation the analysis gives exactly, is used as a
control variate (see :func:`simulate_until`).  With
``--online`` the load-aware rows also carry the coverage of the online router of
docs/model.md §11 with fresh per-node telemetry (k = 2 candidates per profile).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.atomic import atomic_savefig, atomic_write_text
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance, load_instance
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.compare import ANALYTICAL_POLICIES, VALIDATION_SPEC, analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter

LOAD_FRACTIONS = (0.15, 0.35, 0.55, 0.7, 0.85, 0.95)
INSTANCES = ("paper_calibrated", "medium_forest", "mooncake_large")
BENCHMARK_INSTANCES = Path(__file__).resolve().parents[2] / "instances"


@dataclass(frozen=True)
class Case:
    name: str
    instance: Instance
    mix: Mapping[str, float] | npt.ArrayLike | None  # None: the instance's placement.mix
    spec: SimulationSpec


def benchmark_case(name: str) -> Case:
    """The instance, the mix validated and the simulation settings (long service → longer warm-up)."""
    path = BENCHMARK_INSTANCES / f"{name}.toml"
    inst = load_instance(path if path.exists() else name)
    mix = None
    if inst.placement.mix is None:
        checks = path.with_suffix(".checks.json")
        if checks.exists():
            mix = json.loads(checks.read_text())["optimum"]["mix"]
        else:
            mix = np.full(len(inst.profiles), 1.0 / len(inst.profiles))
    service = float((inst.probabilities * inst.service_time.mean(axis=0)).sum())
    spec = replace(
        VALIDATION_SPEC, warmup=max(VALIDATION_SPEC.warmup, 40.0 * service), horizon=max(VALIDATION_SPEC.horizon, 40.0 * service)
    )
    return Case(name, inst, mix, spec)


def stability_edge(instance: Instance, mix, policy: str = "load_aware", *, steps: int = 14) -> float:
    """Largest ``Λ`` at which the mean-field operating point of ``policy`` keeps every tier stable (bisection)."""
    lo, hi = 0.0, instance.network.request_intensity
    while evaluate(instance.with_network(request_intensity=hi), mix, policy).stable:
        lo, hi = hi, 2.0 * hi
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        if evaluate(instance.with_network(request_intensity=mid), mix, policy).stable:
            lo = mid
        else:
            hi = mid
    return lo


def simulate_until(
    instance, mix, router, spec, seeds, tau, se_target: float, queue_free: float | None = None, min_reps: int | None = None
) -> tuple[float, float, int]:
    """Mean coverage over replications (one seed each, in order) until its SE ≤ ``se_target``.

    With ``queue_free`` (the exact queue-free coverage of the routing, eq. (39) with ``F_W ≡ 1``),
    each run's queue-free coverage ``1{ξ r^α + g ≤ τ}`` is a control variate: the estimate is
    ``mean(cov) − β (mean(qf) − queue_free)`` with ``β`` fitted across replications (it removes the
    network-to-network spread of the distances); its SE is that of the residuals, which needs
    enough replications to be trusted: at least 6 with the control variate (4 degrees of freedom),
    3 without.
    """
    if min_reps is None:
        min_reps = 6 if queue_free is not None else 3
    covs: list[float] = []
    free: list[float] = []
    for s in seeds:
        run = simulate_network(instance, mix, router, spec, seed=np.random.default_rng(s))
        covs.append(run.coverage(tau))
        free.append(float(np.mean(np.where(np.isfinite(run.ttft), run.ttft - run.wait, np.inf) <= tau)))
        mean, se = control_variate_estimate(np.array(covs), np.array(free), queue_free)
        if len(covs) >= min_reps and se <= se_target:
            break
    return mean, se, len(covs)


def control_variate_estimate(covs, free, queue_free) -> tuple[float, float]:
    """Mean of ``covs`` corrected by the control variate ``free`` (exact mean ``queue_free``) and its SE."""
    n = covs.size
    if n < 2:
        return float(covs.mean()), float("inf")
    if queue_free is None or n < 3 or free.var() <= 0:
        return float(covs.mean()), float(covs.std(ddof=1) / np.sqrt(n))
    beta = float(np.cov(covs, free)[0, 1] / free.var(ddof=1))
    resid = covs - beta * free
    return float(covs.mean() - beta * (free.mean() - queue_free)), float(resid.std(ddof=1) / np.sqrt(n) * np.sqrt((n - 1) / (n - 2)))


def validate_case(
    case: Case,
    *,
    se_target: float = 0.005,
    max_reps: int = 24,
    seed: int = 0,
    nodes: float = 1000.0,
    online: bool = False,
    fractions=LOAD_FRACTIONS,
    verbose: bool = False,
    policies=ANALYTICAL_POLICIES,
    min_reps: int | None = None,
    warmup: float | None = None,
    horizon: float | None = None,
) -> list[dict]:
    inst, mix = case.instance, case.mix
    spec = replace(case.spec, layout=LayoutSpec(mean_nodes=nodes, counts="exact"))
    if warmup is not None:
        spec = replace(spec, warmup=warmup)
    if horizon is not None:
        spec = replace(spec, horizon=horizon)
    tau = float(inst.placement.target)
    edges = {policy: stability_edge(inst, mix, policy) for policy in policies}
    seeds = np.random.SeedSequence(seed).spawn(max_reps)
    rows = []
    work = [(f, p) for f in fractions for p in policies]
    for frac, policy in progress_bar(work, desc=case.name):
        lam = round(edges[policy] * frac, 4)
        net = inst.with_network(request_intensity=lam)
        mean_field = evaluate(net, mix, policy)
        cell = evaluate(net, mix, policy, queue_model="cell")
        row = {
            "instance": case.name,
            "intensity": lam,
            "load_fraction": frac,
            "policy": policy,
            "meanfield": float(mean_field.coverage(tau)),
            "cell": float(cell.coverage(tau)),
            "stable": bool(mean_field.stable),
            "max_utilization": float(np.nanmax(mean_field.utilization)),
        }
        if mean_field.stable:
            start = time.perf_counter()
            free = float(mean_field.coverage_queue_free(tau))
            sim, se, reps = simulate_until(net, mix, analytical_router(mean_field), spec, seeds, tau, se_target, free, min_reps)
            row.update(simulated=sim, simulated_se=se, replications=reps, seconds=time.perf_counter() - start)
            if online and policy == "load_aware":
                router = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
                sim_o, se_o, reps_o = simulate_until(net, mix, router, spec, seeds, tau, se_target)  # no control variate
                row.update(online=sim_o, online_se=se_o, online_replications=reps_o)
        rows.append(row)
        if verbose:
            print(render([row]).splitlines()[2], flush=True)
    return rows


def reevaluate(rows: list[dict]) -> list[dict]:
    """The analytical columns of saved rows recomputed with the current models (``meanfield``, ``cell``).

    The simulated columns are kept: the simulation routes by the mean-field operating point, which
    the cell model does not change, so a revision of the cell model needs no new simulation.
    """
    cases: dict[str, Case] = {}
    out = []
    for row in rows:
        case = cases.setdefault(row["instance"], benchmark_case(row["instance"]))
        net = case.instance.with_network(request_intensity=row["intensity"])
        tau = float(case.instance.placement.target)
        mean_field = evaluate(net, case.mix, row["policy"])
        cell = evaluate(net, case.mix, row["policy"], queue_model="cell", warm_start=mean_field.advertised_wait)
        out.append(row | {"meanfield": float(mean_field.coverage(tau)), "cell": float(cell.coverage(tau))})
    return out


def render(rows: list[dict]) -> str:
    head = (
        f"{'instance':<17}{'Λ':>8}{'policy':>11}{'sim':>8}{'± SE':>8}{'n':>4}{'meanfield':>10}{'err':>8}{'cell':>8}{'err':>8}{'online':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if "simulated" not in r:
            lines.append(
                f"{r['instance']:<17}{r['intensity']:>8.4g}{r['policy']:>11}  mean field unstable "
                f"(max ρ = {r['max_utilization']:.3f}): not simulated"
            )
            continue
        online = f"{r['online']:>8.4f}" if "online" in r else f"{'':>8}"
        lines.append(
            f"{r['instance']:<17}{r['intensity']:>8.4g}{r['policy']:>11}{r['simulated']:>8.4f}{r['simulated_se']:>8.4f}"
            f"{r['replications']:>4d}{r['meanfield']:>10.4f}{r['meanfield'] - r['simulated']:>+8.4f}"
            f"{r['cell']:>8.4f}{r['cell'] - r['simulated']:>+8.4f}{online}"
        )
    done = [r for r in rows if "simulated" in r]
    if done:
        mf = max(abs(r["meanfield"] - r["simulated"]) for r in done)
        ce = max(abs(r["cell"] - r["simulated"]) for r in done)
        lines.append(f"max |meanfield − sim| = {mf:.4f}, max |cell − sim| = {ce:.4f} over {len(done)} simulated cells")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["instance"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.0), squeeze=False)
    for ax, name in zip(axes[0], names):
        for i, policy in enumerate(ANALYTICAL_POLICIES):
            sel = [r for r in rows if r["instance"] == name and r["policy"] == policy]
            lam = [r["intensity"] for r in sel]
            ax.plot(lam, [r["meanfield"] for r in sel], "--", color=f"C{i}", label=f"{policy} mean field (39)")
            ax.plot(lam, [r["cell"] for r in sel], "-", color=f"C{i}", label=f"{policy} cell (§14)")
            sim = [r for r in sel if "simulated" in r]
            ax.errorbar(
                [r["intensity"] for r in sim],
                [r["simulated"] for r in sim],
                yerr=[2 * r["simulated_se"] for r in sim],
                fmt="o",
                ms=4,
                color=f"C{i}",
                label=f"{policy} simulation ± 2 SE",
            )
            onl = [r for r in sim if "online" in r]
            if onl:
                ax.plot([r["intensity"] for r in onl], [r["online"] for r in onl], "x", color="k", label="online router (telemetry)")
        ax.set_title(name)
        ax.set_xlabel("request intensity Λ")
        ax.set_ylabel("P(TTFT ≤ τ)")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgeprefix.benchmarks.accuracy.cell.cell_validation", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--instances", default=",".join(INSTANCES), help="comma-separated instance names")
    parser.add_argument("--se", type=float, default=0.005, help="target standard error of each simulated cell")
    parser.add_argument("--max-reps", type=int, default=24, help="most replications per cell")
    parser.add_argument("--nodes", type=float, default=1000.0, help="nodes on the simulated torus")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--online", action="store_true", help="also simulate the online router (load-aware rows)")
    parser.add_argument("--policies", default=",".join(ANALYTICAL_POLICIES), help="comma-separated policies")
    parser.add_argument(
        "--fractions",
        default=None,
        metavar="F,...",
        help="loads as fractions of each policy's stability edge (default 0.15,0.35,0.55,0.7,0.85,0.95)",
    )
    parser.add_argument("--min-reps", type=int, default=None, help="fewest replications (default 6 with the control variate)")
    parser.add_argument("--warmup", type=float, default=None, help="discarded seconds (default max(60, 40 × mean service))")
    parser.add_argument("--horizon", type=float, default=None, help="measured seconds (default max(80, 40 × mean service))")
    parser.add_argument("--quick", action="store_true", help="two loads, 300 nodes, SE 0.02 (a smoke run)")
    parser.add_argument(
        "--reevaluate",
        type=Path,
        default=None,
        metavar="JSON",
        help="recompute the analytical columns of a saved cell_validation.json (no new simulation)",
    )
    parser.add_argument("--out", type=Path, default=None, help="folder for cell_validation.json and .png")
    args = parser.parse_args(argv)
    if args.reevaluate is not None:
        saved = reevaluate(json.loads(args.reevaluate.read_text()))
        for name in dict.fromkeys(r["instance"] for r in saved):
            print(render([r for r in saved if r["instance"] == name]), flush=True)
        if args.out is not None:
            atomic_write_text(args.out / "cell_validation.json", json.dumps(saved, indent=2) + "\n")
            plot(saved, args.out / "cell_validation.png")
        return 0
    fractions: tuple[float, ...] = (0.35, 0.85) if args.quick else LOAD_FRACTIONS
    if args.fractions is not None:
        fractions = tuple(float(f) for f in args.fractions.split(",") if f.strip())
    policies = tuple(p.strip() for p in args.policies.split(",") if p.strip())
    unknown = sorted(set(policies) - set(ANALYTICAL_POLICIES))
    if unknown:
        parser.error(f"--policies: unknown {unknown[0]!r} (valid: {', '.join(ANALYTICAL_POLICIES)})")
    nodes, se = (300.0, 0.02) if args.quick else (args.nodes, args.se)
    rows: list[dict] = []
    for name in filter(None, (n.strip() for n in args.instances.split(","))):
        case = benchmark_case(name)
        rows += validate_case(
            case,
            se_target=se,
            max_reps=args.max_reps,
            seed=args.seed,
            nodes=nodes,
            online=args.online,
            fractions=fractions,
            verbose=True,
            policies=policies,
            min_reps=args.min_reps,
            warmup=args.warmup,
            horizon=args.horizon,
        )
        print(render([r for r in rows if r["instance"] == name]), flush=True)
    print(render(rows))
    if args.out is not None:
        atomic_write_text(args.out / "cell_validation.json", json.dumps(rows, indent=2) + "\n")
        plot(rows, args.out / "cell_validation.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
