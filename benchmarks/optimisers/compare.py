"""Optimiser comparison on the benchmark instances (docs/model.md §10.3).

Run ``edgeprefix compare``.  For each instance × method
at equal budgets of black-box evaluations over several seeds it reports the median and IQR of
the best-so-far feasible coverage ``P_cov(τ_0)``, the gap to the reference optimum ``P*``, the
share of seeds within 0.005 of ``P*`` and the wall time; it writes ``runs.csv`` (every run ×
budget), ``summary.csv``, ``summary.json``, ``curves_<instance>.png`` and ``ecdf.png``.

``P*`` is the exhaustive ``1/20`` grid where its feasible lattice has at most ``grid_limit``
points, raised to the best mix any run found when a run beats the lattice — unless the instance
file carries its exact optimum (``metadata.known_optimum``, the classical family of docs/model.md
§18): then ``P*`` is that value at the instance's own load, and the runs are also scored against
the relative targets ``P* (1 − δ)``, ``δ`` in :data:`~edgeprefix.benchmarks.optimisers.compare_metrics.RELATIVE_TARGETS`
(``targets.csv``, ``ecdf_targets.png``).  The scipy baselines
(:mod:`edgeprefix.benchmarks.optimisers.compare_baselines`) run beside the registered methods, and
``loads`` repeats everything at multiples of each instance's ``Λ``.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from math import comb
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from edgeprefix.benchmarks.optimisers.compare_baselines import BASELINES
from edgeprefix.benchmarks.optimisers.compare_metrics import (
    RELATIVE_TARGETS,
    SUCCESS_TOL,
    Reference,
    Summary,
    TargetSummary,
    ecdf,
    make_reference,
    summarise,
    summarise_targets,
)
from edgeprefix.benchmarks.optimisers.compare_runs import (
    PER_BUDGET_METHODS,
    RunRecord,
    anytime_runs,
    grid_resolution_for,
    instance_label,
    lattice_size,
    load_benchmark,
    run_method,
    split_method,
)
from edgeprefix.formulations.placement import placement_problem
from edgeprefix.placement.errors import plain
from edgeprefix.placement.jsonable import json_ready
from edgeprefix.placement.model.instance import Instance, atomic_write_text
from edgeprefix.placement.progress import progress_bar
from edgeprefix.solvers.registry import method_names

DEFAULT_INSTANCES = ("paper_baseline", "medium_forest", "mooncake_large")
DEFAULT_METHODS = ("gradient", "slsqp-fd", "de", "spsa", "tpe", "cmaes", "qmc", "random", "grid")
DEFAULT_BUDGETS = (50, 100, 200, 400, 800)
QUICK_INSTANCES = ("paper_baseline", "medium_forest")
QUICK_BUDGETS = (10, 20)
REFERENCE_RESOLUTION = 20


@dataclass(frozen=True)
class CompareConfig:
    """What to compare.

    Attributes
    ----------
    instances : benchmark names (files of ``benchmarks/instances``) or instance paths.
    methods : solver names or scipy baselines (``slsqp-fd``, ``de``); ``grid`` runs the finest
        ``1/K`` lattice fitting each budget.
    budgets : evaluation budgets ``b`` (increasing); stochastic runs use the largest.
    seeds : number of seeds per stochastic method (the seeds ``0 … seeds−1`` unless
        ``seed_values`` names them).
    seed_values : the seeds themselves (``--seeds 0-9`` or ``0,3,7``); sets ``seeds`` to their count.
    grid_limit : largest feasible ``1/20`` lattice searched exhaustively for ``P*``.
    jobs : worker processes.
    loads : multipliers of each instance's request intensity ``Λ`` (one reference ``P*`` per
        instance and load; a load other than 1 labels the instance ``name×load``).
    """

    instances: tuple[str, ...] = DEFAULT_INSTANCES
    methods: tuple[str, ...] = DEFAULT_METHODS
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    seeds: int = 10
    grid_limit: int = 5000
    jobs: int = 1
    tol: float = SUCCESS_TOL
    seed_values: tuple[int, ...] = ()
    queue_model: str = "meanfield"  # the objective's queue model (docs/model.md §14)
    loads: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        if self.seed_values:
            values = tuple(int(v) for v in self.seed_values)
            if any(v < 0 for v in values) or len(set(values)) != len(values):
                raise ValueError(f"seed_values: distinct integers >= 0 are needed, got {plain(list(self.seed_values))}")
            object.__setattr__(self, "seed_values", values)
            object.__setattr__(self, "seeds", len(values))
        if not self.instances:
            raise ValueError("instances: at least one instance is needed, got none")
        if not self.loads or any(not (np.isfinite(x) and x > 0) for x in self.loads) or len(set(self.loads)) != len(self.loads):
            raise ValueError(f"loads: distinct positive multipliers of Λ are needed, got {list(self.loads)}")
        valid = (*method_names(), *BASELINES)
        bad = [m for m in self.methods if split_method(m)[0] not in valid]
        if bad or not self.methods:
            raise ValueError(
                f"methods: each must be one of {list(valid)} (an Optuna method may name its space, e.g. cmaes:box), "
                f"got {list(self.methods)}"
            )
        if not self.budgets or any(int(b) != b or b < 1 for b in self.budgets):
            raise ValueError(f"budgets: positive integers are needed, got {list(self.budgets)}")
        if list(self.budgets) != sorted(set(self.budgets)):
            raise ValueError(f"budgets: must be strictly increasing, got {list(self.budgets)}")
        for name in ("seeds", "jobs", "grid_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 1:
                raise ValueError(f"{name}: must be a positive integer, got {plain(value)}")

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The seeds every stochastic method runs with."""
        return self.seed_values or tuple(range(self.seeds))


