"""``edgeprefix evaluate``: one placement evaluated at its load–association fixed point."""

from __future__ import annotations

import argparse
import sys

from edgeprefix.commands._common import (
    add_instance_argument,
    add_mix_arguments,
    add_queue_model_argument,
    add_router_argument,
    fmt,
    instance_from_args,
    mix_from_args,
    network_text,
    prediction_from_args,
    print_json,
    print_router_note,
    queue_law_from_args,
    router_line,
    router_note,
    target_text,
)
from edgeprefix.commands._online import online_line, online_prediction, run_model, run_telemetry, show_online
from edgeprefix.commands._overload import cell_accuracy, horizon_text
from edgeprefix.commands._telemetry import add_telemetry_options
from edgeprefix.placement.memory import evaluation_estimate
from edgeprefix.placement.model.evaluation import Evaluation, evaluate
from edgeprefix.placement.model.fixed_point import METHODS
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.policies import POLICIES
from edgeprefix.placement.model.router import QUEUE_MODEL_OF_ROUTER, other_router
from edgeprefix.placement.model.sensitivity import sensitivity
from edgeprefix.placement.work_progress import long_work

EXIT_NOT_CONVERGED = 3
EXIT_OVERLOADED = 1  # as solve's "no evaluated mix was stable"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "evaluate",
        help="evaluate a profile mix: association, queues, TTFT coverage",
        description="Evaluate a profile mix at its load–association fixed point (docs/model.md §5–8). "
        "Exit code 2 on bad input, 3 when the fixed point does not converge, 1 when the network is overloaded "
        "(some active profile's load ρ_s >= 1: no steady state, the tables are printed all the same).",
    )
    add_instance_argument(parser)
    add_mix_arguments(parser, "profile shares, e.g. none=0.3,shallow=0.5,deep=0.2 (default: the instance's mix)")
    parser.add_argument("--policy", choices=POLICIES, default="load_aware", help="routing policy (default: load_aware)")
    parser.add_argument("--target", type=float, default=None, metavar="SECONDS", help="TTFT target τ (default: the instance's)")
    parser.add_argument("--method", choices=METHODS, default="robust", help="fixed-point method (default: robust)")
    add_router_argument(parser)
    add_queue_model_argument(parser)
    add_telemetry_options(parser)
    parser.add_argument(
        "--freshness-for",
        type=float,
        default=None,
        metavar="ZETA",
        help="also find the oldest telemetry (a continuous delay, and a refresh period) at which the online "
        "router's predicted coverage still reaches ZETA (docs/model.md (11.18)); JSON key freshness",
    )
    parser.add_argument(
        "--gradient",
        action="store_true",
        help="also print ∂P_cov(τ)/∂π_s per profile (exact, other shares held fixed; one-sided at share 0)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """The command, under a progress bar of type blocks when the size guard's estimate calls the run long
    (docs/model.md §20; placement/work_progress.py): on stderr, never in the tables or the JSON."""
    instance = instance_from_args(args)
    with long_work(evaluation_estimate(instance, mix_from_args(args), args.policy), "evaluate"):
        return _run(args, instance)


def _run(args: argparse.Namespace, instance: Instance) -> int:
    router, queue_model = prediction_from_args(args, instance)
    mix = mix_from_args(args)
    telemetry = run_telemetry(args, instance)
    queue_law = queue_law_from_args(args, instance)
    ev = evaluate(instance, mix, args.policy, target=args.target, method=args.method, queue_model=queue_model, queue_law=queue_law)
    fp = ev.fixed_point
    converged = fp is None or fp.converged
    gradient = None
    if args.gradient and converged:
        gradient = sensitivity(ev).by_profile("coverage")
    other = other_ev = online = None
    if converged and queue_law == "slots":  # the engine law has no cell model: no other-router note
        other_model = QUEUE_MODEL_OF_ROUTER[other_router(router)]
        other_ev = evaluate(instance, mix, args.policy, target=args.target, method=args.method, queue_model=other_model)
        other = router_note(router, float(ev.coverage()), float(other_ev.coverage()))
        mean_field = ev if ev.queue_model == "meanfield" else other_ev  # the online prediction starts from it, not anew
        online = online_prediction(instance, mix, telemetry, target=args.target, evaluation=mean_field, method=run_model(args))
    accuracy = cell_accuracy(ev)
    freshness = None
    if args.freshness_for is not None and converged:
        from edgeprefix.solvers.telemetry_mix import freshness_for

        try:
            freshness = {
                kind: freshness_for(
                    instance, mix, args.freshness_for, target=args.target, refresh=kind == "refresh", method=run_model(args)
                )
                for kind in ("delay", "refresh")
            }
        except ValueError as exc:
            raise ValueError(f"--freshness-for: {str(exc).split(': ', 1)[-1]}") from None
    if args.json:
        payload = ev.to_dict()
        payload["cell_accuracy_region"] = accuracy
        if other is not None:
            payload["other_router"] = other
        if args.gradient:
            payload["gradient"] = gradient
        payload["telemetry"] = {"delay": telemetry.delay, "refresh": telemetry.refresh}
        payload["online_predicted"] = online
        if freshness is not None:
            payload["freshness"] = freshness
        print_json(payload)
    else:
        print(render(ev, network_text(instance, args), args, gradient))
        if online is not None and show_online(online):
            print(online_line(online))
        if freshness is not None:
            print(freshness_line(freshness))
        if accuracy is not None:
            print(f"note: {accuracy}")
    print_router_note(other)
    if fp is not None and not fp.converged:
        print(
            f"edgeprefix evaluate: warning: the fixed point did not converge ({fp.method}, {fp.iterations} iterations, "
            f"residual {fp.residual:.3g}); the numbers above are not an operating point",
            file=sys.stderr,
        )
        return EXIT_NOT_CONVERGED
    if not ev.stable:
        print(f"edgeprefix evaluate: error: {overload_text(ev)}", file=sys.stderr)
        return EXIT_OVERLOADED
    return 0


def overload_text(ev: Evaluation) -> str:
    """One line: which profile is overloaded, by how much, and what to change."""
    import numpy as np

    load = np.where(ev.active, np.nan_to_num(ev.utilization, nan=0.0, posinf=np.inf), 0.0)
    s = int(np.argmax(load))
    net = ev.instance.network
    return (
        f"the network is overloaded: profile {ev.instance.profile_ids[s]!r} has load ρ = {load[s]:.3g} >= 1 "
        f"(Λ = {net.request_intensity:g}, λ_b = {net.edge_density:g}), so no coverage holds in steady state; "
        "lower --intensity, raise --density or give a mix with more nodes on the loaded profiles"
    )


def render(ev: Evaluation, network: str = "", args: argparse.Namespace | None = None, gradient: dict[str, float] | None = None) -> str:
    """Readable tables of one evaluation; ``network`` (the header's Λ, λ_b) names the overrides; ``gradient`` adds ``∂P_cov/∂π_s``."""
    d = ev.to_dict()
    fp = d["fixed_point"]
    lines = [
        "  ".join(
            filter(
                None,
                [
                    f"instance {d['instance']}",
                    network,
                    f"policy {d['policy']}",
                    target_text("τ", d["target"], args or argparse.Namespace()),
                    f"queue model {d['queue_model']}" if d["queue_model"] != "meanfield" else "",
                    "queue law engine (docs/model.md §17.10)" if d.get("queue_law") == "engine" else "",
                ],
            )
        ),
        "mix      " + "  ".join(f"{k}={v:g}" for k, v in d["mix"].items()),
        "",
        f"TTFT coverage at τ          {fmt(d['coverage'])}",
        f"  {router_line(d['queue_model'])}",
        *([f"  {d['engine_law_region']['note']}"] if d.get("engine_law_region") else []),
        f"queue-free bound            {fmt(d['coverage_queue_free'])}",
        f"mean TTFT [s]               {fmt(d['mean_ttft'])}",
        f"offloading ratio            {fmt(d['offload_ratio'])}",
        f"mean reused prefix [tokens] {fmt(d['mean_prefix_depth'], 1)}",
        f"mean serving distance       {fmt(d['mean_distance'])}",
        (f"stable (every load < 1)     {d['stable']}" if d["queue_model"] != "cell" else f"stable (tiers and nodes)    {d['stable']}"),
        "  overloaded nodes (load >= 1 under the cell law): "
        + (
            "not computed (no converged fixed point)"
            if d["overloaded_node_share"] is None
            else f"{100 * d['overloaded_node_share']:.1f} % of nodes, {100 * d['overloaded_request_share']:.1f} % of requests"
            + ("; " + horizon_text(d) if d["queue_model"] == "cell" else "; the online router balances them (docs/model.md §14.9)")
        ),
        f"fixed point                 {fp['method']}: converged={fp['converged']} iterations={fp['iterations']} "
        f"residual={fp['residual']:.2e}",
        "",
        f"{'profile':<12}{'share':>7}{'servers':>8}{'memory':>9}{'arrivals/s':>11}{'load':>7}{'wait prob.':>11}{'mean wait [s]':>14}",
    ]
    for t in d["tiers"]:
        lines.append(
            f"{t['profile']:<12}{t['share']:>7.3f}{t['concurrency']:>8d}{t['memory']:>9.4f}"
            f"{fmt(t['arrival_rate'], 3):>11}{fmt(t['utilization'], 3):>7}{fmt(t['wait_probability'], 3):>11}"
            f"{fmt(t['mean_wait'], 4):>14}"
        )
    profiles = list(d["mix"])
    lines += ["", "association: share of each request type served by each profile", f"{'type':<12}" + "".join(f"{p:>12}" for p in profiles)]
    for q, row in d["association"].items():
        lines.append(f"{q:<12}" + "".join(f"{row[p]:>12.4f}" for p in profiles))
    if gradient is not None:
        lines += [
            "",
            "∂P_cov(τ)/∂π_s (other shares held fixed; one-sided at share 0)",
            "".join(f"{p:>12}" for p in profiles),
            "".join(f"{gradient[p]:>12.5f}" for p in profiles),
        ]
    return "\n".join(lines)


def freshness_line(block: dict) -> str:
    """One line for ``--freshness-for``."""
    first = block["delay"]
    if first["max_age"] is None:
        return (
            f"telemetry: coverage {first['coverage']:g} is out of reach even with fresh telemetry "
            f"({first['fresh_coverage']:.4f}; docs/model.md (11.18))"
        )
    parts = []
    for kind, word in (("delay", "a delay"), ("refresh", "a refresh period")):
        age = block[kind]["max_age"]
        parts.append(f"{word} of at most {age:g} s" + (" (or more: the search stops there)" if age >= block[kind]["upper"] else ""))
    return (
        f"telemetry: the online router keeps coverage {first['coverage']:g} with "
        + " or ".join(parts)
        + f" (fresh: {first['fresh_coverage']:.4f}; docs/model.md (11.18))"
    )
