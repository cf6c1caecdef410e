"""Every figure at once: the paper's targets, how many hold, and the README table.

:func:`run_all` runs every figure of :data:`~edgeprefix.benchmarks.paper.figures.FIGURES` and gathers
the points that check a paper claim (``paper`` non-null, with ``tolerance``, ``relation`` and
``holds``); :func:`markdown_table` renders them as ``figure | claim | paper | ours | holds``;
:func:`replace_section` rewrites the block between two HTML comments of a Markdown file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from edgeprefix.benchmarks.paper.figures import FIGURES, run_figure
from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.progress import progress_bar

BEGIN, END = "<!-- reproduce --all: begin -->", "<!-- reproduce --all: end -->"


def run_all(quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None) -> dict[str, Any]:
    """Run every figure; ``{"figures": [...], "targets": {"checked", "hold", "failing"}, "checks": [...]}``."""
    payloads = []
    for number in progress_bar(sorted(FIGURES), desc="figures", unit="fig"):
        payloads.append(run_figure(number, quick, out, instance, echo=False))
    rows = [{"figure": p["figure"], "instance": p.get("instance"), **point} for p in payloads for point in p["points"] if "holds" in point]
    failing = [r for r in rows if not r["holds"]]
    return {
        "figures": payloads,
        "checks": rows,
        "quick": quick,
        "targets": {
            "checked": len(rows),
            "hold": len(rows) - len(failing),
            "failing": [{k: r[k] for k in ("figure", "series", "x", "ours", "paper")} for r in failing],
        },
    }


def _number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if value != 0 and abs(value) < 1e-3:
        return f"{value:.1e}"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def markdown_table(report: dict[str, Any]) -> str:
    """``figure | claim | x | paper | ours | holds`` (paper given as relation, value and tolerance)."""
    lines = ["| figure | claim | x | paper | ours | holds |", "|---|---|---|---|---|---|"]
    for r in report["checks"]:
        claim = r.get("claim") or r["series"]
        rel = r["relation"]
        paper = f"{rel} {_number(r['paper'])}" + (f" ± {_number(r['tolerance'])}" if rel == "≈" else "")
        cells = [str(r["figure"]), claim, _number(r["x"]), paper, _number(r["ours"]), "yes" if r["holds"] else "**no**"]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    t = report["targets"]
    instances = sorted({str(r["instance"]) for r in report["checks"] if r.get("instance")})
    mode = " (quick mode)" if report.get("quick") else ""
    lines.append("")
    lines.append(f"{t['hold']} of {t['checked']} checked targets hold on {', '.join(instances) or 'the default instance'}{mode}.")
    return "\n".join(lines)


def replace_section(path: str | os.PathLike[str], body: str) -> None:
    """Replace the text between :data:`BEGIN` and :data:`END` in the Markdown file ``path``."""
    target = Path(path)
    text = target.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), flags=re.S)
    if not pattern.search(text):
        raise ValueError(f"--readme: {target} has no block between {BEGIN!r} and {END!r}; add the two markers first")
    atomic_write_text(target, pattern.sub(lambda _: f"{BEGIN}\n{body}\n{END}", text, count=1))
