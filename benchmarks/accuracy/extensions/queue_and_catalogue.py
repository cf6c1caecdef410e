"""Figures and tables of the queue law and the catalogue (docs/model.md §19.6, §19.7).

Three parts, each printed as a table (errors and differences against a reference measured in the
same run) and drawn as a figure:

- ``mgc``: the M/G/c law against the M/G/c event simulator for deterministic, two-point
  (``C² = 0.5``) and log-normal (``C² = 2``) service, over ``c`` and ``ρ``: errors of ``P^W``, of
  ``W̄`` (the law, Allen–Cunneen and plain Erlang C) and the Kolmogorov distance of the waiting-time
  CDF (the law's and Erlang C's);
- ``chunked``: coverage vs the chunk size on ``benchmarks/instances/serving_chunked.toml``,
  Erlang C and M/G/c analysis beside network simulations with exponential service and with the
  instance's service law;
- ``catalogue``: coverage loss vs the Bloom filter's size and vs the refresh period on
  ``benchmarks/instances/serving_catalogue.toml``, simulated (mean of seeded runs, ± 2 SE) against
  the analytical correction (classic false-positive formula and its occupancy-exact form).

Run ``python -m edgeprefix.benchmarks.accuracy.extensions.queue_and_catalogue [--quick] [--out DIR] [--part NAME]``;
``--write-instances`` rewrites the two benchmark instances.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
import numpy.typing as npt

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from edgeprefix.benchmarks.accuracy.extensions.serving_extensions import INSTANCES, load, to_csv, write_instance_files
from edgeprefix.placement.atomic import atomic_savefig, atomic_write_text
from edgeprefix.placement.model.catalogue import Catalogue, catalogue_evaluation
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.progress import progress_bar
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.mmc import ServiceLaw, simulate_mgc
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.routers import OnlineRouter

NAMES = ("serving_chunked", "serving_catalogue")
PARTS = ("mgc", "chunked", "catalogue")
SERVERS = (1, 2, 4, 8, 16)
LOADS = (0.5, 0.7, 0.8, 0.9, 0.95)
LAWS = (("deterministic", 0.0), ("two_point", 0.5), ("lognormal", 2.0))

HEADERS = {
    "serving_chunked": """# serving_chunked: paper_baseline with chunked prefill and the M/G/c queue law (docs/model.md §19.6).
#
# Prefill runs in chunks of 512 tokens (Sarathi-Serve's chunked prefills; chunk sizes 512–2048 are
# the ones its chunking-overhead experiment compares), each chunk costing δ = 8 ms more: 10 % of
# this law's g(512) = 80 ms, the prefill loss a summary of SARATHI's 128–512-token sweep reports for
# 512-token chunks (an upper figure).  The decode occupancy of a type has SCV 0.5: the output
# lengths of the shipped Mooncake conversation trace have SCV 0.53 (0.44–0.64 within input-length
# quartiles).  The node's queue is M/G/c with the tier's service SCV from the request mix.  Rebuilt
# by `python -m edgeprefix.benchmarks.accuracy.extensions.queue_and_catalogue --write-instances`.
""",
    "serving_catalogue": """# serving_catalogue: paper_baseline with a Bloom-filter catalogue (docs/model.md §19.7).
