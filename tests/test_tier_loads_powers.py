"""The lifts of docs/model.md §20 by one multiplication by 2^k give numpy.ldexp's numbers bit for bit."""

from __future__ import annotations

import numpy as np

from edgeprefix.placement.model import tier_loads


def test_multiplying_by_powers_of_two_is_ldexp_up_and_down():
    rng = np.random.default_rng(1)
    for _ in range(100):
        k = rng.integers(0, tier_loads.EXACT_POWERS + 1, (6, 9))
        tiny = rng.random((6, 9, 5)) * 2.0 ** (-k[..., None].astype(float))  # lifted back into [0, 1)
        assert np.array_equal(tier_loads._times_power_of_two(tiny, k[..., None]), np.ldexp(tiny, k[..., None]))
        sums = rng.random((6, 9, 5)) * 10.0 ** rng.uniform(-30, 30, (6, 9, 1))  # unlifted, into the subnormals
        assert np.array_equal(tier_loads._times_power_of_two(sums, -k[..., None]), np.ldexp(sums, -k[..., None]))
    subnormal = np.array([[5e-324, 3e-320, 0.0, 1e-310]])
    lifted, k = tier_loads.lift(subnormal)
    assert k[0] > tier_loads.EXACT_POWERS and np.array_equal(lifted, np.ldexp(subnormal, k[:, None]))  # the ldexp branch
    assert 0.5 <= lifted.max() < 1.0
    assert np.array_equal(tier_loads.unlift(lifted, k), subnormal)
