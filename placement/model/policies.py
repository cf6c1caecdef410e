"""Routing policies compared in the paper (Sec. VI, docs/model.md §6).

Each policy is the tier bias ``β_{s,q}`` that the router adds to the radio cost ``ξ r^α``:

1. ``nearest`` — ignores prefix and queue (equal biases), so ``A_{s,q} = π_s``;
2. ``prefix`` — queue-unaware: ``β_{s,q} = g(L_q − h_{s,q})``;
3. ``load_aware`` — the proposed policy: ``β_{s,q} = g(L_q − h_{s,q}) + W̄_s`` at the load–association
   fixed point.

Policies 1 and 2 need no fixed point (their association does not depend on ``W̄``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
POLICIES = ("load_aware", "prefix", "nearest")


def check_policy(policy: str) -> str:
    if policy not in POLICIES:
        raise ValueError(f"policy: unknown routing policy {policy!r} (valid: {list(POLICIES)})")
    return policy


def needs_fixed_point(policy: str) -> bool:
    return check_policy(policy) == "load_aware"


def policy_bias(policy: str, residual_prefill: FloatArray, advertised_wait: FloatArray) -> FloatArray:
    """``β_{s,q}`` of ``policy`` given ``g(L_q − h_{s,q})`` ``(S, Q)`` and advertised ``W̄_s`` ``(S,)``."""
    check_policy(policy)
    if policy == "nearest":
        return np.zeros_like(residual_prefill)
    if policy == "prefix":
        return np.array(residual_prefill, dtype=float)
    return residual_prefill + np.asarray(advertised_wait, dtype=float)[:, None]
