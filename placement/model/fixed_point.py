"""Load–association fixed point ``W̄ = 𝒬(𝒜(W̄))`` (docs/model.md §7, eqs. (33)–(36)).

Two methods solve the same residual ``F(W) = W − T(W)`` over the active tiers:

* ``damped`` — the paper's iteration ``W^{k+1} = (1 − η) W^k + η T(W^k)`` (eq. (34)), from ``W^0 = 0``
  or a warm start, stopped when ``max_s |T(W^k) − W^k| ≤ ε`` (then ``|W^{k+1} − W^k| ≤ ηε``) or
  after ``max_iterations`` (reported as not converged).
* ``robust`` — on ``F`` written in ``v = log(W + w_shift)``, warm-started: Newton's method with
  backtracking when the kernel supplies ``∂A/∂b`` (exact Jacobian of ``T``), else (or if Newton
  stalls) a pseudo-transient continuation in ``W`` with the same Jacobian, then MINPACK's hybrid Powell method (``scipy.optimize.root(method="hybr")``); if it stalls, an adaptive damped iteration that halves ``η`` whenever
  the residual grows (and regrows it otherwise) takes over from the best point seen.

``T`` must be continuous (the advertised delay above ``ρ_clip`` is a linear continuation), so an
equilibrium exists; the report tells which method produced it and its final residual.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain

FloatArray = npt.NDArray[np.float64]
METHODS = ("robust", "damped")
DEFAULT_TOLERANCE = 1e-9  # ε on max_s |T(W)_s − W_s|, seconds
DEFAULT_DAMPING = 0.3  # η of the paper's iteration
DEFAULT_MAX_ITERATIONS = 2000


@dataclass(frozen=True)
class FixedPointReport:
    """How the operating point was found: ``method``, ``converged``, ``iterations`` (updates of
    ``W``), ``evaluations`` (of ``T``, i.e. of the association), final ``residual``
    ``max_s |T(W)_s − W_s|`` and the per-iteration ``history`` of ``W`` (damped only)."""

    method: str
    converged: bool
    iterations: int
    evaluations: int
    residual: float
    history: tuple[tuple[float, ...], ...] = ()


class _Counted:
    def __init__(self, fn: Callable[[FloatArray], FloatArray]) -> None:
        self.fn = fn
        self.calls = 0

    def __call__(self, w: FloatArray) -> FloatArray:
        self.calls += 1
        return self.fn(w)


def damped_iteration(
    fn: Callable[[FloatArray], FloatArray],
    start: FloatArray,
    *,
    damping: float = DEFAULT_DAMPING,
    tol: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    record: bool = False,
) -> tuple[FloatArray, FixedPointReport]:
    """The paper's damped iteration (eq. (34)) with the stopping rule of eq. (36)."""
    if not 0.0 < damping <= 1.0:
        raise ValueError(f"damping: η must lie in (0, 1], got {plain(damping)}")
    t = _Counted(fn)
    w = np.array(start, dtype=float)
    history = [tuple(w)] if record else []
    for k in range(max_iterations + 1):
        tw = t(w)
        residual = float(np.max(np.abs(tw - w))) if w.size else 0.0
        if residual <= tol or not np.isfinite(residual):
            return w, FixedPointReport("damped", bool(np.isfinite(residual)), k, t.calls, residual, tuple(history))
        if k == max_iterations:
            break
        w = (1.0 - damping) * w + damping * tw
        if record:
            history.append(tuple(w))
    return w, FixedPointReport("damped", False, max_iterations, t.calls, residual, tuple(history))


def allowed_residual(w: FloatArray, tol: float) -> float:
    """``ε max(1, max_s |W_s|)``: the residual at which ``W`` counts as the fixed point (docs/model.md (7.6)).

    Relative above 1 s: moving ``W`` by one unit in the last place moves ``T(W) − W`` by about
    ``‖∂T/∂W‖ |W| 2⁻⁵²`` (measured 7·10⁻⁹ at ``W ≈ 2·10³`` s, ``‖∂T/∂W‖ ≈ 10⁴``), above an absolute 10⁻⁹ s.
    """
    return tol * max(1.0, float(np.max(np.abs(w), initial=0.0)))


