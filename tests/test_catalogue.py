"""The catalogue with false positives and staleness (docs/model.md §19.7): the false-positive
probability (classic and occupancy-exact) by hand, the advertised-depth law, the exact catalogue as
today's model and today's router, salted Bloom filters in the simulator against the formula,
verification before reuse on a false hit, the churn's slots and epochs, the instance section."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.model.catalogue import (
    Catalogue,
    advertised_depth_law,
    catalogue_evaluation,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, load_instance
from edgeprefix.placement.simulation.catalogue import Churn, catalogue_epochs, churn_events, filter_answers
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec, sample_layout
from edgeprefix.placement.simulation.network import SimulationSpec, _ChurnState, node_times, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter


def base():
    return load_instance("paper_baseline")


# ---------------------------------------------------------------------------------------------
# The false-positive probability and the advertised depth
# ---------------------------------------------------------------------------------------------
def test_false_positive_probability_by_hand():
    assert float(Catalogue(8, 1).false_positive(1)) == pytest.approx(1 - math.exp(-1 / 8))  # 0.1175
    assert float(Catalogue(16, 2).false_positive(2)) == pytest.approx((1 - math.exp(-0.25)) ** 2)  # 0.0489
    assert float(Catalogue(8, 3).false_positive(0)) == 0.0  # an empty filter has no bit set
    assert float(Catalogue(math.inf, 4).false_positive(100)) == 0.0


def test_occupancy_exact_run_probabilities_by_hand():
    # m = 2, k = 2, one entry: the two positions coincide (X = 1) or not (X = 2), each w.p. ½
    cat = Catalogue(2, 2)
    assert cat.false_positive_run(1, 1, exact=True) == pytest.approx(0.5 * 0.25 + 0.5 * 1.0)  # E[(X/2)^2] = 0.625
    assert cat.false_positive_run(1, 2, exact=True) == pytest.approx(0.5 / 16 + 0.5)  # E[(X/2)^4] = 0.53125
    assert cat.false_positive_run(1, 2) == pytest.approx(float(cat.false_positive(1)) ** 2)  # independent tests
    assert Catalogue(1, 3).false_positive_run(1, 1, exact=True) == 1.0  # one bit, always set
    assert cat.false_positive_run(0, 1, exact=True) == 0.0 and cat.false_positive_run(5, 0) == 1.0
    big = Catalogue(4096, 3)  # many bits: the classic formula is the occupancy law's limit
    assert big.false_positive_run(10, 1, exact=True) == pytest.approx(float(big.false_positive(10)), rel=2e-3)


def test_fresh_probability_by_hand():
    assert Catalogue(8, 1, refresh=10.0, churn=0.1).fresh_probability == pytest.approx(1 - math.exp(-1.0))  # 0.632
    assert Catalogue(8, 1, refresh=10.0).fresh_probability == 1.0
    assert Catalogue(8, 1, churn=0.1).fresh_probability == 1.0


def test_advertised_depth_law_on_the_paper_instance():
    inst = base()
    f = 1 - math.exp(-1 / 8)  # shallow holds one entry
    law = advertised_depth_law(inst, Catalogue(8, 1))
    none, shallow, deep = (inst.profile_ids.index(s) for s in ("none", "shallow", "deep"))
    short, long = inst.request_ids.index("short"), inst.request_ids.index("long")
    assert law[shallow][long] == [(800.0, pytest.approx(1 - f)), (2250.0, pytest.approx(f))]
    assert law[shallow][short] == [(800.0, 1.0)]
    assert law[deep][long] == [(2250.0, 1.0)]
    assert law[none][long] == [(0.0, 1.0)]  # an empty filter advertises nothing
    two = 1 - math.exp(-2 / 8)  # deep's filter is fuller, but deep lacks nothing on these paths
    assert float(Catalogue(8, 1).false_positive(2)) == pytest.approx(two)


# ---------------------------------------------------------------------------------------------
# The analytical correction
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["load_aware", "prefix", "nearest"])
def test_an_exact_catalogue_is_todays_model(policy):
    inst = base()
    ev = evaluate(inst, policy=policy)
    ce = catalogue_evaluation(inst, policy=policy, catalogue=Catalogue(math.inf))
    assert ce.coverage_at_target == pytest.approx(ev.coverage_at_target, abs=1e-12)
    assert ce.coverage(1.5) == pytest.approx(float(ev.coverage(1.5)), abs=1e-12)
    assert ce.coverage(queues="tier") == pytest.approx(ev.coverage_at_target, abs=1e-12)
    np.testing.assert_allclose(ce.association_by_profile(), ev.association, atol=1e-12)
    if policy == "load_aware":
        np.testing.assert_allclose(ce.advertised_wait, ev.advertised_wait, rtol=1e-7, atol=1e-12)
    assert ce.false_hit_share == 0.0 and ce.stale_share == 0.0


def test_false_positives_attract_requests_and_cost_coverage():
    inst = base()
    exact = catalogue_evaluation(inst, catalogue=Catalogue(math.inf))
    values = [catalogue_evaluation(inst, catalogue=Catalogue(m, 1)) for m in (2, 8, 64)]
    cov = [v.coverage_at_target for v in values]
    assert cov[0] < cov[1] < cov[2] < exact.coverage_at_target
    shares = [v.false_hit_share for v in values]
    assert shares[0] > shares[1] > shares[2] > 0
    shallow, long = inst.profile_ids.index("shallow"), inst.request_ids.index("long")
    assert values[0].association_by_profile()[shallow, long] > exact.association_by_profile()[shallow, long]
    # a node that falsely advertises tool draws the long requests: its class queue waits more than its tier's
    sub = values[0].tiers[long]
    pw, _, _ = values[0].class_queues()[long]
    false_node = sub.false_hit & (sub.true == shallow)
    assert np.all(pw[false_node] > 5 * values[0].wait_probability[shallow])
    assert np.all(pw[~false_node & (sub.true == shallow)] < values[0].wait_probability[shallow])


def test_stale_share_of_the_nearest_policy_by_hand():
    inst = base()
    cat = Catalogue(math.inf, 1, refresh=20.0, churn=0.05)
    ce = catalogue_evaluation(inst, policy="nearest", catalogue=cat)
    pi = inst.mix_vector(None)
    # nearest: every sub-tier gets its density share; a node shows s but holds s' ≠ s w.p. (1 − p_fresh) π_{s'}
    expected = (1 - cat.fresh_probability) * float((pi * (1 - pi)).sum())
    assert ce.stale_share == pytest.approx(expected, rel=1e-12)
    loaded = catalogue_evaluation(inst, catalogue=cat)
    assert loaded.coverage_at_target < evaluate(inst).coverage_at_target


def test_the_evaluation_report_carries_the_catalogue_block():
    inst = base().replace(catalogue=Catalogue(8, 1, 10.0, 0.01))
    data = evaluate(inst).to_dict()
    block = data["catalogue"]
    ce = catalogue_evaluation(inst)
    assert block["coverage"] == pytest.approx(ce.coverage_at_target)
    assert block["false_positive"]["shallow"] == pytest.approx(1 - math.exp(-1 / 8))
    assert block["coverage"] < data["coverage"]  # the planning model keeps the exact catalogue
    assert "catalogue" not in evaluate(base()).to_dict()


# ---------------------------------------------------------------------------------------------
# The simulator
# ---------------------------------------------------------------------------------------------
SPEC = SimulationSpec(horizon=20.0, warmup=5.0, layout=LayoutSpec(mean_nodes=100.0, counts="exact"))


@pytest.mark.parametrize("online", [False, True])
def test_an_infinite_fresh_catalogue_is_todays_router(online):
    inst = base()
    router = OnlineRouter(candidates_per_profile=2) if online else analytical_router(evaluate(inst))
    today = simulate_network(inst, None, router, SPEC, seed=3)
    cat = simulate_network(inst.replace(catalogue=Catalogue(math.inf, 1, refresh=5.0)), None, router, SPEC, seed=3)
    np.testing.assert_array_equal(cat.node, today.node)
    np.testing.assert_array_equal(cat.wait, today.wait)
    np.testing.assert_array_equal(cat.profile, today.profile)
    np.testing.assert_array_equal(cat.hit, today.hit)
    np.testing.assert_allclose(cat.ttft, today.ttft, rtol=1e-12)


def test_salted_filters_match_the_occupancy_law():
    inst = base()
    nodes = 3000
    answers = filter_answers(inst, nodes, Catalogue(8, 2), np.random.default_rng(7))
    shallow = inst.profile_ids.index("shallow")
    tool = [p.id for p in inst.prefixes].index("tool")
    sys_ = [p.id for p in inst.prefixes].index("sys")
    assert answers[:, shallow, sys_].all()  # no false negative
    rate = answers[:, shallow, tool].mean()
    exact = Catalogue(8, 2).false_positive_run(1, 1, exact=True)  # 0.0566
    se = math.sqrt(exact * (1 - exact) / nodes)
    assert abs(rate - exact) < 5 * se
    assert not answers[:, inst.profile_ids.index("none")].any()


def test_a_false_hit_is_served_from_the_real_depth():
    inst = base().replace(catalogue=Catalogue(2, 1))  # shallow falsely advertises tool on ≈ 40 % of its nodes
    ev = evaluate(inst)
    res = simulate_network(inst, None, analytical_router(ev), SPEC, seed=5)
    exact = simulate_network(base(), None, analytical_router(ev), SPEC, seed=5)
    served = res.node >= 0
    profile, kind = res.profile[served], res.request_type[served]
    np.testing.assert_array_equal(res.hit[served], inst.hit_depth[profile, kind])  # verification: the true hit
    np.testing.assert_allclose(res.prefill[served], inst.first_token_time[profile, kind])
    shallow, long = inst.profile_ids.index("shallow"), inst.request_ids.index("long")
    assert res.association()[shallow, long] > exact.association()[shallow, long] + 0.05
    assert res.coverage(0.8) < exact.coverage(0.8)


def test_churn_events_and_catalogue_epochs():
    rng = np.random.default_rng(0)
    pi = np.array([0.2, 0.5, 0.3])
    churn = churn_events(400, pi, 0.05, 100.0, rng)
    assert np.all(np.diff(churn.time) >= 0) and churn.time.max() < 100.0
    expected = 400 * 0.05 * 100.0
    assert abs(churn.size - expected) < 5 * math.sqrt(expected)
    counts = np.bincount(churn.profile, minlength=3) / churn.size
    assert np.all(np.abs(counts - pi) < 5 * np.sqrt(pi * (1 - pi) / churn.size))
    assert churn_events(400, pi, 0.0, 100.0, rng).size == 0
    profile = np.zeros(3, dtype=np.int64)
    events = Churn(np.array([1.0, 4.0, 12.0]), np.array([0, 1, 0]), np.array([2, 1, 1]))
    starts, snaps = catalogue_epochs(profile, events, 5.0, 15.0)
    np.testing.assert_array_equal(starts, [0.0, 5.0, 10.0])
    np.testing.assert_array_equal(snaps, [[0, 0, 0], [2, 1, 0], [2, 1, 0]])  # the change at 12 s shows from 15 s
    starts, snaps = catalogue_epochs(profile, events, 0.0, 15.0)
    np.testing.assert_array_equal(starts, [0.0, 1.0, 4.0, 12.0])
    np.testing.assert_array_equal(snaps[-1], [1, 1, 0])


def test_a_changing_node_keeps_its_busiest_slots_and_gains_free_ones():
    inst = base()
    layout = sample_layout(inst, {"none": 0.5, "deep": 0.5}, LayoutSpec(mean_nodes=4.0, counts="exact"), seed=1)
    x = int(np.flatnonzero(layout.profile == inst.profile_ids.index("none"))[0])  # c = 12
    deep = inst.profile_ids.index("deep")  # c = 11
    free = [[float(v) for v in range(int(c))] for c in layout.servers]
    occupancy = np.array(node_times(inst, layout)[1])
    state = _ChurnState(inst, layout, free, occupancy, Churn(np.array([0.5, 2.0]), np.array([x, x]), np.array([deep, 0])))
    state.advance(1.0)
    assert sorted(free[x]) == [float(v) for v in range(1, 12)]  # the 11 latest free times
    np.testing.assert_array_equal(occupancy[x], inst.service_time[deep])
    np.testing.assert_array_equal(state.hit[x], inst.hit_depth[deep])
    state.advance(3.0)
    assert sorted(free[x]) == [1.0, 2.0] + [float(v) for v in range(2, 12)]  # one more slot, free at 2 s


def test_staleness_sends_requests_to_nodes_that_changed():
    inst = base().replace(catalogue=Catalogue(math.inf, 1, refresh=20.0, churn=0.05))
    ev = evaluate(base())
    res = simulate_network(inst, None, analytical_router(ev), SPEC, seed=2)
    served = res.node >= 0
    # the served profile is the node's state at arrival: a node seen with several profiles changed
    seen = {}
    for x, s in zip(res.node[served].tolist(), res.profile[served].tolist()):
        seen.setdefault(x, set()).add(s)
    assert any(len(v) > 1 for v in seen.values())
    np.testing.assert_allclose(res.prefill[served], inst.first_token_time[res.profile[served], res.request_type[served]])


# ---------------------------------------------------------------------------------------------
# The instance section
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "section,field",
    [
        ({"bits": 0, "hashes": 1}, "catalogue.bits"),
        ({"bits": 8.5, "hashes": 1}, "catalogue.bits"),
        ({"bits": 8, "hashes": 0}, "catalogue.hashes"),
        ({"bits": 8, "hashes": 1.5}, "catalogue.hashes"),
        ({"bits": 8, "hashes": 1, "refresh": -1.0}, "catalogue.refresh"),
        ({"bits": 8, "hashes": 1, "churn": float("nan")}, "catalogue.churn"),
        ({"bits": 8}, "catalogue.hashes"),
        ({"bits": 8, "hashes": 1, "period": 5.0}, "catalogue.period"),
        ({"bits": True, "hashes": 1}, "catalogue.bits"),
    ],
)
def test_bad_catalogue_fields_name_their_field(section, field):
    data = instance_to_mapping(base())
    data["catalogue"] = section
    with pytest.raises(InstanceError) as err:
        instance_from_mapping(data)
    assert str(err.value).startswith(field)


def test_the_catalogue_section_round_trips():
    data = instance_to_mapping(base())
    data["catalogue"] = {"bits": 64, "hashes": 3, "refresh": 5.0, "churn": 0.02}
    inst = instance_from_mapping(data)
    assert inst.catalogue == Catalogue(64, 3, 5.0, 0.02)
    assert instance_to_mapping(inst)["catalogue"] == data["catalogue"]
    assert not inst.extended  # the node's arrays are the paper's
    with pytest.raises(InstanceError, match="catalogue.bits"):
        instance_to_mapping(base().replace(catalogue=Catalogue(math.inf)))
