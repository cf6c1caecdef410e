"""A straightforward reference spatial kernel: every Theorem 1 / coverage integral by ``scipy.integrate.quad``.

It integrates the paper's form directly in the distance ``r`` (docs/model.md §6):
``f_{s,q}(r) = 2π λ_s r exp(−π λ_s r² − Σ_{t≠s} π λ_t d_{t|s,q}(r)²)`` with
``d_{t|s,q}(r)^α = max(0, r^α + b_{s,q} − b_{t,q})``, splitting the range at the kinks
``r = (b_{t,q} − b_{s,q})^{1/α}``.  It plugs into :func:`edgeprefix.placement.model.evaluation.evaluate` through
the ``kernel`` argument, so the same fixed-point method runs on top of it.  It is slow by design:
it is the yardstick for speed and accuracy, not a code path of the package.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.integrate import quad

FloatArray = npt.NDArray[np.float64]


def _density(lam: FloatArray, b: FloatArray, alpha: float, s: int, q: int) -> Callable[[float], float]:
    others = [t for t in range(lam.size) if t != s]

    def f(r: float) -> float:
        ra = r**alpha
        total = np.pi * lam[s] * r * r
        for t in others:
            x = ra + b[s, q] - b[t, q]
            if x > 0:
                total += np.pi * lam[t] * x ** (2.0 / alpha)
        return 2.0 * np.pi * lam[s] * r * np.exp(-total)

    return f


def _integrate(f: Callable[[float], float], lam: FloatArray, b: FloatArray, alpha: float, s: int, q: int, upper: float) -> float:
    kinks = sorted((b[t, q] - b[s, q]) ** (1.0 / alpha) for t in range(lam.size) if t != s and b[t, q] > b[s, q])
    edges = [0.0] + [k for k in kinks if k < upper] + [upper]
    return float(sum(quad(f, lo, hi, limit=200, epsabs=1e-13, epsrel=1e-12)[0] for lo, hi in zip(edges[:-1], edges[1:])))


@dataclass(frozen=True)
class QuadReferenceKernel:
    """``scipy.integrate.quad`` on every ``(s, q)`` integral (see module notes).

    It supplies no ``∂A/∂b``, so the robust fixed point runs MINPACK's ``hybr`` on it.
    """

    provides_jacobian = False

    def association(self, lam: FloatArray, b: FloatArray, alpha: float) -> FloatArray:
        out = np.zeros(b.shape)
        for s in range(b.shape[0]):
            for q in range(b.shape[1]):
                out[s, q] = _integrate(_density(lam, b, alpha, s, q), lam, b, alpha, s, q, np.inf)
        return out

    def association_jacobian(self, lam: FloatArray, b: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
        """Not available (``provides_jacobian`` is false, so the fixed point never asks)."""
        raise NotImplementedError("QuadReferenceKernel has no exact ∂A/∂b; the robust fixed point uses hybr on it")

    def truncated(self, lam: FloatArray, b: FloatArray, alpha: float, u_cut: FloatArray, tilt: FloatArray) -> tuple[FloatArray, FloatArray]:
        tilt = np.broadcast_to(np.asarray(tilt, dtype=float), b.shape)
        p1 = np.zeros(b.shape)
        p2 = np.zeros(b.shape)
        for s in range(b.shape[0]):
            for q in range(b.shape[1]):
                if u_cut[s, q] <= 0:
                    continue
                f = _density(lam, b, alpha, s, q)
                r_cut = u_cut[s, q] ** (1.0 / alpha)
                k, uc = tilt[s, q], u_cut[s, q]
                p1[s, q] = _integrate(f, lam, b, alpha, s, q, r_cut)
                p2[s, q] = _integrate(lambda r: f(r) * np.exp(-k * (uc - r**alpha)), lam, b, alpha, s, q, r_cut)
        return p1, p2

    def moments(self, lam: FloatArray, b: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
        mu = np.zeros(b.shape)
        mr = np.zeros(b.shape)
        for s in range(b.shape[0]):
            for q in range(b.shape[1]):
                f = _density(lam, b, alpha, s, q)
                mu[s, q] = _integrate(lambda r: r**alpha * f(r), lam, b, alpha, s, q, np.inf)
                mr[s, q] = _integrate(lambda r: r * f(r), lam, b, alpha, s, q, np.inf)
        return mu, mr

    def error(self, lam: FloatArray, b: FloatArray, alpha: float) -> float:
        return 0.0