@dataclass(frozen=True)
class Comparison:
    """Everything one comparison measured (``runs`` raw, ``summaries`` per budget)."""

    config: CompareConfig
    references: dict[str, Reference]
    summaries: tuple[Summary, ...]
    runs: tuple[RunRecord, ...] = field(repr=False)
    targets: tuple[TargetSummary, ...] = ()  # instances with a known optimum only
    profiles: dict[str, int] = field(default_factory=dict)  # instance label → |S|

    def summary(self, instance: str, method: str, budget: int) -> Summary:
        for s in self.summaries:
            if (s.instance, s.method, s.budget) == (instance, method, budget):
                return s
        raise KeyError(f"no summary for ({instance!r}, {method!r}, {budget})")

    def ecdf(self, method: str, evaluations: Sequence[int]) -> np.ndarray:
        """Pooled COCO ECDF of ``method`` at ``evaluations`` (see :func:`compare_metrics.ecdf`)."""
        return ecdf(anytime_runs(self.runs, method), self.references, method, evaluations)


@dataclass(frozen=True)
class _Job:
    instance: str
    method: str
    seed: int
    budget: int
    resolution: int = 0
    queue_model: str = "meanfield"
    load: float = 1.0

    @property
    def label(self) -> str:
        return instance_label(self.instance, self.load)


def known_optimum(instance: Instance) -> tuple[float, str] | None:
    """``(P*, how it was found)`` from an instance file's ``metadata.known_optimum`` (docs/model.md §18), else None."""
    meta = instance.metadata or {}
    value = meta.get("known_optimum")
    if value is None:
        return None
    if not (isinstance(value, (int, float)) and np.isfinite(value)):
        raise ValueError(f"metadata.known_optimum of instance {instance.name!r}: a finite number is needed, got {plain(value)}")
    return float(value), str(meta.get("optimum_method", "exact"))


def known_optima(config: CompareConfig) -> dict[str, tuple[float, str]]:
    """Instance label → ``(P*, method)`` for the instances with a known optimum, at load 1 only
    (the optimum is that of the instance as written)."""
    out = {}
    for name in config.instances:
        known = known_optimum(load_benchmark(name))
        if known is not None and 1.0 in config.loads:
            out[instance_label(name)] = known
    return out


