"""Shared pieces of the figure scripts: points, the printed table, CSV and PNG output.

Every figure's ``run(quick, out, instance)`` returns a JSON-ready dict
``{"figure": N, "title": ..., "points": [{"series", "x", "ours", "paper"}], ...}`` built with
:func:`result`; :func:`finish` prints its table and writes ``figN.csv`` and ``figN.png`` into
``out`` (both atomically: a temporary file in the same folder, then a rename).

A point that checks one of the paper's claims carries ``paper`` (non-null), ``tolerance``,
``relation`` and ``holds`` (:func:`check_point`); :func:`result` counts them under ``targets``.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from edgeprefix.benchmarks.paper.calibration.checks import Check
from edgeprefix.benchmarks.paper.calibration.section6 import FigureLoads, figure_loads
from edgeprefix.placement.atomic import atomic_savefig
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import (
    Instance,
    atomic_write_text,
    load_instance,
)

DEFAULT_INSTANCE = "paper_section6"
Point = dict[str, Any]
Plot = Callable[[plt.Figure], None]


def resolve_instance(instance: Instance | str | os.PathLike[str] | None) -> Instance:
    """An :class:`Instance` from an instance, an embedded name or a file (default ``paper_section6``)."""
    if isinstance(instance, Instance):
        return instance
    return load_instance(DEFAULT_INSTANCE if instance is None else instance)


def loads_of(instance: Instance) -> FigureLoads:
    """The figure loads calibrated for ``instance`` (by name; the historical defaults otherwise)."""
    return figure_loads(instance.name)


def check_point(check: Check, **extra: Any) -> Point:
    """A point for one of the paper's claims: ``paper`` non-null, with ``tolerance``, ``relation``, ``holds``."""
    return point(f"check: {check.claim}", check.x, check.ours, **check.fields(), **extra)


def add_check_fields(row: Point, check: Check) -> Point:
    """Mark an existing point (its ``ours`` and ``paper``) as a check (adds tolerance, relation, holds)."""
    row.update({key: _plain(value) for key, value in check.fields().items()})
    return row


def subtitle(instance: Instance, load: str) -> str:
    """The caption line every figure carries: instance and load."""
    return f"instance {instance.name}; {load}"


def point(series: str, x: Any, ours: float | None, paper: float | None = None, **extra: Any) -> Point:
    """One row of a figure's table: ``series`` at ``x``, our value and the paper's (or ``None``)."""
    row: Point = {"series": series, "x": _plain(x), "ours": _plain(ours), "paper": _plain(paper)}
    row.update({key: _plain(value) for key, value in extra.items()})
    return row


def _plain(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def result(figure: int, title: str, points: Iterable[Point], **extra: Any) -> dict[str, Any]:
    """The dict every ``run`` returns (``figure``, ``title``, ``points``, ``targets`` and any extra keys).

    ``targets`` counts the points that check a paper claim: ``{"checked": n, "hold": k}``.
    """
    rows = list(points)
    checked = [p for p in rows if "holds" in p]
    out: dict[str, Any] = {
        "figure": int(figure),
        "title": title,
        "points": rows,
        "targets": {"checked": len(checked), "hold": sum(bool(p["holds"]) for p in checked)},
    }
    out.update(extra)
    return out


def table(payload: Mapping[str, Any]) -> str:
    """A fixed-width table of the points (paper's value and the difference where given)."""
    points = payload["points"]
    ws = min(46, max([28, *(len(str(p["series"])) + 2 for p in points)]))
    wx = max([12, *(len(_cell(p["x"])) + 2 for p in points)])
    lines = [f"Fig. {payload['figure']}: {payload['title']}", f"{'series':<{ws}}{'x':>{wx}}{'ours':>12}{'paper':>10}{'diff':>11}  holds"]
    for p in points:
        ours, paper = p["ours"], p["paper"]
        diff = ours - paper if isinstance(ours, (int, float)) and isinstance(paper, (int, float)) else None
        holds = ""
        if "holds" in p:
            rule = f"≈ ±{p['tolerance']:g}" if p["relation"] == "≈" else p["relation"]
            holds = f"  {'yes' if p['holds'] else 'NO'} ({rule})"
        lines.append(f"{p['series']!s:<{ws}}{_cell(p['x']):>{wx}}{_cell(ours):>12}{_cell(paper):>10}{_cell(diff, signed=True):>11}{holds}")
    if "targets" in payload:
        t = payload["targets"]
        lines.append(f"paper targets checked: {t['checked']}, holding: {t['hold']}")
    for note in payload.get("notes", ()):
        lines.append(f"note: {note}")
    return "\n".join(lines)


def _cell(value: Any, signed: bool = False) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
        return f"{value:+.2e}" if signed else f"{value:.2e}"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def to_csv(points: Iterable[Point]) -> str:
    """CSV text of the points; the columns are the union of their keys (series, x, ours, paper first)."""
    rows = list(points)
    columns = ["series", "x", "ours", "paper"]
    for row in rows:
        columns += [key for key in row if key not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if row.get(key) is None else row.get(key) for key in columns})
    return buffer.getvalue()


