"""Per-node load correction of the analytical coverage (docs/model.md §13.1).

The analysis gives every node of tier ``s`` the same Poisson arrival rate ``λq_s``.  In a
PPP the serving regions differ in size, so node loads differ: write the rate of a node as
``λq_s X`` with ``E[X] = 1`` and ``X`` Gamma-distributed — the area of a Poisson–Voronoi
cell is close to a Gamma law of shape ``k ≈ 3.5``.  A *request* lands in a node with
probability proportional to its load, so the load it meets is size-biased:
``X ~ Gamma(k + 1, scale 1/k)``.  The corrected waiting-time law of tier ``s`` is

``F̃_{W_s}(w) = E_X[ 1{ρ_s X < 1} (1 − P^W(a_s X, c_s) exp(−(c_s μ_s − λq_s X) w)) ]``,

(an overloaded node, ``ρ_s X ≥ 1``, contributes nothing, as in docs/model.md §5) and coverage is
eq. (39) with ``F̃`` in place of ``F_W``.  Optionally the multi-class service variability is
added the Allen–Cunneen way (decay rate scaled by ``2 / (1 + C_S²)``).
"""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np
import numpy.typing as npt
from scipy import special

from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.queueing import erlang_c
from edgeprefix.placement.simulation.reference import joint_density, radial_grid

FloatArray = npt.NDArray[np.float64]
VORONOI_SHAPE = 3.5  # Gamma shape of the normalised Poisson–Voronoi cell area


def load_distribution(shape: float = VORONOI_SHAPE, *, size_biased: bool = True, points: int = 512) -> tuple[FloatArray, FloatArray]:
    """Equal-probability nodes ``X_j`` and weights of the per-node load factor.

    ``Gamma(k, 1/k)`` (per node) or its size-biased version ``Gamma(k + 1, 1/k)`` (seen by
    a request); ``shape = inf`` gives the analysis (``X ≡ 1``).
    """
    if not shape > 0:
        raise ValueError(f"shape: Gamma shape k must be > 0, got {plain(shape)}")
    if not np.isfinite(shape):
        return np.ones(1), np.ones(1)
    u = (np.arange(points) + 0.5) / points
    # the Gamma(a, 1/k) quantiles, as scipy.stats.gamma(a, scale=1/k).ppf gives them (scipy.stats is slow to import)
    quantiles = special.gammaincinv(shape + 1.0 if size_biased else shape, u) * (1.0 / shape)
    return quantiles, np.full(points, 1.0 / points)


def _route_sampled_requests(evaluation, mean_nodes: float, points_per_node: int, rng: np.random.Generator):
    """One torus network (exact profile counts) and ``points_per_node`` uniform requests per node,
    types by ``p_q``, each routed by Theorem 1's rule ``argmin_s ξ R_s^α + β_{s,q}``.

    Returns ``(layout, kind, pick, node, r)``: request type, chosen profile, chosen node and its
    distance for every sampled request.
    """
    from edgeprefix.placement.simulation.layout import (  # local: avoid a cycle at import
        LayoutSpec,
        sample_layout,
    )
    from edgeprefix.placement.simulation.nearest import nearest_per_profile

    inst = evaluation.instance
    layout = sample_layout(inst, evaluation.mix, LayoutSpec(mean_nodes=mean_nodes, counts="exact"), seed=rng)
    n = layout.nodes * int(points_per_node)
    points = rng.random((n, 2)) * layout.side
    p = np.asarray(inst.probabilities, dtype=float)
    kind = rng.choice(p.size, size=n, p=p / p.sum())
    s_count = len(inst.profiles)
    # remembered: validate routes the same sampled points at every intensity and policy
    nearest, dist = nearest_per_profile(layout, points, 1, s_count)
    xi, alpha = inst.network.radio_scale, inst.network.radio_exponent
    bias = np.nan_to_num(np.asarray(evaluation.bias, dtype=float), nan=np.inf)
    pick = np.argmin(xi * dist**alpha + bias[:, kind].T, axis=1)
    rows = np.arange(n)
    return layout, kind, pick, nearest[rows, pick], dist[rows, pick]