def plan_jobs(config: CompareConfig, known: dict[str, tuple[float, str]] | None = None) -> tuple[list[_Job], dict[str, int]]:
    """The runs to make, and per instance label the ``1/20`` lattice size if it fits ``grid_limit`` (else 0;
    always 0 for an instance whose optimum is known)."""
    jobs: list[_Job] = []
    reference_points: dict[str, int] = {}
    known = known_optima(config) if known is None else known
    for name in config.instances:
        problem = placement_problem(load_benchmark(name), queue_model=config.queue_model)
        size = lattice_size(problem, REFERENCE_RESOLUTION) if _small_lattice(problem.dimension, config.grid_limit) else 0
        resolutions = {b: grid_resolution_for(problem, b) for b in config.budgets} if "grid" in config.methods else {}
        for load in config.loads:
            label = instance_label(name, load)
            reference_points[label] = size if 1 <= size <= config.grid_limit and label not in known else 0
            if reference_points[label]:
                jobs.append(_Job(name, "grid", -1, size, REFERENCE_RESOLUTION, config.queue_model, load))
            for method in config.methods:
                if method == "grid":
                    jobs.extend(_Job(name, "grid", -1, b, k, config.queue_model, load) for b, k in resolutions.items() if k)
                elif method in PER_BUDGET_METHODS:
                    jobs.extend(
                        _Job(name, method, seed, b, 0, config.queue_model, load) for b in config.budgets for seed in config.seed_list
                    )
                else:
                    jobs.extend(_Job(name, method, seed, max(config.budgets), 0, config.queue_model, load) for seed in config.seed_list)
    return jobs, reference_points


def _small_lattice(n: int, limit: int) -> bool:
    """Whether enumerating the unconstrained ``1/20`` lattice is cheap enough to count its feasible points."""
    return comb(REFERENCE_RESOLUTION + n - 1, n - 1) <= 200 * limit


def _execute(job: _Job) -> RunRecord:
    return run_method(job.instance, job.method, job.seed, job.budget, resolution=job.resolution, queue_model=job.queue_model, load=job.load)


def run_comparison(config: CompareConfig, progress: Callable[[str], None] | None = None) -> Comparison:
    """Run every job of :func:`plan_jobs` and summarise.

    A progress bar counts the runs on stderr (on a terminal); ``progress``, if given, also
    gets one line per run.
    """
    known = known_optima(config)
    jobs, reference_points = plan_jobs(config, known)
    records: list[RunRecord] = []
    say = progress or (lambda _: None)
    say(
        f"compare: {len(jobs)} runs ({len(config.instances)} instances, methods {', '.join(config.methods)}, "
        f"budgets {list(config.budgets)}, {config.seeds} seeds, {config.jobs} worker(s))"
    )
    with progress_bar(total=len(jobs), desc="compare", unit="run") as bar:
        if config.jobs > 1:
            with ProcessPoolExecutor(max_workers=config.jobs) as pool:
                outcomes: Iterable[RunRecord] = pool.map(_execute, jobs)
                for i, record in enumerate(outcomes, 1):
                    records.append(record)
                    _report(i, len(jobs), record, say, bar)
        else:
            for i, job in enumerate(jobs, 1):
                records.append(_execute(job))
                _report(i, len(jobs), records[-1], say, bar)
    labels = [instance_label(name, load) for name in config.instances for load in config.loads]

    def is_reference(j: _Job) -> bool:
        return j.method == "grid" and j.resolution == REFERENCE_RESOLUTION and bool(reference_points[j.label])

    reference_runs = {r.instance: r for r, j in zip(records, jobs) if is_reference(j)}
    comparison_runs = [r for r, j in zip(records, jobs) if not is_reference(j)]
    refs = {label: make_reference(label, comparison_runs, reference_runs.get(label), known.get(label)) for label in labels}
    summaries, targets = [], []
    for label in labels:
        for method in config.methods:
            for b in config.budgets:
                if any(
                    r.instance == label and r.method == method and (method not in PER_BUDGET_METHODS or r.budget == b)
                    for r in comparison_runs
                ):
                    summaries.append(summarise(comparison_runs, refs[label], method, b, tol=config.tol))
                    if label in known:
                        targets.append(summarise_targets(comparison_runs, refs[label], method, b))
    sizes = {name: len(load_benchmark(name).profiles) for name in config.instances}
    profiles = {instance_label(name, load): sizes[name] for name in config.instances for load in config.loads}
    return Comparison(config, refs, tuple(summaries), tuple(comparison_runs), tuple(targets), profiles)


