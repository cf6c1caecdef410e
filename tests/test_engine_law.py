"""The engine law (docs/model.md §17.10): its slot limit, monotonicity, exact slopes and gradient, the
``--queue-law`` option, and a few points against single-node engine runs."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeprefix.benchmarks.accuracy.engine.engine_law_fit import INSTANCE, NodeCase, _Gpu, run_node
from edgeprefix.cli import main
from edgeprefix.placement.model.batch import evaluate_batch
from edgeprefix.placement.model.engine_law import (
    EngineLawConstants,
    EngineTiers,
    alone_prefill,
    default_step_time,
    engine_advertised,
    engine_units,
    engine_view,
    engine_wait_law,
    erlang_b_real,
    join_stretch,
    shipped_constants,
    stability_edge,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.queueing import RHO_CLIP, erlang_b
from edgeprefix.placement.model.sensitivity import sensitivity
from edgeprefix.placement.model.wait_laws import EngineLaw, ErlangCLaw

# φ ≡ 1 (a step time that does not grow with the batch), the memory's residence R itself, no compute (π = 0)
SLOTS = EngineLawConstants(compute_servers=1.0, theta_1=1.0, theta_2=0.0, theta_3=0.0, theta_4=1.0)


@pytest.fixture(scope="module")
def mooncake():
    return load_instance(INSTANCE)


def test_real_erlang_b_is_the_recursion_at_whole_servers():
    c = np.array([1, 2, 3, 7, 16, 40, 63, 64, 100], dtype=float)
    for rho in (0.05, 0.5, 0.9, 0.99, 1.3):
        e, over = erlang_b_real(rho * c, c)
        np.testing.assert_allclose(e, erlang_b(rho * c, c.astype(int)), rtol=1e-10)
        np.testing.assert_allclose(over, e / (rho * c), rtol=1e-10)


def test_slot_limit_is_erlang_c():
    """Without compute (π = 0), φ ≡ 1 and r = 1 the law is the paper's M/M/c bit for bit in value and slopes."""
    c = np.array([1.0, 2.0, 5.0, 12.0, 40.0])
    m = np.array([0.7, 2.0, 15.0, 1.0, 3.0])
    tiers = EngineTiers(np.zeros(5), np.ones(5))
    law, ref = EngineLaw(tiers, SLOTS), ErlangCLaw()
    for rho in (0.1, 0.5, 0.9, 0.985, 1.1):
        a = rho * c
        for mine, theirs in zip(law.advertised(a, c, m, RHO_CLIP), ref.advertised(a, c, m, RHO_CLIP)):
            np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-300)
        if rho < 1:
            w, r = law.wait_law(a, c, m), ref.wait_law(a, c, m)
            for name in ("weight", "decay", "d_weight_da", "d_decay_da", "d_decay_dm"):
                np.testing.assert_allclose(getattr(w, name), getattr(r, name), rtol=1e-9, err_msg=name)
            np.testing.assert_allclose(w.mean(), r.mean(), rtol=1e-9)
    np.testing.assert_allclose(stability_edge(c, tiers, SLOTS), c)


# the slot limit's constants with the step in progress switched on (docs/model.md (17.25)): it must vanish at ū = 0
DELAYED = EngineLawConstants(compute_servers=1.0, theta_1=1.0, theta_2=0.0, theta_3=0.0, theta_4=1.0, theta_7=0.3)


