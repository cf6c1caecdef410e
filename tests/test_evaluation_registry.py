"""The queue laws and router predictions of evaluate() are classes in a registry (docs/model.md §8.6): the public
names come from it, and registering a class makes it selectable without touching evaluate."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest

from edgeprefix.placement.model.evaluation import Evaluation, evaluate
from edgeprefix.placement.model.evaluation_registry import (
    QUEUE_LAW_REGISTRY,
    ROUTER_PREDICTION_REGISTRY,
    SLOT_QUEUE_REGISTRY,
    Registry,
)
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.queue_laws import QueueLaw, TierQueues
from edgeprefix.placement.model.router import QUEUE_MODEL_OF_ROUTER, ROUTER_OF_QUEUE_MODEL
from edgeprefix.placement.model.router_predictions import meanfield_coverage_pairs


def test_the_public_names_are_the_registries_keys():
    from edgeprefix.commands import _common
    from edgeprefix.formulations import objective
    from edgeprefix.placement.model import cell, engine_law, engine_section, mgc, serving

    assert QUEUE_LAW_REGISTRY.names() == ("slots", "engine")
    assert SLOT_QUEUE_REGISTRY.names() == ("mmc", "mgc")
    assert ROUTER_PREDICTION_REGISTRY.names() == ("meanfield", "cell")
    assert _common.QUEUE_LAWS == engine_law.QUEUE_LAWS == engine_section.QUEUE_LAWS == QUEUE_LAW_REGISTRY.names()
    assert _common.QUEUE_MODELS == cell.QUEUE_MODELS == objective.QUEUE_MODELS == ROUTER_PREDICTION_REGISTRY.names()
    assert serving.QUEUE_LAWS == mgc.QUEUE_LAWS == SLOT_QUEUE_REGISTRY.names()
    assert set(ROUTER_PREDICTION_REGISTRY.names()) == set(QUEUE_MODEL_OF_ROUTER.values())
    for model in ROUTER_PREDICTION_REGISTRY:  # each prediction names the router it is for
        assert ROUTER_PREDICTION_REGISTRY.get(model).router == ROUTER_OF_QUEUE_MODEL[model]


def test_the_names_load_without_numpy(tmp_path):
    """The command line reads the choices at start-up: the registry module imports no numpy."""
    probe = "import sys, edgeprefix.placement.model.evaluation_registry as r; print(r.QUEUE_LAW_REGISTRY.names(), 'numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["('slots',", "'engine')", "False"]


def test_unknown_names_keep_their_one_line_errors(baseline):
    with pytest.raises(ValueError, match=r"^--queue-law: must be one of \['slots', 'engine'\], got 'fifo'$"):
        evaluate(baseline, queue_law="fifo")
    with pytest.raises(ValueError, match=r"^queue_model: unknown 'node' \(valid: \['meanfield', 'cell'\]\)$"):
        evaluate(baseline, queue_model="node")


def test_a_registry_refuses_a_taken_name_and_an_unknown_removal():
    registry = Registry("thing: unknown {name!r} (valid: {valid})", {"a": int})
    with pytest.raises(ValueError, match="'a' is taken"):
        registry.register("a", float)
    with pytest.raises(ValueError, match=r"^thing: unknown 'b' \(valid: \['a'\]\)$"):
        registry.unregister("b")
    assert registry.get("a") is int and "b" not in registry and len(registry) == 1


@dataclass(frozen=True)
class NoWaitLaw:
    """A toy law: infinitely many servers, so no request ever waits (``W = 0``, ``P^W = 0``)."""

    needs_scv: ClassVar[bool] = False

    @classmethod
    def view(cls, instance: Instance, queue_model: str) -> Instance:
        return instance

    @classmethod
    def for_tiers(cls, instance: Instance, active: np.ndarray) -> QueueLaw:
        return cls()

    def exchange_keys(self) -> list[np.ndarray]:
        return []

    def advertised(self, work, servers, service, scv, rho_clip):
        return np.zeros_like(work)

    def advertised_and_slopes(self, work, servers, service, scv, rho_clip):
        return np.zeros_like(work), np.zeros_like(work), None

    def operating_point(self, work, servers, service, scv) -> TierQueues:
        zero = np.zeros_like(work)
        rho = work / servers  # the slots' load, reported as ρ_s (the node-overload shares read it)
        return TierQueues(utilization=rho, stable=np.ones(work.shape, bool), wait_probability=zero, decay=zero, mean_wait=zero)


@dataclass(frozen=True)
class IdleLaw(NoWaitLaw):
    """A toy law that reports every tier idle (``ρ_s = 0``), a state no shipped law reaches."""

    @classmethod
    def for_tiers(cls, instance: Instance, active: np.ndarray) -> QueueLaw:
        return cls()

    def operating_point(self, work, servers, service, scv) -> TierQueues:
        zero = np.zeros_like(work)
        return TierQueues(utilization=zero, stable=np.ones(work.shape, bool), wait_probability=zero, decay=zero, mean_wait=zero)


class QueueFreePrediction:
    """A toy router prediction: the queue-free bound (8.3) as the coverage."""

    router: ClassVar[str] = "oracle"

    def coverage_pairs(self, evaluation: Evaluation, tau: float) -> np.ndarray:
        return meanfield_coverage_pairs(evaluation, tau, queue=False)

    def stable_on_nodes(self, evaluation: Evaluation) -> bool:
        return True


@pytest.fixture()
def toy_classes() -> Iterator[None]:
    QUEUE_LAW_REGISTRY.register("no_wait", NoWaitLaw)
    ROUTER_PREDICTION_REGISTRY.register("queue_free", QueueFreePrediction)
    try:
        yield
    finally:
        QUEUE_LAW_REGISTRY.unregister("no_wait")
        ROUTER_PREDICTION_REGISTRY.unregister("queue_free")


def test_a_registered_queue_law_is_selectable_and_then_gone(baseline, toy_classes):
    inst = baseline.with_network(request_intensity=2.0)  # a load at which the slots queue (every ρ_s < 1)
    ev = evaluate(inst, queue_law="no_wait")
    assert ev.queue_law == "no_wait" and ev.to_dict()["queue_law"] == "no_wait" and np.all(ev.utilization[ev.active] < 1.0)
    assert ev.fixed_point.converged and np.all(np.abs(ev.advertised_wait[ev.active]) <= 1e-15)  # the solver's rounding
    # no wait: the load-aware routing is the prefix policy's, and the coverage is the queue-free bound
    np.testing.assert_allclose(ev.association, evaluate(inst, policy="prefix").association, rtol=1e-12, atol=1e-15)
    assert ev.coverage() == ev.coverage_queue_free() > evaluate(inst).coverage()
    assert ev.mean_ttft < evaluate(inst).mean_ttft
    QUEUE_LAW_REGISTRY.unregister("no_wait")
    with pytest.raises(ValueError, match="--queue-law: must be one of"):
        evaluate(inst, queue_law="no_wait")
    QUEUE_LAW_REGISTRY.register("no_wait", NoWaitLaw)  # for the fixture's clean-up


def test_a_registered_router_prediction_is_selectable(baseline, toy_classes):
    inst = baseline.with_network(request_intensity=4.0)
    ev = evaluate(inst, queue_model="queue_free")
    mean_field = evaluate(inst)
    assert ev.to_dict()["router"] == "oracle" and ev.stable_on_nodes
    assert ev.coverage() == ev.coverage_queue_free() == mean_field.coverage_queue_free() > mean_field.coverage()
    np.testing.assert_array_equal(ev.advertised_wait, mean_field.advertised_wait)  # the routing is the mean field's


def test_the_toy_classes_are_gone_after_the_test(baseline):
    assert "no_wait" not in QUEUE_LAW_REGISTRY and "queue_free" not in ROUTER_PREDICTION_REGISTRY


def test_a_law_with_every_tier_idle_overloads_no_node(baseline):
    """With no tier receiving work there is no node-level load law: no node overloads and no wait grows
    (before, the shares reduced over zero tiers and raised)."""
    QUEUE_LAW_REGISTRY.register("idle", IdleLaw)
    try:
        ev = evaluate(baseline, queue_law="idle")
        assert not np.any(ev.utilization[ev.active] > 0)
        assert ev.overloaded_shares == (0.0, 0.0) and ev.overload_wait_growth == 0.0
        report = ev.to_dict()
        assert report["overloaded_node_share"] == 0.0 and report["stable"] is True
    finally:
        QUEUE_LAW_REGISTRY.unregister("idle")
