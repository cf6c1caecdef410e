"""What old telemetry costs the online router: the model of docs/model.md §11 against the network simulator.

Run ``python -m edgeprefix.benchmarks.accuracy.telemetry.telemetry_age [--out DIR]`` (the reduced grid of benchmarks/README.md
§11; set ``OPENBLAS_NUM_THREADS=1`` on shared cores) or, for the acceptance grid (about 20 minutes of one core with
the sampled prediction; the mean field takes minutes per prediction at ``D = 8`` s, an equivalent board of 16 s)::

    python -m edgeprefix.benchmarks.accuracy.telemetry.telemetry_age --loads 0.15,0.35,0.55,0.7,0.85 --delays 0,0.5,1,2,4,8 \\
        --refresh 2,8 --method sampled --out DIR

For each instance and load (a fraction of the load-aware stability edge ``Λ_edge``, the largest ``Λ`` at
which the mean-field operating point keeps every tier stable) and each telemetry setting (continuous
delay ``D``, and periodic refresh ``Δt`` with ``D = 0``), it prints the simulated coverage of the online
router (load-aware, ``k = 2`` candidates per profile) with its standard error, the model's prediction
(:func:`edgeprefix.placement.model.stale_router.predict_online`; ``--method``: the board mean field, the sampled
network of docs/model.md (11.19), or both), the error and whether
``|error| ≤ max(0.02, 3 SE)``; and, per load, the simulated tier rule (Theorem 1 with the evaluation's
advertised delays).

The reference estimates what the prediction estimates, the expected coverage over random deployments: ``R``
(``--replications``, default 5) independent networks, each drawing its own layout and arrivals from its seed, the
same seeds for every telemetry setting of a load (common random numbers) and independent of the sampled
prediction's (:data:`~edgeprefix.placement.model.sampled_router.SEED`); by default of the prediction's size
(:data:`~edgeprefix.placement.model.sampled_router.NODES` nodes, fewer for a mitigation the prediction routes by
the per-request loop).  The SE of the criterion is the between-network one, ``sd(ddof=1) / √R`` of the per-network
coverages; the pooled batch-means SE of the runs (docs/model.md (11.8)), which leaves out the spread between
layouts, is kept beside it (``simulated_batch_se``).  Nothing in the model was fitted to these cells.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from edgeprefix.benchmarks.accuracy.cell.cell_validation import stability_edge
from edgeprefix.placement.atomic import atomic_savefig, atomic_write_text
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance
from edgeprefix.placement.model.sampled_router import NODES, SEED
from edgeprefix.placement.model.stale_router import flood_length, predict_online
from edgeprefix.placement.model.telemetry import Telemetry
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.compare import analytical_router
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter, SampledOnlineRouter

INSTANCES = ("paper_calibrated", "paper_baseline", "mooncake_small")
BENCHMARK_INSTANCES = Path(__file__).resolve().parents[2] / "instances"
TOLERANCE = 0.02
METHODS = ("meanfield", "sampled")  # predictions of the grid (docs/model.md (11.14), (11.19))
MEANFIELD_FLOOD = 8.0  # the mean field is skipped above this flood length h [s] (minutes of CPU per prediction)


def _instance(name: str):
    path = BENCHMARK_INSTANCES / f"{name}.toml"
    return load_instance(path if path.exists() else name)


def _spec(instance, nodes: float, horizon: float, warmup: float) -> SimulationSpec:
    """Run length grows with the mean occupancy (trace-built instances serve for tens of seconds)."""
    service = float((np.asarray(instance.probabilities) * np.asarray(instance.service_time).mean(axis=0)).sum())
    return SimulationSpec(
        horizon=max(horizon, 15.0 * service), warmup=max(warmup, 15.0 * service), layout=LayoutSpec(mean_nodes=nodes, counts="exact")
    )


@dataclass(frozen=True)
class Reference:
    """The simulated coverage of one cell over ``R`` independent networks (layout and arrivals drawn per network).

    ``se``: the between-network standard error ``sd(ddof=1) / √R`` of the per-network coverages, the error of the
    mean as an estimate of the expected coverage over random deployments (what the prediction estimates);
    ``batch_se``: the pooled batch-means SE of the runs (docs/model.md (11.8)), which leaves out the spread between
    layouts, kept for comparison; ``networks``: the per-network coverages.
    """

    coverage: float
    se: float
    batch_se: float
    networks: tuple[float, ...]


def _simulate(instance, cases, seeds, tau) -> list[Reference]:
    """One :class:`Reference` per ``(router, spec)`` of ``cases``, every case on the same seeds (common random numbers).

    The networks are the outer loop, so the nearest-candidate queries of one network are remembered across the
    cases (:mod:`edgeprefix.placement.simulation.nearest`).
    """
    if len(seeds) < 2:
        raise ValueError(f"replications: the between-network SE needs at least 2 networks, got {len(seeds)}")
    covs = np.empty((len(cases), len(seeds)))
    ses = np.empty_like(covs)
    for j, s in enumerate(seeds):
        for i, (router, spec) in enumerate(cases):
            run = simulate_network(instance, None, router, spec, seed=np.random.default_rng(s))
            covs[i, j], ses[i, j] = run.coverage(tau), run.coverage_standard_error(tau)
    return [
        Reference(
            float(c.mean()), float(c.std(ddof=1) / math.sqrt(c.size)), float(math.sqrt(float((b**2).sum())) / b.size), tuple(map(float, c))
        )
        for c, b in zip(covs, ses)
    ]


def _reused(row: dict, key: str) -> Reference:
    """A reference column of an earlier run's row (``key``: ``simulated`` or ``tier_rule``)."""
    if f"{key}_batch_se" not in row:
        raise ValueError("--reuse-simulation: the JSON predates the between-network SE (no batch_se column); simulate again")
    return Reference(row[key], row[f"{key}_se"], row[f"{key}_batch_se"], tuple(row.get(f"{key}_networks", ())))