def _report(i: int, total: int, record: RunRecord, say: Callable[[str], None], bar: Any) -> None:
    bar.update(1)
    bar.set_postfix_str(f"{record.instance} {record.method}")
    say(_progress_line(i, total, record))


def _progress_line(i: int, total: int, r: RunRecord) -> str:
    what = f"1/{r.resolution}" if r.method == "grid" else f"seed {r.seed}"
    best = f"{r.best:.4f}" if np.isfinite(r.best) else "none feasible"
    return f"[{i}/{total}] {r.instance} {r.method} {what}: {r.nfev} evals, best {best}, {r.seconds_at(r.nfev):.1f} s"


def render_table(comparison: Comparison) -> str:
    """Plain-text table: one block per instance, one line per method × budget."""
    lines = []
    for name, ref in comparison.references.items():
        lines.append(f"\n{name}: P* = {ref.coverage:.{10 if ref.source.startswith('known') else 4}f} ({reference_note(ref)})")
        head = (
            f"{'method':<9}{'budget':>7}{'median':>9}{'IQR':>9}{'gap':>9}{'success':>9}{'±0.001':>8}{'±1e-4':>7}"
            f"{'evals':>7}{'feasible':>9}{'time s':>9}{'CPU ms/ev':>10}"
        )
        lines += [head, "-" * len(head)]
        for s in comparison.summaries:
            if s.instance == name:
                lines.append(
                    f"{s.method:<9}{s.budget:>7}{s.median:>9.4f}{s.iqr:>9.4f}{s.gap:>9.4f}{s.success:>9.2f}{s.success_strict:>8.2f}"
                    f"{s.success_fine:>7.2f}{s.evaluations:>7.0f}{s.feasible:>9.2f}{s.seconds:>9.2f}{s.cpu_ms:>10.2f}"
                )
    if comparison.targets:
        lines += ["", render_targets(comparison)]
    return "\n".join(lines).lstrip("\n")


def render_targets(comparison: Comparison) -> str:
    """Against the exact ``P*``: one line per instance (dimension |S|) × method × budget with the share of
    (run, target ``P* (1 − δ)``) pairs reached, the share of runs per ``δ`` and the median gap."""
    deltas = comparison.targets[0].targets
    head = (
        f"{'instance':<20}{'|S|':>5} {'method':<9}{'budget':>7}{'targets':>9}"
        + "".join(f"{'δ=' + format(d, 'g'):>10}" for d in deltas)
        + f"{'gap':>10}{'rel. gap':>10}{'min gap':>10}"
    )
    lines = [
        f"Against the known optimum: share of (run, target P*(1 − δ)) pairs reached, δ in {', '.join(f'{d:g}' for d in deltas)}",
        head,
        "-" * len(head),
    ]
    for t in comparison.targets:
        lines.append(
            f"{t.instance:<20}{comparison.profiles.get(t.instance, 0):>5} {t.method:<9}{t.budget:>7}{t.reached:>9.2f}"
            + "".join(f"{v:>10.2f}" for v in t.by_target)
            + f"{t.gap:>10.1e}{t.relative_gap:>10.1e}{t.min_gap:>10.1e}"
        )
    return "\n".join(lines)


def reference_note(ref: Reference) -> str:
    """Where ``P*`` comes from, in words, with the other candidate beside it."""
    if ref.source.startswith("known optimum"):
        return f"{ref.source}; the best run reached {ref.best_found:.10f}"
    grid = f"the exhaustive 1/{ref.grid_resolution} grid ({ref.grid_points} feasible points)" if ref.grid_coverage is not None else None
    if ref.source == "best found":
        other = f"; {grid} reaches {ref.grid_coverage:.4f}" if grid else ""
        return f"the best mix any run found{other}"
    better = ref.best_found > float("-inf")
    return f"{grid}" + (f"; the best run reached {ref.best_found:.4f}" if better else "")


