"""``edgeprefix validate``: the analytical model against simulation (docs/model.md §11, §13).

Three checks, each printed as analytical vs simulated with its error:

1. association — exact nearest-distance Monte Carlo (``--samples``) vs Theorem 1 for
   the three policies;
2. queue tail — an event-driven FCFS M/M/c run per active tier at the load-aware
   operating point vs Erlang C (``P^W``, ``W̄``, Kolmogorov distance of the wait CDF);
3. coverage — the network simulator vs the analysis (eq. (39)), the Gamma-law correction
   and the node-level Erlang-C coverage at ``--intensities``.

``--baselines`` adds the policy table (analytical policies, online router, production
baselines) and a telemetry-period sweep.  ``--out DIR`` writes PNG plots atomically.  A
progress bar counts the steps on stderr (on a terminal).
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.commands._common import (
    add_instance_argument,
    add_mix_arguments,
    add_queue_model_argument,
    add_router_argument,
    at_least,
    fmt,
    instance_from_args,
    mix_from_args,
    network_text,
    prediction_from_args,
    print_json,
    print_router_note,
    queue_law_from_args,
    router_note,
    wrote,
)
from edgeprefix.commands._online import online_prediction, run_model, run_telemetry
from edgeprefix.commands._telemetry import add_telemetry_options
from edgeprefix.commands.replay import PRODUCTION_ROUTERS
from edgeprefix.placement.atomic import atomic_savefig
from edgeprefix.placement.memory import check_memory
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.ranges import check_simulated_network
from edgeprefix.placement.model.router import PREDICTION_ROUTERS, QUEUE_MODEL_OF_ROUTER, other_router
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.association_mc import simulate_instance_association
from edgeprefix.placement.simulation.compare import (
    ANALYTICAL_POLICIES,
    VALIDATION_SPEC,
    compare_coverage,
    policy_table,
    staleness_sweep,
)
from edgeprefix.placement.simulation.layout import (
    LayoutSpec,
    edge_effect_check,
    sample_layout,
)
from edgeprefix.placement.simulation.mmc import simulate_mmc
from edgeprefix.placement.simulation.replay import SHORT_SPAN

# the telemetry periods of ``--baselines`` (staleness_sweep's default), run one at a time
COVERAGE_TABLE_KEYS = ("intensity", "policy", "simulated", "simulated_se", "meanfield", "cell", "online", "online_se")
STALENESS_PERIODS = tuple(inspect.signature(staleness_sweep).parameters["periods"].default)
ROUTERS = (*PREDICTION_ROUTERS, *PRODUCTION_ROUTERS)  # --router: a prediction's router, or a production one (engine nodes)
DEFAULT_INTENSITY_SHARES = (1 / 3, 2 / 3, 1.0)  # default --intensities: these multiples of the instance's Λ


def _floats(text: str, option: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{option}: expected comma-separated numbers, got {text!r}") from None
    if not values or any(not np.isfinite(v) or v <= 0 for v in values):
        raise ValueError(f"{option}: values must be finite and > 0, got {text!r}")
    return values


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "validate",
        help="check the analytical model against Monte Carlo and discrete-event simulation",
        description="Analytical vs simulated association, queue tail and TTFT coverage (docs/model.md §13).",
    )
    add_instance_argument(parser)
    add_mix_arguments(parser, "profile shares, e.g. none=0.18,shallow=0.54,deep=0.28 (default: the instance's)")
    parser.add_argument("--samples", type=int, default=200_000, metavar="N", help="Monte Carlo association samples (default 200000)")
    parser.add_argument("--customers", type=int, default=200_000, metavar="N", help="customers per M/M/c run (default 200000)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default 0)")
    parser.add_argument(
        "--intensities",
        default=None,
        metavar="Λ,...",
        help="request intensities of the coverage table (default: 1/3, 2/3 and 1 times the instance's "
        "network.request_intensity, e.g. 1,2,3 for paper_baseline)",
    )
    parser.add_argument(
        "--nodes",
        type=float,
        default=VALIDATION_SPEC.layout.mean_nodes,
        metavar="N",
        help=f"nodes on the simulated torus (default {VALIDATION_SPEC.layout.mean_nodes:g})",
    )
    parser.add_argument("--horizon", type=float, default=VALIDATION_SPEC.horizon, metavar="SECONDS", help="measured seconds (default 80)")
    parser.add_argument("--warmup", type=float, default=VALIDATION_SPEC.warmup, metavar="SECONDS", help="discarded seconds (default 60)")
    parser.add_argument("--replications", type=int, default=2, help="independent networks per table cell (default 2)")
    parser.add_argument("--target", type=float, default=None, metavar="SECONDS", help="TTFT target τ (default: the instance's)")
    parser.add_argument(
        "--no-online",
        action="store_true",
        help="skip the online router (per-node telemetry at the run's age) on the load-aware rows of the coverage table",
    )
    add_router_argument(parser, choices=ROUTERS)
    add_queue_model_argument(parser)
    add_telemetry_options(parser)
    parser.add_argument("--baselines", action="store_true", help="also run the online router and production baselines (slower)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.add_argument("--out", default=None, metavar="DIR", help="write PNG comparison plots to DIR")
    _add_engine_options(parser)
    parser.set_defaults(handler=run)


def _add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The engine room's options (docs/model.md §17.9): the model workload on engine nodes."""
    from edgeprefix.commands.replay import CACHES, ENGINES

    group = parser.add_argument_group("engine nodes (docs/model.md §17.9): the model workload replayed on engine nodes")
    group.add_argument(
        "--engine", choices=ENGINES, default=None, help="also replay the model workload on slots or on the instance's [engine] (batching)"
    )
    group.add_argument("--cache", choices=CACHES, default="planned", help="node cache of that replay (default: planned)")
    group.add_argument("--engine-requests", type=int, default=3000, metavar="N", help="requests per replay (default 3000)")


