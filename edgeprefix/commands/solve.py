"""``edgeprefix solve``: the best profile mix of an instance (docs/model.md §10.1–10.3).

With no instance it solves the embedded ``paper_baseline``.  The result is printed first;
``--out DIR`` then replaces ``result.json``, ``history.csv`` and ``best_so_far.png`` as one set
(old set or new set, never a mix).  Optuna methods keep their study in ``DIR/study.journal``
(written in batches), so re-running the same command resumes it; a different problem in the
same folder is refused.  Ctrl-C stops after the current evaluation, prints and saves the
partial result and exits 130.
``--storage URL --study NAME --workers N`` shares an Optuna study between N processes here
and any machine running the same command; ``--workers N`` or ``--dask ADDRESS`` runs the grid
on Dask (see docs/distributed.md).  Every result reports the KKT certificate of its mix
(``kkt_residual``, ``active_constraints``, docs/model.md §18.6) or why it has none (``kkt_note``);
``--certify`` polishes the mix with the gradient method until the residual meets ``--certify-tol``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from edgeprefix.commands._common import (
    ROUTER_OF_QUEUE_MODEL,
    add_instance_argument,
    add_queue_model_argument,
    add_router_argument,
    at_least,
    fmt,
    instance_from_args,
    network_text,
    prediction_from_args,
    print_json,
    print_router_note,
    queue_law_from_args,
    router_line,
    router_note,
    target_text,
    wrote,
)
from edgeprefix.commands._online import online_line, online_prediction, run_model, run_telemetry, show_online
from edgeprefix.commands._overload import add_overload_argument, node_overload, overload_line
from edgeprefix.commands._telemetry import add_telemetry_options
from edgeprefix.formulations.objective import POLICIES
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.atomic import check_output_folder, write_output_set
from edgeprefix.placement.jsonable import json_ready
from edgeprefix.placement.progress import progress_bar
from edgeprefix.solvers import DEFAULT_BUDGET, SOLVERS, Progress, Result, solve
from edgeprefix.solvers.distributed import dask_client, grid_search
from edgeprefix.solvers.failures import WorkersFailed
from edgeprefix.solvers.optuna_common import STORAGE_ENV, check_study_name
from edgeprefix.solvers.persistence import check_folder_method, problem_fingerprint
from edgeprefix.solvers.polish import DEFAULT_BUDGET as POLISH_BUDGET
from edgeprefix.solvers.polish import DEFAULT_TOLERANCE, certify
from edgeprefix.solvers.result import history_csv

EXIT_NO_FEASIBLE = 1
EXIT_WORKERS_FAILED = 3


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "solve",
        help="find the coverage-maximising profile mix (exact-gradient SLSQP, SPSA, TPE, CMA-ES, QMC, grid)",
        description="Maximise TTFT coverage P_cov(τ_0; π) over the feasible profile mixes (docs/model.md §10.1). "
        "Exit code 2 on bad input, 1 when no evaluated mix was stable, 3 when every worker died before the study was done.",
    )
    add_instance_argument(parser)
    add_search_arguments(parser, default_method="spsa", budget_help=f"black-box evaluations (default: {DEFAULT_BUDGET}; grid: every point)")
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
        help="also choose the mix for the online router at the telemetry age: every mix of the 1/K lattice "
        "scored by the prediction at --telemetry-delay/--telemetry-refresh (docs/model.md (11.18)); "
        "JSON key telemetry_mix",
    )
    parser.add_argument(
        "--objective",
        default="coverage",
        metavar="OBJ",
        help="coverage (the model, default) or simulation (mean simulated coverage over --sim-seeds on "
        "--sim-nodes nodes, common random numbers: a slow reference for small instances)",
    )
    parser.add_argument("--sim-seeds", default="0-3", metavar="SEEDS", help="seeds of --objective simulation (default 0-3)")
    parser.add_argument("--sim-nodes", type=float, default=300.0, metavar="N", help="nodes of --objective simulation (default 300)")
    parser.add_argument("--out", default=None, metavar="DIR", help="write result.json, history.csv and best_so_far.png here")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the text")
    parser.add_argument(
        "--instance-out",
        default=None,
        metavar="FILE",
        help="also write the instance (with --intensity/--density applied) to FILE (.toml or .json) with "
        "the best mix as its placement.mix, and --router as its network.router when given, so that "
        "evaluate/validate/replay FILE use that mix by default",
    )
    parser.add_argument(
        "--certify",
        action="store_true",
        help="polish the returned mix with the gradient method until its KKT residual is at most "
        "--certify-tol (docs/model.md §18.6); says so when it cannot",
    )
    parser.add_argument(
        "--certify-tol",
        type=float,
        default=None,
        metavar="TOL",
        help=f"tolerance of --certify on the KKT residual (default: {DEFAULT_TOLERANCE:g}); with --method "
        "gradient also where its restarts stop (docs/model.md §18.6)",
    )
    add_distributed_arguments(parser)
    parser.set_defaults(handler=run)


def add_distributed_arguments(parser: argparse.ArgumentParser) -> None:
    """``--storage``, ``--study``, ``--workers``, ``--dask``, ``--heartbeat`` and ``--grace``."""
    group = parser.add_argument_group("many processes and machines (docs/distributed.md)")
    group.add_argument(
        "--storage",
        default=None,
        metavar="URL",
        help="Optuna study storage: SQLite file (*.db), sqlite:///... or postgresql://user@host/db "
        "(default: $EDGEPREFIX_STORAGE, else DIR/study.journal with --out; keep passwords in the variable)",
    )
    group.add_argument("--study", default=None, metavar="NAME", help="study name in the storage (default: edgeprefix)")
    group.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="N worker processes here: Optuna methods share the --storage study, grid runs on a Dask LocalCluster",
    )
    group.add_argument("--dask", default=None, metavar="ADDRESS", help="run the grid on the Dask scheduler at ADDRESS")
    group.add_argument("--heartbeat", type=int, default=None, metavar="SECONDS", help="heartbeat interval of running trials (default: 5)")
    group.add_argument(
        "--grace",
        type=int,
        default=None,
        metavar="SECONDS",
        help="seconds without heartbeat before a trial is retried elsewhere (default: 20)",
    )


def distributed_options(args: argparse.Namespace, options: dict[str, Any]) -> bool:
    """Add the shared-study options to ``options``; ``True`` when the grid runs on Dask."""
    resumable = SOLVERS[args.method].RESUMABLE
    study_flags = {"--storage": args.storage, "--study": args.study, "--heartbeat": args.heartbeat, "--grace": args.grace}
    if not resumable:
        for flag, value in study_flags.items():
            if value is not None:
                raise ValueError(f"{flag} applies to the Optuna methods (tpe, cmaes, qmc), got --method {args.method}")
        if args.method != "grid" and (args.workers is not None or args.dask is not None):
            raise ValueError(f"--workers and --dask apply to the Optuna methods and grid, got --method {args.method}")
        return args.method == "grid" and (args.workers is not None or args.dask is not None)
    if args.dask is not None:
        raise ValueError(f"--dask applies to --method grid (Optuna workers share --storage instead), got --method {args.method}")
    for key, value in (
        ("storage", args.storage),
        ("study_name", args.study),
        ("workers", args.workers),
        ("heartbeat_interval", args.heartbeat),
        ("grace_period", args.grace),
    ):
        if value is not None:
            options[key] = value
    return False


def add_search_arguments(parser: argparse.ArgumentParser, *, default_method: str, budget_help: str) -> None:
    """``--method``, ``--budget``, ``--seed`` and ``--resolution`` (shared with plan-density and migrate)."""
    parser.add_argument("--method", choices=list(SOLVERS), default=default_method, help=f"search method (default: {default_method})")
    parser.add_argument("--budget", type=int, default=None, metavar="N", help=budget_help)
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="random seed (default: 0)")
    parser.add_argument("--resolution", type=int, default=None, metavar="K", help="grid step 1/K (only with --method grid)")


def search_options(args: argparse.Namespace) -> dict[str, Any]:
    """Method options from the shared arguments."""
    options: dict[str, Any] = {}
    if args.method == "gradient" and args.certify_tol is not None:  # its random restarts stop at a certified best point
        options["certify_tol"] = args.certify_tol
    if args.resolution is None:
        return options
    if args.method != "grid":
        raise ValueError(f"--resolution applies to --method grid only, got --method {args.method}")
    return {**options, "resolution": args.resolution}


def progress_callback(budget: int | None, method: str) -> tuple[Callable[[Progress], None], Any]:
    """A solver callback that advances a tqdm bar (stderr, silent off a terminal) and the bar itself."""
    bar = progress_bar(total=budget, desc=f"solve {method}", unit="eval")
    seen = [0]

    def callback(progress: Progress) -> None:
        bar.update(progress.nfev - seen[0])
        seen[0] = progress.nfev
        if math.isfinite(progress.best_coverage):
            bar.set_postfix_str(f"best coverage {progress.best_coverage:.4f}", refresh=False)

    return callback, bar


OUTPUT_FILES = ("result.json", "history.csv", "best_so_far.png")
STUDY_FILES = ("study.journal", "study.db")  # the resumable study kept across output sets (study.db: older versions)
STALE_FILES = ("study.journal.lock",)  # left by a killed append: the study clears it (solvers/persistence.py)
EXIT_INTERRUPTED = 130


def _storage_for(args: argparse.Namespace) -> str | None:
    """``--storage``, else ``$EDGEPREFIX_STORAGE``, else the study in ``--out`` (batched journal; an
    existing ``study.db`` of an older version is resumed as it is)."""
    if args.storage is not None:
        return args.storage
    if os.environ.get(STORAGE_ENV):
        return os.environ[STORAGE_ENV]
    if args.out is not None and SOLVERS[args.method].RESUMABLE:
        legacy = Path(args.out) / "study.db"
        return str(legacy if legacy.is_file() else Path(args.out) / "study.journal")
    return None


class Interrupt:
    """First Ctrl-C: stop the search after the current evaluation (the partial result is printed and
    saved, exit 130); a second Ctrl-C aborts at once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.hit = False
        self._previous: Any = None

    def __enter__(self) -> Interrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _handle(self, signum: int, frame: Any) -> None:
        self.hit = True
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C raises KeyboardInterrupt
        print("\nedgeprefix solve: interrupted: finishing the current evaluation (Ctrl-C again to abort)", file=sys.stderr)

    def __call__(self, progress: Progress) -> bool:
        if self.inner is not None:
            self.inner(progress)
        return self.hit


