"""Figures of the optimiser comparison (matplotlib, Agg): best-so-far curves and the COCO ECDF."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from edgeprefix.benchmarks.optimisers.compare_metrics import RELATIVE_TARGETS, Reference, Summary, ecdf
from edgeprefix.benchmarks.optimisers.compare_runs import RunRecord, anytime_runs
from edgeprefix.placement.atomic import atomic_savefig

STYLES = ("-", "--", "-.", ":")  # one per method, so curves that coincide stay told apart
MARKERS = ("o", "s", "^", "D", "v", "P")


def style(i: int) -> dict:
    """Line style and marker of the ``i``-th method (markers every few points, not on every one)."""
    return {"ls": STYLES[i % len(STYLES)], "marker": MARKERS[i % len(MARKERS)], "markevery": 0.12, "ms": 4}


def log_evaluations_axis(ax) -> None:
    """A log x-axis of evaluation counts labelled once: plain numbers at the decades, no minor labels."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def save_atomic(fig: plt.Figure, path: Path) -> None:
    """Save ``fig`` as PNG through a temporary file in the same folder, then rename."""
    try:
        atomic_savefig(fig, path, dpi=110)
    finally:
        plt.close(fig)


def curves_figure(
    instance: str, runs: Sequence[RunRecord], summaries: Sequence[Summary], ref: Reference, methods: Sequence[str]
) -> plt.Figure:
    """Median best-so-far feasible ``P_cov(τ_0)`` vs evaluations, IQR shaded; grid as markers."""
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for i, method in enumerate(methods):
        if method == "grid":
            pts = sorted((s.budget, s.median) for s in summaries if s.instance == instance and s.method == "grid")
            if pts:
                ax.plot(*zip(*pts), "ks--", label="grid (finest 1/K within b)")
            continue
        chosen = [r for r in anytime_runs(runs, method) if r.instance == instance]
        if not chosen:
            continue
        length = max(r.budget for r in chosen)  # a run that ended early holds its best
        stack = np.array([np.where(np.isfinite(c), c, np.nan) for c in (r.curve_to(length) for r in chosen)])
        x = np.arange(1, length + 1)
        with np.errstate(all="ignore"):
            q25, med, q75 = np.nanpercentile(stack, [25, 50, 75], axis=0)
        per_budget = method in ("spsa",)
        (line,) = ax.plot(x, med, label=f"{method} (run at b = {length})" if per_budget else method, **style(i))
        ax.fill_between(x, q25, q75, color=line.get_color(), alpha=0.2)
        if per_budget:
            pts = sorted((s.budget, s.median) for s in summaries if s.instance == instance and s.method == method)
            ax.plot(*zip(*pts), "o", color=line.get_color(), label=f"{method}, own run per budget")
    ax.axhline(ref.coverage, color="grey", lw=0.8, ls=":", label=f"best known optimum {ref.coverage:.4f} ({ref.source})")
    log_evaluations_axis(ax)
    ax.set_xlabel("objective evaluations")
    ax.set_ylabel("best-so-far feasible TTFT coverage")
    # the y-range follows the data (matplotlib's autoscale), so early, low values stay visible
    ax.set_title(f"{instance}: median and IQR over seeds")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


def ecdf_figure(runs: Sequence[RunRecord], refs: dict[str, Reference], methods: Sequence[str], summaries: Sequence[Summary]) -> plt.Figure:
    """ECDF of targets ``P* − Δ`` reached vs evaluations, pooled over instances and per instance."""
    panels = [("all instances", refs)] + [(name, {name: ref}) for name, ref in refs.items()]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels) + 1.2, 3.8), squeeze=False, layout="constrained")
    longest = max(r.nfev for r in runs)
    n = np.unique(np.geomspace(1, longest, 200).astype(int))
    for ax, (title, subset) in zip(axes[0], panels):
        for i, method in enumerate(methods):
            if method == "grid":
                pts = []
                for budget in sorted({s.budget for s in summaries if s.method == "grid"}):
                    grid_runs = [r for r in runs if r.method == "grid" and r.budget == budget and r.instance in subset]
                    if grid_runs:
                        pts.append((budget, float(ecdf(grid_runs, subset, "grid", [budget])[0])))
                if pts:
                    ax.plot(*zip(*pts), "ks", label="grid")
                continue
            curves = [r for r in anytime_runs(runs, method) if r.instance in subset]
            if curves:
                ax.step(n, ecdf(curves, subset, method, n), where="post", label=method, **style(i))
        log_evaluations_axis(ax)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("objective evaluations")
        ax.set_ylabel("share of (run, target) pairs reached")
        ax.set_title(title, fontsize=9)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="outside right upper")
    fig.suptitle("Targets P* − Δ reached against evaluations (P*: the best known coverage of each instance)", fontsize=10)
    return fig


def target_ecdf_figure(
    runs: Sequence[RunRecord],
    refs: dict[str, Reference],
    methods: Sequence[str],
    profiles: dict[str, int],
    precisions: Sequence[float] = RELATIVE_TARGETS,
) -> plt.Figure:
    """ECDF of the relative targets ``P* (1 − δ)`` of instances with a known optimum vs evaluations: all
    instances pooled, then one panel per instance (titled by its number of profiles)."""
    panels = [("all instances", refs)] + [(f"{name} ({profiles.get(name, '?')} profiles)", {name: ref}) for name, ref in refs.items()]
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols + 1.6, 3.4 * rows), squeeze=False, layout="constrained")
    chosen = [r for r in runs if r.instance in refs]
    longest = max(r.nfev for r in chosen)
    n = np.unique(np.geomspace(1, longest, 200).astype(int))
    for ax, (title, subset) in zip(axes.flat, panels):
        for i, method in enumerate(methods):
            curves = [r for r in anytime_runs(chosen, method) if r.instance in subset]
            if curves:
                ax.step(n, ecdf(curves, subset, method, n, precisions, relative=True), where="post", label=method, **style(i))
        log_evaluations_axis(ax)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("objective evaluations")
        ax.set_ylabel("share of (run, target) pairs")
        ax.set_title(title, fontsize=9)
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="outside right upper")
    fig.suptitle(f"Targets P* (1 − δ), δ in {', '.join(f'{d:g}' for d in precisions)}, against the known optimum", fontsize=10)
    return fig