def _engine_step(args: argparse.Namespace, instance, router: str) -> tuple[bool, Any]:
    """Check the engine options before anything runs (bad input fails at once, not after the
    validation) and fit the batching engine's step time: ``(asked, step)``."""
    if args.engine is None:
        if args.cache != "planned":
            raise ValueError("--cache: it sets the engine replay; add --engine slots|batching")
        if router in PRODUCTION_ROUTERS:
            raise ValueError(f"--router {router}: a production router runs only on engine nodes; add --engine slots|batching")
        return False, None
    if args.engine != "batching":
        return True, None
    if instance.engine is None:
        raise ValueError(
            "--engine batching: the instance has no [engine] section with timings "
            "(add [engine.timings] model, hardware, tensor_parallel; docs/instances.md)"
        )
    if 16 % instance.engine.block_size:
        raise ValueError(
            f"engine.block_size: {instance.engine.block_size} tokens does not divide the model "
            "workload's block size 16: pick 1, 2, 4, 8 or 16"
        )
    from edgeprefix.benchmarks.datasets import SPLITWISE_TIMINGS
    from edgeprefix.placement.simulation.engine.step_time import step_time_from_section

    return True, step_time_from_section(instance.engine, SPLITWISE_TIMINGS)


def _engine_report(args: argparse.Namespace, instance, mix, intensities, tau: float, router: str, step: Any) -> list[dict]:
    """Rows of the engine replay (``--engine``) with ``router`` and the checked ``step`` time."""
    from edgeprefix.commands._telemetry import telemetry_from_args
    from edgeprefix.placement.simulation.engine.model_workload import engine_rows

    return engine_rows(
        instance,
        mix,
        intensities,
        step=step,
        engine=args.engine,
        cache=args.cache,
        router=router,
        telemetry=telemetry_from_args(args),
        requests=args.engine_requests,
        replications=args.replications,
        nodes=min(args.nodes, 100.0),
        seed=args.seed,
        tau=tau,
    )