def simulation_from_args(args: argparse.Namespace):
    """``--objective simulation`` settings, or ``None`` for the model's coverage."""
    if args.objective not in ("coverage", "simulation"):
        raise ValueError(f"--objective: unknown {args.objective!r} (valid: coverage, simulation)")
    if args.objective == "coverage":
        return None
    from edgeprefix.benchmarks.sweeps.seeds import parse_seeds
    from edgeprefix.formulations.simulated import SimulationSettings

    try:
        seeds = parse_seeds(args.sim_seeds)
    except ValueError as exc:
        raise ValueError(f"--sim-seeds: {str(exc).removeprefix('--seeds: ')}") from None
    return SimulationSettings(seeds=tuple(seeds), nodes=args.sim_nodes)


def run(args: argparse.Namespace) -> int:
    at_least(args, 0, "--seed")
    at_least(args, 1, "--budget", "--workers", "--resolution")
    instance = instance_from_args(args)
    router, queue_model = prediction_from_args(args, instance)
    simulation = simulation_from_args(args)
    certify_tol = certify_tolerance(args)
    if args.max_overload is not None and simulation is not None:
        raise ValueError("--max-overload caps the model's overloaded nodes: drop it with --objective simulation")
    queue_law = queue_law_from_args(args, instance)
    if queue_law != "slots" and simulation is not None:
        raise ValueError("--queue-law engine sets the model's node law: drop it with --objective simulation")
    problem = placement_problem(
        instance,
        target=args.target,
        policy=args.policy,
        queue_model=queue_model,
        simulation=simulation,
        max_overloaded_share=args.max_overload,
        queue_law=queue_law,
    )
    options = search_options(args)
    budget = args.budget
    if budget is None and SOLVERS[args.method].NEEDS_BUDGET:
        budget = DEFAULT_BUDGET
    if args.out is not None:
        check_output_folder(args.out, "--out", OUTPUT_FILES + STUDY_FILES + STALE_FILES)
        check_folder_method(args.out, args.method, SOLVERS[args.method].RESUMABLE)
    storage = _storage_for(args)
    if args.study is not None:
        check_study_name(args.study)
    on_dask = distributed_options(args, options)
    if on_dask and args.dask is None:
        on_dask = _grid_cluster_pays(problem, args.workers, options.get("resolution", 20))
    if storage is not None and SOLVERS[args.method].RESUMABLE:
        options["storage"] = storage
        if options.get("workers") and budget is not None and not _study_workers_pay(problem, options["workers"], budget):
            del options["workers"]
    callback, bar = progress_callback(budget, args.method)
    stop = Interrupt(callback)
    try:
        with (
            stop if not options.get("workers") else contextlib.nullcontext(stop)
        ):  # workers: Ctrl-C ends them, the study keeps their trials
            if on_dask:
                with dask_client(args.dask, args.workers) as client:
                    result = grid_search(problem, client=client, budget=budget, callback=stop, **options)
            else:
                result = solve(problem, args.method, budget=budget, seed=args.seed, callback=stop, **options)
    except WorkersFailed as exc:
        print(f"edgeprefix solve: error: {exc}", file=sys.stderr)
        return EXIT_WORKERS_FAILED
    finally:
        bar.close()
    if certify_tol is not None and not stop.hit:
        stop.inner, bar = progress_callback(POLISH_BUDGET, "certify")
        try:
            with stop:
                result = certify(problem, result, tol=certify_tol, callback=stop)
        finally:
            bar.close()
    overrides = {k: v for k, v in (("request_intensity", args.intensity), ("edge_density", args.density)) if v is not None}
    payload = {
        "instance": instance.name,
        "target": problem.target,
        "policy": args.policy,
        "queue_model": queue_model,
        "queue_law": queue_law,
        "router": ROUTER_OF_QUEUE_MODEL[queue_model],
        "scored_by": "simulation" if simulation is not None else "model",
        "seed": args.seed,
        "overrides": overrides,
        **result.to_dict(),
        "fingerprint": problem_fingerprint(problem, args.method),
        "interrupted": stop.hit,
        "max_overload": args.max_overload,
        **_nodes(problem, result, args.policy, queue_model, queue_law),
    }
    if simulation is None and result.success and queue_law == "slots":  # the engine law has no cell model
        payload["other_router"] = _other_router(instance, result.mix, args.policy, problem.target, router, result.coverage)
    payload.update(_online_at_best(args, instance, payload, problem.target))
    # The answer reaches stdout before the disk is touched: a failed write never loses it.
    if args.json:
        print_json(payload)
    else:
        print(render(payload, result, network_text(instance, args), target_text("τ_0", problem.target, args)))
        if show_online(payload["online_predicted"]):
            print(online_line(payload["online_predicted"]))
        if "telemetry_mix" in payload:
            print(telemetry_mix_line(payload["telemetry_mix"]))
    print_router_note(payload.get("other_router"))
    if args.json and result.certified is False:
        print(f"edgeprefix solve: {certify_line(result)}", file=sys.stderr)
    sys.stdout.flush()
    if args.out is not None:
        try:
            written = write_outputs(Path(args.out), payload, result, problem.variable_names)
        except OSError as exc:
            raise ValueError(f"--out {args.out!r}: the result above was not saved ({exc.strerror or exc})") from None
        for path in written:
            wrote(path)
    if args.instance_out is not None and result.success:
        _write_instance_back(instance, result.mix, router if _router_stated(args, instance) else None, args.instance_out)
        wrote(args.instance_out)
    if stop.hit:
        print("edgeprefix solve: interrupted: the result above is the best of the evaluations done so far", file=sys.stderr)
        return EXIT_INTERRUPTED
    if not result.success:
        print(f"edgeprefix solve: warning: {result.message}", file=sys.stderr)
        return EXIT_NO_FEASIBLE
    return 0


