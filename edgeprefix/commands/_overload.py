"""Overloaded nodes under the cell law in the planning commands' output (docs/model.md §14.9).

``evaluate``, ``solve``, ``plan-density`` and ``migrate`` report, for the mix they print, the share of
nodes whose own offered load reaches their slots and the share of requests at those nodes
(JSON ``overloaded_node_share``, ``overloaded_request_share``), and ``stable`` counts them under the
cell model; ``--max-overload SHARE`` makes a cap on the node share a constraint of the search.
"""

from __future__ import annotations

import argparse
from typing import Any

from edgeprefix.placement.model.evaluation import OVERLOAD_TOLERANCE, evaluate


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
    nodes, requests = ev.overloaded_shares
    return {"stable": ev.stable_on_nodes, "overloaded_node_share": nodes, "overloaded_request_share": requests}


def overload_line(report: dict[str, Any], queue_model: str) -> str:
    """One line for the text output."""
    counted = (
        f"counted in stable (at most {100 * OVERLOAD_TOLERANCE:g} % allowed)"
        if queue_model == "cell"
        else "the online router balances them (docs/model.md §14.9)"
    )
    return (
        f"stable {report['stable']}; overloaded nodes (load >= 1 under the cell law): "
        f"{100 * report['overloaded_node_share']:.1f} % of nodes, {100 * report['overloaded_request_share']:.1f} % of requests; "
        f"{counted}"
    )