@pytest.mark.parametrize("k", [DELAYED, shipped_constants()], ids=["delayed", "shipped"])
def test_step_in_progress_vanishes_in_the_slot_limit(k):
    """Without compute (π = 0, ū = 0) there is no step in progress: δ = 0 and, with the slot limit's other constants,
    the law is Erlang C in value, slopes and mean.  With a prefill (ū > 0) and a joined last chunk (J ≥ 0) the least
    wait is δ = θ_7 ū + θ_8 J: F_W = 1 − P^W below it, and the mean grows by P^W δ."""
    c = np.array([1.0, 2.0, 5.0, 12.0, 40.0])
    m = np.array([0.7, 2.0, 15.0, 1.0, 3.0])
    slots = EngineTiers(np.zeros(5), np.ones(5), np.zeros(5), np.zeros(5), np.zeros(5))
    np.testing.assert_array_equal(slots.delay(k), 0.0)
    np.testing.assert_array_equal(slots.shift(k), 0.0)  # no earlier chunks (T = J = 0): ω J = 0, Erlang C (17.26)
    assert not np.any(engine_wait_law(0.5 * c, c, m, slots, k)["shift_weight"] * slots.shift(k))
    if k is DELAYED:
        law, ref = EngineLaw(slots, k), ErlangCLaw()
        a = 0.7 * c
        for mine, theirs in zip(law.advertised(a, c, m, RHO_CLIP), ref.advertised(a, c, m, RHO_CLIP)):
            np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-300)
        w, r = law.wait_law(a, c, m), ref.wait_law(a, c, m)
        for name in ("weight", "decay", "d_weight_da", "d_decay_da", "d_decay_dm"):
            np.testing.assert_allclose(getattr(w, name), getattr(r, name), rtol=1e-9, err_msg=name)
        np.testing.assert_allclose(w.mean(), r.mean(), rtol=1e-9)
    ubar = np.array([0.5, 1.0, 3.0, 0.2, 8.0])
    join = np.array([0.0, 0.4, 1.2, 0.0, 2.0])
    with_prefill = EngineTiers(np.full(5, 0.5), np.ones(5), ubar, join)
    without = EngineTiers(np.full(5, 0.5), np.ones(5))
    a = 0.4 * stability_edge(c, with_prefill, k)
    on, off = engine_wait_law(a, c, m, with_prefill, k), engine_wait_law(a, c, m, without, k)
    delay = k.theta_7 * ubar + k.theta_8 * join
    np.testing.assert_allclose(on["delay"], delay, rtol=1e-12)
    for name in ("weight", "decay", "d_weight_da", "d_decay_da"):
        np.testing.assert_allclose(on[name], off[name], rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(on["mean"], off["mean"] + on["weight"] * delay, rtol=1e-12)


def test_degenerate_engine_has_kv_slots(mooncake):
    """A step time that does not grow with the batch: the work is the prefill steps alone, the residence is
    ``u + o t_0`` and the servers are the KV places."""
    from edgeprefix.placement.simulation.engine.step_time import StepTime

    step = StepTime(base=0.05)
    units = engine_units(mooncake, step, SLOTS)
    p = mooncake.probabilities
    out = np.maximum(np.round(mooncake.decodes / 0.05), 1.0)
    np.testing.assert_allclose(units.work, units.prefill)
    np.testing.assert_allclose(units.prefill[0], 0.05 * np.ceil(mooncake.lengths / mooncake.engine.token_budget))
    free = (mooncake.gpu.memory - mooncake.memory) / mooncake.gpu.kv_per_token
    tokens = (np.maximum(mooncake.lengths - mooncake.hit_depth, 1.0) + out) @ p
    np.testing.assert_allclose(units.servers, np.minimum(256.0, 0.99 * free / tokens))


def test_alone_prefill_matches_the_engine_alone(mooncake):
    """``u`` is the first-token time of a request that meets an empty node."""
    step = default_step_time(mooncake)
    case = NodeCase(
        "one",
        np.array([1.0]),
        np.array([20000.0]),
        np.array([1.0]),
        np.zeros((1, 1)),
        np.zeros(1),
        _Gpu(10.0, mooncake.gpu.kv_per_token),
        mooncake.engine,
    )
    res = run_node(case, step, 1e-4, 3, np.random.SeedSequence(0))
    expected = alone_prefill(step, np.array([20000.0]), np.array([0.0]), mooncake.engine.token_budget)[0]
    np.testing.assert_allclose(res["first"] - res["arrival"], expected, rtol=1e-12)


@pytest.mark.parametrize("tokens", [11793, 20000, 5000])
def test_join_stretch_matches_the_engine(mooncake, tokens):
    """A request arriving during the earlier chunks of a prefill joins its last chunk: the first request's first token
    comes ``j`` after its alone prefill ``u`` (:func:`join_stretch`); a prefill of one chunk is never joined (``j = 0``)."""
    from edgeprefix.placement.simulation.engine.kv_cache import PrefixCache
    from edgeprefix.placement.simulation.engine.scheduler import INF, BatchingNode, Requests

    step, eng = default_step_time(mooncake), mooncake.engine
    reqs = Requests(length=[tokens, tokens], output=[2, 2], seq=[(), ()], full=[0, 0], trace_block=eng.block_size, pinned_hit=[[0.0, 0.0]])
    cache = PrefixCache(100_000, 1, frozenset(), False, 0, None)
    node = BatchingNode(
        0,
        0,
        cache,
        reqs,
        lambda *a: None,
        step,
        token_budget=eng.token_budget,
        max_running=eng.max_running,
        block_size=eng.block_size,
        watermark=eng.watermark,
        chunked=True,
    )
    for i, t in enumerate((0.0, 0.2)):  # the second arrives during the first's first step
        node.advance(t)
        node.arrive(i, t)
    node.advance(INF)
    n = np.array([float(tokens)])
    u = alone_prefill(step, n, np.zeros(1), eng.token_budget)[0]
    j = join_stretch(step, n, eng.token_budget, n, np.zeros(1))[0]
    assert (j > 0) == (tokens > eng.token_budget)
    np.testing.assert_allclose(reqs.first_token[0] - u, j, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("tokens", [11793, 20000, 5000])
def test_candidate_atom_parts(mooncake, tokens):
    """The candidate atom of docs/model.md §17.10.3 (measured by ``engine_law_atom``, not in the law): ``T`` is the alone
    time of all but the last chunk (0 for one chunk, as ``J``), and at ``θ_9 = 0`` its law is (17.25)'s."""
    from edgeprefix.benchmarks.accuracy.engine.engine_law_atom import atom_cdf, atoms, chunks
    from edgeprefix.benchmarks.accuracy.engine.engine_law_fit import law_cdf

    step, budget = default_step_time(mooncake), mooncake.engine.token_budget
    p, n, h = np.ones(1), np.array([float(tokens)]), np.zeros(1)
    ch = chunks(step, budget, p, n, h)
    count = int(np.ceil(tokens / budget))
    earlier = alone_prefill(step, np.array([(count - 1.0) * budget]), h, budget)[0] if count >= 2 else 0.0
    np.testing.assert_allclose(ch.mean_earlier, earlier, rtol=1e-12)
    assert (ch.mean_earlier > 0) == (ch.mean_stretch > 0) == (tokens > budget)
    w = np.linspace(0.0, 3.0, 31)
    np.testing.assert_array_equal(atom_cdf(w, 0.3, 2.0, 0.1, atoms("per profile", 0.5, p, ch, 0.0)), law_cdf(w, 0.3, 2.0, 0.1))
    atom = atoms("per profile", 0.5, p, ch, 1.0)
    gap = law_cdf(w, 0.3, 2.0, 0.1) - atom_cdf(w, 0.3, 2.0, 0.1, atom)
    np.testing.assert_allclose(gap, np.where(w < ch.mean_stretch, 0.7 * min(1.0, 0.5 * earlier), 0.0), atol=1e-15)


@settings(max_examples=40, deadline=None)
@given(st.floats(1.0, 60.0), st.floats(0.02, 1.0), st.floats(0.1, 40.0), st.floats(0.05, 3.0), st.floats(0.05, 3.0), st.floats(0.1, 5.0))
def test_mixture_candidate_monotone_in_load(c, pi, r, ubar, stretch, theta_9):
    """The candidate mixture of shifted laws of docs/model.md §17.10.3 (``engine_law_atom``'s ``mixture`` variants, not
    in the law) falls with the load at every ``w``, and adds ``ω J`` to the mean; the atom on the non-waiting requests
    does not always (its ``(1 − P^W) ω`` rises and then falls)."""
    from edgeprefix.benchmarks.accuracy.engine.engine_law_atom import Chunks, atoms, mixture_cdf

    k = shipped_constants()
    tiers = EngineTiers(np.array([pi]), np.array([r]), np.array([ubar]), np.array([stretch]))
    edge = float(stability_edge(np.array([c]), tiers, k)[0])
    a = np.linspace(0.0, 0.999 * edge, 120)
    ones = np.ones_like(a)
    m = 2.0
    law = engine_wait_law(a, c * ones, m * ones, EngineTiers(pi * ones, r * ones, ubar * ones, stretch * ones), k)
    ch = Chunks(np.array([ubar]), np.array([stretch]), ubar, stretch)
    w = np.linspace(0.0, 4.0 * (stretch + ubar), 41)
    for variant in ("mixture, capped", "mixture, smooth"):
        cdf = np.array(
            [
                mixture_cdf(w, law["weight"][i], law["decay"][i], law["delay"][i], atoms(variant, a[i] / m, np.ones(1), ch, theta_9))
                for i in range(a.size)
            ]
        )
        assert np.all(np.diff(cdf, axis=0) <= 1e-12) and np.all((cdf >= 0.0) & (cdf <= 1.0))
    om = atoms("mixture, smooth", 0.3, np.ones(1), ch, theta_9)[0][0]
    np.testing.assert_allclose(om, 1.0 - np.exp(-theta_9 * 0.3 * ubar), rtol=1e-12)


def test_shifted_mixture_parts():
    """The shipped law's shifted mixture (docs/model.md (17.26)): ``J_s`` where ``T_s > 0`` (else 0),
    ``ω = 1 − e^{−θ_9 (a/m) T}``, the mean grows by ``ω J``, and ``∂ω/∂a``, ``∂ω/∂m`` are its derivatives."""
    k = shipped_constants()
    assert k.theta_9 > 0
    rng = np.random.default_rng(11)
    n = 12
    c, m = rng.uniform(2.0, 30.0, n), rng.uniform(0.5, 10.0, n)
    earlier = np.where(np.arange(n) % 3 == 0, 0.0, rng.uniform(0.1, 3.0, n))
    join = rng.uniform(0.05, 1.5, n)
    on_tiers = EngineTiers(rng.uniform(0.05, 0.9, n), rng.uniform(0.2, 20.0, n), rng.uniform(0.1, 2.0, n), join, earlier)
    off_tiers = dataclasses.replace(on_tiers, earlier_chunks=None)
    a = 0.5 * stability_edge(c, on_tiers, k)
    on, off = engine_wait_law(a, c, m, on_tiers, k), engine_wait_law(a, c, m, off_tiers, k)
    np.testing.assert_array_equal(on["shift"], np.where(earlier > 0, join, 0.0))
    omega = np.where(earlier > 0, -np.expm1(-k.theta_9 * a / m * earlier), 0.0)
    np.testing.assert_allclose(on["shift_weight"], omega, rtol=1e-12)
    np.testing.assert_allclose(on["mean"], off["mean"] + omega * on["shift"], rtol=1e-12)
    np.testing.assert_array_equal(off["shift_weight"], 0.0)
    h = 1e-6
    up, down = engine_wait_law(a * (1 + h), c, m, on_tiers, k), engine_wait_law(a * (1 - h), c, m, on_tiers, k)
    np.testing.assert_allclose(on["d_shift_weight_da"], (up["shift_weight"] - down["shift_weight"]) / (2 * h * a), rtol=1e-6, atol=1e-12)
    up, down = engine_wait_law(a, c, m * (1 + h), on_tiers, k), engine_wait_law(a, c, m * (1 - h), on_tiers, k)
    np.testing.assert_allclose(on["d_shift_weight_dm"], (up["shift_weight"] - down["shift_weight"]) / (2 * h * m), rtol=1e-6, atol=1e-12)
    law = EngineLaw(on_tiers, k).wait_law(a, c, m)
    np.testing.assert_allclose(law.mean(), on["mean"], rtol=1e-12)
    bar = rng.uniform(0.5, 2.0, n)
    da, dm, _ = law.mean_vjp(bar)
    up_a, down_a = EngineLaw(on_tiers, k).wait_law(a * (1 + h), c, m), EngineLaw(on_tiers, k).wait_law(a * (1 - h), c, m)
    np.testing.assert_allclose(da, bar * (up_a.mean() - down_a.mean()) / (2 * h * a), rtol=1e-5)
    up_m, down_m = EngineLaw(on_tiers, k).wait_law(a, c, m * (1 + h)), EngineLaw(on_tiers, k).wait_law(a, c, m * (1 - h))
    np.testing.assert_allclose(dm, bar * (up_m.mean() - down_m.mean()) / (2 * h * m), rtol=1e-5)


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 60.0), st.floats(0.02, 1.0), st.floats(0.1, 40.0), st.floats(0.05, 3.0), st.floats(0.05, 3.0), st.floats(0.05, 3.0))
def test_shipped_law_cdf_falls_with_load(c, pi, r, ubar, stretch, earlier):
    """The shipped law's ``F_W(w) = (1 − ω) F_0(w) + ω F_0(w − J)`` (docs/model.md (17.26)) falls with the load at every
    ``w`` and is a distribution function in ``w``."""
    from edgeprefix.benchmarks.accuracy.engine.engine_law_fit import law_cdf

    k = shipped_constants()
    one = EngineTiers(np.array([pi]), np.array([r]), np.array([ubar]), np.array([stretch]), np.array([earlier]))
    edge = float(stability_edge(np.array([c]), one, k)[0])
    a = np.linspace(0.0, 0.999 * edge, 120)
    ones = np.ones_like(a)
    law = engine_wait_law(a, c * ones, 2.0 * ones, EngineTiers(pi * ones, r * ones, ubar * ones, stretch * ones, earlier * ones), k)
    assert np.all(np.diff(law["shift_weight"]) >= 0) and law["shift_weight"][-1] > 0
    w = np.linspace(0.0, 4.0 * (stretch + ubar), 41)
    cdf = np.array(
        [law_cdf(w, law["weight"][i], law["decay"][i], law["delay"][i], law["shift"][i], law["shift_weight"][i]) for i in range(a.size)]
    )
    assert np.all(np.diff(cdf, axis=0) <= 1e-12) and np.all(np.diff(cdf, axis=1) >= -1e-12)
    assert np.all((cdf >= 0.0) & (cdf <= 1.0))


