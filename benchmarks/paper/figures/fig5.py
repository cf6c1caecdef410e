"""Fig. 5: M/M/9 waiting-time CDF at ``ρ ≈ 0.82``, Erlang C (eqs. (19)–(20)) vs FCFS event simulation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.paper.calibration import checks
from edgeprefix.benchmarks.paper.figures._common import add_check_fields, finish, point, result
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.queueing import erlang_c, waiting_cdf
from edgeprefix.placement.simulation import simulate_mmc

FIGURE = 5
SERVERS = 9  # c
UTILIZATION = 0.82  # ρ
SERVICE_RATE = 1.0  # μ (time in mean service times)
CUSTOMERS = 1_000_000
QUICK_CUSTOMERS = 100_000


def run(
    quick: bool = False, out: Path | str | None = None, instance: Instance | str | None = None, *, seed: int = 5, echo: bool = True
) -> dict[str, Any]:
    """Analytical ``F_W(w) = 1 − P^W e^{−(cμ − λq) w}`` against the simulated empirical CDF.

    ``instance`` is accepted for a uniform signature and ignored (the queue is the paper's M/M/9).
    """
    arrival = UTILIZATION * SERVERS * SERVICE_RATE
    customers = QUICK_CUSTOMERS if quick else CUSTOMERS
    sim = simulate_mmc(arrival, SERVICE_RATE, SERVERS, customers, seed=seed)
    pw = float(erlang_c(arrival / SERVICE_RATE, SERVERS))
    decay = SERVERS * SERVICE_RATE - arrival
    grid = np.linspace(0.0, 3.0, 16)
    analytic = waiting_cdf(grid, pw, decay)
    waits = np.sort(sim.waits)
    empirical = np.searchsorted(waits, grid, side="right") / waits.size
    points = []
    for w, fa, fe in zip(grid, analytic, empirical):
        points.append(point("erlang_c", float(w), float(fa)))
        points.append(point("simulation", float(w), float(fe)))
    points += [
        point("P^W erlang_c", "P(W>0)", pw),
        point("P^W simulation", "P(W>0)", sim.wait_probability),
        add_check_fields(
            point("kolmogorov distance", "sup|F̂−F|", sim.kolmogorov),
            checks.Check(FIGURE, "sup |F̂ − F| (simulation vs Erlang C)", "sup|F̂−F|", sim.kolmogorov, checks.KOLMOGOROV, "≤"),
        ),
    ]
    payload = result(
        FIGURE,
        f"M/M/{SERVERS} waiting-time CDF at ρ = {UTILIZATION}",
        points,
        customers=customers,
        kolmogorov=sim.kolmogorov,
        utilization=UTILIZATION,
        servers=SERVERS,
        notes=["time in units of the mean service time 1/μ"],
    )

    def draw(fig) -> None:
        ax = fig.add_subplot(1, 1, 1)
        fine = np.linspace(0.0, 3.0, 300)
        ax.plot(fine, waiting_cdf(fine, pw, decay), label="Erlang C (eqs. (19)–(20))")
        ax.step(fine, np.searchsorted(waits, fine, side="right") / waits.size, where="post", ls="--", label="event simulation")
        ax.set_xlabel("waiting time w [1/μ]")
        ax.set_ylabel("$F_W(w)$")
        ax.set_title(
            f"Fig. 5: M/M/{SERVERS} at ρ = {UTILIZATION}, KS = {sim.kolmogorov:.1e} ({customers} customers)\n"
            "instance-independent (the paper's M/M/9); load ρ = 0.82",
            fontsize=9,
        )
        ax.legend()

    return finish(payload, out, draw, echo=echo)
