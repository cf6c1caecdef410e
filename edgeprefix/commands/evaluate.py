"""``edgeprefix evaluate``: one placement evaluated at its load–association fixed point."""

from __future__ import annotations

import argparse
import sys

from edgeprefix.commands._common import (
    add_instance_argument,
    add_queue_model_argument,
    fmt,
    instance_from_args,
    network_text,
    parse_mix,
    print_json,
    queue_model_from_args,
    router_line,
    target_text,
)
from edgeprefix.commands._online import online_line, online_prediction, run_telemetry
from edgeprefix.commands._telemetry import add_telemetry_options
from edgeprefix.placement.model.evaluation import Evaluation, evaluate
from edgeprefix.placement.model.fixed_point import METHODS
from edgeprefix.placement.model.policies import POLICIES
from edgeprefix.placement.model.sensitivity import sensitivity

EXIT_NOT_CONVERGED = 3


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "evaluate",
        help="evaluate a profile mix: association, queues, TTFT coverage",
        description="Evaluate a profile mix at its load–association fixed point (docs/model.md §5–8). "
        "Exit code 2 on bad input, 3 when the fixed point does not converge.",
    )
    add_instance_argument(parser)
    parser.add_argument("--mix", default=None, help="profile shares, e.g. none=0.3,shallow=0.5,deep=0.2 (default: the instance's mix)")
    parser.add_argument("--policy", choices=POLICIES, default="load_aware", help="routing policy (default: load_aware)")
    parser.add_argument("--target", type=float, default=None, metavar="SECONDS", help="TTFT target τ (default: the instance's)")
    parser.add_argument("--method", choices=METHODS, default="robust", help="fixed-point method (default: robust)")
    add_queue_model_argument(parser)
    add_telemetry_options(parser)
    parser.add_argument("--gradient", action="store_true",
                        help="also print ∂P_cov(τ)/∂π_s per profile (exact, other shares held fixed; one-sided at share 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    instance = instance_from_args(args)
    telemetry = run_telemetry(args, instance)
    ev = evaluate(instance, parse_mix(args.mix), args.policy, target=args.target, method=args.method,
                  queue_model=queue_model_from_args(args))
    fp = ev.fixed_point
    online = None if fp is not None and not fp.converged else online_prediction(
        instance, parse_mix(args.mix), telemetry, target=args.target, evaluation=ev)
    gradient = None
    if args.gradient and (fp is None or fp.converged):
        gradient = sensitivity(ev).by_profile("coverage")
    if args.json:
        payload = ev.to_dict()
        if args.gradient:
            payload["gradient"] = gradient
        payload["telemetry"] = {"delay": telemetry.delay, "refresh": telemetry.refresh}
        payload["online_predicted"] = online
        print_json(payload)
    else:
        print(render(ev, network_text(instance, args), args, gradient))
        if online is not None and not telemetry.fresh:
            print(online_line(online))
    if fp is not None and not fp.converged:
        print(
            f"edgeprefix evaluate: warning: the fixed point did not converge ({fp.method}, {fp.iterations} iterations, "
            f"residual {fp.residual:.3g}); the numbers above are not an operating point",
            file=sys.stderr,
        )
        return EXIT_NOT_CONVERGED
    return 0


def render(ev: Evaluation, network: str = "", args: argparse.Namespace | None = None, gradient: dict[str, float] | None = None) -> str:
    """Readable tables of one evaluation; ``network`` (the header's Λ, λ_b) names the overrides; ``gradient`` adds ``∂P_cov/∂π_s``."""
    d = ev.to_dict()
    fp = d["fixed_point"]
    lines = [
        "  ".join(filter(None, [f"instance {d['instance']}", network, f"policy {d['policy']}",
                                target_text("τ", d["target"], args or argparse.Namespace()),
                                f"queue model {d['queue_model']}" if d["queue_model"] != "meanfield" else ""])),
        "mix      " + "  ".join(f"{k}={v:g}" for k, v in d["mix"].items()),
        "",
        f"TTFT coverage at τ          {fmt(d['coverage'])}",
        f"  {router_line(d['queue_model'])}",
        f"queue-free bound            {fmt(d['coverage_queue_free'])}",
        f"mean TTFT [s]               {fmt(d['mean_ttft'])}",
        f"offloading ratio            {fmt(d['offload_ratio'])}",
        f"mean reused prefix [tokens] {fmt(d['mean_prefix_depth'], 1)}",
        f"mean serving distance       {fmt(d['mean_distance'])}",
        f"stable (every load < 1)     {d['stable']}",
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
    lines += ["", "association: share of each request type served by each profile",
              f"{'type':<12}" + "".join(f"{p:>12}" for p in profiles)]
    for q, row in d["association"].items():
        lines.append(f"{q:<12}" + "".join(f"{row[p]:>12.4f}" for p in profiles))
    if gradient is not None:
        lines += ["", "∂P_cov(τ)/∂π_s (other shares held fixed; one-sided at share 0)",
                  "".join(f"{p:>12}" for p in profiles), "".join(f"{gradient[p]:>12.5f}" for p in profiles)]
    return "\n".join(lines)