def run(args: argparse.Namespace) -> int:
    instance = instance_from_args(args)
    mix = mix_from_args(args)
    instance.mix_vector(mix)  # validate early
    if args.samples < 1 or args.customers < 100 or args.replications < 1:
        raise ValueError(
            f"--samples >= 1, --customers >= 100 and --replications >= 1 must hold, got "
            f"{args.samples}, {args.customers}, {args.replications}"
        )
    at_least(args, 0, "--seed")
    check_memory(
        8.0 * args.samples * (3 * len(instance.profiles) + 3 * len(instance.requests)),
        "--samples",
        f"a Monte Carlo association of {args.samples} samples",
        "lower --samples",
    )
    if args.intensities is None:
        intensities = tuple(round(share * instance.network.request_intensity, 6) for share in DEFAULT_INTENSITY_SHARES)
    else:
        intensities = _floats(args.intensities, "--intensities")
    if not (np.isfinite(args.nodes) and args.nodes >= 1):
        raise ValueError(f"--nodes must be a number >= 1 (nodes on the simulated torus), got {args.nodes:g}")
    check_simulated_network(instance, args.nodes, args.warmup, args.horizon, tuple(intensities))
    # a production router (engine nodes only) has no prediction: the prediction is then the instance's router's
    router, queue_model = prediction_from_args(args, instance, use_router_option=args.router not in PRODUCTION_ROUTERS)
    engine_router = args.router or router
    engine_asked, engine_step = _engine_step(args, instance, engine_router)
    tau = float(instance.placement.target if args.target is None else args.target)
    telemetry = run_telemetry(args, instance)
    spec = replace(
        VALIDATION_SPEC,
        horizon=args.horizon,
        warmup=args.warmup,
        layout=LayoutSpec(mean_nodes=args.nodes, counts="exact"),
        telemetry_delay=telemetry.delay,
        refresh_period=telemetry.refresh,
    )  # read by the online router only
    small = replace(spec, layout=LayoutSpec(mean_nodes=min(args.nodes, 300.0), counts="exact"))
    cells = [(lam, policy) for lam in intensities for policy in ANALYTICAL_POLICIES]
    steps = len(ANALYTICAL_POLICIES) + 2 + len(cells) + (len(intensities) + len(STALENESS_PERIODS) if args.baselines else 0)
    queue_law = queue_law_from_args(args, instance)
    if queue_law == "engine" and args.engine != "batching":
        raise ValueError("--queue-law engine: validate compares the engine law with the batching-engine network; add --engine batching")
    report: dict = {
        "instance": instance.name,
        "target": tau,
        "queue_model": queue_model,
        "queue_law": queue_law,
        "router": router,
        "intensities": list(intensities),
        "mix": dict(zip(instance.profile_ids, instance.mix_vector(mix).tolist())),
        "telemetry": {"delay": telemetry.delay, "refresh": telemetry.refresh},
        "warnings": [],
    }
    short = short_horizon_warning(instance, mix, args.horizon, tau)
    if short is not None:  # said before the run: the run itself may be long
        report["warnings"].append(short)
        print(f"edgeprefix validate: warning: {short}", file=sys.stderr)
    with progress_bar(total=steps, desc="validate", unit="step") as bar:

        def step(label: str) -> None:
            bar.set_postfix_str(label, refresh=False)
            bar.update(1)

        report["association"] = _association(instance, mix, args.samples, args.seed, tau, step)
        report["queues"] = _queues(instance, mix, args.customers, args.seed, tau)
        step("queues")
        report["edge_effect"] = _edge_effect(instance, mix, spec.layout, args.seed)
        step("edge effect")
        # one (Λ, policy) cell at a time: the same seeds as one call over all cells, so the same rows
        report["coverage"] = []
        report["coverage_table"] = []  # the JSON contract: both queue models side by side
        for lam, policy in cells:
            rows = compare_coverage(
                instance,
                mix,
                intensities=(lam,),
                policies=(policy,),
                spec=spec,
                replications=args.replications,
                tau=tau,
                seed=args.seed,
                online=not args.no_online,
            )
            predicted = (
                None
                if policy != "load_aware" or args.no_online
                else online_prediction(
                    instance.with_network(request_intensity=float(lam)), mix, telemetry, target=tau, method=run_model(args), region=False
                )["coverage"]
            )
            report["coverage"] += [{**row.to_dict(), "online_predicted": predicted} for row in rows]
            report["coverage_table"] += [
                {**{key: row.to_dict()[key] for key in COVERAGE_TABLE_KEYS}, "online_predicted": predicted} for row in rows
            ]
            step(f"coverage Λ = {lam:g} {policy}")
        if args.baselines:
            report["policies"] = []
            for lam in intensities:
                report["policies"] += policy_table(
                    instance, mix, intensities=(lam,), spec=small, tau=tau, seed=args.seed, queue_model=queue_model
                )
                step(f"policies Λ = {lam:g}")
            report["staleness"] = []
            heavy = instance.with_network(request_intensity=max(intensities))
            for period in STALENESS_PERIODS:
                report["staleness"] += staleness_sweep(heavy, mix, periods=(period,), spec=small, tau=tau, seed=args.seed)
                step(f"telemetry period {period:g} s")
    other = _other_router(report, router)
    if other is not None:
        report["other_router"] = other
    if engine_asked:
        engine_rows = _engine_report(args, instance, mix, intensities, tau, engine_router, engine_step)
        report["engine"] = {"engine": args.engine, "cache": args.cache, "router": engine_router, "rows": engine_rows}
        if args.engine == "batching":
            _engine_columns(report, instance, mix, tau, engine_rows)
    if args.out is not None:
        report["plots"] = write_plots(report, instance, Path(args.out))
    if args.json:
        print_json(report)
    else:
        print(render(report, instance, network_text(instance, args)))
    print_router_note(report.get("other_router"))
    for path in report.get("plots", []):
        wrote(path)
    return 0


