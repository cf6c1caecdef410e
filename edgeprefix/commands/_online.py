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
    instance, mix, telemetry: Telemetry, *, target: float | None = None, evaluation=None, method: str = "meanfield"
) -> dict:
    """JSON block: the online router's coverage, mean TTFT and tier loads at ``telemetry`` (docs/model.md §11).

    ``evaluation``: a load-aware mean-field evaluation to reuse (any other is ignored); ``method``: ``--telemetry-model``.
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
    return predict_online(instance, mix, telemetry, target=target, evaluation=reuse, method=method).to_dict()


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
    if tel["delay"] == 0 and tel["refresh"] == 0:
        return f"online router, fresh telemetry: coverage {block['coverage']:.4f} (the mean-field model, docs/model.md §11{note})"
    sampled = "" if block.get("coverage_se") is None else f" ± {block['coverage_se']:.4f}, sampled"
    return (
        f"online router, telemetry delay {tel['delay']:g} s, refresh {tel['refresh']:g} s: coverage "
        f"{block['coverage']:.4f}{sampled} (fresh: {block['meanfield_coverage']:.4f}; docs/model.md §11{note})"
    )