def run_grid(
    names,
    loads,
    delays,
    refreshes,
    *,
    nodes,
    replications,
    horizon,
    warmup,
    seed=0,
    log=None,
    methods=METHODS,
    meanfield_flood=MEANFIELD_FLOOD,
    simulated=None,
) -> list[dict]:
    """Every cell of the grid (module docstring); ``log``: called with each row as it is done.

    ``methods``: the predictions computed (``"meanfield"``, ``"sampled"``); the mean field is skipped (None) at
    flood lengths above ``meanfield_flood`` seconds (minutes of CPU each).  The row's ``predicted``/``error``/
    ``passed`` are the first method's; every method's are in ``predicted_<method>`` etc.  ``simulated``: rows of an
    earlier run of the same grid and sizes (its JSON), whose simulated columns are taken instead of simulating again.
    """
    done = {(r["instance"], r["load"], r["delay"], r["refresh"]): r for r in (simulated or [])}
    settings = [Telemetry(delay=d) for d in delays] + [Telemetry(refresh=r) for r in refreshes]
    rows = []
    seeds = np.random.SeedSequence(seed).spawn(replications)
    router = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    with progress_bar(total=len(names) * len(loads) * (len(settings) + 1), desc="telemetry age", unit="cell") as bar:
        for name in names:
            base = _instance(name)
            edge = stability_edge(base, None)
            tau = float(base.placement.target)
            for frac in loads:
                inst = base.with_network(request_intensity=frac * edge)
                spec = _spec(inst, NODES if nodes is None else nodes, horizon, warmup)
                ev = evaluate(inst, None, "load_aware", target=tau)
                known = [r for r in done.values() if r["instance"] == name and r["load"] == frac]
                if known:
                    tier = _reused(known[0], "tier_rule")
                else:
                    (tier,) = _simulate(inst, [(analytical_router(ev), spec)], seeds, tau)
                fresh = None  # the node model at h = 0, shared by every telemetry setting of the load
                by_flood: dict[float, Any] = {}  # settings of equal flood length h share one prediction
                bar.update(1)
                olds = [done.get((name, frac, tel.delay, tel.refresh)) for tel in settings]
                todo = [tel for tel, old in zip(settings, olds) if old is None]
                fresh_refs = iter(
                    _simulate(inst, [(router, replace(spec, telemetry_delay=t.delay, refresh_period=t.refresh)) for t in todo], seeds, tau)
                    if todo
                    else []
                )
                for tel, old in zip(settings, olds):
                    ref = _reused(old, "simulated") if old is not None else next(fresh_refs)
                    sim, se = ref.coverage, ref.se
                    h = flood_length(tel)
                    preds: dict[str, Any] = {}
                    if "meanfield" in methods and h <= meanfield_flood:
                        if h not in by_flood:
                            by_flood[h] = predict_online(inst, None, tel, target=tau, evaluation=ev, fresh=fresh)
                        preds["meanfield"] = by_flood[h]
                        fresh = by_flood[h].fresh_node if by_flood[h].fresh_node is not None else fresh
                    if "sampled" in methods:
                        preds["sampled"] = predict_online(inst, None, tel, target=tau, evaluation=ev, method="sampled")
                    per_method = {}
                    for m in methods:
                        got = preds.get(m)
                        e = None if got is None else got.coverage - sim
                        per_method.update(
                            {
                                f"predicted_{m}": None if got is None else got.coverage,
                                f"predicted_{m}_se": None if got is None else got.coverage_se,
                                f"error_{m}": e,
                                f"passed_{m}": None if e is None else bool(abs(e) <= max(TOLERANCE, 3.0 * se)),
                            }
                        )
                    pred = preds.get(methods[0])
                    if pred is None:  # the first method skipped: the row reports the next one
                        pred = next(iter(preds.values()))
                    err = pred.coverage - sim
                    rows.append(
                        {
                            "instance": name,
                            "load": frac,
                            "intensity": frac * edge,
                            "delay": tel.delay,
                            "refresh": tel.refresh,
                            "simulated": sim,
                            "simulated_se": se,
                            "simulated_batch_se": ref.batch_se,
                            "simulated_networks": list(ref.networks),
                            "reference_nodes": spec.layout.mean_nodes,
                            "predicted": pred.coverage,
                            "predicted_se": pred.coverage_se,
                            "error": err,
                            "method": pred.method,
                            **per_method,
                            "node_model": None if pred.node is None else pred.node.coverage,
                            "fresh_node_model": None if pred.fresh_node is None else pred.fresh_node.coverage,
                            "flood": h,
                            "meanfield": pred.meanfield_coverage,
                            "tier_rule": tier.coverage,
                            "tier_rule_se": tier.se,
                            "tier_rule_batch_se": tier.batch_se,
                            "tier_rule_networks": list(tier.networks),
                            "passed": bool(abs(err) <= max(TOLERANCE, 3.0 * se)),
                        }
                    )
                    if log is not None:
                        log(rows[-1])
                    bar.update(1)
    return rows