def _adaptive(t: _Counted, w: FloatArray, tol: float, max_iterations: int) -> tuple[FloatArray, float, int]:
    """Adaptive damping (7.8) until ``max_s |T(W)_s − W_s| ≤`` :func:`allowed_residual`."""
    eta = 0.5
    tw = t(w)
    res = float(np.max(np.abs(tw - w)))
    best_w, best_res = w, res
    for k in range(max_iterations):
        if res <= allowed_residual(w, tol):
            return w, res, k
        cand = (1.0 - eta) * w + eta * tw
        tc = t(cand)
        rc = float(np.max(np.abs(tc - cand)))
        if rc < res:
            w, tw, res = cand, tc, rc
            eta = min(1.0, eta * 1.5)
            if res < best_res:
                best_w, best_res = w, res
        else:
            eta *= 0.5
            if eta < 1e-6:
                eta = 0.5
                w, tw, res = cand, tc, rc  # accept to leave a cycle
    return best_w, best_res, max_iterations


def _newton(
    residual_and_jacobian: Callable[[FloatArray], tuple[FloatArray, FloatArray]],
    v: FloatArray,
    done: Callable[[FloatArray, FloatArray], bool],
    max_steps: int = 50,
) -> tuple[FloatArray, FloatArray, bool, int]:
    """Newton's method with Armijo backtracking on ``||F||``.

    ``done(v, F(v))`` is the stopping test.  Returns (point, F there, success, steps).
    """
    f, jac = residual_and_jacobian(v)
    for step_count in range(max_steps):
        if done(v, f):
            return v, f, True, step_count
        try:
            step = np.linalg.solve(jac, -f)
        except np.linalg.LinAlgError:
            return v, f, False, step_count
        norm = math.sqrt(float(f @ f))
        length = 1.0
        while True:
            trial = v + length * step
            f_trial, jac_trial = residual_and_jacobian(trial)
            trial_norm = math.sqrt(float(f_trial @ f_trial))
            if math.isfinite(trial_norm) and trial_norm <= (1.0 - 1e-4 * length) * norm:
                break
            length *= 0.5
            if length < 1e-4:
                return v, f, False, step_count
        v, f, jac = trial, f_trial, jac_trial
    return v, f, done(v, f), max_steps


def _pseudo_transient(
    t_and_jacobian: Callable[[FloatArray], tuple[FloatArray, FloatArray]],
    w: FloatArray,
    tol: float,
    w_max: float,
    max_steps: int = 40,
) -> tuple[FloatArray, float, int, bool]:
    """Pseudo-transient continuation of ``dW/dτ = T(W) − W`` (docs/model.md (7.11)).

    Implicit Euler steps ``(I/δ + I − ∂T/∂W) ΔW = T(W) − W``, ``W ← max(W + ΔW, 0)``, with the step
    ``δ`` grown by the residual's fall (switched evolution relaxation, ``δ ← δ ‖F_old‖/‖F_new‖``, within
    ``[10⁻⁶, 10¹⁵]``); it becomes Newton's method in ``W`` as ``δ → ∞``.  At most ``max_steps`` steps
    (the cases it solves took 5–12).  Returns (point, residual, steps, converged).
    """
    delta, previous = 1.0, math.inf
    identity = np.eye(w.size)
    for step_count in range(max_steps):
        capped = np.minimum(w, w_max)
        tw, jac = t_and_jacobian(capped)
        f = tw - w
        res = float(np.max(np.abs(f)))
        if not np.isfinite(res):
            return w, res, step_count, False
        if res <= allowed_residual(w, tol) and np.all(w < w_max):
            return w, res, step_count, True
        if np.isfinite(previous):
            delta = min(max(delta * previous / res, 1e-6), 1e15)
        previous = res
        try:
            dw = np.linalg.solve(identity * (1.0 + 1.0 / delta) - np.where((w < w_max)[None, :], jac, 0.0), f)
        except np.linalg.LinAlgError:
            return w, res, step_count, False
        w = np.maximum(w + dw, 0.0)
    return w, previous, max_steps, False