def telemetry_mix_line(block: dict) -> str:
    """One line for ``--for-telemetry``: the mix for the telemetry age against the fresh-telemetry mix."""
    mix = ", ".join(f"{k}={v:g}" for k, v in block["mix"].items())
    fresh = ", ".join(f"{k}={v:g}" for k, v in block["fresh_mix"].items())
    tel = block["telemetry"]
    return (
        f"mix for telemetry delay {tel['delay']:g} s, refresh {tel['refresh']:g} s ({block['mixes']} lattice mixes): "
        f"{mix}, online coverage {block['coverage']:.4f}; the fresh-telemetry mix {fresh} gives "
        f"{block['fresh_mix_coverage']:.4f} there ({block['fresh_mix_fresh_coverage']:.4f} fresh; docs/model.md (11.18))"
    )


def _router_stated(args: argparse.Namespace, instance: Any) -> bool:
    return args.router is not None or args.queue_model is not None or instance.network.router is not None


def _write_instance_back(instance: Any, mix: Mapping[str, float], router: str | None, path: str) -> None:
    """``instance`` with ``mix`` as its default mix (and ``router`` as its network.router), written atomically."""
    import dataclasses

    from edgeprefix.placement.model.instance import write_instance

    placement = dataclasses.replace(instance.placement, mix=tuple((k, float(v)) for k, v in mix.items()))
    changed = instance.replace(placement=placement)
    if router is not None:
        changed = changed.with_network(router=router)
    try:
        write_instance(changed, path)
    except OSError as exc:
        raise ValueError(f"--instance-out {path!r}: the result above was not saved ({exc.strerror or exc})") from None


