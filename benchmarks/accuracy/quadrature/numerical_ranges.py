"""Accuracy of the association quadrature across the supported radio exponents (docs/model.md §20).

For random tiers (2–5 profiles, 1–3 request types, densities and offsets over six decades) the
default-node quadrature is compared with a 300-node reference, for α in and just outside the
supported range [1, 6]; also ``max |Σ_s A_{s,q} − 1|`` of the reference.

    python -m edgeprefix.benchmarks.accuracy.quadrature.numerical_ranges [--cases 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from edgeprefix.placement.model.association import association_quadrature, default_nodes
from edgeprefix.placement.model.ranges import RADIO_EXPONENT_MAX, RADIO_EXPONENT_MIN

ALPHAS = (0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)


def measure(cases: int, seed: int) -> list[tuple[float, int, float, float]]:
    """Rows ``(α, default nodes, max |A − A_ref|, max |Σ A_ref − 1|)``."""
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(cases):
        s, q = int(rng.integers(2, 6)), int(rng.integers(1, 4))
        draws.append((rng.dirichlet(np.ones(s)) * 10 ** rng.uniform(-3, 3), rng.uniform(0, 1, (s, q)) * 10 ** rng.uniform(-3, 3)))
    rows = []
    for alpha in ALPHAS:
        n = default_nodes(alpha)
        err = total = 0.0
        for lam, b in draws:
            ref = association_quadrature(lam, b, alpha, 300)
            err = max(err, float(np.abs(association_quadrature(lam, b, alpha, n) - ref).max()))
            total = max(total, float(np.abs(ref.sum(axis=0) - 1.0).max()))
        rows.append((alpha, n, err, total))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m edgeprefix.benchmarks.accuracy.quadrature.numerical_ranges", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--cases", type=int, default=200, help="random tier sets per α (default: 200)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the tier sets (default: 1)")
    args = parser.parse_args(argv)
    print("| α | supported | nodes per segment | max abs error on A | max abs Σ_s A − 1 (reference) |")
    print("|---|---|---|---|---|")
    for alpha, n, err, total in measure(args.cases, args.seed):
        inside = RADIO_EXPONENT_MIN <= alpha <= RADIO_EXPONENT_MAX
        print(f"| {alpha:g} | {'yes' if inside else 'no'} | {n} | {err:.1e} | {total:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