def robust_solve(
    fn: Callable[[FloatArray], FloatArray],
    start: FloatArray,
    *,
    tol: float = DEFAULT_TOLERANCE,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    w_shift: float = 1e-3,
    jacobian: Callable[[FloatArray], tuple[FloatArray, FloatArray]] | None = None,
    w_max: float = math.inf,
    fallbacks: bool = True,
) -> tuple[FloatArray, FixedPointReport]:
    """Safeguarded quasi-Newton solve of ``W = T(W)`` (see module notes).

    ``w_shift`` (seconds) sets the smallest delay scale resolved by the log variable;
    :func:`edgeprefix.placement.model.evaluation.evaluate` uses 5 % of the mean service time ``1/μ_{s,q}``
    (measured with the median over 14 loads and instances: 86 evaluations in all, against
    82–116 for 1 ms and for 1 %, 2 %, 10 %, 20 % of the service time).
    ``jacobian(W) -> (T(W), ∂T/∂W)`` lets MINPACK use exact derivatives instead of ``|S|``
    finite differences per Jacobian (the difference between 60 and ~10 evaluations at 16
    profiles).
    ``w_max`` (seconds) caps the delays at which ``T`` is evaluated (docs/model.md (7.9)): a Newton or
    MINPACK trial step of thousands in ``v`` (a nearly singular Jacobian) would overflow ``e^v``; the
    map is evaluated at ``min(W, w_max)`` instead, which leaves every fixed point below ``w_max``
    unchanged, and a point at or above the cap is never reported as converged.
    ``fallbacks=False`` (a step of the load continuation (7.12), with a Jacobian) stops after Newton and the
    pseudo-transient continuation instead of going on to MINPACK and the damping.
    """
    t = _Counted(fn)
    w0 = np.array(start, dtype=float)
    if w0.size == 0:
        return w0, FixedPointReport("robust", True, 0, 0, 0.0)
    if jacobian is None and np.any(w0 != 0.0):  # a warm start may already be the equilibrium
        # (with a Jacobian, Newton's first evaluation makes the same test)
        first = float(np.max(np.abs(t(w0) - w0)))
        if first <= allowed_residual(w0, tol):
            return w0, FixedPointReport("robust:warm-start", True, 0, t.calls, first)
    # Solve in v = log(W + w_shift): delays span orders of magnitude near saturation, and the
    # log keeps the Newton steps of heavy load well scaled (measured: 16 instead of 27
    # evaluations at Λ = 4 on paper_baseline).  W ≥ 0 at every equilibrium (T(W) ≥ 0).
    v_max = math.log(w_max + w_shift)  # T is evaluated at W = e^{min(v, v_max)} − w₀ (7.9)

    def residual_v(v: FloatArray) -> FloatArray:
        return np.log(np.maximum(t(np.exp(np.minimum(v, v_max)) - w_shift), 0.0) + w_shift) - v

    identity = np.eye(w0.size)

    def residual_and_jacobian(v: FloatArray) -> tuple[FloatArray, FloatArray]:
        t.calls += 1
        inside = v < v_max
        ev = np.exp(np.where(inside, v, v_max))
        tw, dt = jacobian(ev - w_shift)  # type: ignore[misc]
        tw = np.maximum(tw, 0.0) + w_shift
        jac = np.where(inside[None, :], dt * ev, 0.0) / tw[:, None] - identity  # the cap's derivative is 0 above it
        return np.log(tw) - v, jac

    v0 = np.log(np.maximum(w0, 0.0) + w_shift)
    if jacobian is not None:
        # In v, F = log(T + w₀) − v, so T(W) − W = (W + w₀)(e^F − 1): the W-residual comes free.
        def w_residual(v: FloatArray, f: FloatArray) -> float:
            if np.any(v >= v_max):
                return math.inf  # at the cap: not a fixed point of T (7.9)
            return float(np.max(np.abs(np.exp(v) * np.expm1(f))))

        def done(v: FloatArray, f: FloatArray) -> bool:
            return w_residual(v, f) <= 0.5 * allowed_residual(np.exp(np.minimum(v, v_max)) - w_shift, tol)

        v_newton, f_newton, ok, steps = _newton(residual_and_jacobian, v0, done)
        if ok:
            # e^{log w₀} − w₀ can round to −1e-17; every equilibrium has W = T(W) ≥ 0 exactly
            w = np.maximum(np.exp(v_newton) - w_shift, 0.0)
            method = "robust:warm-start" if steps == 0 and np.any(w0 != 0.0) else "robust:newton"
            return w, FixedPointReport(method, True, steps, t.calls, w_residual(v_newton, f_newton))

        # Newton stalls where the association is steep against the delays (deep overload: W in 10³–10⁴ s,
        # tiers within seconds of each other); the continuation's steps stay bounded there (7.11).
        def counted_jacobian(w: FloatArray) -> tuple[FloatArray, FloatArray]:
            t.calls += 1
            return jacobian(w)

        w_ptc, res_ptc, steps_ptc, ok_ptc = _pseudo_transient(counted_jacobian, np.maximum(w0, 0.0), tol, w_max)
        if ok_ptc:
            return w_ptc, FixedPointReport("robust:continuation", True, steps + steps_ptc, t.calls, res_ptc)
        if not fallbacks:
            return w_ptc, FixedPointReport("robust:continuation", False, steps + steps_ptc, t.calls, res_ptc)
        v0 = v_newton if np.all(np.isfinite(v_newton)) else v0
    options = {"xtol": 1e-12, "maxfev": 200 * (w0.size + 1)}
    from scipy.optimize import root  # the rare fallback; keeps evaluate's start-up cheap

    sol = root(residual_v, v0, method="hybr", options=options)  # type: ignore[call-overload]  # the stub spells maxfev "maxffev"
    w = np.maximum(np.exp(np.minimum(np.asarray(sol.x, dtype=float), v_max)) - w_shift, 0.0)  # rounding, as above
    residual = float(np.max(np.abs(t(w) - w)))
    if np.isfinite(residual) and residual <= allowed_residual(w, tol):
        return w, FixedPointReport("robust:hybr", True, int(sol.nfev), t.calls, residual)
    start_w = w if np.isfinite(residual) and np.all(np.isfinite(w)) else w0
    w, residual, k = _adaptive(t, start_w, tol, max_iterations)
    return w, FixedPointReport("robust:hybr+adaptive", residual <= allowed_residual(w, tol), int(sol.nfev) + k, t.calls, residual)


def solve_fixed_point(
    fn: Callable[[FloatArray], FloatArray],
    start: FloatArray,
    *,
    method: str = "robust",
    tol: float = DEFAULT_TOLERANCE,
    damping: float = DEFAULT_DAMPING,
    max_iterations: int = DEFAULT_MAX_ITERATIONS,
    record: bool = False,
    jacobian: Callable[[FloatArray], tuple[FloatArray, FloatArray]] | None = None,
    w_shift: float = 1e-3,
    w_max: float = math.inf,
    fallbacks: bool = True,
) -> tuple[FloatArray, FixedPointReport]:
    """Dispatch by method name (``robust`` or ``damped``; ``w_max`` and ``fallbacks`` are the robust solver's)."""
    if method == "damped":
        return damped_iteration(fn, start, damping=damping, tol=tol, max_iterations=max_iterations, record=record)
    if method == "robust":
        return robust_solve(
            fn, start, tol=tol, max_iterations=max_iterations, jacobian=jacobian, w_shift=w_shift, w_max=w_max, fallbacks=fallbacks
        )
    raise ValueError(f"method: unknown fixed-point method {method!r} (valid: {list(METHODS)})")
