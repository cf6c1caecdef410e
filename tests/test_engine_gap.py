"""The model-against-the-engine benchmarks (docs/model.md §17.9): engine_gap, engine_depth, engine_decisions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edgeprefix.benchmarks.accuracy.engine import engine_decisions, engine_depth, engine_gap, engine_runs
from edgeprefix.benchmarks.accuracy.engine.engine_runs import SimSize
from edgeprefix.benchmarks.paper.figures.fig7 import shared_depths
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.simulation.engine.step_time import StepTime

TINY = SimSize(requests=200, replications=2, nodes=4.0, seed=3)


@pytest.fixture(scope="module")
def baseline():
    return engine_runs.engine_instance("paper_baseline")


@pytest.mark.parametrize("main", [engine_gap.main, engine_depth.main])
def test_engine_law_without_the_law_is_one_line_and_exit_2(main, monkeypatch, capsys) -> None:
    monkeypatch.setattr(engine_runs, "engine_law_available", lambda: False)
    with pytest.raises(SystemExit) as exc:
        main(["--queue-law", "engine", "--requests", "40"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--queue-law engine" in err and "--queue-law slots" in err


def test_law_keywords_pass_the_engine_law_only_where_the_model_has_it(monkeypatch) -> None:
    assert engine_runs.law_keywords("slots") == {}
    monkeypatch.setattr(engine_runs, "engine_law_available", lambda: True)
    assert engine_runs.law_keywords("engine") == {"queue_law": "engine"}

    def solver_entry(instance: object, *, queue_model: str = "meanfield") -> None:  # an entry point without the law
        return None

    with pytest.raises(ValueError, match="solver_entry takes no queue_law"):
        engine_runs.law_keywords("engine", solver_entry)
    with pytest.raises(ValueError, match="--queue-law"):
        engine_runs.law_keywords("erlang")


def test_bad_size_is_one_line_and_exit_2(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        engine_gap.main(["--replications", "1"])
    assert exc.value.code == 2
    assert "--replications" in capsys.readouterr().err


def test_common_random_numbers_give_identical_replays_for_identical_mixes(baseline) -> None:
    a = engine_runs.simulate(baseline, None, 0.3, TINY)
    b = engine_runs.simulate(baseline, np.asarray(baseline.mix_vector(None)), 0.3, TINY)
    assert len(a) == TINY.replications
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.ttft, y.ttft)
        np.testing.assert_array_equal(x.node, y.node)
    assert not np.array_equal(a[0].time, a[1].time)  # the replications are different draws


def test_solo_prefill_chunks_the_prompt_with_its_context() -> None:
    step = StepTime(base=0.04, per_prefill_token=2e-4, per_attention=5e-9, per_sequence=1e-4, per_context_token=1e-6)
    one = engine_runs.solo_prefill(step, np.array([1000.0]), np.array([500.0]), 8192)
    assert one[0] == pytest.approx(0.04 + 2e-4 * 1000 + 5e-9 * 1000 * 1500)
    two = engine_runs.solo_prefill(step, np.array([10000.0]), np.array([0.0]), 8192)
    first = 0.04 + 2e-4 * 8192 + 5e-9 * 8192 * 8192
    second = 0.04 + 2e-4 * 1808 + 5e-9 * 1808 * 10000
    assert two[0] == pytest.approx(first + second)
    whole = engine_runs.solo_prefill(step, np.array([10000.0]), np.array([0.0]), 8192, chunked=False)
    assert whole[0] == pytest.approx(0.04 + 2e-4 * 10000 + 5e-9 * 10000 * 10000)


def test_near_zero_load_coverage_is_the_engine_without_waiting(baseline) -> None:
    """At a load where requests almost never meet on a node, the simulated coverage is the share of requests whose
    radio term plus their solo prefill meets τ (tolerance: 3 binomial SEs of the pooled coverage)."""
    step = engine_runs.step_time(baseline)
    results = engine_runs.simulate(baseline, None, 0.005, TINY, step=step)
    point = engine_runs.sim_point(results, baseline, step)
    n = TINY.requests * TINY.replications
    p = point["no_wait"]
    assert 0.05 < p < 0.95
    assert abs(point["coverage"] - p) <= 3.0 * math.sqrt(p * (1.0 - p) / n)
    assert all(engine_runs.wait_growth(r) < 0.1 for r in results)


def test_stability_edge_brackets_a_saturating_load(baseline) -> None:
    edge = engine_runs.stability_edge(baseline, None, TINY, start=0.5, router="tier", rtol=0.25)
    assert edge.stable < edge.edge <= edge.stable * 1.25 + 1e-12
    tau = baseline.placement.target
    assert engine_runs.saturated(engine_runs.simulate(baseline, None, 4.0 * edge.edge, TINY), tau)
    assert not engine_runs.saturated(engine_runs.simulate(baseline, None, edge.stable / 4.0, TINY), tau)


def test_gap_rows_lose_coverage_with_load_and_tabulate_every_row(baseline) -> None:
    edge = engine_runs.Edge(stable=1.5, edge=1.7, probes=0)
    rows, edges = engine_gap.gap_rows(baseline, TINY, (0.05, 0.9), "slots", edge=edge)
    assert [(r["share"], r["router"]) for r in rows] == [(0.05, "tier"), (0.05, "online"), (0.9, "tier"), (0.9, "online")]
    assert edges == {"online": edge}
    for router in engine_gap.ROUTERS:
        light, heavy = (next(r for r in rows if r["router"] == router and r["share"] == s)["sim"] for s in (0.05, 0.9))
        assert light["coverage"] - heavy["coverage"] > 2.0 * math.hypot(light["coverage_se"], heavy["coverage_se"])
    text = engine_gap.table(rows).splitlines()
    assert len(text) == 2 + len(rows) and text[2].startswith("| paper_baseline | 0.085 | 0.05 | tier |")


def test_depth_rows_carry_the_engine_memory_and_deeper_caches_win_at_light_load() -> None:
    inst = engine_runs.with_engine(engine_depth.resolve_instance(None))
    top, _ = shared_depths(inst)
    rows = engine_depth.depth_rows(inst, (0.0, top), {"light": 0.15}, TINY, "slots")
    kappa, memory = inst.gpu.kv_per_token, inst.gpu.memory
    assert [r["kv_tokens"] for r in rows] == pytest.approx([memory / kappa, (memory - kappa * top) / kappa])
    assert rows[0]["slots"] > rows[1]["slots"]
    shallow, deep = (np.asarray(r["sim"]) for r in rows)
    diff = deep - shallow
    assert diff.mean() > 3.0 * diff.std(ddof=1) / math.sqrt(diff.size)
    best = engine_depth.optimum(rows, "light", "sim")
    assert best["depth"] == top and best["near"][1] == top
    assert "| 0 |" in engine_depth.table(rows, {"light": 0.15})


def test_decisions_say_the_engine_law_is_missing_rather_than_filling_it(baseline, monkeypatch) -> None:
    monkeypatch.setattr(engine_runs, "engine_law_available", lambda: False)
    monkeypatch.setattr(engine_decisions, "engine_law_available", lambda: False)
    rows, edge = engine_decisions.decision_rows(baseline, TINY, {"moderate": 0.5}, "tier", budget=5)
    assert rows[0]["engine"] is None and len(rows[0]["slots"]) == TINY.replications
    assert engine_decisions.gain(rows[0]) is None
    assert engine_runs.NOT_AVAILABLE in engine_decisions.table(rows)
    dens = engine_decisions.density_table([{"law": "engine", "density": None}])
    assert engine_runs.NOT_AVAILABLE in dens


def test_gain_is_the_paired_difference() -> None:
    row = {"slots": [0.5, 0.6, 0.7], "engine": [0.55, 0.62, 0.78]}
    mean, se = engine_decisions.gain(row)
    d = np.array([0.05, 0.02, 0.08])
    assert mean == pytest.approx(d.mean()) and se == pytest.approx(d.std(ddof=1) / math.sqrt(3))


def test_wait_growth_separates_a_growing_queue_from_a_steady_one() -> None:
    from types import SimpleNamespace

    n = 400
    steady = SimpleNamespace(node=np.zeros(n, dtype=np.int64), wait=np.full(n, 0.3))
    growing = SimpleNamespace(node=np.zeros(n, dtype=np.int64), wait=np.linspace(0.0, 10.0, n))
    rejecting = SimpleNamespace(node=np.full(n, -1, dtype=np.int64), wait=np.zeros(n))
    assert engine_runs.wait_growth(steady) == pytest.approx(0.0)
    assert engine_runs.wait_growth(growing) == pytest.approx(5.0, rel=0.02)
    assert engine_runs.wait_growth(rejecting) == math.inf
    assert engine_runs.saturated([growing, growing, steady], tau=1.0)
    assert not engine_runs.saturated([steady, steady, growing], tau=1.0)


def test_engine_figures_are_written_as_png(tmp_path):
    """Both engine figures render through the package's atomic PNG writer to the path they are given."""
    from edgeprefix.benchmarks.accuracy.engine import engine_comparison, engine_depth

    rows = [
        {"workload": w, "row": name, "intensity": lam, "coverage": 0.5 - lam, "se": 0.01}
        for w in ("a", "b")
        for name, _, _ in engine_comparison.ROWS[:2]
        for lam in (0.1, 0.2)
    ]
    engine_comparison.plot(rows, tmp_path / "comparison.png")
    depth_rows = [
        {"load": label, "depth": d, "sim": [0.5 + 1e-4 * d, 0.52 + 1e-4 * d], "model": 0.5 + 2e-4 * d}
        for label in ("light", "heavy")
        for d in (0, 100, 200)
    ]
    engine_depth.plot(depth_rows, {"light": 0.1, "heavy": 0.5}, "slots", tmp_path / "depth.png")
    for name in ("comparison.png", "depth.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*"))  # no temporary left behind