def test_atom_candidate_not_monotone_in_load():
    """The example that ruled the atom out (docs/model.md §17.10.3): below ``J`` its ``F_W`` rises with the load where
    ``ω > e^{−θ (w − δ)}``."""
    from edgeprefix.benchmarks.accuracy.engine.engine_law_atom import Chunks, atom_cdf, atoms

    k = shipped_constants()
    c, pi, r, ubar, stretch = 4.0, 0.5, 1.0, 1.0, 3.0
    ch = Chunks(np.array([ubar]), np.array([stretch]), ubar, stretch)
    a = np.linspace(0.05, 0.99 * float(stability_edge(np.array([c]), EngineTiers(np.array([pi]), np.array([r])), k)[0]), 60)
    ones = np.ones_like(a)
    law = engine_wait_law(a, c * ones, 2.0 * ones, EngineTiers(pi * ones, r * ones, ubar * ones, stretch * ones), k)
    w = np.array([0.5 * stretch])
    cdf = np.array(
        [
            atom_cdf(w, law["weight"][i], law["decay"][i], law["delay"][i], atoms("per profile", a[i] / 2.0, np.ones(1), ch, 5.0))[0]
            for i in range(a.size)
        ]
    )
    assert np.any(np.diff(cdf) > 1e-6)


tiers_strategy = st.tuples(st.floats(1.0, 60.0), st.floats(0.02, 1.0), st.floats(0.1, 40.0))


