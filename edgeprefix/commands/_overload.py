"""Overloaded nodes under the cell law in the planning commands' output (docs/model.md §14.9).

``evaluate``, ``solve``, ``plan-density`` and ``migrate`` report, for the mix they print, the share of
nodes whose own offered load reaches their slots and the share of requests at those nodes
(JSON ``overloaded_node_share``, ``overloaded_request_share``), and ``stable`` counts them under the
cell model; ``--max-overload SHARE`` makes a cap on the node share a constraint of the search.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from edgeprefix.placement.model.cell import accuracy_region
from edgeprefix.placement.model.evaluation import MEAN_TTFT_TOLERANCE, OVERLOAD_TOLERANCE, REFERENCE_SERVICE_TIMES, evaluate


def add_overload_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-overload",
        type=float,
        default=None,
        metavar="SHARE",
        help="cap on the share of nodes whose own load reaches their slots under the cell law, "
        "a constraint of the search (docs/model.md §14.9), e.g. 0.01; default: none",
    )


def node_overload(instance: Any, mix: Any, policy: str, target: float | None, queue_model: str, queue_law: str = "slots") -> dict[str, Any]:
    """``stable`` (tiers, and under the cell model the nodes), ``overloaded_node_share`` and
    ``overloaded_request_share`` of one mix."""
    ev = evaluate(instance, mix, policy, target=target, queue_model=queue_model, queue_law=queue_law)
    return overload_report(ev)


def overload_report(ev: Any) -> dict[str, Any]:
    """The keys above, and the overloaded nodes' growth of the mean wait (docs/model.md (14.17), (14.18)):
    ``mean_wait_growth`` (seconds of mean wait per second the plan runs), ``mean_ttft_horizon_s`` (the horizon
    over which that growth stays within the tolerance of the mean TTFT; null when nothing overloads) and
    ``reference_horizon_s`` (the span it must cover for ``stable`` under the cell model)."""
    nodes, requests = ev.overloaded_shares
    horizon = ev.mean_ttft_horizon
    region = cell_accuracy(ev)
    return {
        "stable": ev.stable_on_nodes,
        "overloaded_node_share": nodes,
        "overloaded_request_share": requests,
        "mean_wait_growth": ev.overload_wait_growth,
        "mean_ttft_horizon_s": horizon if np.isfinite(horizon) else None,
        "reference_horizon_s": ev.reference_horizon,
        **({"cell_accuracy_region": region} if ev.queue_model == "cell" else {}),
    }


def cell_accuracy(ev: Any) -> str | None:
    """The cell model's measured-accuracy note for the region of ``(α, active profiles, busiest ρ_s)`` the plan lies
    in (docs/model.md §14.10); ``None`` for the mean field or an overloaded network."""
    if ev.queue_model != "cell":
        return None
    load = np.asarray(ev.utilization, dtype=float)[ev.active]
    peak = float(np.max(load)) if load.size else 0.0
    return accuracy_region(float(ev.instance.network.radio_exponent), int(np.count_nonzero(ev.active)), peak)


def horizon_text(report: dict[str, Any]) -> str:
    """How soon the overloaded nodes' growing queues move the mean TTFT, as ``stable`` counts it (docs/model.md (14.18))."""
    horizon = report.get("mean_ttft_horizon_s")
    reach = "never" if horizon is None else f"after {horizon:.4g} s"
    return (
        f"their growing queues move the mean TTFT by {100 * MEAN_TTFT_TOLERANCE:g} % {reach}; stable needs at most "
        f"{100 * OVERLOAD_TOLERANCE:g} % of nodes and {REFERENCE_SERVICE_TIMES:g} mean service times = "
        f"{report['reference_horizon_s']:.4g} s (docs/model.md (14.18))"
    )


def overload_line(report: dict[str, Any], queue_model: str) -> str:
    """One line for the text output (and under the cell model a second: the model's measured accuracy there)."""
    counted = (
        horizon_text(report)
        if queue_model == "cell" and report.get("reference_horizon_s") is not None
        else "the online router balances them (docs/model.md §14.9)"
    )
    region = report.get("cell_accuracy_region")
    return (
        f"stable {report['stable']}; overloaded nodes (load >= 1 under the cell law): "
        f"{100 * report['overloaded_node_share']:.1f} % of nodes, {100 * report['overloaded_request_share']:.1f} % of requests; "
        f"{counted}" + (f"\nnote: {region}" if region else "")
    )
