"""The cell model with the engine law (docs/model.md §17.10): its slot limit is the slot cell model, its node law
is monotone in the node's load, its coverage falls with the load, and its gradient is the derivative."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeprefix.benchmarks.accuracy.engine.engine_law_fit import INSTANCE
from edgeprefix.placement.model.cell import cell_coverage_pairs, cell_load, engine_wait_tables, wait_tables
from edgeprefix.placement.model.cell_gradient import cell_coverage_gradient
from edgeprefix.placement.model.engine_law import EngineLawConstants, EngineTiers
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.sensitivity import sensitivity

# the engine law's slot limit (tests/test_engine_law.py): no compute, φ ≡ 1, the memory's residence R itself
SLOTS = EngineLawConstants(compute_servers=1.0, theta_1=1.0, theta_2=0.0, theta_3=0.0, theta_4=1.0)


@pytest.fixture(scope="module")
def mooncake():
    return load_instance(INSTANCE)


def _case():
    rng = np.random.default_rng(3)
    lam = np.array([0.6, 0.3, 0.1])
    offsets = rng.uniform(0.0, 0.4, (3, 2))
    work = np.array([[1.0, 2.0], [0.5, 1.5], [0.3, 0.9]])
    servers = np.array([2.0, 5.0, 12.0])
    kw = {
        "radio_scale": 0.2,
        "first_token": rng.uniform(0.05, 0.3, (3, 2)),
        "offered_load": np.array([1.2, 3.0, 8.0]),
        "mean_service": np.array([0.7, 1.3, 2.0]),
    }
    return lam, offsets, work, servers, kw


def test_slot_limit_tables_are_erlang_c():
    """In the law's slot limit the edge is c_s, the P^W table Erlang C's and ι ≡ 1 (the slots' 1/K)."""
    c = np.array([1.0, 2.0, 5.0, 12.0, 40.0])
    edge, pw, iota = engine_wait_tables(c, EngineTiers(np.zeros(5), np.ones(5)), SLOTS)
    np.testing.assert_allclose(edge, c, rtol=1e-12)
    np.testing.assert_allclose(pw, wait_tables(c)[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(iota, 1.0, rtol=1e-9)


def test_slot_limit_is_the_slot_cell_model():
    """Coverage pairs and the cell gradient with the slot-limit engine tables equal the slot cell model's."""
    lam, offsets, work, servers, kw = _case()
    edge, pw, iota = engine_wait_tables(servers, EngineTiers(np.zeros(3), np.ones(3)), SLOTS)
    law = cell_load(lam, offsets, 2.0, work)
    for tau in (0.4, 1.5, np.inf):
        slots = cell_coverage_pairs(law, tau, servers=servers, **kw)
        engine = cell_coverage_pairs(law, tau, servers=edge, tables=(pw, iota), **kw)
        assert slots.sum() > 0.05
        np.testing.assert_allclose(engine, slots, rtol=1e-8, atol=1e-12)
    ref = cell_coverage_gradient(lam, offsets, work, 1.5, servers=servers, **kw)
    got = cell_coverage_gradient(lam, offsets, work, 1.5, servers=edge, tables=(pw, iota), **kw)
    for name in ("value", "lam", "offsets", "offered_load", "mean_service", "work"):
        np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-7, atol=1e-12, err_msg=name)


@settings(max_examples=40, deadline=None)
@given(
    c=st.floats(1.0, 60.0),
    pi=st.floats(0.05, 0.95),
    r=st.floats(0.2, 3.0),
)
def test_node_law_is_monotone_in_the_nodes_load(c, pi, r):
    """A node's P(W > w) = P^W(y) e^{−(1 − y) a* ι(y) w} grows with its load y = a X / a* at every w, and P^W with it."""
    edge, pw, iota = engine_wait_tables(np.array([c]), EngineTiers(np.array([pi]), np.array([r])), nodes=256)
    y = np.linspace(0.0, 1.0, 257)
    assert np.all(np.diff(pw[0]) >= -1e-12)
    for w in (0.05, 0.5, 5.0):
        miss = pw[0] * np.exp(-(1.0 - y) * edge[0] * iota[0] * w)
        assert np.all(np.diff(miss) >= -1e-10), w
    assert np.all(iota >= 0) and np.all(np.isfinite(iota))


def test_cell_engine_coverage_falls_with_load(mooncake):
    """Under the engine law the cell model's coverage falls with Λ, below the mean field's from moderate load on
    (a node's law is convex in its load), and stays positive past the mean field's edge (light nodes still serve)."""
    cells, fields = [], []
    for lam in (0.02, 0.05, 0.08, 0.11, 0.14):
        inst = mooncake.with_network(request_intensity=lam)
        cells.append(evaluate(inst, None, queue_law="engine", queue_model="cell").coverage())
        fields.append(evaluate(inst, None, queue_law="engine").coverage())
    assert np.all(np.diff(cells) < 0)
    assert all(c < f for c, f in zip(cells[1:], fields[1:]))
    past = evaluate(mooncake.with_network(request_intensity=0.3), None, queue_law="engine")
    assert past.coverage() == 0.0
    assert evaluate(mooncake.with_network(request_intensity=0.3), None, queue_law="engine", queue_model="cell").coverage() > 0.0


def _value(inst, pi, s, h):
    mix = pi.copy()
    mix[s] += h
    total = mix.sum()
    scaled = inst.with_network(edge_density=inst.network.edge_density * total)
    return evaluate(scaled, mix / total, tol=1e-13, queue_law="engine", queue_model="cell").coverage()


@pytest.mark.slow
def test_gradient_of_the_cell_model_through_the_engine_law(mooncake):
    """``∂P_cov/∂π_s`` of the cell model under the engine law (its partials chained through the engine law's fixed
    point) against 4-point differences; steps small enough not to cross the tables' nodes in most directions."""
    inst = mooncake.with_network(request_intensity=0.08)
    pi = np.zeros(len(inst.profiles))
    pi[[0, 1, 4]] = (0.5, 0.3, 0.2)
    ev = evaluate(inst, pi, tol=1e-13, queue_law="engine", queue_model="cell")
    assert np.all(ev.shift_weight[ev.active] > 0.01)  # the shifted mixture (17.26) is on: its ω is differentiated too
    sens = sensitivity(ev)
    assert sens.values["coverage"] == pytest.approx(ev.coverage(), abs=1e-9)
    assert ev.cell_gradient().value == pytest.approx(ev.coverage(), abs=1e-9)
    h = 1e-6
    for s in (0, 1, 4):
        f = [_value(inst, pi, s, k * h) for k in (-2, -1, 1, 2)]
        fd = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
        assert sens.gradients["coverage"][s] == pytest.approx(fd, rel=1e-4, abs=1e-6), s
    mean_field = sensitivity(evaluate(inst, pi, tol=1e-13, queue_law="engine")).gradients["coverage"]
    assert np.max(np.abs(sens.gradients["coverage"] - mean_field)) > 1e-3


def test_cli_takes_the_cell_model_with_the_engine_law(capsys, mooncake):
    """``evaluate --queue-model cell --queue-law engine`` (refused before the cell model had the engine law) echoes both
    and reports the cell model's coverage, not the mean field's."""
    import json

    from edgeprefix.cli import main

    args = ["evaluate", str(INSTANCE), "--intensity", "0.1", "--queue-law", "engine", "--json"]
    assert main(args + ["--queue-model", "cell"]) == 0
    cell = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    field = json.loads(capsys.readouterr().out)
    assert (cell["queue_model"], cell["queue_law"], field["queue_model"]) == ("cell", "engine", "meanfield")
    expected = evaluate(mooncake.with_network(request_intensity=0.1), None, queue_law="engine", queue_model="cell").coverage()
    assert cell["coverage"] == pytest.approx(expected, abs=1e-9)
    assert cell["coverage"] < field["coverage"] - 0.05


@pytest.mark.slow
def test_gradient_of_the_cell_model_with_the_shifted_mixture_off_alpha_2(mooncake):
    """At ``α = 2.5`` the cell model's pairs under the shifted mixture (docs/model.md (17.26)) take ``P1`` at ``g`` and at
    ``g + J``: the evaluation's coverage equals the cell gradient's value and its gradient the 4-point differences."""
    inst = mooncake.with_network(request_intensity=0.08, radio_exponent=2.5)
    pi = np.zeros(len(inst.profiles))
    pi[[0, 1, 4]] = (0.5, 0.3, 0.2)
    ev = evaluate(inst, pi, tol=1e-13, queue_law="engine", queue_model="cell")
    assert np.all(ev.shift_weight[ev.active] > 0.01)
    assert ev.cell_gradient().value == pytest.approx(ev.coverage(), abs=1e-9)
    sens = sensitivity(ev)
    h = 1e-6
    for s in (0, 1, 4):
        f = [_value(inst, pi, s, k * h) for k in (-2, -1, 1, 2)]
        fd = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
        assert sens.gradients["coverage"][s] == pytest.approx(fd, rel=1e-4, abs=1e-6), s