#
# Every node advertises its prefixes in an 8-bit filter with one hash (salted per node): a shallow
# node (one entry) falsely advertises the tool prefix with probability 1 − e^{−1/8} = 0.118.  The
# catalogue is refreshed every 10 s while a node re-purposes (re-draws its profile from the mix)
# once per 100 s on average.  Rebuilt by
# `python -m edgeprefix.benchmarks.accuracy.extensions.queue_and_catalogue --write-instances`.
""",
}


def instance_mappings() -> dict[str, dict[str, Any]]:
    """The two benchmark instances as mappings, built from the embedded ``paper_baseline``."""
    text = resources.files("edgeprefix.placement").joinpath("data", "paper_baseline.toml").read_text(encoding="utf-8")
    base = tomllib.loads(text)
    chunked, cat = copy.deepcopy(base), copy.deepcopy(base)
    chunked["name"] = "serving_chunked"
    chunked["serving"] = {"queue": "mgc", "chunk_size": 512.0, "chunk_overhead": 0.008, "decode_scv": 0.5}
    cat["name"] = "serving_catalogue"
    cat["catalogue"] = {"bits": 8, "hashes": 1, "refresh": 10.0, "churn": 0.01}
    return {m["name"]: m for m in (chunked, cat)}


def write_instances(folder: Path = INSTANCES) -> list[Path]:
    """Write ``serving_chunked.toml`` and ``serving_catalogue.toml`` (validated first)."""
    return write_instance_files(instance_mappings(), HEADERS, folder)


# ---------------------------------------------------------------------------------------------
# Part 1: the M/G/c law against the event simulator
# ---------------------------------------------------------------------------------------------
def mgc_rows(
    *, customers: int = 400_000, servers: Sequence[int] = SERVERS, loads: Sequence[float] = LOADS, seed: int = 0
) -> list[dict[str, Any]]:
    """One row per (law, c, ρ): simulated and approximated ``P^W``, ``W̄`` and the Kolmogorov distances."""
    jobs = [(law, scv, c, rho) for law, scv in LAWS for c in servers for rho in loads]
    rows = []
    for i, (law, scv, c, rho) in enumerate(progress_bar(jobs, desc="M/G/c")):
        res = simulate_mgc(rho * c, ServiceLaw(law, 1.0, scv), c, customers, seed=seed + i)
        w, se = res.mean_wait, res.mean_wait_standard_error()
        rows.append(
            {
                "law": law,
                "scv": scv,
                "c": c,
                "rho": rho,
                "pw_sim": res.wait_probability,
                "pw_err": res.approx_wait_probability - res.wait_probability,
                "w_sim": w,
                "w_se": se,
                "w_err_mgc": res.approx_mean_wait / w - 1.0,
                "w_err_ac": res.allen_cunneen_mean_wait / w - 1.0,
                "w_err_mmc": res.erlang_mean_wait / w - 1.0,
                "ks_mgc": res.kolmogorov,
                "ks_mmc": res.kolmogorov_mmc,
            }
        )
    return rows


def mgc_table(rows: Sequence[dict[str, Any]]) -> str:
    head = (
        f"{'law':<14}{'c':>3}{'ρ':>6}{'P^W sim':>9}{'err':>8}{'W̄ sim':>9}{'±2SE%':>7}"
        f"{'M/G/c%':>8}{'A–C%':>8}{'M/M/c%':>8}{'KS M/G/c':>10}{'KS M/M/c':>10}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['law']:<14}{r['c']:>3}{r['rho']:>6.2f}{r['pw_sim']:>9.4f}{r['pw_err']:>+8.4f}{r['w_sim']:>9.4f}"
            f"{200 * r['w_se'] / r['w_sim']:>7.1f}{100 * r['w_err_mgc']:>+8.1f}{100 * r['w_err_ac']:>+8.1f}"
            f"{100 * r['w_err_mmc']:>+8.1f}{r['ks_mgc']:>10.4f}{r['ks_mmc']:>10.4f}"
        )
    lines.append(mgc_summary(rows))
    return "\n".join(lines)


def mgc_summary(rows: Sequence[dict[str, Any]]) -> str:
    out = []
    for law, _ in LAWS:
        part = [r for r in rows if r["law"] == law]
        if not part:
            continue
        out.append(
            f"{law}: max |P^W err| {max(abs(r['pw_err']) for r in part):.4f}; max |W̄ err| M/G/c "
            f"{max(abs(r['w_err_mgc']) for r in part):.1%}, Allen–Cunneen {max(abs(r['w_err_ac']) for r in part):.1%}, "
            f"M/M/c {max(abs(r['w_err_mmc']) for r in part):.1%}; max KS M/G/c {max(r['ks_mgc'] for r in part):.4f} "
            f"vs M/M/c {max(r['ks_mmc'] for r in part):.4f}"
        )
    return "\n".join(out)


def mgc_figure(rows: Sequence[dict[str, Any]], path: Path) -> None:
    laws = [law for law, _ in LAWS if any(r["law"] == law for r in rows)]
    figure, axes = plt.subplots(2, len(laws), figsize=(4.2 * len(laws), 7.0), squeeze=False)
    for col, law in enumerate(laws):
        part = [r for r in rows if r["law"] == law]
        scv = part[0]["scv"]
        for c in sorted({r["c"] for r in part}):
            pts = sorted((r for r in part if r["c"] == c), key=lambda r: r["rho"])
            rho = [r["rho"] for r in pts]
            (line,) = axes[0, col].plot(rho, [100 * r["w_err_mgc"] for r in pts], marker="o", ms=3, label=f"c = {c}")
            axes[0, col].plot(rho, [100 * r["w_err_ac"] for r in pts], ls="--", color=line.get_color(), lw=0.8)
            axes[1, col].plot(rho, [r["ks_mgc"] for r in pts], marker="o", ms=3, color=line.get_color(), label=f"c = {c}")
            axes[1, col].plot(rho, [r["ks_mmc"] for r in pts], ls=":", color=line.get_color(), lw=0.8)
        axes[0, col].axhline(0.0, color="black", lw=0.5)
        axes[0, col].set_title(f"{law} service, C² = {scv:g}")
        axes[0, col].set_ylabel("mean-wait error vs simulation [%]")
        axes[1, col].set_ylabel("Kolmogorov distance of F_W")
        for ax in axes[:, col]:
            ax.set_xlabel("utilisation ρ")
            ax.grid(alpha=0.3)
        axes[0, col].legend(fontsize=7, title="solid: M/G/c law; dashed: Allen–Cunneen", title_fontsize=7)
        axes[1, col].legend(fontsize=7, title="solid: M/G/c law; dotted: Erlang C", title_fontsize=7)
    figure.suptitle("M/G/c law against the M/G/c event simulator (docs/model.md §19.6)")
    figure.tight_layout()
    atomic_savefig(figure, path)
    plt.close(figure)


# ---------------------------------------------------------------------------------------------
# Part 2: chunk size, Erlang C vs M/G/c, with network simulations
# ---------------------------------------------------------------------------------------------
SPEC = SimulationSpec(horizon=60.0, warmup=40.0, layout=LayoutSpec(mean_nodes=400.0, counts="exact"))
QUICK_SPEC = SimulationSpec(horizon=30.0, warmup=20.0, layout=LayoutSpec(mean_nodes=200.0, counts="exact"))
CHUNKS = (128.0, 256.0, 512.0, 1024.0, 2048.0, None)
QUICK_CHUNKS = (256.0, 1024.0, None)


def _with_serving(inst: Instance, **changes: Any) -> Instance:
    assert inst.serving is not None  # the chunked-prefill instance has a [serving] section
    return inst.replace(serving=dataclasses.replace(inst.serving, **changes))


def _tier_router(wait: npt.ArrayLike) -> OnlineRouter:
    return OnlineRouter(policy="load_aware", delay="tier", tier_wait=tuple(float(x) for x in np.nan_to_num(wait)))


def _simulated(inst: Instance, router: OnlineRouter, spec: SimulationSpec, seed: int) -> tuple[float, float]:
    res = simulate_network(inst, None, router, spec, seed=seed)
    tau = inst.placement.target
    return res.coverage(tau), res.coverage_standard_error(tau)


def chunked_rows(*, quick: bool = False, seed: int = 0) -> list[dict[str, Any]]:
    """Coverage vs chunk size: analysis with Erlang C and with M/G/c; simulations with the instance's
    service law routed at each analysis' operating point, and with exponential service (Erlang C's
    router) as the reference the analysis' M/M/c queue assumes."""
    base = load("serving_chunked")
    assert base.serving is not None  # the instance exists for its [serving] section
    spec = QUICK_SPEC if quick else SPEC
    law = dataclasses.replace(spec, service="instance")
    rows = []
    for chunk in progress_bar(QUICK_CHUNKS if quick else CHUNKS, desc="chunk size"):
        inst = _with_serving(base, chunk_size=chunk, chunk_overhead=base.serving.chunk_overhead if chunk else 0.0)
        mgc = evaluate(inst)
        mmc = evaluate(_with_serving(inst, queue="mmc"))
        assert mgc.service_scv is not None  # the instance's M/G/c queue law reports C_S²
        row = {
            "chunk": chunk,
            "mmc": mmc.coverage_at_target,
            "mgc": mgc.coverage_at_target,
            "scv": float(np.nanmean(mgc.service_scv)),
            # the cell-load model (docs/model.md §14) at the same operating points, with each law per node
            "cell_mmc": evaluate(_with_serving(inst, queue="mmc"), queue_model="cell").coverage_at_target,
            "cell_mgc": evaluate(inst, queue_model="cell").coverage_at_target,
        }
        row["sim_exp"], row["sim_exp_se"] = _simulated(inst, _tier_router(mmc.advertised_wait), spec, seed)
        row["sim_law_mmc"], row["sim_law_mmc_se"] = _simulated(inst, _tier_router(mmc.advertised_wait), law, seed)
        row["sim_law_mgc"], row["sim_law_mgc_se"] = _simulated(inst, _tier_router(mgc.advertised_wait), law, seed)
        rows.append(row)
    return rows