def _engine_columns(report: dict, instance, mix, tau: float, engine_rows: list[dict]) -> None:
    """``--engine batching``: in every coverage_table row ``simulated`` / ``simulated_se`` are the batching-engine
    network at the row's Λ (load-aware rows; ``None`` on the others, whose routers the engine room does not run),
    the FCFS-slot network's numbers move to ``slots_simulated`` / ``slots_simulated_se``, and ``engine_law`` is the
    model with ``--queue-law engine`` (docs/model.md §17.10); the engine rows gain ``engine_law`` and
    ``engine_law_mean_ttft``."""
    by_intensity = {float(row["intensity"]): row for row in engine_rows}
    law: dict[tuple[float, str], Any] = {}

    def predicted(lam: float, policy: str) -> Any:
        if (lam, policy) not in law:
            law[(lam, policy)] = evaluate(instance.with_network(request_intensity=lam), mix, policy, target=tau, queue_law="engine")
        return law[(lam, policy)]

    for row in report["coverage_table"]:
        lam, policy = float(row["intensity"]), str(row["policy"])
        engine = by_intensity.get(lam) if policy == "load_aware" else None
        row["slots_simulated"], row["slots_simulated_se"] = row["simulated"], row["simulated_se"]
        row["simulated"] = None if engine is None else engine["coverage_engine"]
        row["simulated_se"] = None if engine is None else engine["coverage_engine_se"]
        row["engine_law"] = float(predicted(lam, policy).coverage())
    for row in engine_rows:
        ev = predicted(float(row["intensity"]), "load_aware")
        row["engine_law"] = float(ev.coverage())
        row["engine_law_mean_ttft"] = float(ev.mean_ttft) if np.isfinite(ev.mean_ttft) else None


