"""The names evaluate() accepts for its queue laws and router predictions, each mapped to one class (docs/model.md §8.6).

Three registries, keyed by the public names (the CLI options and instance fields that choose them):

* :data:`QUEUE_LAW_REGISTRY` -- ``--queue-law`` / ``engine.queue_law``: ``slots`` (the node is ``c_s`` FCFS slots) and
  ``engine`` (the engine law of docs/model.md §17.10);
* :data:`SLOT_QUEUE_REGISTRY` -- ``serving.queue``, the law of the slots: ``mmc`` (Erlang C, eqs. (17)–(20)) and
  ``mgc`` (the M/G/c law of docs/model.md §19.6);
* :data:`ROUTER_PREDICTION_REGISTRY` -- ``--queue-model`` (with ``--router`` / ``network.router`` naming the same choice):
  ``meanfield`` (eq. (39), the online router) and ``cell`` (docs/model.md §14, the tier-level rule).

An entry is a class, or ``"module:Class"`` resolved on first use: this module imports no numpy, so the command
line reads the names at start-up without loading the model.  A new law is a new class and one
:meth:`Registry.register` call; ``evaluate`` has no branch to edit.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

PACKAGE = "edgeprefix.placement.model"


class Registry:
    """Public name → class, in registration order; unknown names raise one line listing the valid ones."""

    def __init__(self, unknown: str, entries: Mapping[str, object]) -> None:
        """``unknown`` formats the error for an unknown name, with ``{name!r}`` and ``{valid}`` (the list)."""
        self._unknown = unknown
        self._entries: dict[str, object] = dict(entries)

    def names(self) -> tuple[str, ...]:
        """The registered names, in order (the choices of the option that selects them)."""
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, name: str) -> Any:
        """The class registered as ``name`` (imported on first use); ``ValueError`` for an unknown name."""
        if name not in self._entries:
            raise ValueError(self._unknown.format(name=name, valid=list(self._entries)))
        entry = self._entries[name]
        if isinstance(entry, str):
            module, _, attribute = entry.partition(":")
            entry = getattr(importlib.import_module(module), attribute)
            self._entries[name] = entry
        return entry

    def register(self, name: str, cls: object) -> None:
        """Make ``cls`` selectable as ``name``; a name already taken is a ``ValueError`` (unregister it first)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"register: the name must be a non-empty string, got {name!r}")
        if name in self._entries:
            raise ValueError(f"register: {name!r} is taken (registered: {list(self._entries)})")
        self._entries[name] = cls

    def unregister(self, name: str) -> None:
        """Remove ``name`` (``ValueError`` if it is not registered)."""
        self.get(name)  # the unknown-name error
        del self._entries[name]


QUEUE_LAW_REGISTRY = Registry(
    "--queue-law: must be one of {valid}, got {name!r}",
    {"slots": f"{PACKAGE}.queue_laws:SlotLaw", "engine": f"{PACKAGE}.queue_laws:EngineQueueLaw"},
)
SLOT_QUEUE_REGISTRY = Registry(
    "serving.queue: must be one of {valid}, got {name!r}",
    {"mmc": f"{PACKAGE}.queue_laws:ErlangCSlots", "mgc": f"{PACKAGE}.queue_laws:MgcSlots"},
)
ROUTER_PREDICTION_REGISTRY = Registry(
    "queue_model: unknown {name!r} (valid: {valid})",
    {"meanfield": f"{PACKAGE}.router_predictions:OnlinePrediction", "cell": f"{PACKAGE}.router_predictions:TierPrediction"},
)
