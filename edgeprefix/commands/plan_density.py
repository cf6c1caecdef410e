"""``edgeprefix plan-density``: the fewest edge nodes meeting a coverage target (docs/model.md §10.4); with
``--queue-law engine --refine-on-engine`` also that density refined on the batching-engine simulation
(docs/model.md §17.10.2, :mod:`._engine_refine`)."""

from __future__ import annotations

import argparse

import numpy as np

from edgeprefix.commands._common import (
    ROUTER_OF_QUEUE_MODEL,
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
from edgeprefix.commands._engine_refine import add_refine_arguments, engine_step, refine_size_from_args, refinement_lines, run_refinement
from edgeprefix.commands._online import online_line, online_prediction, run_model, run_telemetry, show_online
from edgeprefix.commands._overload import add_overload_argument, node_overload, overload_line
from edgeprefix.commands._telemetry import add_telemetry_options
from edgeprefix.commands.solve import add_search_arguments, search_options
from edgeprefix.formulations.density import density_problem
from edgeprefix.formulations.objective import POLICIES
from edgeprefix.solvers.density import DensityPlan, plan_density


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "plan-density",
        help="smallest edge density λ_b whose TTFT coverage reaches ζ",
        description="Minimise λ_b subject to P_cov(τ_0; π, λ_b) ≥ ζ (docs/model.md §10.4) by bracketing and bisection. "
        "With --mix the mix is fixed; without it the best mix is searched at every density "
        "(default: the 1/10 grid). With --queue-law engine --refine-on-engine the planned density is then refined on "
        "a simulated network of the instance's batching-engine nodes until the simulated coverage is ζ (docs/model.md "
        "§17.10.2): that density is the simulation's, not the law's.",
    )
    add_instance_argument(parser, density_help="refused: λ_b is what plan-density plans")
    parser.add_argument("--reliability", type=float, required=True, metavar="ζ", help="coverage to reach, in (0, 1)")
    add_mix_arguments(parser, "fixed profile shares, e.g. none=0.2,shallow=0.5,deep=0.3 (default: searched at every density)")
    parser.add_argument("--policy", choices=POLICIES, default="load_aware", help="routing policy (default: load_aware)")
    parser.add_argument("--target", type=float, default=None, metavar="SECONDS", help="TTFT target τ_0 (default: the instance's)")
    add_router_argument(parser)
    add_queue_model_argument(parser)
    add_overload_argument(parser)
    add_telemetry_options(parser)
    parser.add_argument(
        "--for-telemetry",
        type=int,
        default=None,
        metavar="K",
        help="also plan the density for the online router at the telemetry age (--telemetry-delay/--telemetry-refresh): "
        "the smallest λ_b whose predicted coverage at that age reaches ζ, with --mix fixed or else the best mix of the "
        "1/K lattice (and the fresh plan's mix) for the age at each density (docs/model.md (11.18)); JSON key telemetry_plan",
    )
    parser.add_argument("--rtol", type=float, default=1e-3, help="relative width of the final bracket (default: 1e-3)")
    add_search_arguments(parser, default_method="grid", budget_help="evaluations per density of the mix search (grid: every point)")
    add_refine_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.density is not None:
        raise ValueError("--density does not apply to plan-density: the edge density λ_b is what it plans (drop --density)")
    instance = instance_from_args(args)
    router, queue_model = prediction_from_args(args, instance)
    queue_law = queue_law_from_args(args, instance)
    refine_size = refine_size_from_args(args)  # checked before anything runs, with the engine's step time
    refine_step = None
    if refine_size is not None:
        if queue_law != "engine":
            raise ValueError("--refine-on-engine: refines the engine law's plan; add --queue-law engine (docs/model.md §17.10.2)")
        refine_step = engine_step(instance)
    problem = density_problem(
        instance,
        args.reliability,
        mix=mix_from_args(args),
        target=args.target,
        policy=args.policy,
        queue_model=queue_model,
        max_overloaded_share=args.max_overload,
        queue_law=queue_law,
    )
    if args.method != "grid" and args.budget is None and problem.joint:
        raise ValueError(f"--method {args.method} needs --budget N (evaluations per density)")
    plan = plan_density(problem, method=args.method, budget=args.budget, seed=args.seed, rtol=args.rtol, **search_options(args))
    other = _other_router(instance, plan, args.policy, problem.objective.target, router) if queue_law == "slots" else None
    nodes = node_overload(problem.at_density(plan.edge_density), plan.mix, args.policy, problem.objective.target, queue_model, queue_law)
    telemetry = run_telemetry(args, instance)
    planned = plan.to_dict()
    online = (
        None
        if planned.get("mix") is None or planned.get("edge_density") is None
        else online_prediction(
            instance.with_network(edge_density=float(planned["edge_density"])),
            planned["mix"],
            telemetry,
            target=problem.objective.target,
            method=run_model(args),
        )
    )
    extra: dict = {"telemetry": {"delay": telemetry.delay, "refresh": telemetry.refresh}, "online_predicted": online}
    telemetry_plan = None if args.for_telemetry is None else _telemetry_plan(args, instance, problem, plan, telemetry)
    if telemetry_plan is not None:
        extra["telemetry_plan"] = telemetry_plan
    region = _engine_law_region(problem, plan, args.policy, queue_model) if queue_law == "engine" else None
    if region is not None:
        extra["engine_law_region"] = region
    refinement = None if refine_size is None else run_refinement(args, problem, plan, args.policy, queue_model, refine_size, refine_step)
    if refinement is not None:
        extra["engine_refinement"] = refinement
    if args.json:
        print_json(
            {
                **planned,
                "queue_model": queue_model,
                "queue_law": queue_law,
                "router": ROUTER_OF_QUEUE_MODEL[queue_model],
                **nodes,
                "max_overload": args.max_overload,
                **({"other_router": other} if other is not None else {}),
                **extra,
            }
        )
    else:
        print(
            render(
                instance.name,
                problem.objective.target,
                plan,
                network_text(instance, args),
                args,
                prediction=f"router {router} (queue model {queue_model})",
            )
        )
        print(overload_line(nodes, queue_model))
        print(router_line(queue_model))
        if online is not None and show_online(online):
            print(online_line(online))
        if telemetry_plan is not None:
            print(telemetry_plan_line(telemetry_plan))
        if region is not None:
            print(region["note"])
        if refinement is not None:
            print("\n".join(refinement_lines(refinement, float(problem.reliability))))
    print_router_note(other)
    return 0