ROUTE = SimSize(requests=600, replications=12, nodes=12.0, seed=7)


def test_routed_on_the_engine_law_the_idle_network_covers_the_law_s_queue_free_coverage(baseline) -> None:
    """docs/model.md §17.10.1 ("The queue-free gap"): the engine law's first-token time is the engine's alone
    prefill, so at a vanishing load the network routed on the engine law covers what the law's queue-free
    coverage says (3 SEs over the replications, whose layouts dominate the spread); the same network routed on
    the slot node's ``g`` sends more long prompts to the deep tier, as the slot model's biases say."""
    step = engine_runs.step_time(baseline)
    lam = 0.05
    ev = engine_runs.predict(baseline, None, lam, "meanfield", "engine")
    free = float(ev.coverage_queue_free(ev.target))
    routed = {law: engine_runs.simulate(baseline, None, lam, ROUTE, step=step, route_law=law) for law in ("slots", "engine")}
    solo = np.array([engine_runs.solo_coverage(r, baseline, step) for r in routed["engine"]])
    assert abs(solo.mean() - free) <= 3.0 * solo.std(ddof=1) / math.sqrt(solo.size)
    assert routed["engine"][0].predictions[0].queue_law == "engine"
    deep = len(baseline.profiles) - 1
    long_q = int(np.argmax(baseline.lengths))

    def deep_share(results) -> float:
        long_served = np.concatenate([(r.kind == long_q) & (r.node >= 0) for r in results])
        on_deep = np.concatenate([r.profile == deep for r in results])
        return float(on_deep[long_served].mean())

    slot_ev = evaluate(baseline.with_network(request_intensity=lam), None, "load_aware", target=ev.target)
    share = {law: deep_share(res) for law, res in routed.items()}
    want = {"slots": slot_ev.association[deep, long_q], "engine": ev.association[deep, long_q]}
    assert want["slots"] - want["engine"] > 0.1  # the two laws' biases route long prompts differently
    assert share["slots"] - share["engine"] > 0.5 * (want["slots"] - want["engine"])