# label, margin z_δ, local accounting, power of d (0: every candidate), admission threshold ρ (inf: none)
MITIGATIONS = (
    ("none", 0.0, False, 0, math.inf),
    ("margin z=1", 1.0, False, 0, math.inf),
    ("margin z=3", 3.0, False, 0, math.inf),
    ("local accounting", 0.0, True, 0, math.inf),
    ("power of d=2", 0.0, False, 2, math.inf),
    ("power of d=3", 0.0, False, 3, math.inf),
    ("admission ρ=1", 0.0, False, 0, 1.0),
    ("admission ρ=1.5", 0.0, False, 0, 1.5),
)


def mitigation_router(margin: float, sample: int, admission: float):
    """The simulated router of one row of :data:`MITIGATIONS` (``k = 2`` candidates per profile)."""
    online = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2, margin=margin, rho_high=admission, rho_low=admission)
    return SampledOnlineRouter(online, sample) if sample > 0 else online


def run_mitigations(name, loads, delays, *, nodes, replications, horizon, warmup, seed=0, method="meanfield") -> list[dict]:
    """Each mitigation of docs/model.md (11.15) at each load and delay: simulated vs predicted (common random numbers).

    ``nodes`` None: each mitigation's reference networks are the size of its sampled prediction's (1000 nodes on the
    block routing, fewer on the per-request loop, :func:`_sampled_nodes`)."""
    base = _instance(name)
    edge = stability_edge(base, None)
    tau = float(base.placement.target)
    seeds = np.random.SeedSequence(seed).spawn(replications)
    rows = []
    with progress_bar(total=len(loads) * len(delays) * len(MITIGATIONS), desc="mitigations", unit="cell") as bar:
        for frac in loads:
            inst = base.with_network(request_intensity=frac * edge)
            sizes = [
                nodes if nodes is not None else _sampled_nodes(inst, local, sample, admission)
                for _, _, local, sample, admission in MITIGATIONS
            ]
            ev = evaluate(inst, None, "load_aware", target=tau)
            fresh = None
            for delay in delays:
                cases = [
                    (
                        mitigation_router(margin, sample, admission),
                        replace(_spec(inst, n, horizon, warmup), telemetry_delay=delay, local_accounting=local),
                    )
                    for n, (_, margin, local, sample, admission) in zip(sizes, MITIGATIONS)
                ]
                refs = _simulate(inst, cases, seeds, tau)
                for ref, n, (label, margin, local, sample, admission) in zip(refs, sizes, MITIGATIONS):
                    sim, se = ref.coverage, ref.se
                    clock = time.process_time()
                    pred = predict_online(
                        inst,
                        None,
                        Telemetry(delay=delay),
                        target=tau,
                        evaluation=ev,
                        fresh=fresh,
                        margin=margin,
                        local_accounting=local,
                        sample=sample,
                        admission=admission,
                        method=method,
                    )
                    cpu = time.process_time() - clock
                    fresh = pred.fresh_node if pred.fresh_node is not None else fresh
                    err = pred.coverage - sim
                    rows.append(
                        {
                            "instance": name,
                            "load": frac,
                            "intensity": frac * edge,
                            "delay": delay,
                            "refresh": 0.0,
                            "mitigation": label,
                            "simulated": sim,
                            "simulated_se": se,
                            "simulated_batch_se": ref.batch_se,
                            "simulated_networks": list(ref.networks),
                            "reference_nodes": n,
                            "predicted": pred.coverage,
                            "predicted_se": pred.coverage_se,
                            "method": pred.method,
                            "prediction_cpu_seconds": cpu,
                            "prediction_nodes": None if method != "sampled" else _sampled_nodes(inst, local, sample, admission),
                            "error": err,
                            "meanfield": pred.meanfield_coverage,
                            "tier_rule": float("nan"),
                            "passed": bool(abs(err) <= max(TOLERANCE, 3.0 * se)),
                        }
                    )
                    bar.update(1)
    return rows