def save_png(path: Path, draw: Plot, size: tuple[float, float] = (7.0, 4.5)) -> None:
    """Draw a figure with ``draw(fig)`` and save it to ``path`` atomically (matplotlib Agg)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = plt.figure(figsize=size)
    try:
        draw(fig)
        # a figure-level legend sits below the panels: keep a strip free for it
        fig.tight_layout(rect=(0.0, 0.06, 1.0, 0.92 if fig.get_suptitle() else 1.0) if fig.legends else None)
        atomic_savefig(fig, path, dpi=120)
    finally:
        plt.close(fig)


def coverage_along(instances: Iterable[Instance], policies: Iterable[str], target: float) -> dict[str, list[float]]:
    """``P_cov(τ)`` of every policy on each instance of a sweep (load-aware warm-started from the
    previous point, as the paper's Fig. 6 remarks)."""
    policies = tuple(policies)
    out: dict[str, list[float]] = {p: [] for p in policies}
    warm = None
    for inst in instances:
        for policy in policies:
            ev = evaluate(inst, None, policy, warm_start=warm if policy == "load_aware" else None)
            if policy == "load_aware":
                warm = np.where(ev.active, ev.advertised_wait, 0.0)
            out[policy].append(float(ev.coverage(target)))
    return out


def coverage_curves(
    points: list[dict[str, Any]],
    policies: Iterable[str],
    paper: Mapping[tuple[str, float], float],
    *,
    xlabel: str,
    title: str,
    target: float,
    plateau: float | None = None,
) -> Plot:
    """A ``draw(fig)`` for coverage vs one swept parameter: one line per policy, the paper's
    values as crosses, an optional horizontal plateau (Figs. 8 and 12)."""

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        styles = ("-o", "--s", ":^", "-.v")
        for i, policy in enumerate(policies):
            ax.plot(*series_xy(points, policy), styles[i % len(styles)], label=policy)
        xs, ys = [x for (_, x) in paper], list(paper.values())
        ax.plot(xs, ys, "kx", ms=9, mew=2, label="paper (Sec. VI)")
        if plateau is not None:
            ax.axhline(plateau, color="gray", lw=0.8, ls=":", label=f"paper: nearest ≈ {plateau:g}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"TTFT coverage $P_{{cov}}({target}\\,s)$")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

    return draw


def finish(
    payload: dict[str, Any], out: Path | str | None, draw: Plot | None, *, echo: bool = True, size: tuple[float, float] = (7.0, 4.5)
) -> dict[str, Any]:
    """Print the table (when ``echo``), write ``figN.csv`` and ``figN.png`` into ``out`` (if given)."""
    if echo:
        print(table(payload))
    if out is not None:
        folder = Path(out)
        stem = f"fig{payload['figure']}"
        atomic_write_text(folder / f"{stem}.csv", to_csv(payload["points"]))
        files = [str(folder / f"{stem}.csv")]
        if draw is not None:
            save_png(folder / f"{stem}.png", draw, size)
            files.append(str(folder / f"{stem}.png"))
        payload["files"] = files
    return payload


def series_xy(points: Iterable[Point], series: str, key: str = "ours") -> tuple[list[Any], list[Any]]:
    """The ``(x, value)`` lists of one series (for plotting)."""
    rows = [p for p in points if p["series"] == series]
    return [p["x"] for p in rows], [p[key] for p in rows]