def to_payload(comparison: Comparison) -> dict[str, Any]:
    """JSON-ready: config, references, summaries (the ``--json`` output)."""
    return {
        "config": asdict(comparison.config),
        "references": {k: asdict(v) for k, v in comparison.references.items()},
        "summaries": [{**asdict(s), "iqr": s.iqr} for s in comparison.summaries],
        "targets": [asdict(t) for t in comparison.targets],
        "profiles": dict(comparison.profiles),
    }


def runs_csv(comparison: Comparison) -> str:
    """One row per run × budget: the raw numbers behind every summary."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        [
            "instance",
            "method",
            "seed",
            "budget",
            "resolution",
            "evaluations",
            "best_coverage",
            "feasible",
            "seconds",
            "best_mix",
            "cpu_ms_per_evaluation",
            "gradient_solves",
        ]
    )
    budgets = comparison.config.budgets
    for r in comparison.runs:
        for b in [r.budget] if r.method in PER_BUDGET_METHODS else budgets:
            best = r.best_at(b)
            cpu = 1e3 * r.cpu_per_evaluation(b)
            writer.writerow(
                [
                    r.instance,
                    r.method,
                    r.seed,
                    b,
                    r.resolution,
                    min(b, r.nfev),
                    f"{best:.10g}" if np.isfinite(best) else "",
                    int(np.isfinite(best)),
                    f"{r.seconds_at(b):.4f}",
                    " ".join(f"{v:.6g}" for v in r.best_mix) if b >= r.nfev else "",
                    f"{cpu:.4f}" if np.isfinite(cpu) else "",
                    r.njev,
                ]
            )
    return buffer.getvalue()


def summary_csv(comparison: Comparison) -> str:
    buffer = io.StringIO()
    names = [*Summary.__dataclass_fields__, "iqr", "reference", "reference_source"]
    writer = csv.DictWriter(buffer, fieldnames=names)
    writer.writeheader()
    for s in comparison.summaries:
        ref = comparison.references[s.instance]
        writer.writerow({**asdict(s), "iqr": s.iqr, "reference": ref.coverage, "reference_source": ref.source})
    return buffer.getvalue()


def targets_csv(comparison: Comparison) -> str:
    """One row per (instance, method, budget) with a known optimum: :class:`TargetSummary` flattened."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    deltas = comparison.targets[0].targets if comparison.targets else RELATIVE_TARGETS
    writer.writerow(
        [
            "instance",
            "profiles",
            "method",
            "budget",
            "runs",
            "reached",
            *(f"reached_{d:g}" for d in deltas),
            "median_gap",
            "median_relative_gap",
            "min_gap",
        ]
    )
    for t in comparison.targets:
        writer.writerow(
            [
                t.instance,
                comparison.profiles.get(t.instance, ""),
                t.method,
                t.budget,
                t.runs,
                f"{t.reached:.6g}",
                *(f"{v:.6g}" for v in t.by_target),
                f"{t.gap:.6g}",
                f"{t.relative_gap:.6g}",
                f"{t.min_gap:.6g}",
            ]
        )
    return buffer.getvalue()