def _sampled_nodes(instance, local: bool, sample: int, admission: float) -> int:
    """Nodes per network of the sampled prediction of one mitigation (the per-request loop is sized down)."""
    from edgeprefix.placement.model.sampled_router import loop_nodes, takes_loop

    return loop_nodes(instance) if takes_loop(local_accounting=local, sample=sample, admission=admission) else NODES


def render_mitigations(rows: list[dict]) -> str:
    """The mitigations as a markdown table: simulated, predicted, error, within, and the gain over no mitigation."""
    lines = [
        "| load | Λ | mitigation | simulated ± SE | predicted ± SE | error | within | simulated gain | predicted gain | nodes | CPU s |",
        "|---:|---:|---|---:|---:|---:|:-:|---:|---:|---:|---:|",
    ]
    base = {r["load"]: r for r in rows if r["mitigation"] == "none"}
    for r in rows:
        b = base.get(r["load"])
        pse = "" if r.get("predicted_se") is None else f" ± {r['predicted_se']:.4f}"
        gains = " — | — |" if b is None else f" {r['simulated'] - b['simulated']:+.4f} | {r['predicted'] - b['predicted']:+.4f} |"
        lines.append(
            f"| {r['load']:.2f} | {r['intensity']:.3f} | {r['mitigation']} | {r['simulated']:.4f} ± {r['simulated_se']:.4f} | "
            f"{r['predicted']:.4f}{pse} | {r['error']:+.4f} | {'yes' if r['passed'] else '**no**'} |{gains} "
            f"{r.get('prediction_nodes') or '—'} | {r.get('prediction_cpu_seconds', float('nan')):.1f} |"
        )
    passed = sum(r["passed"] for r in rows)
    lines.append(f"\n{passed} of {len(rows)} cells within max({TOLERANCE}, 3 SE); largest |error| {max(abs(r['error']) for r in rows):.4f}")
    return "\n".join(lines)