def test_route_law_is_checked(baseline) -> None:
    from edgeprefix.placement.simulation.engine.cluster import engine_replay
    from edgeprefix.placement.simulation.engine.model_workload import model_workload
    from edgeprefix.placement.simulation.replay import ReplaySpec

    step = engine_runs.step_time(baseline)
    wl, blocks = model_workload(baseline, 40, 0.05, seed=1)
    for engine, law, match in (("batching", "erlang", "route_law: one of"), ("slots", "engine", "needs --engine batching")):
        spec = ReplaySpec(decode_per_token=0.05, nodes=4.0, engine=engine, arrivals="poisson", hits="type", lengths="type")
        with pytest.raises(ValueError, match=match):
            engine_replay(baseline, wl, None, spec, blocks=blocks, step=step, seed=1, route_law=law)


@pytest.mark.parametrize("model_slope", [0.05, 0.2, 1.0])
def test_the_simulation_refined_density_finds_the_root_of_a_monotone_coverage(model_slope) -> None:
    """engine_law_density.refine (docs/model.md §17.10.2): from a start off the root and a model slope that may be wrong
    by a factor 4, the Newton/secant/bisection search ends within its tolerance of ζ in at most its budget of
    simulations, and refuses a slope that is not positive."""
    from edgeprefix.benchmarks.accuracy.engine import engine_law_density as eld

    calls = []

    def coverage(density: float) -> float:  # increasing in λ_b, concave in log λ_b, as a simulated coverage is
        calls.append(density)
        return 1.0 - 0.9 * math.exp(-0.35 * density)

    root = -math.log(0.2 / 0.9) / 0.35
    density, found, points = eld.refine(coverage, 0.6 * root, 0.8, model_slope)
    assert abs(found - 0.8) <= eld.REFINE_TOL and len(points) == len(calls) <= eld.REFINE_MAX
    assert density == pytest.approx(root, rel=0.02)
    with pytest.raises(ValueError, match="slope"):
        eld.refine(coverage, root, 0.8, 0.0)


def test_depth_model_column_takes_the_queue_model() -> None:
    """``--queue-model cell``: the model column is the cell model's evaluation (docs/model.md §14), not the mean field's."""
    inst = engine_depth.uniform_instance(engine_runs.with_engine(engine_depth.resolve_instance(None)), 0.0)
    lam = 0.7
    mf, cell = (engine_depth.model_coverage(inst, lam, "engine", q) for q in ("meanfield", "cell"))
    ref = evaluate(inst.with_network(request_intensity=lam), None, "nearest", queue_model="cell", queue_law="engine")
    assert cell == pytest.approx(float(ref.coverage_at_target), abs=1e-12)
    assert abs(cell - mf) > 0.01  # at this load the cell model's load spread is visible


@pytest.mark.parametrize("main", [engine_depth.main, engine_decisions.main])
def test_bad_queue_model_is_one_line_and_exit_2(main, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--queue-model", "erlang"])
    assert exc.value.code == 2
    assert "--queue-model" in capsys.readouterr().err