def chunked_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        f"{'chunk C':>8}{'mean C_S²':>10}{'ana M/M/c':>10}{'ana M/G/c':>10}{'Δ ana':>8}{'sim exp':>9}"
        f"{'sim law':>9}{'sim law':>9}{'±2SE':>7}{'Δ law':>8}{'cell':>8}{'cell':>8}",
        f"{'':>8}{'':>10}{'':>10}{'':>10}{'':>8}{'M/M/c rt':>9}{'M/M/c rt':>9}{'M/G/c rt':>9}{'':>7}{'−exp':>8}{'M/M/c':>8}{'M/G/c':>8}",
    ]
    for r in rows:
        label = "none" if r["chunk"] is None else f"{r['chunk']:.0f}"
        se = max(r["sim_exp_se"], r["sim_law_mmc_se"], r["sim_law_mgc_se"])
        lines.append(
            f"{label:>8}{r['scv']:>10.3f}{r['mmc']:>10.4f}{r['mgc']:>10.4f}{r['mgc'] - r['mmc']:>+8.4f}"
            f"{r['sim_exp']:>9.4f}{r['sim_law_mmc']:>9.4f}{r['sim_law_mgc']:>9.4f}{2 * se:>7.4f}"
            f"{r['sim_law_mmc'] - r['sim_exp']:>+8.4f}{r['cell_mmc']:>8.4f}{r['cell_mgc']:>8.4f}"
        )
    return "\n".join(lines)