@settings(max_examples=60, deadline=None)
@given(tiers_strategy)
def test_monotone_in_load(params):
    """Advertised delay, mean wait and P^W increase with the load; the advertised slope is positive."""
    c, pi, r = params
    k = shipped_constants()
    tiers = EngineTiers(np.array([pi]), np.array([r]))
    edge = float(stability_edge(np.array([c]), tiers, k)[0])
    a = np.linspace(0.0, 1.5 * edge, 200)
    ones = np.ones_like(a)
    wait, slope = engine_advertised(a, c * ones, 2.0 * ones, EngineTiers(pi * ones, r * ones), RHO_CLIP, k)
    assert np.all(np.diff(wait) > 0) and np.all(slope[1:] > 0)
    below = a < edge
    law = engine_wait_law(a[below], c * ones[below], 2.0 * ones[below], EngineTiers(pi * ones[below], r * ones[below]), k)
    assert np.all(np.diff(law["mean"]) > 0) and np.all(np.diff(law["weight"]) > 0)
    assert (
        np.all(law["stable"])
        and not engine_wait_law(a[~below], c * ones[~below], 2.0 * ones[~below], EngineTiers(pi * ones[~below], r * ones[~below]), k)[
            "stable"
        ].any()
    )


@pytest.mark.parametrize(
    "k", [None, EngineLawConstants(theta_1=1.2, theta_3=1.0, theta_5=0.5, theta_6=0.1, theta_7=0.3)], ids=["shipped", "delayed"]
)
def test_slopes_are_the_derivatives(k):
    """``∂Ŵ/∂a`` (both sides of the clip), ``∂Ŵ/∂m`` and the wait law's slopes against central differences."""
    rng = np.random.default_rng(3)
    n = 40
    c, m = rng.uniform(1.0, 30.0, n), rng.uniform(0.5, 10.0, n)
    tiers = EngineTiers(rng.uniform(0.05, 0.9, n), rng.uniform(0.2, 20.0, n))
    law = EngineLaw(tiers, k)
    edge = stability_edge(c, tiers, shipped_constants() if k is None else k)
    for share in (0.3, 0.8, 1.05):
        a = share * edge
        h = 1e-6 * edge
        wait, da, dm, _ = law.advertised(a, c, m, RHO_CLIP)
        np.testing.assert_allclose(
            da, (law.advertised(a + h, c, m, RHO_CLIP)[0] - law.advertised(a - h, c, m, RHO_CLIP)[0]) / (2 * h), rtol=1e-5
        )
        np.testing.assert_allclose(
            dm,
            (law.advertised(a, c, m * (1 + 1e-6), RHO_CLIP)[0] - law.advertised(a, c, m * (1 - 1e-6), RHO_CLIP)[0]) / (2e-6 * m),
            rtol=1e-5,
        )
        if share < 1:
            w, up, down = law.wait_law(a, c, m), law.wait_law(a + h, c, m), law.wait_law(a - h, c, m)
            np.testing.assert_allclose(w.d_weight_da, (up.weight - down.weight) / (2 * h), rtol=1e-5, atol=1e-12)
            np.testing.assert_allclose(w.d_decay_da, (up.decay - down.decay) / (2 * h), rtol=1e-5, atol=1e-12)


