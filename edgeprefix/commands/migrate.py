"""``edgeprefix migrate``: epoch mixes and the migration plans between them (docs/model.md §10.5).

The epochs file (TOML, or JSON by suffix)::

    instance = "paper_baseline"        # embedded name or path (relative to this file); optional
    current_mix = { none = 0.18, shallow = 0.54, deep = 0.28 }   # π^0 (default: the instance's mix)
    change_budget = 0.15               # m_max: share of nodes that may change profile per epoch
    byte_weight = 0.0                  # γ: objective cost per byte moved (instance memory units)

    [[epochs]]
    name = "evening"
    request_intensity = 3.5            # Λ^e
    probabilities = { short = 0.6, long = 0.4 }   # overrides of p^e
    weight = 1.0                       # w_e
    start = 0.0                        # optional window on a trace's clock, seconds (edgeprefix epochs)
    end = 600.0
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from edgeprefix.commands._common import (
    ROUTER_OF_QUEUE_MODEL,
    add_queue_model_argument,
    add_router_argument,
    fmt,
    prediction_from_args,
    print_json,
    print_router_note,
    queue_law_from_args,
    router_line,
    router_note,
)
from edgeprefix.commands._online import online_prediction, run_model, run_telemetry
from edgeprefix.commands._overload import node_overload, overload_line
from edgeprefix.commands._telemetry import add_telemetry_options
from edgeprefix.commands.solve import add_search_arguments, search_options
from edgeprefix.formulations.migration import load_migration
from edgeprefix.formulations.objective import POLICIES
from edgeprefix.solvers.migration import MigrationSolution, solve_migration


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "migrate",
        help="decide per-epoch mixes under a node-change budget and plan the migrations",
        description="Per-epoch profile mixes maximising w_e P_cov^e − γ·bytes under the node-change budget m_max, "
        "and the transport-LP migration plan m_{s→t} between consecutive mixes (docs/model.md §10.5).",
    )
    parser.add_argument("epochs_file", metavar="EPOCHS_FILE", help="TOML or JSON file with the epochs, current mix, budget and γ")
    parser.add_argument("--policy", choices=POLICIES, default="load_aware", help="routing policy (default: load_aware)")
    add_search_arguments(
        parser, default_method="grid", budget_help="evaluations per epoch (grid: every point; with --joint: in total, default 300)"
    )
    parser.set_defaults(method=None)  # grid, or spsa with --joint
    add_router_argument(parser)
    add_queue_model_argument(parser)
    add_telemetry_options(parser)
    parser.add_argument("--joint", action="store_true", help="search all epochs' mixes at once instead of epoch by epoch")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    problem = load_migration(args.epochs_file, policy=args.policy)
    router, queue_model = prediction_from_args(args, problem.instance)
    queue_law = queue_law_from_args(args, problem.instance)
    problem = dataclasses.replace(problem, queue_model=queue_model, queue_law=queue_law)
    args.method = args.method or ("spsa" if args.joint else "grid")
    if args.method != "grid" and args.budget is None and not args.joint:
        raise ValueError(f"--method {args.method} needs --budget N (evaluations per epoch)")
    solution = solve_migration(problem, method=args.method, budget=args.budget, seed=args.seed, joint=args.joint, **search_options(args))
    other = _other_router(problem, solution, router) if queue_law == "slots" else None  # the engine law has no cell model
    nodes = [
        node_overload(problem.epoch_instance(e), d.mix, args.policy, None, queue_model, queue_law) for e, d in enumerate(solution.epochs)
    ]
    online = _online_by_epoch(args, problem, solution)
    if args.json:
        payload = {
            **solution.to_dict(),
            "queue_model": queue_model,
            "queue_law": queue_law,
            "router": ROUTER_OF_QUEUE_MODEL[queue_model],
            **({"other_router": other} if other is not None else {}),
            **online,
        }
        payload["epochs"] = [{**row, **shares} for row, shares in zip(payload["epochs"], nodes)]
        print_json(payload)
    else:
        print(render(problem.instance.name, problem.change_budget, problem.byte_weight, solution))
        for d, shares in zip(solution.epochs, nodes):
            print(f"epoch {d.name}: {overload_line(shares, queue_model)}")
        print(router_line(queue_model))
        tel = online["telemetry"]
        if tel["delay"] or tel["refresh"]:
            print(
                f"online router at telemetry delay {tel['delay']:g} s, refresh {tel['refresh']:g} s, coverage per epoch: "
                + " ".join(f"{c:.4f}" for c in online["online_predicted"])
                + " (docs/model.md §11)"
            )
    print_router_note(other)
    return 0


def _other_router(problem: Any, solution: MigrationSolution, router: str) -> dict[str, Any] | None:
    """The other router's coverage of the epoch where its prediction differs most (a note when by more than 0.05)."""
    from edgeprefix.placement.model.evaluation import evaluate
    from edgeprefix.placement.model.router import QUEUE_MODEL_OF_ROUTER, other_router

    model = QUEUE_MODEL_OF_ROUTER[other_router(router)]
    worst: tuple[float, int, float] | None = None
    for e, decision in enumerate(solution.epochs):
        if not decision.feasible:
            continue
        instance = problem.epoch_instance(e)
        target = instance.placement.target if problem.target is None else float(problem.target)
        value = float(evaluate(instance, decision.mix, problem.policy, target=target, queue_model=model).coverage())
        gap = abs(value - decision.coverage)
        if worst is None or gap > worst[0]:
            worst = (gap, e, value)
    if worst is None:
        return None
    _, e, value = worst
    name = solution.epochs[e].name
    entry = router_note(router, float(solution.epochs[e].coverage), value, what=f"coverage of epoch {name}")
    return None if entry is None else {"epoch": name, **entry}


def _online_by_epoch(args: argparse.Namespace, problem, solution) -> dict:
    """``telemetry`` and the online router's predicted coverage of each epoch's chosen mix (docs/model.md §11)."""
    telemetry = run_telemetry(args, problem.instance)
    if telemetry.fresh:
        return {"telemetry": {"delay": 0.0, "refresh": 0.0}, "online_predicted": None}
    covs = [
        online_prediction(problem.epoch_instance(e), decision["mix"], telemetry, method=run_model(args), region=False)["coverage"]
        for e, decision in enumerate(solution.to_dict()["epochs"])
    ]
    return {"telemetry": {"delay": telemetry.delay, "refresh": telemetry.refresh}, "online_predicted": covs}


def render(name: str, budget: float | None, gamma: float, solution: MigrationSolution) -> str:
    lines = [
        f"instance {name}  change budget m_max {budget if budget is not None else '∞'}  byte weight γ {gamma:g}",
        "current  " + "  ".join(f"{k}={v:.4f}" for k, v in solution.current.items()),
    ]
    for e in solution.epochs:
        lines += [
            "",
            f"epoch {e.name}: coverage {fmt(e.coverage)}  feasible {e.feasible}  "
            f"moved share {e.plan.moved_share:.4f}  moved bytes {e.plan.moved_bytes:.4g}",
            "  mix    " + "  ".join(f"{k}={v:.4f}" for k, v in e.mix.items()),
        ]
        table = e.plan.table()
        if not table:
            lines.append("  plan   no node changes profile")
        for source, moves in table.items():
            for dest, share in moves.items():
                lines.append(f"  plan   {source} → {dest}: {share:.4f}")
    lines += ["", f"objective {solution.objective:.4f}  evaluations {solution.evaluations}  seconds {solution.seconds:.2f}"]
    return "\n".join(lines)
