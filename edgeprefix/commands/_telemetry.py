"""``--telemetry-delay`` / ``--telemetry-refresh``: one definition for every command that takes them."""

from __future__ import annotations

import argparse

from edgeprefix.placement.model.telemetry import Telemetry

TELEMETRY_MODELS = ("meanfield", "sampled")  # edgeprefix.placement.model.stale_router.METHODS


def add_telemetry_options(parser: argparse.ArgumentParser, *, prediction: bool = True) -> None:
    """Add the two telemetry options (docs/model.md §11); both default to the instance's setting (fresh).

    ``prediction``: also ``--telemetry-model``, how the online router's prediction models the age (commands that
    report it)."""
    group = parser.add_argument_group("telemetry (how old the queue information routers act on is)")
    group.add_argument(
        "--telemetry-delay",
        type=float,
        default=None,
        metavar="SECONDS",
        help="every router sees each node's queue as it was SECONDS ago (default 0: fresh)",
    )
    group.add_argument(
        "--telemetry-refresh",
        type=float,
        default=None,
        metavar="SECONDS",
        help="queue reports are refreshed every SECONDS (default 0: continuous)",
    )
    if prediction:
        group.add_argument(
            "--telemetry-model",
            choices=TELEMETRY_MODELS,
            default="meanfield",
            help="the online router's prediction at an age: the board mean field (default; fresh telemetry: eq. (39)) or "
            "the sampled network, fresh telemetry included (docs/model.md (11.19): accurate, seconds of CPU per prediction)",
        )


def telemetry_model(args: argparse.Namespace) -> str:
    """``--telemetry-model`` (``meanfield`` when the command has no such option)."""
    return str(getattr(args, "telemetry_model", None) or "meanfield")


def telemetry_from_args(args: argparse.Namespace, default: Telemetry | None = None) -> Telemetry:
    """The :class:`Telemetry` the options ask for, falling back to ``default`` (fresh when None)."""
    base = default if default is not None else Telemetry()
    delay = getattr(args, "telemetry_delay", None)
    refresh = getattr(args, "telemetry_refresh", None)
    try:
        return Telemetry(delay=base.delay if delay is None else delay, refresh=base.refresh if refresh is None else refresh)
    except ValueError as exc:
        option = "--telemetry-delay" if "delay" in str(exc).split(":")[0] else "--telemetry-refresh"
        raise ValueError(f"{option}: {str(exc).split(': ', 1)[1]}") from None