def _other_router(instance: Any, mix: Mapping[str, float], policy: str, target: float, router: str, coverage: float) -> Any:
    """The other router's predicted coverage of the returned mix (a note when it differs by more than 0.05)."""
    from edgeprefix.placement.model.evaluation import evaluate
    from edgeprefix.placement.model.router import QUEUE_MODEL_OF_ROUTER, other_router

    other = evaluate(instance, mix, policy, target=target, queue_model=QUEUE_MODEL_OF_ROUTER[other_router(router)])
    return router_note(router, float(coverage), float(other.coverage()))


def certify_tolerance(args: argparse.Namespace) -> float | None:
    """The tolerance of ``--certify`` (``None`` without it); ``--certify-tol`` alone or not positive is refused."""
    if args.certify_tol is not None:
        if not args.certify and args.method != "gradient":
            raise ValueError("--certify-tol applies with --certify or --method gradient; add one or drop --certify-tol")
        if not (math.isfinite(args.certify_tol) and args.certify_tol > 0):
            raise ValueError(f"--certify-tol must be a positive number, got {args.certify_tol!r}")
    return None if not args.certify else DEFAULT_TOLERANCE if args.certify_tol is None else args.certify_tol


def kkt_line(result: Result) -> str:
    """``KKT residual …  active …`` (docs/model.md §18.6), or why the mix has no certificate."""
    cert = result.certificate
    if cert is None:
        return f"KKT residual n/a: {(result.certificate_note or '').removeprefix('no certificate: ')}"
    bounds = sum(1 for name in cert.active if " >= " in name or " <= " in name)
    rows = [name for name in cert.active if " >= " not in name and " <= " not in name]
    active = ", ".join(rows + ([f"{bounds} bound{'s' * (bounds != 1)}"] if bounds else [])) or "none"
    return f"KKT residual {cert.residual:.2e}  active constraints: {active}"