def run_decision(name, load, delay, *, resolution, nodes, replications, horizon, warmup, seed=0, method="meanfield") -> dict:
    """The mix chosen for the telemetry's age against the mix chosen for fresh telemetry (docs/model.md (11.14)).

    Every feasible mix of the ``1/resolution`` lattice is scored by eq. (39) (fresh) and by the
    stale-telemetry prediction at ``D = delay``; both best mixes are then simulated at ``D = delay`` on
    the same seeds (common random numbers), and the paired difference is reported with its SE.
    """
    from edgeprefix.formulations.placement import placement_problem
    from edgeprefix.solvers.grid import feasible_lattice

    base = _instance(name)
    inst = base.with_network(request_intensity=load * stability_edge(base, None))
    tau = float(inst.placement.target)
    tel = Telemetry(delay=delay)
    lattice = feasible_lattice(placement_problem(inst).constraints, resolution)
    scored = []
    with progress_bar(total=len(lattice), desc="mixes", unit="mix") as bar:
        for mix in lattice:
            ev = evaluate(inst, mix, "load_aware", target=tau)
            if ev.stable:
                scored.append(
                    (mix, float(ev.coverage(tau)), predict_online(inst, mix, tel, target=tau, evaluation=ev, method=method).coverage)
                )
            bar.update(1)
    fresh_mix = max(scored, key=lambda r: r[1])
    stale_mix = max(scored, key=lambda r: r[2])
    spec = replace(_spec(inst, NODES if nodes is None else nodes, horizon, warmup), telemetry_delay=delay)
    router = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    seeds = np.random.SeedSequence(seed).spawn(replications)
    pairs = np.array(
        [
            [simulate_network(inst, m, router, spec, seed=np.random.default_rng(sd)).coverage(tau) for m in (fresh_mix[0], stale_mix[0])]
            for sd in seeds
        ]
    )
    gain = pairs[:, 1] - pairs[:, 0]
    return {
        "instance": name,
        "method": method,
        "load": load,
        "intensity": float(inst.network.request_intensity),
        "delay": delay,
        "mixes": len(scored),
        "scored": [{"mix": [float(v) for v in m], "fresh": f, "predicted": c} for m, f, c in scored],
        "fresh_mix": [float(v) for v in fresh_mix[0]],
        "stale_mix": [float(v) for v in stale_mix[0]],
        "fresh_mix_predicted": fresh_mix[2],
        "stale_mix_predicted": stale_mix[2],
        "fresh_mix_simulated": float(pairs[:, 0].mean()),
        "stale_mix_simulated": float(pairs[:, 1].mean()),
        "gain": float(gain.mean()),
        "gain_se": float(gain.std(ddof=1) / np.sqrt(gain.size)) if gain.size > 1 else float("nan"),
    }


def render(rows: list[dict]) -> str:
    lines = [
        f"{'instance':<17}{'mitigation':<18}{'load':>5}{'Λ':>7}{'D':>5}{'Δt':>5}{'simulated':>10}{'± SE':>7}{'predicted':>10}"
        f"{'error':>8}{'eq.(39)':>8}{'tier rule':>10}  ok"
    ]
    for r in rows:
        lines.append(
            f"{r['instance']:<17}{r.get('mitigation', '—'):<18}{r['load']:>5.2f}{r['intensity']:>7.3f}{r['delay']:>5g}{r['refresh']:>5g}"
            f"{r['simulated']:>10.4f}{r['simulated_se']:>7.4f}{r['predicted']:>10.4f}{r['error']:>+8.4f}"
            f"{r['meanfield']:>8.4f}{r['tier_rule']:>10.4f}  {'yes' if r['passed'] else 'NO'}"
        )
    passed = sum(r["passed"] for r in rows)
    lines.append(f"{passed} of {len(rows)} cells within max({TOLERANCE}, 3 SE); largest |error| {max(abs(r['error']) for r in rows):.4f}")
    return "\n".join(lines)


