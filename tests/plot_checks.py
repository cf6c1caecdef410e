"""Checks of a rendered matplotlib figure, reusable by any test that draws one.

``figure_problems(fig)`` lists what a reader would trip over; ``assert_readable(fig)`` fails
with that list.  It checks that

- every axes with data has a title (its own, or the figure's ``suptitle``) and x and y labels;
- no visible text is raw markup or an equation label (``A_{s,q}``, ``P^W``, ``eq. (39)``,
  ``Theorem 1``, paper labels such as ``P-`` and a number); mathtext between ``$…$`` is fine;
- every finite data point (lines, markers, error bars, filled bands, bars) lies inside the
  axes limits, i.e. nothing is clipped;
- no legend drawn inside an axes covers a plotted line or marker.
"""

from __future__ import annotations

import re

import numpy as np
from matplotlib.collections import Collection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

RAW_MARKUP = re.compile(r"[_^]\{|\^[A-Za-z]|\beq\.\s*\(\d+\)|\bTheorem\s+\d|\bP-\d+")
_SLACK = 1e-9  # relative tolerance on the limits


def _texts(fig: Figure) -> list[str]:
    out = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text") and hasattr(a, "get_visible") and a.get_visible())]
    return [t for t in out if isinstance(t, str) and t]


def _outside_math(text: str) -> str:
    return re.sub(r"\$[^$]*\$", "", text)


def _inside(values: np.ndarray, low: float, high: float) -> np.ndarray:
    lo, hi = min(low, high), max(low, high)
    slack = _SLACK * max(1.0, abs(lo), abs(hi))
    return (values >= lo - slack) & (values <= hi + slack)


def _data_points(ax) -> list[tuple[str, np.ndarray]]:
    """(what, points (n, 2) in data coordinates) for every visible artist that shows data."""
    found: list[tuple[str, np.ndarray]] = []
    for line in ax.get_lines():
        if not line.get_visible():
            continue
        xy = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
        transform = line.get_transform()
        if transform != ax.transData:  # axhline/axvline are in blended coordinates: check the data side only
            continue
        found.append((f"line {line.get_label()!r}", xy))
    for coll in ax.collections:
        if not coll.get_visible() or coll.get_transform() != ax.transData:
            continue
        pts = [p.vertices for p in coll.get_paths() if len(p.vertices)]
        if pts:
            found.append((f"{type(coll).__name__} {coll.get_label()!r}", np.vstack(pts)))
        offsets = np.asarray(coll.get_offsets(), float)
        if offsets.size and isinstance(coll, Collection) and coll.get_offset_transform() == ax.transData:
            found.append((f"markers {coll.get_label()!r}", offsets.reshape(-1, 2)))
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_visible():
            x, y, w, h = patch.get_x(), patch.get_y(), patch.get_width(), patch.get_height()
            found.append(("bar", np.array([[x, y], [x + w, y + h]], float)))
    return found


def _legend_overlaps(fig: Figure, legend, renderer) -> list[str]:
    """Lines of any axes whose drawn path passes under ``legend``."""
    box = legend.get_window_extent(renderer)
    found = []
    for ax in fig.axes:
        for line in ax.get_lines():
            if not line.get_visible() or line.get_transform() != ax.transData:
                continue
            xy = np.column_stack([np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)])
            xy = xy[np.all(np.isfinite(xy), axis=1)]
            if len(xy) == 0:
                continue
            # densify the segments in display space, so a line crossing the legend counts too
            disp = ax.transData.transform(xy)
            if len(disp) > 1 and line.get_linestyle() not in ("None", "none", ""):
                t = np.linspace(0.0, 1.0, 25)[:, None]
                disp = np.vstack([a + t * (b - a) for a, b in zip(disp[:-1], disp[1:])])
            covered = (disp[:, 0] > box.x0) & (disp[:, 0] < box.x1) & (disp[:, 1] > box.y0) & (disp[:, 1] < box.y1)
            if covered.any():
                found.append(f"the legend covers line {line.get_label()!r} of axes {ax.get_title()!r}")
    return found


def figure_problems(fig: Figure) -> list[str]:
    """Everything :func:`assert_readable` would complain about (empty when the figure is fine)."""
    problems: list[str] = []
    suptitle = fig._suptitle.get_text() if fig._suptitle is not None else ""
    fig.canvas.draw()  # layout and legend positions are final only after a draw
    renderer = fig.canvas.get_renderer()
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not (ax.get_lines() or ax.collections or ax.patches):
            continue  # colour bars, empty panels
        name = f"axes {i} ({ax.get_title() or 'untitled'})"
        if not (ax.get_title() or ax.get_title(loc="left") or ax.get_title(loc="right") or suptitle):
            problems.append(f"{name}: no title")
        if not ax.get_xlabel():
            problems.append(f"{name}: no x-axis label")
        if not ax.get_ylabel():
            problems.append(f"{name}: no y-axis label")
        (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
        for what, xy in _data_points(ax):
            finite = np.all(np.isfinite(xy), axis=1)
            if ax.get_xscale() == "log":
                finite &= xy[:, 0] > 0
            if ax.get_yscale() == "log":
                finite &= xy[:, 1] > 0
            pts = xy[finite]
            bad = ~(_inside(pts[:, 0], x0, x1) & _inside(pts[:, 1], y0, y1))
            if bad.any():
                px, py = pts[bad][0]
                problems.append(
                    f"{name}: {what} has {int(bad.sum())} point(s) outside the limits "
                    f"x {x0:.4g}..{x1:.4g}, y {y0:.4g}..{y1:.4g}, e.g. ({px:.4g}, {py:.4g})"
                )
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    for legend in legends:
        if legend.get_visible():
            problems += _legend_overlaps(fig, legend, renderer)
    for text in _texts(fig):
        if RAW_MARKUP.search(_outside_math(text)):
            problems.append(f"raw markup or equation label in visible text: {text!r}")
    return problems


def assert_readable(fig: Figure) -> None:
    """Fail with every problem :func:`figure_problems` finds."""
    problems = figure_problems(fig)
    assert not problems, "\n".join(problems)