def chunked_figure(rows: Sequence[dict[str, Any]], path: Path, tau: float) -> None:
    top = max(r["chunk"] for r in rows if r["chunk"] is not None)
    x = np.array([r["chunk"] if r["chunk"] is not None else 2 * top for r in rows])
    figure, ax = plt.subplots(figsize=(7.0, 4.5))
    ax.plot(x, [r["mmc"] for r in rows], marker="o", ms=3, label="analysis, Erlang C (M/M/c)")
    ax.plot(x, [r["mgc"] for r in rows], marker="s", ms=3, label="analysis, M/G/c law")
    for key, shift, fmt, label in (
        ("sim_exp", 0.94, "x", "simulation, exponential service, Erlang C router"),
        ("sim_law_mmc", 1.0, "+", "simulation, instance law, Erlang C router"),
        ("sim_law_mgc", 1.06, "d", "simulation, instance law, M/G/c router"),
    ):
        ax.errorbar(
            x * shift, [r[key] for r in rows], yerr=[2 * r[key + "_se"] for r in rows], fmt=fmt, capsize=3, label=label + " (± 2 SE)"
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(x, [f"{v:.0f}" if v != 2 * top else "none" for v in x])
    ax.set_xlabel("prefill chunk size C [tokens] (δ = 8 ms per chunk)")
    ax.set_ylabel(f"TTFT coverage at τ = {tau:g} s")
    ax.set_title("serving_chunked: chunked prefill and the queue law (docs/model.md §19.6)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    figure.tight_layout()
    atomic_savefig(figure, path)
    plt.close(figure)


# ---------------------------------------------------------------------------------------------
# Part 3: catalogue size and refresh period
# ---------------------------------------------------------------------------------------------
BITS = (1, 2, 4, 8, 16, 32, 64)
QUICK_BITS = (2, 8)
REFRESH = (1.0, 5.0, 10.0, 20.0, 50.0, 100.0)
QUICK_REFRESH = (10.0, 50.0)


def _catalogue_point(
    inst: Instance, cat: Catalogue, spec: SimulationSpec, seeds: Sequence[int], reference: float, reference_sim: float
) -> dict[str, Any]:
    ce = catalogue_evaluation(inst, catalogue=cat)
    exact = catalogue_evaluation(inst, catalogue=cat, exact_false_positives=True)
    sims = np.array([_simulated(inst.replace(catalogue=cat), _tier_router(ce.advertised_wait), spec, s)[0] for s in seeds])
    return {
        "bits": None if math.isinf(cat.bits) else int(cat.bits),
        "hashes": cat.hashes,
        "refresh": cat.refresh,
        "churn": cat.churn,
        "f_shallow": float(ce.false_positive[1]),
        "loss_ana": reference - ce.coverage_at_target,
        "loss_ana_exact": reference - exact.coverage_at_target,
        "loss_ana_tier": reference - ce.coverage(queues="tier"),
        "loss_sim": reference_sim - float(sims.mean()),
        "loss_sim_se": float(sims.std(ddof=1) / np.sqrt(sims.size)) if sims.size > 1 else float("nan"),
        "false_hit_share": ce.false_hit_share,
        "stale_share": ce.stale_share,
    }


def catalogue_rows(*, quick: bool = False, seeds: Sequence[int] = (0, 1, 2, 3)) -> list[dict[str, Any]]:
    """Coverage loss against the exact catalogue, simulated (same seeds, same layouts) and analysed."""
    base = load("serving_catalogue")
    assert base.catalogue is not None  # the instance exists for its [catalogue] section
    exact_inst = base.replace(catalogue=None)
    spec = QUICK_SPEC if quick else SPEC
    seeds = seeds[:2] if quick else seeds
    ev = evaluate(exact_inst)
    reference = ev.coverage_at_target
    reference_sim = float(np.mean([_simulated(exact_inst, _tier_router(ev.advertised_wait), spec, s)[0] for s in seeds]))
    jobs = [Catalogue(b, k) for k in (1, 2) for b in (QUICK_BITS if quick else BITS)]
    jobs += [Catalogue(math.inf, 1, t, base.catalogue.churn) for t in (QUICK_REFRESH if quick else REFRESH)]
    rows = [
        dict(_catalogue_point(base, cat, spec, seeds, reference, reference_sim), reference=reference, reference_sim=reference_sim)
        for cat in progress_bar(jobs, desc="catalogue")
    ]
    return rows


def catalogue_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = [
        f"{'bits m':>7}{'k':>3}{'T_r':>6}{'γ':>6}{'f_shallow':>10}{'false hits':>11}{'stale':>7}"
        f"{'loss ana':>9}{'ana exact':>10}{'ana tier':>10}{'loss sim':>9}{'±2SE':>7}{'sim−ana':>9}"
    ]
    for r in rows:
        bits = "∞" if r["bits"] is None else str(r["bits"])
        lines.append(
            f"{bits:>7}{r['hashes']:>3}{r['refresh']:>6g}{r['churn']:>6g}{r['f_shallow']:>10.4f}"
            f"{r['false_hit_share']:>11.4f}{r['stale_share']:>7.4f}{r['loss_ana']:>9.4f}{r['loss_ana_exact']:>10.4f}"
            f"{r['loss_ana_tier']:>10.4f}"
            f"{r['loss_sim']:>9.4f}{2 * r['loss_sim_se']:>7.4f}{r['loss_sim'] - r['loss_ana']:>+9.4f}"
        )
    if rows:
        lines.append(f"exact catalogue: analysis {rows[0]['reference']:.4f}, simulation {rows[0]['reference_sim']:.4f}")
    return "\n".join(lines)


def catalogue_figure(rows: Sequence[dict[str, Any]], path: Path) -> None:
    figure, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.5))
    for k, marker in ((1, "o"), (2, "s")):
        pts = [r for r in rows if r["bits"] is not None and r["hashes"] == k and r["refresh"] == 0]
        if not pts:
            continue
        x = [r["bits"] for r in pts]
        (line,) = left.plot(x, [r["loss_ana"] for r in pts], marker=marker, ms=3, label=f"analysis with (19.25), k = {k}")
        left.plot(
            x,
            [r["loss_ana_exact"] for r in pts],
            ls="--",
            color=line.get_color(),
            label=f"analysis with the exact occupancy (19.26), k = {k}",
        )
        left.errorbar(
            x,
            [r["loss_sim"] for r in pts],
            yerr=[2 * r["loss_sim_se"] for r in pts],
            fmt=marker,
            mfc="none",
            color=line.get_color(),
            capsize=3,
            label=f"simulation ± 2 SE, k = {k}",
        )
    left.set_xscale("log", base=2)
    left.set_xlabel("Bloom filter size m [bits per node]")
    left.set_ylabel("coverage loss vs the exact catalogue")
    left.set_title("false positives (no refresh lag)")
    pts = [r for r in rows if r["bits"] is None]
    if pts:
        x = [r["refresh"] for r in pts]
        right.plot(x, [r["loss_ana"] for r in pts], marker="o", ms=3, label="analysis (19.28)–(19.31), class queues")
        right.plot(x, [r["loss_ana_tier"] for r in pts], marker="s", ms=3, ls="--", label="analysis, tier queues")
        right.errorbar(
            x, [r["loss_sim"] for r in pts], yerr=[2 * r["loss_sim_se"] for r in pts], fmt="x", capsize=3, label="simulation ± 2 SE"
        )
        right.set_xscale("log")
        right.set_title(f"staleness (exact filters, churn γ = {pts[0]['churn']:g} / s)")
    right.set_xlabel("catalogue refresh period T_r [s]")
    right.set_ylabel("coverage loss vs the exact catalogue")
    for ax in (left, right):
        ax.axhline(0.0, color="black", lw=0.5)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    figure.suptitle("serving_catalogue: coverage lost to a Bloom-filter catalogue (docs/model.md §19.7)")
    figure.tight_layout()
    atomic_savefig(figure, path)
    plt.close(figure)