def certify_line(result: Result) -> str:
    """What ``--certify`` did, in one line."""
    facts = result.polish or {}
    if not result.certified:
        return f"not certified: {facts.get('note')}"
    spent = facts.get("evaluations", 0)
    how = (
        f"after {spent} polishing evaluations (coverage {result.coverage - facts['coverage_before']:+.2e})"
        if spent
        else "as returned (no polishing needed)"
    )
    assert result.certificate is not None  # certified: the polish kept the certificate it checked
    return f"certified: KKT residual {result.certificate.residual:.2e} <= {facts['tolerance']:g} {how}"


def _grid_cluster_pays(problem: Any, workers: int | None, resolution: int) -> bool:
    """Whether the grid should run on a LocalCluster; says why not on stderr."""
    from edgeprefix.solvers.distributed import local_cluster_pays, probe_seconds_per_point
    from edgeprefix.solvers.grid import feasible_lattice

    points = feasible_lattice(problem.constraints, resolution)
    reason = local_cluster_pays(workers, len(points), probe_seconds_per_point(problem, points))
    if reason is not None:
        print(f"edgeprefix solve: running the grid serially: {reason}", file=sys.stderr)
    return reason is None


def _study_workers_pay(problem: Any, workers: int, budget: int) -> bool:
    """Whether ``--workers`` processes on the shared study should beat this process alone; says why
    not on stderr (the study still goes to --storage, trial by trial, from this one process)."""
    from edgeprefix.solvers.distributed import local_workers_pay, probe_seconds_per_evaluation
    from edgeprefix.solvers.grid import feasible_lattice

    points = feasible_lattice(problem.constraints, 4)
    reason = local_workers_pay(workers, budget, probe_seconds_per_evaluation(problem, points))
    if reason is not None:
        print(f"edgeprefix solve: running the study in this process: {reason}", file=sys.stderr)
    return reason is None