def file_stem(label: str) -> str:
    """``label`` as a plain file name: letters, digits, ``.``, ``_`` and ``-`` only, no leading dot or
    separator, so that a label from the command line (``../../x``) can never name a path outside ``--out``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._-")
    return stem[:100] or "instance"


def markdown_summary(summaries: Sequence[Summary], references: dict[str, Reference], methods: Sequence[str]) -> str:
    """benchmarks/README.md's tables: per budget, the median gap to ``P*`` and the share of seeds within
    1e-4 (rows: methods, columns: instance × load); then evaluations used and CPU per evaluation at
    the largest budget."""
    labels = list(references)
    budgets = sorted({s.budget for s in summaries})
    cell = {(s.method, s.instance, s.budget): s for s in summaries}
    head = "| method | " + " | ".join(labels) + " |\n|---|" + "---:|" * len(labels)
    out = ["P* " + ", ".join(f"{k} {v.coverage:.6f}" for k, v in references.items())]

    def table(title: str, text: Any, budget: int) -> None:
        out.extend(["", title, "", head])
        for m in methods:
            row = [text(cell[(m, label, budget)]) if (m, label, budget) in cell else "" for label in labels]
            out.append(f"| {m} | " + " | ".join(row) + " |")

    for b in budgets:
        table(f"**Budget {b}: median gap to P\\* (share of seeds within 1e-4)**", lambda s: f"{s.gap:.4f} ({s.success_fine:.1f})", b)
    top = budgets[-1]
    table(f"**Budget {top}: evaluations used (median) / CPU ms per evaluation**", lambda s: f"{s.evaluations:.0f} / {s.cpu_ms:.1f}", top)
    return "\n".join(out) + "\n"


def markdown_targets(comparison: Comparison) -> str:
    """benchmarks/README.md's tables against the known optimum: per budget, rows methods, columns the
    instances (with their |S|), cells ``F(b)`` — the share of (run, target) pairs reached — and the
    median relative gap ``(P* − P̂(b)) / P*``."""
    labels = list(dict.fromkeys(t.instance for t in comparison.targets))
    cell = {(t.method, t.instance, t.budget): t for t in comparison.targets}
    deltas = ", ".join(f"{d:g}" for d in comparison.targets[0].targets)
    out = ["P* " + ", ".join(f"{k} {comparison.references[k].coverage:.10f}" for k in labels)]
    head = "| method | " + " | ".join(f"{k} ({comparison.profiles.get(k, '?')})" for k in labels) + " |\n|---|" + "---:|" * len(labels)
    for b in sorted({t.budget for t in comparison.targets}):
        out += ["", f"**Budget {b}: share of (run, target P\\*(1 − δ)) pairs reached, δ in {deltas} (median relative gap)**", "", head]
        for m in comparison.config.methods:
            row = [f"{cell[(m, k, b)].reached:.2f} ({cell[(m, k, b)].relative_gap:.0e})" if (m, k, b) in cell else "" for k in labels]
            out.append(f"| {m} | " + " | ".join(row) + " |")
    return "\n".join(out) + "\n"


def write_outputs(comparison: Comparison, out: Path) -> list[Path]:
    """Write CSVs, JSON and PNG figures into ``out`` (each file atomically); returns the paths."""
    from edgeprefix.benchmarks.optimisers.compare_plots import (
        curves_figure,
        ecdf_figure,
        save_atomic,
        target_ecdf_figure,
    )

    written = []
    markdown = markdown_summary(comparison.summaries, comparison.references, comparison.config.methods)
    if comparison.targets:
        markdown += "\n" + markdown_targets(comparison)
    for name, text in (
        ("runs.csv", runs_csv(comparison)),
        ("summary.csv", summary_csv(comparison)),
        ("summary.json", json.dumps(json_ready(to_payload(comparison)), indent=2, allow_nan=False) + "\n"),
        ("summary.md", markdown),
    ):
        atomic_write_text(out / name, text)
        written.append(out / name)
    methods = comparison.config.methods
    for name, ref in comparison.references.items():
        path = out / f"curves_{file_stem(name)}.png"
        save_atomic(curves_figure(name, comparison.runs, comparison.summaries, ref, methods), path)
        written.append(path)
    save_atomic(ecdf_figure(comparison.runs, comparison.references, methods, comparison.summaries), out / "ecdf.png")
    written.append(out / "ecdf.png")
    if comparison.targets:
        atomic_write_text(out / "targets.csv", targets_csv(comparison))
        known = {t.instance: comparison.references[t.instance] for t in comparison.targets}
        save_atomic(target_ecdf_figure(comparison.runs, known, methods, comparison.profiles), out / "ecdf_targets.png")
        written += [out / "targets.csv", out / "ecdf_targets.png"]
    return written


def stderr_progress(stream: TextIO | None = None) -> Callable[[str], None]:
    """One progress line per call on ``stream`` (default: the ``sys.stderr`` of the moment)."""

    def say(line: str) -> None:
        print(line, file=stream or sys.stderr, flush=True)

    return say
