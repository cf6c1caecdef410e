"""How often the robust fixed point converges deep in overload, and which of its methods gets there (docs/model.md §7.1).

Run ``python -m edgeprefix.benchmarks.accuracy.fixed_point.overload [--instances N] [--seed S]``.  It draws ``N``
small seeded synthetic instances (:func:`~edgeprefix.benchmarks.workloads.synthetic.synthetic_instance`: 1–3
request types, 2–4 profiles, path-loss exponent ``α`` from {1, 2, 2.5, 3, 4, 6}, ``Λ`` 1, 3, 10 or 30 times the
instance's, a random mix with zero shares), evaluates each with the default solver and prints, per ``Λ``
multiplier, how many converged and by which method: Newton (7.7), the pseudo-transient continuation (7.11),
MINPACK or the damping (7.8), the load continuation (7.12), and how many stayed unconverged; with the CPU
seconds spent on the points Newton alone did not solve, against those on the points it solved (same run).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

import numpy as np

from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.progress import progress_bar

ALPHAS = (1.0, 2.0, 2.5, 3.0, 4.0, 6.0)
FACTORS = (1.0, 3.0, 10.0, 30.0)
METHODS = ("robust:newton", "robust:continuation", "robust:hybr", "robust:hybr+adaptive", "robust:load-continuation")


def draw(rng: np.random.Generator):
    """One instance and mix: sizes, ``α``, the load multiplier and a mix with at least one positive share."""
    types, profiles = int(rng.integers(1, 4)), int(rng.integers(2, 5))
    alpha, factor = float(rng.choice(ALPHAS)), float(rng.choice(FACTORS))
    inst = synthetic_instance(types, profiles, alpha=alpha, seed=int(rng.integers(2**31)))
    inst = inst.with_network(request_intensity=inst.network.request_intensity * factor)
    mix = np.where(rng.random(profiles) < 0.3, 0.0, rng.random(profiles))
    if not mix.any():
        mix[int(rng.integers(profiles))] = 1.0
    return inst, mix / mix.sum(), factor


def run(instances: int, seed: int) -> tuple[dict[float, Counter[str]], dict[float, dict[str, float]]]:
    """Per ``Λ`` multiplier, the points each method solved (and ``unconverged``), and the CPU seconds of Newton's
    points (``newton``) and of the others (``other``)."""
    rng = np.random.default_rng(seed)
    counts: dict[float, Counter[str]] = {f: Counter() for f in FACTORS}
    cpu: dict[float, dict[str, float]] = {f: {"newton": 0.0, "other": 0.0} for f in FACTORS}
    with progress_bar(total=instances, desc="fixed points", unit="instance") as bar:
        for _ in range(instances):
            inst, mix, factor = draw(rng)
            start = time.process_time()
            fp = evaluate(inst, mix).fixed_point
            spent = time.process_time() - start
            assert fp is not None  # the load-aware policy always solves a fixed point
            counts[factor][fp.method if fp.converged else "unconverged"] += 1
            cpu[factor]["newton" if fp.method == "robust:newton" else "other"] += spent
            bar.update(1)
    return counts, cpu


def render(counts: dict[float, Counter[str]], cpu: dict[float, dict[str, float]]) -> str:
    cols = [*METHODS, "unconverged"]
    head = "| Λ multiplier | " + " | ".join(c.removeprefix("robust:") for c in cols) + " | CPU s, Newton's points / the others |"
    lines = [head, "|" + "---:|" * (len(cols) + 2)]
    total: Counter[str] = Counter()
    for f, c in counts.items():
        total.update(c)
        lines.append(f"| {f:g} | " + " | ".join(str(c[k]) for k in cols) + f" | {cpu[f]['newton']:.1f} / {cpu[f]['other']:.1f} |")
    newton, other = (sum(v[k] for v in cpu.values()) for k in ("newton", "other"))
    lines.append("| all | " + " | ".join(str(total[k]) for k in cols) + f" | {newton:.1f} / {other:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=2000, help="random instances (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws (default 0)")
    args = parser.parse_args(argv)
    if args.instances < 1:
        print(f"--instances: at least 1, got {args.instances}", file=sys.stderr)
        return 2
    print(render(*run(args.instances, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