def render_grid(rows: list[dict], methods=METHODS) -> str:
    """The grid as a markdown table, one prediction column group per method, and each method's count of passes."""
    head = "| instance | load | Λ | D [s] | Δt [s] | simulated ± SE | batch SE |"
    rule = "|---|---:|---:|---:|---:|---:|---:|"
    for m in methods:
        head += f" {m} | error | within |"
        rule += "---:|---:|:-:|"
    head += " eq. (39) | tier rule (sim.) |"
    rule += "---:|---:|"
    lines = [head, rule]
    for r in rows:
        line = f"| {r['instance']} | {r['load']:.2f} | {r['intensity']:.3f} | {r['delay']:g} | {r['refresh']:g} | {r['simulated']:.4f} ± {r['simulated_se']:.4f} |"
        line += " — |" if r.get("simulated_batch_se") is None else f" {r['simulated_batch_se']:.4f} |"
        for m in methods:
            p, e, ok = r.get(f"predicted_{m}"), r.get(f"error_{m}"), r.get(f"passed_{m}")
            pse = r.get(f"predicted_{m}_se")
            shown = "—" if p is None else f"{p:.4f}" + ("" if pse is None else f" ± {pse:.4f}")
            line += " — | — | — |" if p is None else f" {shown} | {e:+.4f} | {'yes' if ok else '**no**'} |"
        line += f" {r['meanfield']:.4f} | {r['tier_rule']:.4f} |"
        lines.append(line)
    for m in methods:
        done = [r for r in rows if r.get(f"passed_{m}") is not None]
        aged = [r for r in done if r["delay"] > 0 or r["refresh"] > 0]
        worst = max((abs(r[f"error_{m}"]) for r in done), default=float("nan"))
        mean = float(np.mean([abs(r[f"error_{m}"]) for r in done])) if done else float("nan")
        low = min((r[f"error_{m}"] for r in done), default=float("nan"))
        high = max((r[f"error_{m}"] for r in done), default=float("nan"))
        batch = [r for r in done if r.get("simulated_batch_se") is not None]
        lines.append(
            f"{m}: {sum(r[f'passed_{m}'] for r in done)} of {len(done)} cells within max({TOLERANCE}, 3 SE) "
            f"({sum(r[f'passed_{m}'] for r in aged)} of {len(aged)} with old telemetry); errors {low:+.4f}…{high:+.4f}, "
            f"mean |error| {mean:.4f}, largest {worst:.4f}"
            + (
                f"; with the pooled batch-means SE instead: "
                f"{sum(abs(r[f'error_{m}']) <= max(TOLERANCE, 3.0 * r['simulated_batch_se']) for r in batch)} of {len(batch)}"
                if batch
                else ""
            )
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["instance"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.0), squeeze=False)
    for ax, name in zip(axes[0], names):
        mine = [r for r in rows if r["instance"] == name and r["refresh"] == 0]
        for i, frac in enumerate(dict.fromkeys(r["load"] for r in mine)):
            cell = [r for r in mine if r["load"] == frac]
            d = np.array([r["delay"] for r in cell])
            color = f"C{i}"
            ax.errorbar(
                d,
                [r["simulated"] for r in cell],
                yerr=[3 * r["simulated_se"] for r in cell],
                fmt="o",
                color=color,
                capsize=3,
                label=f"{frac:.0%} of the edge: simulated (±3 SE)",
            )
            for m, style in (("meanfield", "-"), ("sampled", "--")):
                got = [(x, r.get(f"predicted_{m}")) for x, r in zip(d, cell) if r.get(f"predicted_{m}") is not None]
                if got:
                    ax.plot([g[0] for g in got], [g[1] for g in got], style, color=color, label=f"predicted ({m})")
            ax.axhline(cell[0]["tier_rule"], color=color, ls=":", lw=1, label="tier rule (simulated)")
        ax.set_title(name)
        ax.set_xlabel("telemetry delay D [s]")
        ax.set_ylabel("TTFT coverage")
    axes[0][0].legend(fontsize=6)
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=120)
    plt.close(fig)


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(",") if v.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", default=",".join(INSTANCES))
    parser.add_argument("--loads", default="0.15,0.55,0.85", help="fractions of the load-aware stability edge")
    parser.add_argument("--delays", default="0,0.5,1,2,4", help="continuous telemetry delays D [s]")
    parser.add_argument("--refresh", default="2,8", help="periodic refresh periods Δt [s] (with D = 0)")
    parser.add_argument(
        "--nodes",
        type=float,
        default=None,
        help="nodes per reference network (default: the sampled prediction's, 1000; fewer for a mitigation on the per-request loop)",
    )
    parser.add_argument("--replications", type=int, default=5, help="reference networks per cell (at least 2: the SE is their spread)")
    parser.add_argument("--horizon", type=float, default=40.0, help="measured seconds (at least 15 mean occupancies)")
    parser.add_argument("--warmup", type=float, default=30.0, help="discarded seconds (at least 15 mean occupancies)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--mitigations", action="store_true", help="instead: each mitigation on the first instance at --loads and --delays (no refresh)"
    )
    parser.add_argument(
        "--decision",
        action="store_true",
        help="instead: the best mix for the first --delays value against the fresh-telemetry mix "
        "(first instance, first load; the 1/--resolution lattice)",
    )
    parser.add_argument("--resolution", type=int, default=5)
    parser.add_argument(
        "--method",
        default=",".join(METHODS),
        help="predictions to compute, comma-separated (meanfield, sampled; --mitigations and --decision use the first)",
    )
    parser.add_argument(
        "--reuse-simulation",
        default=None,
        metavar="JSON",
        help="take the simulated columns from an earlier telemetry_age.json of the same grid and sizes (predictions only)",
    )
    parser.add_argument("--meanfield-flood", type=float, default=MEANFIELD_FLOOD, help="skip the mean field above this flood length h [s]")
    parser.add_argument("--out", default=None, metavar="DIR", help="write telemetry_age.json and telemetry_age.png here")
    args = parser.parse_args(argv)
    if args.replications < 2:
        parser.error(f"--replications: the SE is the spread between networks, give at least 2 (got {args.replications})")
    if args.seed == SEED:
        parser.error(f"--seed: {SEED} is the sampled prediction's seed; give another so the reference is independent")
    if args.nodes is not None and not args.nodes >= 10:
        parser.error(f"--nodes: give at least 10 nodes per network (got {args.nodes})")
    size = dict(nodes=args.nodes, replications=args.replications, horizon=args.horizon, warmup=args.warmup, seed=args.seed)
    methods = tuple(m.strip() for m in args.method.split(",") if m.strip())
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        parser.error(f"--method: unknown {unknown} (valid: {list(METHODS)})")
    if args.decision:
        result = run_decision(
            args.instances.split(",")[0],
            _floats(args.loads)[0],
            _floats(args.delays)[0],
            resolution=args.resolution,
            method=methods[0],
            **size,
        )
        print(json.dumps(result, indent=1))
        return 0
    if args.mitigations:
        rows = run_mitigations(args.instances.split(",")[0], _floats(args.loads), _floats(args.delays), method=methods[0], **size)
        print(render(rows))
        print(render_mitigations(rows))
    else:
        reused = None if args.reuse_simulation is None else json.loads(Path(args.reuse_simulation).read_text())
        if reused is not None and any("simulated_batch_se" not in r for r in reused):
            parser.error("--reuse-simulation: the JSON predates the between-network SE (no simulated_batch_se); simulate again")
        rows = run_grid(
            args.instances.split(","),
            _floats(args.loads),
            _floats(args.delays),
            _floats(args.refresh),
            **size,
            log=lambda row: print(json.dumps(row), file=sys.stderr, flush=True),
            methods=methods,
            meanfield_flood=args.meanfield_flood,
            simulated=reused,
        )
        print(render_grid(rows, methods))
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        stem = "telemetry_mitigations" if args.mitigations else "telemetry_age"
        atomic_write_text(out / f"{stem}.json", json.dumps(rows, indent=1))
        if not args.mitigations:
            plot(rows, out / f"{stem}.png")
        print(f"wrote {out / stem}.json" + ("" if args.mitigations else f" and {out / stem}.png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