def _nodes(problem: Any, result: Result, policy: str, queue_model: str, queue_law: str = "slots") -> dict[str, Any]:
    """``stable`` and the overloaded shares of the best mix (docs/model.md §14.9); ``None`` without one."""
    if not result.mix or not math.isfinite(result.coverage):
        return {"stable": None, "overloaded_node_share": None, "overloaded_request_share": None} | (
            {"cell_accuracy_region": None} if queue_model == "cell" else {}
        )
    return node_overload(problem.instance, dict(result.mix), policy, problem.target, queue_model, queue_law)


def _online_at_best(args: argparse.Namespace, instance, payload: dict, target: float) -> dict:
    """``telemetry`` and ``online_predicted`` (the online router at the run's telemetry, docs/model.md §11) at the best mix."""
    telemetry = run_telemetry(args, instance)
    mix = payload.get("mix")
    online = (
        None
        if not mix or not payload.get("feasible", True)
        else online_prediction(instance, mix, telemetry, target=target, method=run_model(args))
    )
    out = {"telemetry": {"delay": telemetry.delay, "refresh": telemetry.refresh}, "online_predicted": online}
    if getattr(args, "for_telemetry", None) is not None:
        from edgeprefix.solvers.telemetry_mix import mix_for_telemetry

        at_least(args, 1, "--for-telemetry")
        chosen = mix_for_telemetry(instance, telemetry, resolution=args.for_telemetry, target=target, method=run_model(args)).to_dict()
        chosen["mix"] = dict(zip(instance.profile_ids, chosen["mix"]))
        chosen["fresh_mix"] = dict(zip(instance.profile_ids, chosen["fresh_mix"]))
        out["telemetry_mix"] = chosen
    return out