def short_horizon_warning(instance, mix, horizon: float, tau: float) -> str | None:
    """The warning when the measured ``horizon`` holds fewer than ``SHORT_SPAN`` mean service times of a
    request (``Σ_q p_q Σ_s A_{s,q} / μ_{s,q}`` at the instance's Λ, load-aware; as ``replay`` warns,
    docs/model.md §17.7 and §20): the simulated network is then mostly transient, and its coverage is not the
    steady state the analysis describes (``decode = 1e30`` gave 0 analytical against 0.31 simulated)."""
    ev = evaluate(instance, mix, "load_aware", target=tau)
    mean = float(np.nansum(instance.probabilities * (np.asarray(ev.association) * instance.service_time).sum(axis=0)))
    if not (np.isfinite(mean) and mean > 0):
        return None
    spans = horizon / mean
    if spans >= SHORT_SPAN:
        return None
    return (
        f"the measured span is {spans:.3g} mean service times (< {SHORT_SPAN:g}; a request's mean service time is "
        f"{mean:.3g} s): the simulation is mostly transient, not the steady state the analysis describes; raise --horizon"
    )


def _other_router(report: dict, router: str) -> dict | None:
    """The load-aware row where the two routers' predictions differ most (a note when by more than 0.05)."""
    rows = [row for row in report["coverage_table"] if row["policy"] == "load_aware"]
    if not rows:
        return None
    mine, theirs = QUEUE_MODEL_OF_ROUTER[router], QUEUE_MODEL_OF_ROUTER[other_router(router)]  # coverage_table columns
    row = max(rows, key=lambda r: abs(r[theirs] - r[mine]))
    entry = router_note(router, float(row[mine]), float(row[theirs]), what=f"coverage at Λ = {row['intensity']:g}")
    return None if entry is None else {"intensity": row["intensity"], **entry}


def _association(instance, mix, samples: int, seed: int, tau: float, step=lambda label: None) -> dict:
    out = {}
    for policy in ANALYTICAL_POLICIES:
        ev = evaluate(instance, mix, policy, target=tau)
        start = time.perf_counter()
        mc = simulate_instance_association(instance, mix, ev.bias, samples=samples, seed=seed)
        elapsed = time.perf_counter() - start
        analytic = np.asarray(ev.association, dtype=float)
        out[policy] = {
            "analytical": analytic.tolist(),
            "simulated": mc.association.tolist(),
            "max_abs_error": float(np.abs(mc.association - analytic).max()),
            "binomial_se": float(mc.standard_error().max()),
            "seconds": elapsed,
            "mean_distance_analytical": float(ev.mean_distance),
            "mean_distance_simulated": float(
                np.nansum(np.asarray(instance.probabilities)[None, :] * mc.association * np.nan_to_num(mc.mean_distance()))
            ),
        }
        step(f"association {policy}")
    return out


def _edge_effect(instance, mix, layout_spec: LayoutSpec, seed: int) -> dict:
    """KS distance of the torus nearest-node distance per tier vs ``1 − exp(−π λ_s r²)``."""
    pi = instance.mix_vector(mix)
    layout = sample_layout(instance, mix, layout_spec, seed=seed)
    lam = pi * instance.network.edge_density
    ks = edge_effect_check(layout, lam, seed=seed)
    counts = np.bincount(layout.profile, minlength=pi.size)
    return {
        sid: {"kolmogorov": float(ks[s]), "nodes": int(counts[s]), "reference": float(1.36 / np.sqrt(counts[s])) if counts[s] else None}
        for s, sid in enumerate(instance.profile_ids)
    }


