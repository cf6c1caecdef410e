"""Fig. 6: per-tier mean wait ``W̄_s`` across fixed-point iterations (docs/model.md §7).

The paper's damped iteration (eq. (34), ``η = 0.3`` from ``W̄⁰ = 0``) and the package's robust
solver (Newton on the log-delay residual) are run on the same operating point; the robust
path is read from the association calls it makes (a recording kernel), the damped one from
its own history.  The paper's reading: the deep tier first attracts the long requests and
develops the largest delay, its advertised cost then pushes demand to shallower tiers, and
the iteration settles after a few effective updates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.benchmarks.paper.calibration import checks
from edgeprefix.benchmarks.paper.figures._common import (
    check_point,
    finish,
    point,
    resolve_instance,
    result,
    subtitle,
)
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.model.spatial import AnalyticKernel

FIGURE = 6
INTENSITY = 3.0  # Λ of the operating point (Fig. 8's moderate load)
FloatArray = npt.NDArray[np.float64]


@dataclass
class RecordingKernel:
    """The analytic kernel, recording the normalised biases ``b = β/ξ`` of every association call."""

    inner: AnalyticKernel = field(default_factory=AnalyticKernel)
    calls: list[FloatArray] = field(default_factory=list)
    provides_jacobian = True

    def association(self, lam: FloatArray, b: FloatArray, alpha: float) -> FloatArray:
        self.calls.append(np.array(b))
        return self.inner.association(lam, b, alpha)

    def association_jacobian(self, lam: FloatArray, b: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
        self.calls.append(np.array(b))
        return self.inner.association_jacobian(lam, b, alpha)

    def truncated(self, *args: Any) -> tuple[FloatArray, FloatArray]:
        return self.inner.truncated(*args)

    def moments(self, *args: Any) -> tuple[FloatArray, FloatArray]:
        return self.inner.moments(*args)

    def error(self, *args: Any) -> float:
        return self.inner.error(*args)


def robust_path(instance: Instance, intensity: float) -> tuple[list[FloatArray], Any]:
    """Advertised ``W̄`` (active tiers) at every evaluation of the robust solver, and its evaluation."""
    kernel = RecordingKernel()
    inst = instance.with_network(request_intensity=intensity)
    ev = evaluate(inst, None, "load_aware", method="robust", kernel=kernel)
    g = inst.residual_prefill[ev.active][:, 0]
    xi = inst.network.radio_scale
    return [xi * b[:, 0] - g for b in kernel.calls], ev


def run(
    quick: bool = False,
    out: Path | str | None = None,
    instance: Instance | str | None = None,
    *,
    intensity: float = INTENSITY,
    echo: bool = True,
) -> dict[str, Any]:
    """Damped vs robust iterates of ``W̄_s``; ``iterations`` reports both counts."""
    inst = resolve_instance(instance).with_network(request_intensity=intensity)
    damped = evaluate(inst, None, "load_aware", method="damped", record_history=True)
    damped_fp = damped.fixed_point
    assert damped_fp is not None  # the load-aware policy solves the fixed point
    history = [np.asarray(w) for w in damped_fp.history]
    robust, ev = robust_path(inst, intensity)
    ids = [sid for sid, on in zip(inst.profile_ids, damped.active) if on]
    shown = history if not quick else history[: min(len(history), 60)]
    points = []
    for k, w in enumerate(shown):
        for sid, value in zip(ids, w):
            points.append(point(f"damped/{sid}", k, float(value)))
    for k, w in enumerate(robust):
        for sid, value in zip(ids, w):
            points.append(point(f"robust/{sid}", k, float(value)))
    final_damped = dict(zip(ids, map(float, damped.advertised_wait[damped.active])))
    final_robust = dict(zip(ids, map(float, ev.advertised_wait[ev.active])))
    peak = {sid: float(max(w[i] for w in history)) for i, sid in enumerate(ids)} if history else {}
    deepest = inst.profile_ids[int(np.argmax(inst.memory))]
    rivals = [w for sid, w in final_robust.items() if sid != deepest]
    if deepest in final_robust and rivals:
        points.append(
            check_point(
                checks.Check(
                    FIGURE, f"{deepest} tier's delay − largest other tier's", "final", final_robust[deepest] - max(rivals), 0.0, ">"
                )
            )
        )
    points.append(
        check_point(
            checks.Check(
                FIGURE,
                "damped vs robust fixed point: max |ΔW̄|",
                "final",
                max(abs(final_damped[s] - final_robust[s]) for s in ids),
                1e-6,
                "≤",
            )
        )
    )
    payload = result(
        FIGURE,
        f"mean wait per tier across fixed-point iterations (Λ = {intensity:g})",
        points,
        instance=inst.name,
        intensity=intensity,
        iterations={"damped": damped_fp.iterations, "robust": ev.fixed_point.evaluations},
        converged={"damped": damped_fp.converged, "robust": ev.fixed_point.converged},
        final_wait={"damped": final_damped, "robust": final_robust},
        peak_wait_damped=peak,
    )

    def draw(fig) -> None:
        left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        for i, sid in enumerate(ids):
            left.plot([w[i] for w in history], label=sid)
            right.plot([w[i] for w in robust], marker="o", label=sid)
        left.set_title(f"(a) damped η = 0.3: {damped_fp.iterations} iterations", fontsize=9)
        right.set_title(f"(b) robust: {ev.fixed_point.evaluations} evaluations", fontsize=9)
        fig.suptitle(
            f"Fig. 6: per-tier mean wait across fixed-point iterations\n{subtitle(inst, f'load-aware, Λ = {intensity:g}, default mix')}",
            fontsize=10,
        )
        for ax in (left, right):
            ax.set_xlabel("iteration")
            ax.set_ylabel("advertised $\\bar W_s$ [s]")
            ax.legend()

    return finish(payload, out, draw, echo=echo, size=(10.0, 4.0))
