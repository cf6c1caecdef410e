"""Simulators that validate the analytical model (docs/model.md §11, §13).

- :mod:`~edgeprefix.placement.simulation.association_mc`: exact nearest-distance Monte Carlo of ``A_{s,q}``;
- :mod:`~edgeprefix.placement.simulation.mmc`: FCFS M/M/c simulation vs Erlang C;
- :mod:`~edgeprefix.placement.simulation.layout`, :mod:`~edgeprefix.placement.simulation.network`,
  :mod:`~edgeprefix.placement.simulation.routers`: network discrete-event simulator with the online router
  and production baselines;
- :mod:`~edgeprefix.placement.simulation.correction`: per-node load corrections of the coverage;
- :mod:`~edgeprefix.placement.simulation.compare`: the analytical-vs-simulation tables.
"""

from __future__ import annotations

from edgeprefix.placement.simulation.association_mc import (
    AssociationSample,
    simulate_association,
    simulate_instance_association,
)
from edgeprefix.placement.simulation.layout import (
    Layout,
    LayoutSpec,
    NodeAttributes,
    StateRecord,
    sample_layout,
    verify_reuse,
)
from edgeprefix.placement.simulation.mmc import MMcComparison, fcfs_waits, simulate_mmc
from edgeprefix.placement.simulation.network import (
    NetworkResult,
    SimulationSpec,
    simulate_network,
)
from edgeprefix.placement.simulation.routers import (
    BASELINES,
    OnlineRouter,
    hysteresis_step,
)

__all__ = [
    "AssociationSample",
    "BASELINES",
    "Layout",
    "LayoutSpec",
    "MMcComparison",
    "NetworkResult",
    "NodeAttributes",
    "OnlineRouter",
    "SimulationSpec",
    "StateRecord",
    "fcfs_waits",
    "hysteresis_step",
    "sample_layout",
    "simulate_association",
    "simulate_instance_association",
    "simulate_mmc",
    "simulate_network",
    "verify_reuse",
]
