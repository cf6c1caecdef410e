"""A candidate engine-law form measured, not built into the law: a load-dependent atom at the joined stretch (docs/model.md §17.10.3).

``python -m edgeprefix.benchmarks.accuracy.engine.engine_law_atom`` runs the single-node design grid of
:mod:`.engine_law_fit` (same seeds, the same 62 fit runs and 52 held-out runs) and fits one more constant on the fit
part, the shipped ``c_0, θ_1 … θ_8`` held: a request that does not wait in the queue (probability ``1 − P^W``) is
delayed by the joined stretch ``J`` with probability ``ω = min(1, θ_9 λ T)``, ``T`` the alone time of a prefill's
earlier chunks (all but its last; 0 for a prefill of one chunk) — an arrival during them joins its last chunk:

``F_W(w) = (1 − P^W)(1 − ω 1[w < J]) + P^W (1 − e^{−θ (w − δ)⁺})``,  ``W̄ = W̄_(17.25) + (1 − P^W) ω J``.

Four variants: **per profile** (``T_s = Σ_q p_q T_q``, the atom at the law's ``J_s``; ``ω = θ_9 a T_s / w̄_s``, a
constant of the profile times the GPU load) and **per type** (``Σ_q p_q min(1, θ_9 λ T_q)`` at ``j_q``), and two **mixtures of shifted laws**, monotone in the load by construction: every request is
delayed by ``J`` with probability ``ω``, ``F_W(w) = (1 − ω) F_0(w) + ω F_0(w − J)`` (``F_0`` the law of (17.25), 0 below 0;
``W̄ = W̄_(17.25) + ω J``), with ``ω = min(1, θ_9 λ T_s)`` (**mixture, capped**) or the smooth saturating
``ω = 1 − e^{−θ_9 λ T_s}`` (**mixture, smooth**).  The load derivative of the mixture,
``(1 − ω) ∂F_0(w) + ω ∂F_0(w − J) − ω′ (F_0(w) − F_0(w − J))``, is ≤ 0; that of the atom on the non-waiting requests is
not when ``ω > e^{−θ (w − δ)}``.  It prints
each variant's fit and held-out cost against the law with ``θ_9 = 0`` (the residuals of :func:`.engine_law_fit.residuals`),
the law's ``P(W ≤ x ū)`` at the mooncake run ``a = 0.33`` (549k tokens) against the engine's, and the proxy of
§17.10.2: the law's ``P(W ≤ slack)`` for ``mooncake_engine``'s profile ``none`` (its dominant type, 98 %) averaged
over the size-biased Voronoi load (a Gamma law of shape 4.575, scale 1/3.575, times the tier's ``a``).  Nothing is
written: the law (``engine_law.json``, the coverage, the cell model, the gradients) is unchanged.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import integrate, stats
from scipy.optimize import least_squares

from edgeprefix.benchmarks.accuracy.engine import engine_law_fit as fit
from edgeprefix.placement.model.engine_law import (
    EngineLawConstants,
    alone_prefill,
    default_step_time,
    engine_units,
    engine_wait_law,
    join_stretch,
    shipped_constants,
)
from edgeprefix.placement.model.instance import load_instance

FloatArray = npt.NDArray[np.float64]
VARIANTS = ("per profile", "per type", "mixture, capped", "mixture, smooth")
MIXTURES = VARIANTS[2:]
VORONOI_SHAPE = 4.575  # the size-biased Voronoi load's Gamma law (docs/model.md §17.10.2)
PROBE = ("mooncake/549k", 0.33)  # the run whose cluster §17.10.3 diagnoses


@dataclasses.dataclass(frozen=True)
class Chunks:
    """Per type: the earlier chunks' alone time ``T_q`` and the joined stretch ``j_q``; the profile's ``T_s`` and ``J_s``."""

    earlier: FloatArray
    stretch: FloatArray
    mean_earlier: float
    mean_stretch: float


def chunks(step: Any, budget: int, p: FloatArray, lengths: FloatArray, cached: FloatArray) -> Chunks:
    n = np.maximum(lengths - cached, 1.0)
    count = np.ceil(n / budget)
    earlier = np.where(count >= 2, alone_prefill(step, (count - 1.0) * budget, cached, budget), 0.0)
    stretch = join_stretch(step, n, budget, np.array([n @ p]), np.array([cached @ p]))
    return Chunks(earlier, stretch, float(earlier @ p), float(stretch @ p))


def atoms(variant: str, rate: float, p: FloatArray, ch: Chunks, theta_9: float) -> list[tuple[float, float]]:
    """``(weight, J)`` pairs of the atom: one per profile, or one per type of two or more chunks."""
    if variant == "mixture, smooth":
        return [(float(-np.expm1(-theta_9 * rate * ch.mean_earlier)), ch.mean_stretch)]
    if variant in ("per profile", "mixture, capped"):
        return [(min(1.0, theta_9 * rate * ch.mean_earlier), ch.mean_stretch)]
    return [(float(pq * min(1.0, theta_9 * rate * t)), float(j)) for pq, t, j in zip(p, ch.earlier, ch.stretch) if t > 0]


def atom_cdf(w: FloatArray, weight: float, decay: float, delay: float, atom: list[tuple[float, float]]) -> FloatArray:
    w = np.asarray(w, dtype=float)
    held = sum((om * (w < j) for om, j in atom), np.zeros_like(w))
    return 1.0 - weight * np.exp(-decay * np.maximum(w - delay, 0.0)) - (1.0 - weight) * held


def mixture_cdf(w: FloatArray, weight: float, decay: float, delay: float, atom: list[tuple[float, float]]) -> FloatArray:
    """``(1 − ω) F_0(w) + ω F_0(w − J)``, ``F_0(w) = 1 − P^W e^{−θ (w − δ)⁺}`` for ``w ≥ 0`` and 0 below."""
    w = np.asarray(w, dtype=float)

    def f0(x: FloatArray) -> FloatArray:
        return np.where(x >= 0.0, 1.0 - weight * np.exp(-decay * np.maximum(x - delay, 0.0)), 0.0)

    (om, j), *_ = atom
    return (1.0 - om) * f0(w) + om * f0(w - j)


def law_cdf(variant: str, w: FloatArray, weight: float, decay: float, delay: float, atom: list[tuple[float, float]]) -> FloatArray:
    return (mixture_cdf if variant in MIXTURES else atom_cdf)(w, weight, decay, delay, atom)


def atom_mean(variant: str, weight: float, atom: list[tuple[float, float]]) -> float:
    """What the atom adds to ``W̄``: ``(1 − P^W) Σ ω J`` on the non-waiting requests, ``ω J`` for a mixture."""
    return (1.0 if variant in MIXTURES else 1.0 - weight) * sum(om * j for om, j in atom)


def residuals(
    theta_9: float,
    variant: str,
    points: list[fit.Point],
    by_name: dict[str, fit.NodeCase],
    step: Any,
    ch: dict[str, Chunks],
    k: EngineLawConstants,
) -> FloatArray:
    """:func:`.engine_law_fit.residuals` with the atom (``θ_9 = 0``: (17.26) without its mixture, the law shipped before it)."""
    out: list[float] = []
    for pt in points:
        stable, pw, decay, mean, delay = fit.law_at(pt, k, by_name[pt.case], step)
        if not stable:
            out.extend([1.0] * (len(fit.SLACK) + 1))
            continue
        atom = atoms(variant, pt.rate, by_name[pt.case].probabilities, ch[pt.case], theta_9)
        w = np.asarray(fit.SLACK) * pt.prefill
        out.extend(law_cdf(variant, w, pw, decay, delay, atom) - (pt.wait[None, :] <= w[:, None]).mean(axis=1))
        mean += atom_mean(variant, pw, atom)
        out.append(0.5 * np.log((mean + 0.01 * pt.prefill) / (pt.wait.mean() + 0.01 * pt.prefill)))
    return np.asarray(out)


def cost(r: FloatArray) -> float:
    return 0.5 * float(np.sum(r**2))


def proxy(theta_9: float, load: float, slack: float, k: EngineLawConstants, variant: str = "per profile") -> tuple[float, list[float]]:
    """The law's (per profile or a mixture) ``P(W ≤ slack)`` for ``mooncake_engine``'s profile ``none`` averaged over ``a X``,
    ``X`` the size-biased Voronoi load, and the law's curve at ``a = 0.1 … 0.7``."""
    inst = load_instance(fit.INSTANCE)
    step = default_step_time(inst)
    units = engine_units(inst, step, k)
    s = inst.profile_ids.index("none")
    p = np.asarray(inst.probabilities, dtype=float)
    lengths = np.asarray(inst.lengths, dtype=float)
    cached = np.minimum(np.asarray(inst.hit_depth, dtype=float)[s], lengths)
    engine = inst.engine
    assert engine is not None  # mooncake_engine has an [engine] section
    ch = chunks(step, engine.token_budget, p, lengths, cached)
    w_bar = float(units.work[s] @ p)

    def law(a: float) -> float:
        out = engine_wait_law(np.array([a]), units.servers[s : s + 1], np.array([w_bar]), units.tiers.take([s]), k)
        if not out["stable"][0]:
            return 0.0
        atom = atoms(variant, a / w_bar, p, ch, theta_9)
        return float(law_cdf(variant, np.array(slack), out["weight"][0], out["decay"][0], out["delay"][0], atom))

    spread = stats.gamma(VORONOI_SHAPE, scale=1.0 / (VORONOI_SHAPE - 1.0))
    mean = integrate.quad(lambda x: spread.pdf(x) * law(load * x), 0.0, 8.0, limit=200, points=[1.0])[0]
    return mean, [law(a) for a in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--requests", type=int, default=fit.REQUESTS)
    ap.add_argument("--load", type=float, default=0.297, help="the tier's GPU load a of the proxy (docs/model.md §17.10.2: 0.297)")
    ap.add_argument("--slack", type=float, default=1.155, help="seconds; the dominant type's slack τ − radio − u is 1.13–1.18 s")
    args = ap.parse_args(argv)
    if not (0.0 < args.load < 1.0) or not args.slack > 0.0:
        ap.error("--load must lie in (0, 1) and --slack be > 0")
    t0 = time.process_time()
    points, _, (_, step, grid) = fit.collect(args.seed, args.requests)
    by_name = {c.name: c for c in grid}
    budget = grid[0].engine.token_budget
    ch = {c.name: chunks(step, budget, c.probabilities, c.lengths, c.hit_depth[0]) for c in grid}
    k = dataclasses.replace(shipped_constants(), theta_9=0.0)  # the law of (17.25): each variant adds its own θ_9
    train = [p for p in points if not p.held_out]
    held = [p for p in points if p.held_out]
    probe = next(p for p in points if p.case == PROBE[0] and abs(p.load - PROBE[1]) < 1e-9)
    levels = np.asarray(fit.SMALL) * probe.prefill
    engine_small = [float(np.mean(probe.wait <= w)) for w in levels]
    print(f"grid of engine_law_fit (seed {args.seed}, {args.requests} requests per run): {len(train)} fit runs, {len(held)} held out")
    base_fit, base_held = (
        cost(residuals(0.0, VARIANTS[0], train, by_name, step, ch, k)),
        residuals(0.0, VARIANTS[0], held, by_name, step, ch, k),
    )
    print(f"law without the mixture (θ_9 = 0): fit cost {base_fit:.4f}, held-out cost {cost(base_held):.4f}")
    print(f"{PROBE[0]} a = {PROBE[1]}: engine P(W ≤ x ū) at x = {list(fit.SMALL)}: " + ", ".join(f"{e:.3f}" for e in engine_small))
    for variant in VARIANTS:

        def on_fit(t: FloatArray, variant: str = variant) -> FloatArray:
            return residuals(float(t[0]), variant, train, by_name, step, ch, k)

        runs = [
            least_squares(
                on_fit,
                x0=[x0],
                bounds=([0.0], [5.0]),
                diff_step=1e-3,  # type: ignore[arg-type]  # a scalar step, as in engine_law_fit
            )
            for x0 in (0.3, 1.0, 2.0)
        ]
        theta_9 = float(min(runs, key=lambda r: float(r.cost)).x[0])
        r_held = residuals(theta_9, variant, held, by_name, step, ch, k)
        print(
            f"form 'atom at J, {variant}': θ_9 = {theta_9:.4f}, fit cost {cost(residuals(theta_9, variant, train, by_name, step, ch, k)):.4f}, "
            f"held-out cost {cost(r_held):.4f}"
        )
        per = len(fit.SLACK) + 1
        by_case: dict[str, float] = {}
        for i, pt in enumerate(held):
            sl = slice(i * per, (i + 1) * per)
            by_case[pt.case] = by_case.get(pt.case, 0.0) + cost(r_held[sl]) - cost(base_held[sl])
        print("  held-out cost change by case: " + ", ".join(f"{c} {d:+.3f}" for c, d in sorted(by_case.items())))
        stable, pw, decay, _, delay = fit.law_at(probe, k, by_name[probe.case], step)
        atom = atoms(variant, probe.rate, by_name[probe.case].probabilities, ch[probe.case], theta_9)
        law = law_cdf(variant, levels, pw, decay, delay, atom)
        print(
            f"  {PROBE[0]} a = {PROBE[1]}: law P(W ≤ x ū) "
            + ", ".join(f"{v:.3f}" for v in law)
            + f" (shipped: {', '.join(f'{v:.3f}' for v in atom_cdf(levels, pw, decay, delay, []))})"
        )
        if variant != "per type":
            for label, t9 in ((("shipped", 0.0),) if variant == "per profile" else ()) + (
                ("atom" if variant == "per profile" else variant, theta_9),
            ):
                mean, curve = proxy(t9, args.load, args.slack, k, variant)
                print(
                    f"  proxy ({label}): mooncake_engine 'none', slack {args.slack} s, a = {args.load}: P(W ≤ slack) over the Voronoi load "
                    f"{mean:.4f}; at a = 0.1 … 0.7: " + ", ".join(f"{v:.3f}" for v in curve)
                )
    print(f"CPU {time.process_time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
