"""The joint calibration as an optimisation problem: CMA-ES over the ``paper_section6`` family.

Decision: the 16 coordinates of :class:`~edgeprefix.benchmarks.paper.calibration.section6.Parameters`
in the unit cube (log scale where the box says so); the five figure loads are chosen inside
each assessment.  Objective: :meth:`~edgeprefix.benchmarks.paper.calibration.assess.Assessment.penalty`
(weighted target shortfalls, cheapest stages first with early rejection).  The search runs
``restarts`` CMA-ES rounds (the ``cmaes`` package behind Optuna's ``CmaEsSampler``, ask/tell in
the unit cube): the first from ``start``, each further one from the best point so far with a fresh
step size and a doubled population (IPOP), all seeded from ``seed``.

Every assessed candidate is appended to a JSON-lines log (unit point, shortfalls, loads), from
which :func:`pareto_front` extracts the non-dominated trade-offs between the targets.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from cmaes import CMA

from edgeprefix.benchmarks.paper.calibration.assess import WEIGHTS, Assessment, assess
from edgeprefix.benchmarks.paper.calibration.section6 import Parameters
from edgeprefix.placement.progress import progress_bar

SIGMA0 = 0.15  # initial CMA-ES step in the unit cube


@dataclass
class SearchResult:
    """The best assessment of a search and its bookkeeping."""

    best: Assessment
    trials: int
    seconds: float
    history: list[dict[str, Any]] = field(default_factory=list)  # one record per assessed candidate


def record(a: Assessment, trial: int, round_: int) -> dict[str, Any]:
    """The JSON-ready log record of one assessment."""
    return {
        "trial": trial,
        "round": round_,
        "penalty": a.penalty(),
        "stage": a.stage,
        "evaluations": a.evaluations,
        "objectives": a.objectives(),
        "loads": {k: list(v) if isinstance(v, tuple) else v for k, v in a.loads.items()},
        "unit": [round(float(x), 6) for x in a.params.to_unit()],
        "fig10": {k: v for k, v in a.details.get("fig10", {}).items() if k in ("margin", "gain", "light_best", "scope")},
    }


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def search(
    start: Parameters, *, seed: int, budget: int, restarts: int = 1, log: Path | None = None, sigma0: float = SIGMA0, verbose: bool = True
) -> SearchResult:
    """``restarts`` CMA-ES rounds sharing ``budget`` assessments; progress on stderr.

    Parameters
    ----------
    start : the first round's mean.
    seed : seeds every round (round ``k`` uses ``seed + k``).
    budget : total number of assessed candidates.
    log : JSON-lines file, one record per candidate (appended).
    """
    if budget < 1 or restarts < 1:
        raise ValueError(f"search: budget and restarts must be >= 1, got budget={budget}, restarts={restarts}")
    names = Parameters.names()
    t0 = time.perf_counter()
    best: Assessment | None = None
    history: list[dict[str, Any]] = []
    handle = log.open("a", encoding="utf-8") if log is not None else None
    per_round = [budget // restarts + (1 if k < budget % restarts else 0) for k in range(restarts)]
    trial = 0
    try:
        with progress_bar(total=budget, desc="calibration", unit="cand") as bar:
            mean = start.to_unit()
            bounds = np.tile([0.0, 1.0], (len(names), 1))
            for round_, n in enumerate(per_round):
                cma = CMA(
                    mean=mean.copy(),
                    sigma=sigma0,
                    bounds=bounds,
                    seed=seed + round_,
                    population_size=(4 + int(3 * np.log(len(names)))) * 2**round_,
                )
                done = 0
                while done < n and not (best is not None and best.penalty() == 0.0):
                    told = []
                    for _ in range(cma.population_size):
                        x = cma.ask()
                        a = assess(Parameters.from_unit(x))
                        value = a.penalty()
                        told.append((x, value))
                        rec = record(a, trial, round_)
                        history.append(rec)
                        if handle is not None:
                            handle.write(json.dumps(rec) + "\n")
                            handle.flush()
                        trial += 1
                        done += 1
                        bar.update(1)
                        if best is None or value < best.penalty() - 1e-12:
                            best = a
                            bar.set_postfix_str(f"best {value:.4f}")
                            if verbose:
                                _say(
                                    f"[calibration] candidate {trial}/{budget} round {round_}: penalty {value:.5f} "
                                    + " ".join(f"{k}={v:.4f}" for k, v in a.objectives().items())
                                    + f" loads={rec['loads']}"
                                )
                    cma.tell(told)
                    if cma.should_stop():
                        break
                if best is not None:
                    mean = best.params.to_unit()
    finally:
        if handle is not None:
            handle.close()
    assert best is not None
    return SearchResult(best, trial, time.perf_counter() - t0, history)


def read_log(path: Path) -> list[dict[str, Any]]:
    """The records of a search log (see :func:`record`)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def pareto_front(records: Iterable[dict[str, Any]], keys: tuple[str, ...] = tuple(WEIGHTS)) -> list[dict[str, Any]]:
    """The non-dominated records (every objective in ``keys`` minimised) among complete assessments."""
    rows = [r for r in records if r["stage"] == "fig10"]
    if not rows:
        return []
    values = np.array([[r["objectives"][k] for k in keys] for r in rows])
    keep = []
    for i, v in enumerate(values):
        dominated = np.any(np.all(values <= v, axis=1) & np.any(values < v, axis=1))
        if not dominated:
            keep.append(rows[i])
    return keep
