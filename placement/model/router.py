"""The two routers a prediction can be for, named once (docs/model.md §14).

Each analytical prediction is what one router delivers: the cell model (``queue_model =
"cell"``) is the coverage of Theorem 1's tier-level rule (``"tier"``), the mean-field
coverage of eq. (39) (``queue_model = "meanfield"``) that of a router that sees every node's
own queue (``"online"``).  The instance field ``network.router`` and the CLI's ``--router``
take these names.  No numpy here: the CLI imports this module at start-up.
"""

from __future__ import annotations

from edgeprefix.placement.errors import InstanceError

PREDICTION_ROUTERS = ("tier", "online")
QUEUE_MODEL_OF_ROUTER = {"tier": "cell", "online": "meanfield"}
ROUTER_OF_QUEUE_MODEL = {model: router for router, model in QUEUE_MODEL_OF_ROUTER.items()}
ROUTER_DESCRIPTION = {
    "online": "a router that sees each node's own queue (fresh per-node telemetry, docs/model.md §11)",
    "tier": "the tier-level rule of Theorem 1 (each tier's mean delay, docs/model.md §6)",
}
DISAGREEMENT = 0.05  # coverage gap between the two routers' predictions above which the CLI prints a note


def check_router(value: object, field: str = "network.router") -> str:
    """``value`` must be one of :data:`PREDICTION_ROUTERS`."""
    if value not in PREDICTION_ROUTERS:
        raise InstanceError(field, f"must be one of {list(PREDICTION_ROUTERS)}, got {value!r}")
    return str(value)


def other_router(router: str) -> str:
    """The router whose prediction the CLI compares against (the other of the two)."""
    return PREDICTION_ROUTERS[1 - PREDICTION_ROUTERS.index(router)]