def _queues(instance, mix, customers: int, seed: int, tau: float) -> list[dict]:
    ev = evaluate(instance, mix, "load_aware", target=tau)
    rows = []
    for s, sid in enumerate(instance.profile_ids):
        lam = float(ev.arrival_rate[s])
        if not ev.active[s] or not lam > 0 or not ev.utilization[s] < 1:
            continue
        mu = 1.0 / float(ev.mean_service[s])
        c = int(instance.concurrency[s])
        start = time.perf_counter()
        res = simulate_mmc(lam, mu, c, customers, seed=seed + s)
        rows.append(
            {
                "profile": sid,
                "servers": c,
                "utilization": res.utilization,
                "wait_probability_erlang": res.erlang_wait_probability,
                "wait_probability_simulated": res.wait_probability,
                "mean_wait_erlang": res.erlang_mean_wait,
                "mean_wait_simulated": res.mean_wait,
                "mean_wait_se": res.mean_wait_standard_error(),
                "kolmogorov": res.kolmogorov,
                "customers": customers,
                "seconds": time.perf_counter() - start,
            }
        )
    return rows


def render(report: dict, instance, network: str = "") -> str:
    """The text report: one table per check, in plain words."""
    head = "  ".join(
        filter(
            None,
            [
                f"instance {report['instance']}",
                network,
                f"target τ = {report['target']:g} s",
                f"router {report['router']} (queue model {report['queue_model']})",
            ],
        )
    )
    mix = "mix      " + "  ".join(f"{k}={v:.4f}" for k, v in report["mix"].items())
    lines = [
        head,
        mix,
        "",
        "association (share of each request type served by each profile): Monte Carlo vs analysis",
        f"{'policy':<12}{'max error':>11}{'binom. SE':>11}{'mean distance':>15}{'simulated':>11}{'seconds':>9}",
    ]
    for policy, d in report["association"].items():
        lines.append(
            f"{policy:<12}{d['max_abs_error']:>11.2e}{d['binomial_se']:>11.2e}"
            f"{fmt(d['mean_distance_analytical']):>15}{fmt(d['mean_distance_simulated']):>11}{d['seconds']:>9.3f}"
        )
    lines += [
        "",
        "queue tail at the load-aware operating point: FCFS M/M/c simulation vs Erlang C",
        f"{'profile':<10}{'servers':>8}{'load':>7}{'wait prob. (Erlang C)':>22}{'simulated':>10}{'mean wait [s] (Erlang C)':>25}"
        f"{'simulated':>10}{'± SE':>8}{'KS':>8}",
    ]
    for d in report["queues"]:
        lines.append(
            f"{d['profile']:<10}{d['servers']:>8d}{d['utilization']:>7.3f}{d['wait_probability_erlang']:>22.4f}"
            f"{d['wait_probability_simulated']:>10.4f}{d['mean_wait_erlang']:>25.4f}{d['mean_wait_simulated']:>10.4f}"
            f"{d['mean_wait_se']:>8.4f}{d['kolmogorov']:>8.4f}"
        )
    lines += [
        "",
        "edge effect of the torus: Kolmogorov–Smirnov distance of the nearest-node distance per profile "
        "vs the plane's Rayleigh law (reference: 1.36/√nodes)",
        "  " + "  ".join(f"{sid}: {fmt(d['kolmogorov'], 3)} (ref {fmt(d['reference'], 3)})" for sid, d in report["edge_effect"].items()),
    ]
    lines += [
        "",
        "TTFT coverage: network simulation (Theorem 1's tier rule) vs the mean-field model (eq. (39)), the cell model "
        "(§14), the sampled Gamma-law and node-level Erlang-C corrections; 'online': the online router with fresh "
        "per-node telemetry on the same networks (at the run's telemetry age), 'predicted' its model (docs/model.md §11)",
        f"{'Λ':>4} {'policy':<11}{'simulated':>10}{'± SE':>8}{'meanfield':>10}{'error':>8}{'cell':>8}{'error':>8}"
        f"{'Gamma':>8}{'error':>8}{'node':>8}{'error':>8}{'online':>8}{'± SE':>7}{'predicted':>10}  closest",
    ]
    for d in report["coverage"]:
        online = (
            f"{d['online']:>8.4f}{d['online_se']:>7.4f}" if d.get("online") is not None and np.isfinite(d["online"]) else f"{'—':>8}{'':>7}"
        )
        lines.append(
            f"{d['intensity']:>4g} {d['policy']:<11}{d['simulated']:>10.4f}{d['simulated_se']:>8.4f}"
            f"{d['analytical']:>10.4f}{d['error_analytical']:>+8.4f}{d['cell']:>8.4f}{d['error_cell']:>+8.4f}"
            f"{d['gamma']:>8.4f}{d['error_gamma']:>+8.4f}"
            f"{d['node_erlang']:>8.4f}{d['error_node_erlang']:>+8.4f}{online}{fmt(d.get('online_predicted')):>10}"
            f"  {d['closest']}"
        )
    if "policies" in report:
        ids = instance.profile_ids
        lines += [
            "",
            "policies (simulated): coverage, TTFT quantiles [s], per-profile utilisation",
            f"{'Λ':>4} {'router':<19}{'coverage':>9}{'analysis':>9}{'p50':>7}{'p95':>7}{'p99':>7}{'rejected':>9}  "
            + " ".join(f"{s:>8}" for s in ids),
        ]
        for d in report["policies"]:
            util = " ".join(f"{d['tiers'][s]['utilization']:>8.3f}" for s in ids)
            lines.append(
                f"{d['intensity']:>4g} {d['router']:<19}{d['coverage']:>9.3f}{fmt(d['analytical_coverage'], 3):>9}"
                f"{fmt(d['p50'], 2):>7}{fmt(d['p95'], 2):>7}{fmt(d['p99'], 2):>7}{d['rejected']:>9.3f}  {util}"
            )
        lines += [
            "",
            f"telemetry period sweep at Λ = {max(d['intensity'] for d in report['policies']):g} "
            "(load_aware_online, k = 2; 'counting': the router also counts its own in-flight requests)",
            f"{'period [s]':>10}{'coverage':>10}{'p95':>8}{'counting: coverage':>20}{'p95':>8}",
        ]
        by_period: dict[float, dict[bool, dict]] = {}
        for d in report["staleness"]:
            by_period.setdefault(d["refresh_period"], {})[d["local_accounting"]] = d
        for period, pair in by_period.items():
            plain, acct = pair.get(False), pair.get(True)
            lines.append(
                f"{period:>10g}{fmt(None if plain is None else plain['coverage']):>10}{fmt(None if plain is None else plain['p95'], 2):>8}"
                f"{fmt(None if acct is None else acct['coverage']):>20}{fmt(None if acct is None else acct['p95'], 2):>8}"
            )
    eng = report.get("engine")
    if eng:
        lines += [
            "",
            f"model workload on engine nodes ({eng['engine']}, cache {eng['cache']}, router {eng['router']}): coverage vs analysis",
            f"{'Λ':>6}{'engine':>9}{'± SE':>8}{'analysis':>10}{'TTFT p50':>10}{'p99':>8}{'hit blocks':>11}{'preempt':>9}",
        ]
        for d in eng["rows"]:
            lines.append(
                f"{d['intensity']:>6g}{fmt(d['coverage_engine']):>9}{fmt(d['coverage_engine_se']):>8}"
                f"{fmt(d['coverage_analytical']):>10}{fmt(d['ttft_p50'], 2):>10}{fmt(d['ttft_p99'], 2):>8}"
                f"{fmt(d['hit_rate_blocks']):>11}{d['preemptions']:>9.0f}"
            )
    return "\n".join(lines)