def test_the_decay_slope_is_finite_at_vanishing_load():
    """At a load of 10⁻²⁰⁰ both components' ``f`` is ~10⁻²⁰⁰ and ``f²`` underflows: the decay's slope was 0/0 (a
    RuntimeWarning and a NaN on mooncake_engine's damped run, which the gradient would have carried).  It is finite
    now; near zero it is a cancellation, so it is only as good as ``P^W`` makes it matter: the gradient reads it
    through ``P^W ∂θ/∂a``, which must vanish with the load."""
    rng = np.random.default_rng(5)
    n = 20
    c, m = rng.uniform(1.0, 30.0, n), rng.uniform(0.5, 10.0, n)
    tiers = EngineTiers(rng.uniform(0.05, 0.9, n), rng.uniform(0.2, 20.0, n))
    for load in (1e-200, 1e-100):
        law = engine_wait_law(np.full(n, load), c, m, tiers)
        assert np.all(np.isfinite(law["d_decay_da"])) and np.all(law["weight"] > 0)
        assert np.all(np.abs(law["weight"] * law["d_decay_da"]) < 1e-10)


def _value(instance, pi, s, h, objective):
    mix = pi.copy()
    mix[s] += h
    total = mix.sum()
    scaled = instance.with_network(edge_density=instance.network.edge_density * total)
    ev = evaluate(scaled, mix / total, tol=1e-11, queue_law="engine")
    assert ev.fixed_point.converged
    return ev.coverage() if objective == "coverage" else ev.mean_ttft


@pytest.mark.slow
def test_gradient_through_the_engine_law(mooncake):
    """The exact gradient (docs/model.md §15) through the engine law against 4-point finite differences."""
    inst = mooncake.with_network(request_intensity=0.12)
    pi = np.zeros(len(inst.profiles))
    pi[[0, 1, 4]] = (0.5, 0.3, 0.2)  # two tiers at share 0 stay out (they would be test tiers)
    ev = evaluate(inst, pi, tol=1e-11, queue_law="engine")
    assert np.all(ev.shift_weight[ev.active] > 0.01)  # the shifted mixture (17.26) is on: its ω is differentiated too
    sens = sensitivity(ev, objectives=("coverage", "mean_ttft"))
    for objective in ("coverage", "mean_ttft"):
        exact = sens.gradients[objective]
        for s in (0, 1, 4):
            h = 1e-4
            f = [_value(inst, pi, s, k * h, objective) for k in (-2, -1, 1, 2)]
            fd = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * h)
            assert exact[s] == pytest.approx(fd, rel=1e-5, abs=1e-7), (objective, s)


def test_evaluate_and_batch_agree(mooncake):
    inst = mooncake.with_network(request_intensity=0.1)
    mixes = np.eye(len(inst.profiles))[[0, 1]] * 0.5 + np.eye(len(inst.profiles))[[4, 9]] * 0.5
    batch = evaluate_batch(inst, mixes, queue_law="engine")
    for mix, ev in zip(mixes, batch.evaluations):
        one = evaluate(inst, mix, queue_law="engine")
        assert one.queue_law == ev.queue_law == "engine"
        assert float(one.coverage()) == pytest.approx(float(ev.coverage()), abs=1e-9)
    slots = evaluate(inst, mixes[0])
    assert float(slots.coverage()) != pytest.approx(float(batch.coverage[0]), abs=1e-3)


def test_view_is_in_the_engine_units(mooncake):
    view = engine_view(mooncake)
    units = view.engine_units
    np.testing.assert_allclose(view.first_token_time, units.prefill)
    np.testing.assert_allclose(view.service_time, units.work)
    np.testing.assert_allclose(view.concurrency, units.servers)
    assert engine_view(mooncake) is view  # cached