def run(*, parts: Sequence[str] = PARTS, quick: bool = False, out: Path | str | None = None, echo: bool = True) -> dict:
    results: dict[str, list[dict[str, Any]]] = {}
    folder = None if out is None else Path(out)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    if "mgc" in parts:
        rows = mgc_rows(customers=60_000 if quick else 400_000, servers=(1, 4) if quick else SERVERS, loads=(0.7, 0.9) if quick else LOADS)
        results["mgc"] = rows
        if echo:
            print(mgc_table(rows))
        if folder is not None:
            mgc_figure(rows, folder / "queue_law_errors.png")
            atomic_write_text(folder / "queue_law_errors.csv", to_csv(rows))
    if "chunked" in parts:
        rows = chunked_rows(quick=quick)
        results["chunked"] = rows
        if echo:
            print(chunked_table(rows))
        if folder is not None:
            chunked_figure(rows, folder / "serving_chunked.png", load("serving_chunked").placement.target)
            atomic_write_text(folder / "serving_chunked.csv", to_csv(rows))
    if "catalogue" in parts:
        rows = catalogue_rows(quick=quick)
        results["catalogue"] = rows
        if echo:
            print(catalogue_table(rows))
        if folder is not None:
            catalogue_figure(rows, folder / "serving_catalogue.png")
            atomic_write_text(folder / "serving_catalogue.csv", to_csv(rows))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer points, shorter simulations")
    parser.add_argument("--part", choices=PARTS, action="append", help="run only this part (repeatable)")
    parser.add_argument("--out", help="folder for the figures and CSV files")
    parser.add_argument("--write-instances", action="store_true", help="rewrite the two benchmark instances and exit")
    args = parser.parse_args(argv)
    if args.write_instances:
        for path in write_instances():
            print(f"wrote {path}")
        return 0
    run(parts=args.part or PARTS, quick=args.quick, out=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
