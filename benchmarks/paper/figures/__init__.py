"""The paper's figures reproduced: one module per figure, ``run(quick, out, instance)``.

``FIGURES`` maps the figure number to its module; :func:`run_figure` imports and runs one.
Every ``run`` returns ``{"figure": N, "title": ..., "points": [{"series", "x", "ours", "paper"}], ...}``,
prints a table and, with ``out``, writes ``figN.csv`` and ``figN.png``.  The default instance is
the embedded ``paper_calibrated`` (see ``benchmarks/paper/calibration/README.md``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from edgeprefix.placement.model.instance import Instance

FIGURES: dict[int, str] = {n: f"edgeprefix.benchmarks.paper.figures.fig{n}" for n in (1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)}


def run_figure(
    number: int, quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None, *, echo: bool = True
) -> dict[str, Any]:
    """Run figure ``number`` (one of :data:`FIGURES`)."""
    if number not in FIGURES:
        raise ValueError(f"figure: unknown figure {number!r} (valid: {sorted(FIGURES)})")
    module = importlib.import_module(FIGURES[number])
    return module.run(quick=quick, out=out, instance=instance, echo=echo)


__all__ = ["FIGURES", "run_figure"]
