"""The online router's prediction at the run's telemetry age, for every command that reports it (docs/model.md §11)."""

from __future__ import annotations

import argparse

from edgeprefix.commands._telemetry import telemetry_from_args, telemetry_model
from edgeprefix.placement.model.telemetry import Telemetry


def run_telemetry(args: argparse.Namespace, instance) -> Telemetry:
    """``--telemetry-delay`` / ``--telemetry-refresh``, else the instance's ``[telemetry]``, else fresh."""
    return telemetry_from_args(args, getattr(instance, "telemetry", None))


def run_model(args: argparse.Namespace) -> str:
    """``--telemetry-model``: how the prediction models the telemetry's age (docs/model.md (11.19))."""
    return telemetry_model(args)


def online_prediction(
    instance, mix, telemetry: Telemetry, *, target: float | None = None, evaluation=None, method: str = "meanfield", region: bool = True
) -> dict:
    """JSON block: the online router's coverage, mean TTFT and tier loads at ``telemetry`` (docs/model.md §11), and
    ``fresh_edge``: the operating point's fraction of the stability edge and eq. (39)'s fresh bias measured there
    (:func:`~edgeprefix.placement.model.stale_router.edge_region`).

    ``evaluation``: a load-aware mean-field evaluation to reuse (any other is ignored); ``method``: ``--telemetry-model``;
    ``region``: False leaves ``fresh_edge`` out (callers that read only the coverage skip its bisection).
    """
    from edgeprefix.placement.model.stale_router import predict_online

    reuse = (
        evaluation
        if (
            evaluation is not None
            and getattr(evaluation, "policy", "") == "load_aware"
            and getattr(evaluation, "queue_model", "meanfield") == "meanfield"
        )
        else None
    )
    if reuse is not None and target is not None and float(reuse.target) != float(target):
        reuse = None
    from edgeprefix.placement.model.stale_router import edge_region

    block = predict_online(instance, mix, telemetry, target=target, evaluation=reuse, method=method).to_dict()
    if region:
        block["fresh_edge"] = edge_region(instance, mix, target=target, method=method)  # where eq. (39)'s fresh bias lies
    return block


def show_online(block: dict | None) -> bool:
    """Whether the text output prints :func:`online_line`: old telemetry, the sampled method, or an operating point
    where eq. (39)'s fresh bias was measured large or not at all (docs/model.md (11.17))."""
    if block is None:
        return False
    tel = block["telemetry"]
    edge = block.get("fresh_edge") or {}
    return bool(
        tel["delay"] or tel["refresh"] or block.get("method") == "sampled" or edge.get("in_region") or edge.get("bias_measured", 0) is None
    )


def online_line(block: dict) -> str:
    """One line of text for :func:`online_prediction`'s block."""
    tel = block["telemetry"]
    region = block.get("fresh_region") or {}
    note = ""
    if region.get("near_edge"):
        lo, hi = region["bias_measured"]
        note = (
            f"; near the stability edge (busiest tier at {region['max_utilization']:.2f}) eq. (39) was measured "
            f"{lo:+.2f}…{hi:+.2f} above the simulated fresh router, docs/model.md (11.17)"
        )
    edge = block.get("fresh_edge") or {}
    if edge.get("in_region") or (edge and edge.get("bias_measured") is None):
        note = f"; {edge['note']}"
    sampled = "" if block.get("coverage_se") is None else f" ± {block['coverage_se']:.4f}, sampled"
    if tel["delay"] == 0 and tel["refresh"] == 0:
        how = "the network sampled, docs/model.md (11.19)" if sampled else "the mean-field model, docs/model.md §11"
        return f"online router, fresh telemetry: coverage {block['coverage']:.4f}{sampled.replace(', sampled', '')} ({how}{note})"
    return (
        f"online router, telemetry delay {tel['delay']:g} s, refresh {tel['refresh']:g} s: coverage "
        f"{block['coverage']:.4f}{sampled} (fresh: {block['meanfield_coverage']:.4f}; docs/model.md §11{note})"
    )
