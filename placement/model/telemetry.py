"""How old the queue information a router acts on is (docs/model.md §11).

A router that reads each node's advertised queue ``n_x`` sees it as it was some time ago:

- ``delay`` ``D``: every read shows the node as it was ``D`` seconds earlier (a continuous lag);
- ``refresh`` ``Δt``: the board is rewritten every ``Δt`` seconds (0: no periodic board).

``Telemetry()`` (both 0) is fresh telemetry, the setting every prediction assumed so far.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edgeprefix.placement.errors import plain


@dataclass(frozen=True)
class Telemetry:
    """Age of the telemetry: continuous delay ``D`` [s] and periodic refresh ``Δt`` [s]."""

    delay: float = 0.0
    refresh: float = 0.0

    def __post_init__(self) -> None:
        for name in ("delay", "refresh"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
                raise ValueError(f"telemetry.{name}: must be a finite number of seconds >= 0, got {plain(value)}")

    @property
    def fresh(self) -> bool:
        """True when every read is current (``D = 0`` and ``Δt = 0``)."""
        return self.delay == 0 and self.refresh == 0
