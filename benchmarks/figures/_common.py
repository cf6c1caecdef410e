"""Shared pieces of the figure scripts: points, the printed table, CSV and PNG output.

Every figure's ``run(quick, out, instance)`` returns a JSON-ready dict
``{"figure": N, "title": ..., "points": [{"series", "x", "ours", "paper"}], ...}`` built with
:func:`result`; :func:`finish` prints its table and writes ``figN.csv`` and ``figN.png`` into
``out`` (both atomically: a temporary file in the same folder, then a rename).
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

from edgeprefix.placement.atomic import atomic_savefig
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import (
    Instance,
    atomic_write_text,
    load_instance,
)

DEFAULT_INSTANCE = "paper_calibrated"
Point = dict[str, Any]
Plot = Callable[[plt.Figure], None]


def resolve_instance(instance: Instance | str | os.PathLike[str] | None) -> Instance:
    """An :class:`Instance` from an instance, an embedded name or a file (default ``paper_calibrated``)."""
    if isinstance(instance, Instance):
        return instance
    return load_instance(DEFAULT_INSTANCE if instance is None else instance)


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
    """The dict every ``run`` returns (``figure``, ``title``, ``points`` and any extra keys)."""
    out: dict[str, Any] = {"figure": int(figure), "title": title, "points": list(points)}
    out.update(extra)
    return out


def table(payload: Mapping[str, Any]) -> str:
    """A fixed-width table of the points (paper's value and the difference where given)."""
    lines = [f"Fig. {payload['figure']}: {payload['title']}", f"{'series':<28}{'x':>12}{'ours':>12}{'paper':>10}{'diff':>11}"]
    for p in payload["points"]:
        ours, paper = p["ours"], p["paper"]
        diff = ours - paper if isinstance(ours, (int, float)) and isinstance(paper, (int, float)) else None
        lines.append(f"{p['series']!s:<28}{_cell(p['x']):>12}{_cell(ours):>12}{_cell(paper):>10}{_cell(diff, signed=True):>11}")
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
        fig.tight_layout()
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


def coverage_curves(points: list[dict[str, Any]], policies: Iterable[str], paper: Mapping[tuple[str, float], float],
                    *, xlabel: str, title: str, target: float, plateau: float | None = None) -> Plot:
    """A ``draw(fig)`` for coverage vs one swept parameter: one line per policy, the paper's
    values as crosses, an optional horizontal plateau (Figs. 8 and 12)."""

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        for policy in policies:
            ax.plot(*series_xy(points, policy), marker="o", label=policy)
        for (_, x), value in paper.items():
            ax.plot([x], [value], "kx")
        if plateau is not None:
            ax.axhline(plateau, color="gray", lw=0.5, ls=":")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"TTFT coverage $P_{{cov}}({target}\\,s)$")
        ax.set_title(title)
        ax.set_ylim(0, 1)
        ax.legend()

    return draw


def finish(payload: dict[str, Any], out: Path | str | None, draw: Plot | None, *, echo: bool = True,
           size: tuple[float, float] = (7.0, 4.5)) -> dict[str, Any]:
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