def _save(fig, path: Path) -> None:
    """Save a figure atomically and close it."""
    import matplotlib.pyplot as plt

    try:
        atomic_savefig(fig, path, dpi=120)
    finally:
        plt.close(fig)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def association_figure(report: dict, instance):
    """Monte Carlo against analysis, one point per (profile, request type) pair of a profile with
    share > 0, one panel per policy (readable for any number of pairs; share-0 profiles serve nothing)."""
    plt = _pyplot()
    shares = np.asarray(list(report["mix"].values()), dtype=float) if "mix" in report else np.ones(len(instance.profile_ids))
    n = len(report["association"])
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.6), squeeze=False, layout="constrained")
    for ax, (policy, d) in zip(axes[0], report["association"].items()):
        ana, sim = np.asarray(d["analytical"], dtype=float), np.asarray(d["simulated"], dtype=float)
        used = shares > 0
        ana, sim = ana[used].ravel(), np.nan_to_num(sim[used].ravel())
        ax.plot([0.0, 1.0], [0.0, 1.0], "-", color="0.7", lw=1, label="equal")
        ax.plot(ana, sim, "o", ms=4, label="(profile, request type)")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("share served, analysis", fontsize=8)
        ax.set_ylabel("share served, Monte Carlo", fontsize=8)
        ax.set_title(f"{policy}: largest error {d['max_abs_error']:.1e}", fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="outside lower center", ncols=2)
    fig.suptitle("association: analysis vs Monte Carlo (profiles with share > 0)", fontsize=10)
    return fig