def sample_load_factors(
    evaluation, *, mean_nodes: float = 2000.0, points_per_node: int = 500, seed: int | np.random.Generator | None = None
) -> list[FloatArray]:
    """Monte Carlo law of the per-node load factor ``X`` under the evaluation's routing.

    Draws a torus network with exact profile counts (:class:`LayoutSpec` ``counts="exact"``),
    throws ``points_per_node`` uniform request locations per node with types by ``p_q``,
    routes each by Theorem 1's rule (``argmin_s ξ R_s^α + β_{s,q}``) and sums, per node,
    the offered work ``Σ 1/μ_{s,q}`` of its requests: ``X_x = a_x / mean_{tier}(a)``.  Work,
    not counts: under biased routing a large cell draws a different type mix (long
    requests from afar), so its offered load differs from its arrival count.  No queue is simulated; the
    result feeds :func:`corrected_coverage` (``load_factors=``) in place of a Gamma law.
    Returns one array per profile (empty for inactive tiers).
    """
    inst = evaluation.instance
    layout, kind, pick, chosen, _ = _route_sampled_requests(evaluation, mean_nodes, points_per_node, np.random.default_rng(seed))
    s_count = len(inst.profiles)
    work = np.asarray(inst.service_time, dtype=float)[pick, kind]  # 1/μ_{s,q}: offered work
    counts = np.bincount(chosen, weights=work, minlength=layout.nodes)
    out = []
    for s in range(s_count):
        c = counts[layout.profile == s]
        out.append(c / c.mean() if c.size and c.mean() > 0 else np.empty(0))
    return out


def service_scv(instance, association: npt.ArrayLike) -> FloatArray:
    """Squared coefficient of variation ``C_S²`` of the per-tier service mixture.

    Per-type exponential occupancies of mean ``1/μ_{s,q}`` mixed with ``ω_{s,q}``:
    ``E[S²] = Σ_q ω 2/μ_{s,q}²`` and ``C² = E[S²]/E[S]² − 1``.
    """
    a = np.asarray(association, dtype=float)
    flow = np.asarray(instance.probabilities)[None, :] * a
    total = flow.sum(axis=1, keepdims=True)
    omega = np.divide(flow, total, out=np.zeros_like(flow), where=total > 0)
    m = np.asarray(instance.service_time, dtype=float)
    mean = (omega * m).sum(axis=1)
    second = (omega * 2.0 * m**2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mean > 0, second / mean**2 - 1.0, 1.0)


def corrected_coverage(
    evaluation,
    tau: float | None = None,
    *,
    shape: float | npt.ArrayLike = VORONOI_SHAPE,
    size_biased: bool = True,
    scv: bool = False,
    load_factors=None,
    load_points: int = 512,
    radial_points: int = 4001,
) -> float:
    """TTFT coverage ``P_cov(τ)`` with the queue averaged over the per-node load law.

    Parameters
    ----------
    evaluation : a :class:`edgeprefix.placement.model.evaluation.Evaluation` (association, ``β_{s,q}``,
        ``λ_s``, ``λq_s``, ``1/μ_s`` are taken from it; routing is unchanged).
    tau : target ``τ`` (default: the evaluation's).
    shape : Gamma shape ``k`` of the per-node load, scalar or per tier (``inf``: no
        correction, which reproduces eq. (39)).
    size_biased : average over the load seen by a request (default) or by a node.
    scv : also scale the waiting decay by ``2/(1 + C_S²)`` (multi-class service).
    load_factors : optional per-tier samples of the per-node load factor ``X`` (e.g. from
        :func:`sample_load_factors` or a simulation's node arrivals); used instead of the
        Gamma law, size-biased by weighting each sample by ``X`` when ``size_biased``.
    """
    inst = evaluation.instance
    tau = float(evaluation.target if tau is None else tau)
    act = np.asarray(evaluation.active, dtype=bool)
    lam = np.asarray(evaluation.densities, dtype=float)[act]
    bias = np.asarray(evaluation.bias, dtype=float)[act]
    g = np.asarray(inst.first_token_time, dtype=float)[act]  # g(L_q − h_{s,q}) in the paper's model
    c = np.asarray(inst.concurrency, dtype=float)[act]
    arrivals = np.asarray(evaluation.arrival_rate, dtype=float)[act]
    mean_service = np.asarray(evaluation.mean_service, dtype=float)[act]
    xi, alpha = inst.network.radio_scale, inst.network.radio_exponent
    shapes = np.broadcast_to(np.asarray(shape, dtype=float), (act.size,))[act]
    scale = (2.0 / (1.0 + service_scv(inst, evaluation.association)[act])) if scv else np.ones(lam.size)

    r = radial_grid(lam, radial_points)
    f = joint_density(r, lam, bias, xi, alpha)  # (S, Q, R)
    slack = tau - xi * r[None, None, :] ** alpha - g[:, :, None]  # time left for the queue
    cdf = np.zeros_like(f)
    for s in range(lam.size):
        if load_factors is not None:
            x = np.asarray(load_factors[np.flatnonzero(act)[s]], dtype=float)
            x = x / x.mean()
            wts = x / x.sum() if size_biased else np.full(x.size, 1.0 / x.size)
        else:
            x, wts = load_distribution(shapes[s], size_biased=size_biased, points=load_points)
        offered = arrivals[s] * mean_service[s] * x
        stable = offered < c[s]
        pw = np.asarray(erlang_c(offered[stable], np.full(stable.sum(), c[s])), dtype=float)
        decay = (c[s] - offered[stable]) / mean_service[s] * scale[s]
        reached = slack[s] >= 0  # elsewhere the coverage is 0: the load points' sum is formed where it counts
        w = slack[s][reached][:, None]  # (pairs reached, 1)
        tail = (wts[stable] * pw * np.exp(-decay * w)).sum(axis=-1)
        cdf[s][reached] = wts[stable].sum() - tail
    pairs = np.trapezoid(f * cdf, r, axis=-1)  # (S, Q)
    return float(np.clip((np.asarray(inst.probabilities) * pairs.sum(axis=0)).sum(), 0.0, 1.0))


