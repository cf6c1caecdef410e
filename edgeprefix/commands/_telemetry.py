"""``--telemetry-delay`` / ``--telemetry-refresh``: one definition for every command that takes them."""

from __future__ import annotations

import argparse

from edgeprefix.placement.model.telemetry import Telemetry


def add_telemetry_options(parser: argparse.ArgumentParser) -> None:
    """Add the two telemetry options (docs/model.md §11); both default to the instance's setting (fresh)."""
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