def test_queue_law_refused_without_engine_section():
    base = load_instance("paper_baseline")
    with pytest.raises(ValueError, match="--queue-law engine: .* no \\[engine\\] section"):
        evaluate(base, queue_law="engine")
    with pytest.raises(ValueError, match="--queue-law: must be one of"):
        evaluate(base, queue_law="batching")


def test_cli_queue_law(capsys, mooncake):
    code = main(["evaluate", str(INSTANCE), "--intensity", "0.1", "--queue-law", "engine", "--json"])
    engine = json.loads(capsys.readouterr().out)
    main(["evaluate", str(INSTANCE), "--intensity", "0.1", "--json"])
    slots = json.loads(capsys.readouterr().out)
    assert code == 0 and engine["queue_law"] == "engine" and slots["queue_law"] == "slots"
    expected = evaluate(mooncake.with_network(request_intensity=0.1), queue_law="engine")
    assert engine["coverage"] == pytest.approx(float(expected.coverage()), abs=1e-12)
    assert main(["evaluate", "--queue-law", "engine"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--queue-law engine" in err[0] and "[engine" in err[0]
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", "--queue-law", "fast"])
    assert exit_info.value.code == 2


# -- engine runs against the law ----------------------------------------------------------------------------


def _shipped_node(mooncake):
    """The shipped instance's engine, mix and all its free memory as one single-node case (the default step time)."""
    p = np.asarray(mooncake.probabilities)
    case = NodeCase(
        "mooncake",
        p,
        np.asarray(mooncake.lengths),
        np.asarray(mooncake.decodes),
        np.zeros((1, p.size)),
        np.zeros(1),
        _Gpu(mooncake.gpu.memory, mooncake.gpu.kv_per_token),
        mooncake.engine,
    )
    return default_step_time(mooncake), p, case


@pytest.mark.slow
@pytest.mark.parametrize("load", [0.25, 0.55])
def test_law_against_single_node_engine_runs(mooncake, load):
    """The shipped mix with all its free memory: the engine's ``P(W ≤ ū/2)`` (the coverage at ``τ = u + ū/2``) and
    mean TTFT against the law.

    Tolerance: 3 batch-means SE of the run (10 batches of 800 requests: long batches, since waits are
    correlated over many services at a = 0.55) plus the law's own error on this regime in the fit's table up
    to a = 0.55 (0.07 in probability, 10 % of the mean TTFT; docs/model.md §17.10)."""
    step, p, case = _shipped_node(mooncake)
    units = engine_units(case, step)
    w_bar = float(units.work[0] @ p)
    n, warm, batches = 8400, 400, 10
    res = run_node(case, step, load / w_bar, n, np.random.SeedSequence(11))
    u = units.prefill[0][res["kind"]][warm:]
    wait = (res["first"] - res["arrival"])[warm:] - u
    u_bar = float(units.prefill[0] @ p)
    law = engine_wait_law(np.array([load]), units.servers, np.array([w_bar]), units.tiers)
    hit = (wait <= u_bar / 2).astype(float)
    se = hit.reshape(batches, -1).mean(axis=1).std(ddof=1) / np.sqrt(batches)
    predicted = 1.0 - law["weight"][0] * np.exp(-law["decay"][0] * u_bar / 2)
    assert abs(predicted - hit.mean()) <= 3 * se + 0.07
    ttft = wait + u
    ttft_se = ttft.reshape(batches, -1).mean(axis=1).std(ddof=1) / np.sqrt(batches)
    assert abs(u_bar + law["mean"][0] - ttft.mean()) <= 3 * ttft_se + 0.10 * ttft.mean()


@pytest.mark.slow
def test_small_waits_against_a_single_node_engine_run(mooncake):
    """The shipped mix with all its free memory at ``a = 0.25``: the engine's share of small waits ``P(W ≤ x ū)``,
    ``x = 0.1, 0.25`` (below and above the least wait ``δ = θ_7 ū + θ_8 J``, docs/model.md (17.25), §17.10.3), against
    ``F_W(x ū) = 1 − P^W e^{−θ (x ū − δ)⁺}``.

    Tolerance: 3 batch-means SE of the run (10 batches of 800 requests) plus the law's own error at these levels on
    this mix and load in the fit's table (0.039 and 0.025, docs/model.md §17.10.3): 0.05."""
    step, p, case = _shipped_node(mooncake)
    units = engine_units(case, step)
    w_bar = float(units.work[0] @ p)
    n, warm, batches = 8400, 400, 10
    res = run_node(case, step, 0.25 / w_bar, n, np.random.SeedSequence(11))
    wait = (res["first"] - res["arrival"])[warm:] - units.prefill[0][res["kind"]][warm:]
    u_bar = float(units.prefill[0] @ p)
    law = engine_wait_law(np.array([0.25]), units.servers, np.array([w_bar]), units.tiers)
    delay = float(law["delay"][0])
    k = shipped_constants()
    assert delay == pytest.approx(k.theta_7 * u_bar + k.theta_8 * float(units.tiers.join_stretch[0]))
    assert 0.1 * u_bar <= delay < 0.25 * u_bar
    for x in (0.1, 0.25):
        hit = (wait <= x * u_bar).astype(float)
        se = hit.reshape(batches, -1).mean(axis=1).std(ddof=1) / np.sqrt(batches)
        predicted = 1.0 - law["weight"][0] * np.exp(-law["decay"][0] * max(x * u_bar - delay, 0.0))
        assert abs(predicted - hit.mean()) <= 3 * se + 0.05, (x, predicted, hit.mean(), se)


def test_plan_density_with_the_engine_law(capsys):
    """plan-density echoes the law and plans the density whose engine-law coverage is the reliability."""
    assert main(["plan-density", str(INSTANCE), "--reliability", "0.8", "--mix", "none=1", "--queue-law", "engine", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queue_law"] == "engine" and out["coverage"] >= 0.8 - 1e-9
    inst = load_instance(INSTANCE).with_network(edge_density=out["edge_density"])
    assert float(evaluate(inst, {"none": 1.0}, queue_law="engine").coverage()) == pytest.approx(out["coverage"], abs=1e-9)


def test_validate_engine_law_needs_the_batching_engine(capsys):
    assert main(["validate", str(INSTANCE), "--queue-law", "engine", "--samples", "100", "--customers", "100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--queue-law engine" in err[0] and "--engine batching" in err[0]


@pytest.mark.slow
def test_validate_engine_columns(tmp_path, capsys):
    """The contract: with --engine batching every coverage_table row carries simulated, simulated_se (the
    batching-engine network, load-aware rows), the slot network under slots_simulated, slots_simulated_se, and
    engine_law (the prediction with --queue-law engine)."""
    from edgeprefix.placement.model.engine_section import EngineSection
    from edgeprefix.placement.model.instance import write_instance

    steps = (("base", 0.01), ("per_prefill_token", 2e-5), ("per_sequence", 1e-4), ("per_context_token", 1e-7))
    inst = load_instance("paper_baseline").replace(engine=EngineSection(step_time=steps))
    path = tmp_path / "engine.toml"
    write_instance(inst, path)
    assert (
        main(
            [
                "validate",
                str(path),
                "--engine",
                "batching",
                "--queue-law",
                "engine",
                "--intensities",
                "1",
                "--samples",
                "500",
                "--customers",
                "500",
                "--nodes",
                "20",
                "--horizon",
                "10",
                "--warmup",
                "5",
                "--replications",
                "2",
                "--engine-requests",
                "200",
                "--no-online",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["queue_law"] == "engine"
    engine_row = report["engine"]["rows"][0]
    for row in report["coverage_table"]:
        assert {"simulated", "simulated_se", "slots_simulated", "slots_simulated_se", "engine_law"} <= set(row)
        assert 0.0 <= row["slots_simulated"] <= 1.0 and row["slots_simulated_se"] >= 0.0
        expected = evaluate(inst.with_network(request_intensity=row["intensity"]), None, row["policy"], queue_law="engine")
        assert row["engine_law"] == pytest.approx(float(expected.coverage()), abs=1e-12)
        if row["policy"] == "load_aware":
            assert row["simulated"] == engine_row["coverage_engine"]
            assert row["simulated_se"] == engine_row["coverage_engine_se"]
        else:
            assert row["simulated"] is None
    assert engine_row["engine_law"] == pytest.approx(report["coverage_table"][0]["engine_law"], abs=1e-12)


def test_queue_law_refused_with_serving_extensions():
    chunked = load_instance(INSTANCE.parent / "serving_chunked.toml")
    from edgeprefix.placement.model.engine_section import EngineSection

    inst = chunked.replace(engine=EngineSection(step_time=(("base", 0.01),)))
    with pytest.raises(ValueError, match="--queue-law engine: .* serving extensions"):
        evaluate(inst, queue_law="engine")


@pytest.mark.slow
def test_replay_echoes_the_engine_law(tmp_path, capsys):
    """replay --queue-law engine: the JSON echoes the law and carries the engine law's prediction of the replayed mix."""
    from importlib import resources

    from edgeprefix.placement.model.instance import instance_from_mapping, instance_to_mapping, write_instance

    sample = resources.files("edgeprefix.placement").joinpath("data", "sample_trace.jsonl")
    plain = tmp_path / "sample.toml"
    assert main(["profiles", str(sample), "--out", str(plain), "--json"]) == 0
    capsys.readouterr()
    timings = {"model": "llama2-70b", "hardware": "h100-80gb", "tensor_parallel": 8}
    path = tmp_path / "engine.toml"
    write_instance(instance_from_mapping({**instance_to_mapping(load_instance(plain)), "engine": {"timings": timings}}), path)
    argv = ["replay", str(sample), "--instance", str(path), "--nodes", "6", "--engine", "batching", "--json"]
    assert main([*argv, "--queue-law", "engine"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["queue_law"] == "engine" and 0.0 <= report["engine_law"]["coverage"] <= 1.0
    assert main(argv) == 0
    slots = json.loads(capsys.readouterr().out)
    assert slots["queue_law"] == "slots" and "engine_law" not in slots
    assert main(["replay", str(sample), "--instance", str(plain), "--queue-law", "engine"]) == 2
    assert "--queue-law engine" in capsys.readouterr().err


def test_instance_field_sets_the_default_law(tmp_path, capsys, mooncake):
    """engine.queue_law = "engine" is the default of --queue-law; --queue-law slots overrides it; a bad value is refused."""
    import dataclasses

    from edgeprefix.placement.model.instance import write_instance

    path = tmp_path / "law.toml"
    write_instance(mooncake.replace(engine=dataclasses.replace(mooncake.engine, queue_law="engine")), path)
    assert load_instance(path).engine.queue_law == "engine"
    assert main(["evaluate", str(path), "--intensity", "0.1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queue_law"] == "engine"
    assert main(["evaluate", str(path), "--intensity", "0.1", "--queue-law", "slots", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["queue_law"] == "slots"
    bad = tmp_path / "bad.toml"
    bad.write_text(path.read_text(encoding="utf-8").replace('queue_law = "engine"', 'queue_law = "batched"'), encoding="utf-8")
    assert main(["evaluate", str(bad)]) == 2
    assert "engine.queue_law" in capsys.readouterr().err


def test_migration_scores_with_the_engine_law(mooncake):
    """MigrationProblem(queue_law="engine"): each epoch's black box is the engine law's coverage."""
    from edgeprefix.formulations.migration import Epoch, MigrationProblem

    mix = {"none": 0.5, "knapsack": 0.5}
    problem = MigrationProblem(
        instance=mooncake, epochs=(Epoch("a", request_intensity=0.08), Epoch("b", request_intensity=0.12)), current=mix, queue_law="engine"
    )
    pi = mooncake.mix_vector(mix)
    for e in range(2):
        objective = problem.epoch_problem(e, pi).objective
        assert objective.queue_law == "engine"
        expected = evaluate(problem.epoch_instance(e), pi, queue_law="engine").coverage()
        assert objective.score(pi).coverage == pytest.approx(float(expected), abs=1e-9)


def test_output_states_the_engine_laws_validated_region(mooncake, capsys):
    """Under the engine law every evaluation names the busiest tier's GPU load against the load the law was
    validated to (docs/model.md §17.10); the text says more beyond it; the slot law's output has no such key."""
    from edgeprefix.placement.model.evaluation import ENGINE_LAW_VALIDATED_LOAD

    light = evaluate(mooncake.with_network(request_intensity=0.02), None, queue_law="engine").to_dict()["engine_law_region"]
    heavy = evaluate(mooncake.with_network(request_intensity=0.16), None, queue_law="engine").to_dict()["engine_law_region"]
    assert light["inside"] and light["busiest_load"] <= ENGINE_LAW_VALIDATED_LOAD < heavy["busiest_load"] and not heavy["inside"]
    assert "beyond it" in heavy["note"] and "beyond it" not in light["note"]
    assert "engine_law_region" not in evaluate(mooncake, None).to_dict()
    assert main(["evaluate", str(INSTANCE), "--queue-law", "engine", "--intensity", "0.16"]) == 0
    assert "engine law: busiest GPU load" in capsys.readouterr().out


def test_the_region_note_names_the_cell_model_as_the_engine_law_s_pairing(mooncake, capsys):
    """docs/model.md §17.10.1: on engine networks the mean field with the engine law misses the load spread, so the
    mean field's note says to use the cell model and the cell model's says it is the pairing; both carry the key."""
    inst = mooncake.with_network(request_intensity=0.05)
    mf = evaluate(inst, None, queue_law="engine").to_dict()["engine_law_region"]
    cell = evaluate(inst, None, queue_law="engine", queue_model="cell").to_dict()["engine_law_region"]
    assert mf["queue_model"] == "meanfield" and cell["queue_model"] == "cell"
    assert mf["recommended_queue_model"] == cell["recommended_queue_model"] == "cell"
    assert "use --queue-model cell" in mf["note"] and "use --queue-model cell" not in cell["note"]
    assert "pairing to use" in cell["note"]
    assert main(["evaluate", str(INSTANCE), "--queue-law", "engine", "--intensity", "0.05"]) == 0
    assert "use --queue-model cell" in capsys.readouterr().out


def test_the_region_states_the_measured_network_error_and_plan_density_carries_it(mooncake, capsys):
    """docs/model.md §17.10.2: under the engine law the region carries the error measured on engine networks (per queue
    model, coverage and mean TTFT), and plan-density's output carries the planned point's region; the slot law's none."""
    from edgeprefix.placement.model.evaluation import ENGINE_LAW_NETWORK_ERROR

    cell = evaluate(mooncake.with_network(request_intensity=0.05), None, queue_law="engine", queue_model="cell").to_dict()
    err = cell["engine_law_region"]["network_error"]
    assert err["coverage_within"] == ENGINE_LAW_NETWORK_ERROR["cell"]["coverage_within"] < err["cells"]
    assert err["coverage_error_min"] < 0 < err["coverage_error_max"] and err["mean_ttft_ratio_min"] < 1 < err["mean_ttft_ratio_max"]
    assert "mean TTFT within 10 %" in cell["engine_law_region"]["note"] and "plan-density" in cell["engine_law_region"]["note"]
    args = ["plan-density", str(INSTANCE), "--reliability", "0.8", "--mix", "none=1", "--queue-model", "cell", "--json"]
    assert main([*args, "--queue-law", "engine"]) == 0
    planned = json.loads(capsys.readouterr().out)
    assert planned["engine_law_region"]["network_error"]["nodes"] == err["nodes"]
    assert main(args) == 0
    assert "engine_law_region" not in json.loads(capsys.readouterr().out)
