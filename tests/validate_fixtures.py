"""A small, fast ``edgeprefix validate`` run shared by the tests that drive the command."""

from __future__ import annotations


def fast_validate_args(intensities: str) -> list[str]:
    """Options of a short validate run (20,000 Monte Carlo samples, 80 nodes, 8 s horizon, seed 3) at ``intensities``."""
    return [
        "--samples", "20000", "--customers", "5000", "--intensities", intensities, "--nodes", "80",
        "--horizon", "8", "--warmup", "4", "--replications", "1", "--seed", "3",
    ]  # fmt: skip