def _telemetry_plan(args: argparse.Namespace, instance, problem, plan: DensityPlan, telemetry) -> dict:
    """``--for-telemetry K``: the density for ζ when the online router sees telemetry of this age (docs/model.md (11.18)),
    the bracket started at the fresh plan's density."""
    from edgeprefix.commands._common import at_least
    from edgeprefix.solvers.telemetry_mix import density_for_telemetry

    at_least(args, 1, "--for-telemetry")
    if args.policy != "load_aware":
        raise ValueError("--for-telemetry plans the load-aware online router: drop --policy (or use --policy load_aware)")
    got = density_for_telemetry(
        instance,
        args.reliability,
        telemetry,
        mix=problem.mix,
        resolution=args.for_telemetry,
        target=problem.objective.target,
        method=run_model(args),
        rtol=max(args.rtol, 0.01),
        start=float(plan.edge_density),
        extra=() if problem.mix is not None or plan.x is None else (np.asarray(plan.x, dtype=float),),  # the fresh plan's mix too
    )
    out = got.to_dict(instance.profile_ids)
    out["fresh_edge_density"] = float(plan.edge_density)
    return out


def telemetry_plan_line(block: dict) -> str:
    """One line for ``--for-telemetry``: the density the telemetry's age needs against the fresh plan's."""
    tel = block["telemetry"]
    mix = "  ".join(f"{k}={v:.2f}" for k, v in block["mix"].items())
    se = "" if block.get("coverage_se") is None else f" ± {block['coverage_se']:.4f}"
    how = "the mix optimised for the age" if block["joint"] else "the given mix"
    fresh = float(block["fresh_edge_density"])
    return (
        f"online router at telemetry delay {tel['delay']:g} s, refresh {tel['refresh']:g} s ({block['method']}): "
        f"λ_b {block['edge_density']:.4f} (misses ζ at {block['lower']:.4f}) with {how} {mix}, coverage "
        f"{block['coverage']:.4f}{se}; fresh telemetry: λ_b {fresh:.4f} (×{block['edge_density'] / fresh:.2f})"
    )


def _engine_law_region(problem, plan: DensityPlan, policy: str, queue_model: str):
    """Under the engine law: the planned point's ``engine_law_region`` (its validated region and the error measured on
    engine networks, docs/model.md §17.10.2), ``None`` without a planned mix."""
    from edgeprefix.placement.model.evaluation import evaluate

    if plan.coverage is None or not plan.mix:
        return None
    ev = evaluate(
        problem.at_density(plan.edge_density),
        plan.mix,
        policy,
        target=problem.objective.target,
        queue_model=queue_model,
        queue_law="engine",
    )
    return ev.engine_law_region()


def _other_router(instance, plan: DensityPlan, policy: str, target: float, router: str):
    """The other router's predicted coverage at the planned density and mix (a note when it differs by more than 0.05)."""
    from edgeprefix.placement.model.evaluation import evaluate
    from edgeprefix.placement.model.router import QUEUE_MODEL_OF_ROUTER, other_router

    if plan.coverage is None or not plan.mix:
        return None
    other = evaluate(
        instance.with_network(edge_density=plan.edge_density),
        plan.mix,
        policy,
        target=target,
        queue_model=QUEUE_MODEL_OF_ROUTER[other_router(router)],
    )
    return router_note(router, float(plan.coverage), float(other.coverage()))


def render(
    name: str, target: float, plan: DensityPlan, network: str = "", args: argparse.Namespace | None = None, prediction: str = ""
) -> str:
    """The text output; the header names the run's settings (``prediction``: the router and queue model)
    and the options that overrode the instance."""
    how = f"joint with the mix ({plan.method})" if plan.joint else "for the given mix"
    head = [
        f"instance {name}",
        network,
        f"reliability ζ = {plan.reliability:g}",
        target_text("τ_0", target, args or argparse.Namespace()),
        prediction,
        how,
    ]
    return "\n".join(
        [
            "  ".join(filter(None, head)),
            f"edge density λ_b   {plan.edge_density:.4f}   (misses ζ at {plan.lower:.4f})",
            f"coverage           {fmt(plan.coverage)}",
            "mix                " + "  ".join(f"{k}={v:.4f}" for k, v in plan.mix.items()),
            f"densities tried {plan.steps}  evaluations {plan.evaluations}  seconds {plan.seconds:.2f}",
        ]
    )