def render(payload: dict[str, Any], result: Result, network: str = "", target: str = "") -> str:
    """The text output: a header with the settings (overrides marked), the best mix, its coverage."""
    extras = result.extras
    lines = [
        "  ".join(
            filter(
                None,
                [
                    f"instance {payload['instance']}",
                    network,
                    f"method {result.method}",
                    f"seed {payload['seed']}",
                    f"policy {payload['policy']}",
                    target,
                ],
            )
        ),
        "best mix  " + "  ".join(f"{k}={v:.4f}" for k, v in result.mix.items()),
        f"TTFT coverage at τ_0 = {payload['target']:g} s   {fmt(result.coverage)}   feasible {result.success}",
        f"evaluations {result.nfev}  seconds {result.seconds:.2f}  status {result.status.value}",
        router_line(payload["queue_model"]) if payload.get("scored_by") != "simulation" else "scored by the network simulator",
    ]
    if payload.get("stable") is not None:
        lines.append(overload_line(payload, payload["queue_model"]))
    if result.njev:
        lines.append(f"gradient solves {result.njev} (one adjoint solve each, at evaluated points)")
    lines.append(kkt_line(result))
    if result.certified is not None:
        lines.append(certify_line(result))
    if extras.get("projections"):
        lines.append(f"projection {1e3 * extras['projection_seconds_per_call']:.2f} ms per call ({extras['projections']} calls)")
    if extras.get("resumed_trials"):
        lines.append(f"resumed {extras['resumed_trials']} earlier trials")
    return "\n".join(lines)


def best_so_far_figure(result: Result, target: float | None = None) -> Any:
    """Figure of the best-so-far feasible TTFT coverage against evaluations (evaluations before
    the first feasible mix are left blank)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width, height = 6.0, 3.5  # inches; fixed margins (tight_layout would draw the figure twice)
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)  # the Agg canvas, as pyplot's Agg backend would attach
    fig.subplots_adjust(left=0.8 / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - 0.35 / height)
    ax = fig.add_subplot()
    history = [float(v) for v in result.best_coverage_history]
    ax.plot(range(1, len(history) + 1), [v if math.isfinite(v) else float("nan") for v in history], lw=1.5)
    ax.set_xlabel("objective evaluations")
    at = f" at τ₀ = {target:g} s" if target is not None else ""
    ax.set_ylabel(f"best-so-far TTFT coverage{at}")
    ax.set_title(f"{result.method}: best coverage {fmt(result.coverage)} after {result.nfev} evaluations")
    ax.grid(alpha=0.3)
    return fig


def render_plot(result: Result, target: float | None = None) -> bytes:
    """PNG bytes of :func:`best_so_far_figure`."""
    import io

    buffer = io.BytesIO()
    best_so_far_figure(result, target).savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def write_outputs(folder: Path, payload: dict[str, Any], result: Result, names: tuple[str, ...]) -> list[Path]:
    """Replace the output set in ``folder`` as a whole (:func:`edgeprefix.placement.atomic.write_output_set`);
    returns the paths written.

    ``result.json`` lists the SHA-256 of the other files under ``"files"``, so a reader can check
    that the set is the one the result describes; the study file is carried over.
    """
    plot = render_plot(result, payload.get("target"))
    history = history_csv(result, names).encode("utf-8")
    files = {"history.csv": history, "best_so_far.png": plot}
    digest = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    body = json.dumps(json_ready({**payload, "files": digest}), indent=2, allow_nan=False) + "\n"
    write_output_set(folder, {"result.json": body.encode("utf-8"), **files}, keep=STUDY_FILES)
    return [folder / name for name in OUTPUT_FILES]