Seed = int | np.integer[Any] | np.random.Generator | None


@overload
def node_erlang_coverage(
    evaluation: Any,
    tau: float | None = None,
    *,
    mean_nodes: float = 2000.0,
    points_per_node: int = 500,
    seed: Seed = None,
    with_queue_free: Literal[False] = False,
) -> float: ...
@overload
def node_erlang_coverage(
    evaluation: Any,
    tau: float | None = None,
    *,
    mean_nodes: float = 2000.0,
    points_per_node: int = 500,
    seed: Seed = None,
    with_queue_free: Literal[True],
) -> tuple[float, float]: ...
def node_erlang_coverage(
    evaluation: Any,
    tau: float | None = None,
    *,
    mean_nodes: float = 2000.0,
    points_per_node: int = 500,
    seed: Seed = None,
    with_queue_free: bool = False,
) -> float | tuple[float, float]:
    """Coverage with one Erlang-C queue per node, loads and distances sampled jointly.

    Spatial Monte Carlo, no queue simulation: a torus network (exact profile counts),
    ``points_per_node`` uniform requests per node routed by Theorem 1's rule; node ``x``
    gets ``λ_x = Λ · area · n_x / n``, offered load ``a_x`` from its own requests' ``1/μ_{s,q}``,
    and its own ``P^W_x``, decay ``(c_x − a_x)/m̄_x``.  Coverage is the average over the
    sampled requests of ``F_{W_x}(τ − ξ r^α − g(L_q − h_{s,q}))``, so the correlation
    between a large cell, a far request and a heavy queue is kept (it is lost when the
    load law is averaged independently, as in :func:`corrected_coverage`).  With ``with_queue_free``
    also the sample's queue-free coverage ``P(ξ r^α + g ≤ τ)`` (a control variate: eq. (39) with
    ``F_W ≡ 1`` is its exact expectation).
    """
    inst = evaluation.instance
    tau = float(evaluation.target if tau is None else tau)
    layout, kind, pick, node, r = _route_sampled_requests(evaluation, mean_nodes, points_per_node, np.random.default_rng(seed))
    n = kind.size
    xi, alpha = inst.network.radio_scale, inst.network.radio_exponent
    service = np.asarray(inst.service_time, dtype=float)[pick, kind]
    per_point = inst.network.request_intensity * layout.area / n  # arrival rate each point stands for
    arrivals = np.bincount(node, minlength=layout.nodes) * per_point
    work = np.bincount(node, weights=service, minlength=layout.nodes) * per_point  # a_x
    c = layout.servers.astype(float)
    mean_service = np.divide(work, arrivals, out=np.ones_like(work), where=arrivals > 0)
    stable = work < c
    pw = np.ones(layout.nodes)
    pw[stable] = np.asarray(erlang_c(work[stable], c[stable]), dtype=float)
    decay = np.where(stable, (c - work) / mean_service, 0.0)
    slack = tau - xi * r**alpha - np.asarray(inst.first_token_time, dtype=float)[pick, kind]
    ok = stable[node] & (slack >= 0)
    cdf = np.where(ok, 1.0 - pw[node] * np.exp(-decay[node] * np.maximum(slack, 0.0)), 0.0)
    if with_queue_free:
        return float(cdf.mean()), float(np.mean(slack >= 0))
    return float(cdf.mean())
