"""Per-tier sums over request types without underflow (docs/model.md §5, §20).

A tier's arrival rate ``λq_s = σ_s Σ_q p_q A_{s,q}`` and offered load ``a_s = σ_s Σ_q p_q A_{s,q}/μ_{s,q}``
(``σ_s = Λ/λ_s``) are sums over its row of the association; the mean service time
``1/μ_s = a_s / λq_s`` and the second moment ``E[S²]_s`` are ratios of two such sums.  A tier that the
router almost never picks has a row ``A_{s,·}`` of subnormal numbers (``e^{−G}`` with
``708 < G < 745``, met by the fixed point's trial points and by extreme calibrations); the sums then
lose their digits or underflow to 0 one at a time, and the ratio comes out as 0 (a service time
outside ``[min_q 1/μ_{s,q}, max_q 1/μ_{s,q}]``) or ``0/0``.

:func:`lift` scales each row by the power of two ``2^k`` that brings its largest entry into
``[½, 1)`` (``k = 0`` for rows already there or above, and for rows of zeros).  A power of two is
exact, so a ratio of lifted sums has the rounding of the unlifted one wherever nothing
underflows, and the right value where something did; the sums themselves are returned unlifted
with :func:`numpy.ldexp`, correctly rounded.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def lift_exponents(a_q: FloatArray) -> IntArray:
    """``k ≥ 0`` per row (every axis but the last, the types) with ``2^k max_q A_{s,q} ∈ [½, 1)`` when the
    largest entry is below ½ and positive; 0 otherwise."""
    _, exponent = np.frexp(a_q.max(axis=-1))
    return np.maximum(-exponent, 0).astype(np.int64)


def lift(a_q: FloatArray) -> tuple[FloatArray, IntArray]:
    """``(2^k A, k)`` with ``k`` from :func:`lift_exponents`; ``A`` itself (no copy) when every ``k`` is 0."""
    k = lift_exponents(a_q)
    if not k.any():
        return a_q, k
    return _times_power_of_two(a_q, k[..., None]), k


EXACT_POWERS = 1022  # 2^±k is a normal float up to here: the product by it is ldexp's correctly rounded value


def _times_power_of_two(values: FloatArray, k: IntArray) -> FloatArray:
    """``ldexp(values, k)``, as one multiplication by ``2^k`` when every ``|k|`` allows (4× faster, the same numbers:
    both are the correctly rounded ``values · 2^k``)."""
    if np.abs(k).max() > EXACT_POWERS:
        return np.ldexp(values, k)
    return values * np.ldexp(1.0, k)


def unlift(values: FloatArray, k: IntArray) -> FloatArray:
    """``2^{−k} values`` (``values`` unchanged when every ``k`` is 0); ``k`` broadcasts over trailing axes."""
    if not k.any():
        return values
    return _times_power_of_two(values, -k.reshape(k.shape + (1,) * (values.ndim - k.ndim)))