def queues_figure(report: dict):
    """Probability of waiting per profile: Erlang C beside the M/M/c simulation."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.6), layout="constrained")
    names = [d["profile"] for d in report["queues"]]
    x = np.arange(len(names))
    ax.bar(x - 0.2, [d["wait_probability_erlang"] for d in report["queues"]], 0.4, label="Erlang C (analysis)")
    ax.bar(x + 0.2, [d["wait_probability_simulated"] for d in report["queues"]], 0.4, label="M/M/c simulation")
    ax.set_xticks(x, names)
    ax.set_xlabel("profile")
    ax.set_ylabel("probability of waiting")
    ax.set_title("queue tail at the load-aware operating point", fontsize=10)
    fig.legend(fontsize=7, loc="outside right upper")
    return fig


def coverage_figure(report: dict):
    """TTFT coverage vs request intensity: simulation (±2 SE) and the three analytical curves per policy."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    for i, policy in enumerate(ANALYTICAL_POLICIES):
        rows = [d for d in report["coverage"] if d["policy"] == policy]
        if not rows:
            continue
        lam = [d["intensity"] for d in rows]
        color = f"C{i}"
        ax.plot(lam, [d["analytical"] for d in rows], "-", color=color, label=f"{policy}: analysis")
        ax.plot(lam, [d["gamma"] for d in rows], ":", color=color, label=f"{policy}: Gamma-law correction")
        ax.plot(lam, [d["cell"] for d in rows], "-.", color=color, label=f"{policy}: cell model (§14)")
        ax.plot(lam, [d["node_erlang"] for d in rows], "--", color=color, label=f"{policy}: node-level Erlang C")
        ax.errorbar(
            lam,
            [d["simulated"] for d in rows],
            yerr=[2 * d["simulated_se"] for d in rows],
            fmt="o",
            color=color,
            label=f"{policy}: simulation ± 2 SE",
        )
        online = [d for d in rows if d.get("online") is not None and np.isfinite(d["online"])]
        if online:
            ax.errorbar(
                [d["intensity"] for d in online],
                [d["online"] for d in online],
                yerr=[2 * d["online_se"] for d in online],
                fmt="s",
                mfc="none",
                color=color,
                label=f"{policy}: online router, simulation ± 2 SE",
            )
    ax.set_xlabel("request intensity Λ [requests per unit area per second]")
    ax.set_ylabel(f"share of requests with TTFT ≤ {report['target']:g} s")
    ax.set_title("TTFT coverage: network simulation vs analysis", fontsize=10)
    fig.legend(fontsize=7, loc="outside right upper")
    return fig


def write_plots(report: dict, instance, out: Path) -> list[str]:
    """association.png, queues.png (when a tier is active) and coverage.png in ``out``, each atomically."""
    written = []
    figures = [("association.png", association_figure(report, instance))]
    if report["queues"]:
        figures.append(("queues.png", queues_figure(report)))
    figures.append(("coverage.png", coverage_figure(report)))
    for name, fig in figures:
        _save(fig, out / name)
        written.append(str(out / name))
    return written
