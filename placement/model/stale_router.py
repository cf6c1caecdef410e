"""The online router under old telemetry: a mean field of the bulletin-board model (docs/model.md §11).

The online router of docs/model.md §11 sends a type-``q`` request to the node of least
``ξ r^α + g_{s,q} + Ŵ_x``, with ``Ŵ_x = max(0, n_x − c_s + 1) m̄_s / c_s`` read from telemetry.  When the
reads are old every router sends its requests to the nodes that *looked* idle (herding).  This module
predicts that cost from three pieces (derivation in docs/model.md §11, eqs. (11.10)–(11.14)):

1. **Catchment of a node that shows ``n``** (marked PPP, Slivnyak): the other nodes of tier ``t`` form a
   PPP of intensity ``λ_t`` with i.i.d. shown states of law ``β_t``; a request at distance ``r`` from a
   tier-``s`` node showing ``Ŵ`` goes to it with probability
   ``P_{s,q}(r, Ŵ) = exp(−π Σ_t λ_t E_{n'~β_t} max(0, r^α + (g_{s,q} + Ŵ − g_{t,q} − Ŵ_t(n'))/ξ)^{2/α})``,
   so the node's type-``q`` arrival rate is ``λ_{s,q}(n) = Λ p_q ∫ 2π r P_{s,q}(r, Ŵ(n)) dr`` (the best
   node over all candidates: ``k`` per profile is taken as unlimited).
2. **One node's queue under a board of period ``h``** (Mitzenmacher's bulletin board): during a phase
   the node shows the state ``j`` it had at the phase start and receives Poisson arrivals of rate
   ``λ_s(j)``; it serves ``min(n, c_s)`` at rate ``μ_s``.  The board states form a Markov chain
   ``T_{jk} = P(n(h) = k | n(0) = j)`` (uniformisation of the birth–death generator), its stationary law
   is ``β_s``, and an arrival in a phase that started at ``j`` meets the phase-average law ``p̄_j``.
   ``h = 0`` (fresh telemetry) is the birth–death chain with rate ``λ_s(n)`` in state ``n``.
3. **The equivalent board period**: a node that empties at ``t_0`` is shown idle from ``t_0 + D`` and
   flooded until its own arrivals are reported (``D`` seconds), and then keeps attracting requests while
   the board replays its rising queue (up to ``D`` more): ``h ∈ [D, 2D]``.  The model takes the board whose
   reads have the telemetry's mean age, ``Δt/2 + D``: ``h = Δt + 2D`` (docs/model.md (11.13)).

The fixed point ``β_t → λ_{s,q}(·) → β_s`` is iterated (damped).  The prediction is eq. (39)'s coverage
plus the node model's change from fresh telemetry, ``P_cov(h) = P^{(39)} + (P^{node}(h) − P^{node}(0))``,
so ``D = Δt = 0`` returns eq. (39)'s number itself, and at light load (no queue) nothing changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.special import gammainc, gammaincc, roots_legendre

from edgeprefix.placement.model.telemetry import Telemetry

FloatArray = npt.NDArray[np.float64]
RADIAL_NODES = 96  # Gauss–Legendre nodes in sqrt of the area variable x = π λ_b r^{2} on [0, X_MAX]
X_MAX = 40.0
ITERATIONS = 200
DAMPING = 0.8  # weight of the new iterate
TOLERANCE = 1e-6
EXTRA_STATES = 40  # states kept above c_s, plus what a flood of length h can add (grown until the tail is < 1e-9)
MAX_STATES = 1200
MARK_FLOOR = 1e-9  # shown states of less mass are left out of the competitors' marks
MARK_ATOMS = 16  # atoms of a competitor tier's shown-wait law
OWN_DENSE = 12  # own shown states computed one by one (then OWN_TAIL geometric ones, interpolated)
OWN_TAIL = 12
NEAR_EDGE_UTILIZATION = 0.85  # busiest tier's eq. (39) load from which the fresh prediction's bias grows (11.17)
NEAR_EDGE_BIAS = (0.0, 0.07)  # eq. (39) − simulated fresh online router, measured there (benchmarks/README.md §11)
INSIDE_BIAS = (-0.02, 0.04)  # ... and below it (mooncake_small at 55 % of the edge: +0.039 at a busiest load of 0.67)
CLOSED = 1e6  # seconds added to the shown delay of a node closed by admission control (never preferred)
CANDIDATES = (1, 2)  # k nearest per profile with a closed form (the online router of docs/model.md §11 uses 2)
METHODS = ("meanfield", "sampled")  # the node model of this module; the sampled network (docs/model.md (11.19))


def flood_length(telemetry: Telemetry) -> float:
    """``h = Δt + 2D``: the board period whose reads have the telemetry's mean age ``Δt/2 + D`` (module docstring,
    item 3; docs/model.md (11.13))."""
    return float(telemetry.refresh) + 2.0 * float(telemetry.delay)


@dataclass(frozen=True)
class NodeModel:
    """The node-level mean field at one flood length (``h = 0``: fresh telemetry)."""

    flood: float
    coverage: float
    mean_ttft: float
    utilization: FloatArray  # time-average busy servers / c_s per tier
    shown: tuple[FloatArray, ...] = field(repr=False)  # β_s over n = 0..N_s
    arrival_rate: FloatArray = field(repr=False)  # mean λ_s per node (arrivals / s)
    iterations: int = 0
    truncation: float = 0.0  # largest probability mass at the top state N_s
    residual: float = 0.0


@dataclass(frozen=True)
class StaleRouterPrediction:
    """The online router's prediction at a telemetry age (docs/model.md §11).

    ``coverage``, ``mean_ttft``, ``utilization``: eq. (39)'s figures plus the node model's change from
    fresh telemetry; ``node``/``fresh_node``: the node model at the flood length and at ``h = 0``.
    """

    telemetry: Telemetry
    target: float
    coverage: float
    mean_ttft: float
    utilization: FloatArray
    meanfield_coverage: float
    node: NodeModel | None = field(default=None, repr=False)
    meanfield_utilization: FloatArray | None = field(default=None, repr=False)  # eq. (39)'s tier loads
    fresh_node: NodeModel | None = field(default=None, repr=False)
    method: str = "meanfield"  # how the age was modelled (METHODS); fresh: eq. (39) for the mean field, sampled for "sampled"
    coverage_se: float | None = None  # the sampled prediction's standard error (None: not sampled)

    def to_dict(self) -> dict:
        return {
            "telemetry": {"delay": float(self.telemetry.delay), "refresh": float(self.telemetry.refresh)},
            "flood_length": flood_length(self.telemetry),
            "coverage": float(self.coverage),
            "mean_ttft": float(self.mean_ttft),
            "utilization": [float(v) for v in self.utilization],
            "meanfield_coverage": float(self.meanfield_coverage),
            "node_coverage": None if self.node is None else float(self.node.coverage),
            "fresh_node_coverage": None if self.fresh_node is None else float(self.fresh_node.coverage),
            "fresh_region": fresh_region(self.meanfield_utilization),
            "method": self.method,
            "coverage_se": None if self.coverage_se is None else float(self.coverage_se),
        }


def predict_online(
    instance,
    mix=None,
    telemetry: Telemetry | None = None,
    *,
    target: float | None = None,
    evaluation=None,
    fresh: NodeModel | None = None,
    margin: float = 0.0,
    local_accounting: bool = False,
    sample: int = 0,
    admission: float = math.inf,
    method: str = "meanfield",
) -> StaleRouterPrediction:
    """Coverage at ``target``, mean TTFT and tier loads of the online router at ``telemetry``.

    ``method``: ``"meanfield"`` (the node model of this module, anchored on eq. (39), docs/model.md (11.14)) or
    ``"sampled"`` (the network sampled under the telemetry, :func:`edgeprefix.placement.model.sampled_router.predict_sampled`,
    docs/model.md (11.19)).  Fresh telemetry without a mitigation is eq. (39) itself for the mean field (bit for
    bit); the sampled method samples it like every other age, which corrects eq. (39)'s bias near the stability
    edge (docs/model.md (11.17), (11.19); :func:`edge_region` states where that bias was measured).

    Mitigations (docs/model.md (11.15)): ``margin`` ``z_δ`` adds ``z_δ sqrt(k_x) m̄_s / c_s`` to the shown
    delay (the age term of ``σ̂`` is the same for every candidate, so it does not change the choice);
    ``local_accounting``: the router counts its own sends since the read, so a node is shown with its
    current queue plus the departures it has not reported, ``n + min(n, c_s) μ_s ω`` with ``ω = D + Δt/2``
    (the mean report age), and the queue is fed back at once (``h = 0``).

    ``evaluation``: the load-aware mean-field evaluation of ``instance`` (computed when None); ``fresh``:
    the node model at ``h = 0`` of the same instance, mix and target (a previous prediction's
    ``fresh_node``; computed when None).  With the mean field, fresh telemetry returns eq. (39)'s coverage, mean
    TTFT and loads unchanged.
    """
    from edgeprefix.placement.model.evaluation import evaluate

    telemetry = Telemetry() if telemetry is None else telemetry
    tau = float(instance.placement.target if target is None else target)
    ev = evaluate(instance, mix, "load_aware", target=tau) if evaluation is None else evaluation
    base_cov = float(ev.coverage(tau))
    base_ttft = float(ev.mean_ttft)
    base_util = np.asarray(ev.utilization, dtype=float)
    if margin < 0 or not math.isfinite(margin):
        raise ValueError(f"margin: z_δ must be a finite number >= 0, got {margin}")
    h = flood_length(telemetry)
    window = float(telemetry.delay) + 0.5 * float(telemetry.refresh)
    if method not in METHODS:
        raise ValueError(f"method: unknown {method!r} (valid: {list(METHODS)})")
    if method == "meanfield" and h == 0.0 and margin == 0.0 and sample == 0 and admission == math.inf:
        return StaleRouterPrediction(
            telemetry, tau, base_cov, base_ttft, base_util, base_cov, meanfield_utilization=base_util, method=method
        )
    if method == "sampled":  # every age, fresh telemetry included: the network sampled (docs/model.md (11.19))
        from edgeprefix.placement.model.sampled_router import predict_sampled

        got = predict_sampled(
            instance, mix, telemetry, target=tau, margin=margin, local_accounting=local_accounting, sample=sample, admission=admission
        )
        return StaleRouterPrediction(
            telemetry=telemetry,
            target=tau,
            coverage=got.coverage,
            mean_ttft=got.mean_ttft,
            utilization=got.utilization,
            meanfield_coverage=base_cov,
            meanfield_utilization=base_util,
            method=method,
            coverage_se=got.coverage_se,
        )
    fresh = node_model(instance, ev, 0.0, tau) if fresh is None else fresh
    stale = node_model(
        instance,
        ev,
        0.0 if local_accounting else h,
        tau,
        start=fresh.shown,
        margin=margin,
        overcount=window if local_accounting else 0.0,
        sample=sample,
        admission=admission,
    )
    return StaleRouterPrediction(
        telemetry=telemetry,
        target=tau,
        coverage=float(min(max(base_cov + stale.coverage - fresh.coverage, 0.0), 1.0)),
        mean_ttft=base_ttft + stale.mean_ttft - fresh.mean_ttft,
        utilization=base_util + np.where(np.isfinite(base_util), stale.utilization - fresh.utilization, 0.0),
        meanfield_coverage=base_cov,
        node=stale,
        fresh_node=fresh,
        meanfield_utilization=base_util,
    )


EDGE_REGION = (0.55, 0.95)  # fractions of the load-aware stability edge where eq. (39)'s fresh bias was measured large
EDGE_BIAS = (0.008, 0.066)  # eq. (39) − simulated fresh online router there (55, 70, 85 % of the edge; docs/model.md (11.17))
BELOW_EDGE_BIAS = (-0.010, 0.008)  # ... and at 15 % of the edge (the three instances of benchmarks/README.md §11)
EDGE_STEPS = 12  # bisection steps of the stability edge (relative precision 2^-12)


def stability_edge(instance, mix=None, *, target: float | None = None, steps: int = EDGE_STEPS) -> float:
    """Largest ``Λ`` at which the load-aware mean-field operating point of ``mix`` keeps every tier stable (bisection
    on ``network.request_intensity``; inf when no ``Λ`` up to 2^40 times the instance's, or up to the accepted range of
    ``network.request_intensity``, destabilises it)."""
    from edgeprefix.placement.model.evaluation import evaluate

    def stable(lam: float) -> bool:
        return bool(evaluate(instance.with_network(request_intensity=lam), mix, "load_aware", target=target).stable)

    lo, hi = 0.0, float(instance.network.request_intensity)
    for _ in range(40):
        try:
            if not stable(hi):
                break
        except ValueError:  # Λ beyond network.request_intensity's accepted range: still stable there
            return math.inf
        lo, hi = hi, 2.0 * hi
    else:
        return math.inf
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if stable(mid) else (lo, mid)
    return lo


def edge_region(instance, mix=None, *, target: float | None = None, method: str = "meanfield", edge: float | None = None) -> dict:
    """Where the operating point lies against the stability edge, and what eq. (39)'s fresh prediction was measured to
    miss there (docs/model.md (11.17)): ``edge_fraction`` ``Λ / Λ_edge``, ``region`` :data:`EDGE_REGION`, ``in_region``,
    ``bias_measured`` (eq. (39) − simulated fresh online router, :data:`EDGE_BIAS` in the region,
    :data:`BELOW_EDGE_BIAS` below it, None beyond it: not measured), ``corrected`` (the sampled method samples fresh
    telemetry too, so the bias is not in its prediction) and a one-line ``note``.  ``edge``: the stability edge of
    ``mix`` when known (:func:`stability_edge`; it does not depend on the instance's own ``Λ``)."""
    edge = stability_edge(instance, mix, target=target) if edge is None else float(edge)
    frac = float(instance.network.request_intensity) / edge if math.isfinite(edge) and edge > 0 else 0.0
    lo_r, hi_r = EDGE_REGION
    inside = bool(lo_r <= frac <= hi_r)
    bias = EDGE_BIAS if inside else (BELOW_EDGE_BIAS if frac < lo_r else None)
    corrected = method == "sampled"
    where = f"{frac:.0%} of the load-aware stability edge" if math.isfinite(edge) else "no load-aware stability edge found"
    if bias is None:
        note = f"{where}: beyond the measured {lo_r:.0%}–{hi_r:.0%}; eq. (39)'s fresh bias is not measured here"
    else:
        span = f"{bias[0]:+.3f}…{bias[1]:+.3f}"
        region = f"inside the near-edge region {lo_r:.0%}–{hi_r:.0%}" if inside else f"below the near-edge region {lo_r:.0%}–{hi_r:.0%}"
        note = f"{where} ({region}): eq. (39) was measured {span} above the simulated fresh online router"
    note += (
        "; the sampled prediction samples fresh telemetry too, so it does not carry that bias, docs/model.md (11.19)"
        if corrected
        else "; --telemetry-model sampled corrects it, docs/model.md (11.17)"
    )
    return {
        "edge_fraction": frac,
        "stability_edge": edge,
        "region": [lo_r, hi_r],
        "in_region": inside,
        "bias_measured": None if bias is None else [bias[0], bias[1]],
        "corrected": corrected,
        "note": note,
    }


def fresh_region(utilization: FloatArray | None) -> dict | None:
    """Where eq. (39) stands for the fresh online router (docs/model.md (11.17)): the busiest tier's load and,
    at or above :data:`NEAR_EDGE_UTILIZATION` (near the stability edge), the measured bias ``[lo, hi]`` of eq. (39)
    against the simulated router (prediction − simulation), else the bias measured below it."""
    if utilization is None:
        return None
    load = np.asarray(utilization, dtype=float)
    busiest = float(np.nanmax(load)) if np.isfinite(load).any() else float("nan")
    near = bool(busiest >= NEAR_EDGE_UTILIZATION)
    lo, hi = NEAR_EDGE_BIAS if near else INSIDE_BIAS
    return {"max_utilization": busiest, "near_edge": near, "bias_measured": [lo, hi]}


def _radial(edge_density: float) -> tuple[FloatArray, FloatArray]:
    """Area nodes ``v = r²`` and weights of ``∫ π (·) dv`` on ``x = π λ_b v ∈ [0, X_MAX]`` (``x = y²``)."""
    y, w = roots_legendre(RADIAL_NODES)
    y = 0.5 * (y + 1.0) * math.sqrt(X_MAX)
    w = 0.5 * w * math.sqrt(X_MAX)
    x = y**2
    return x / (math.pi * edge_density), w * 2.0 * y / edge_density  # dv π = dx / λ_b; dx = 2 y dy


def _states(c: int, cmu: float, peak: float, h: float) -> int:
    return int(min(MAX_STATES, c + EXTRA_STATES + math.ceil(2.0 * max(peak - cmu, 0.0) * h)))


def node_model(
    instance,
    ev,
    h: float,
    tau: float,
    *,
    k: int = 2,
    start: tuple[FloatArray, ...] | None = None,
    margin: float = 0.0,
    overcount: float = 0.0,
    sample: int = 0,
    admission: float = math.inf,
) -> NodeModel:
    """The fixed point of the node-level bulletin-board mean field at flood length ``h`` (module docstring).

    ``margin``: ``z_δ`` of the robust margin on the shown delay; ``overcount``: seconds of unreported
    departures in the shown count (local accounting, :func:`predict_online`); ``sample``: ``d`` of the
    power of ``d`` (0: every candidate); ``admission``: ``ρ`` of the admission threshold (a node shown with
    ``n ≥ ρ c_s`` is closed; docs/model.md (11.16)).
    """
    if k not in CANDIDATES:
        raise ValueError(f"candidates_per_profile: the stale-telemetry model has k in {list(CANDIDATES)}, got {k}")
    if not (isinstance(sample, (int, np.integer)) and sample >= 0):
        raise ValueError(f"sample: d of the power of d must be an integer >= 0 (0: every candidate), got {sample}")
    if not admission > 0:
        raise ValueError(f"admission: the threshold ρ must be > 0 (inf: no admission control), got {admission}")
    act = np.flatnonzero(np.asarray(ev.active, dtype=bool))
    lam_s = np.asarray(ev.densities, dtype=float)[act]
    c = np.asarray(instance.concurrency, dtype=np.int64)[act]
    p = np.asarray(instance.probabilities, dtype=float)
    g = np.asarray(instance.first_token_time, dtype=float)[act]  # (S, Q)
    shown_unit = (np.asarray(instance.service_time, dtype=float) @ p)[act] / c  # m̄_s / c_s
    mu = 1.0 / np.asarray(ev.mean_service, dtype=float)[act]
    net = instance.network
    xi, alpha, big_lambda = net.radio_scale, net.radio_exponent, net.request_intensity
    v, wv = _radial(float(lam_s.sum()))
    radio = xi * v ** (alpha / 2.0)  # ξ r^α at each area node
    s_count = act.size
    # per-node rate bound for the truncation: every request of the disc around the node
    peak = big_lambda / lam_s
    sizes = [_states(int(c[s]), float(c[s] * mu[s]), float(peak[s]), h) for s in range(s_count)]
    shown_wait = []
    for s, n in enumerate(sizes):
        state = np.arange(n + 1)
        ahead = np.maximum(state + overcount * mu[s] * np.minimum(state, c[s]) - c[s] + 1, 0.0)
        wait = (ahead + margin * np.sqrt(ahead)) * shown_unit[s]
        shown_wait.append(np.where(state >= admission * c[s], wait + CLOSED, wait))
    sampled = 0 if sample >= k * s_count else int(sample)  # d >= K: every candidate, the best-choice router
    if start is not None and len(start) == len(sizes):  # a previous law, cut or padded to these states
        beta = [np.r_[b[: n + 1], np.zeros(max(n + 1 - b.size, 0))] for b, n in zip(start, sizes)]
        beta = [b / b.sum() for b in beta]
    else:
        beta = [np.r_[1.0, np.zeros(n)] for n in sizes]
    lam_q = None
    residual, it = np.inf, 0
    for it in range(1, ITERATIONS + 1):
        lam_q, win = _catchment(beta, shown_wait, lam_s, g, radio, wv, xi, alpha, big_lambda * p, k, sampled)
        new = [_board(lam_q[s].sum(axis=0), int(c[s]), float(mu[s]), h)[0] for s in range(s_count)]
        residual = max(float(np.abs(b - n).max()) for b, n in zip(beta, new))
        beta = [DAMPING * n + (1.0 - DAMPING) * b for b, n in zip(beta, new)]
        if residual < TOLERANCE:
            break
    lam_q, win = _catchment(beta, shown_wait, lam_s, g, radio, wv, xi, alpha, big_lambda * p, k, sampled)
    coverage = ttft = 0.0
    util = np.full(np.asarray(ev.active).size, np.nan)
    rates = np.full(util.size, np.nan)
    truncation = 0.0
    for s in range(s_count):
        rate = lam_q[s].sum(axis=0)  # (J,)
        b, avg = _board(rate, int(c[s]), float(mu[s]), h)
        b = beta[s]  # the converged law (the damped iterate)
        state = np.arange(sizes[s] + 1)
        occupancy = b @ avg  # time-average law
        util[act[s]] = float(occupancy @ np.minimum(state, c[s])) / c[s]
        rates[act[s]] = float(b @ rate)
        truncation = max(truncation, float(occupancy[-1]))
        ahead = np.maximum(state - c[s] + 1, 0)  # Erlang stages of a FCFS arrival meeting n
        for q in range(p.size):
            slack = tau - radio - g[s, q]  # (R,)
            within = _erlang_cdf(ahead[:, None], c[s] * mu[s], slack[None, :])  # (N, R)
            # requests per unit area of type q served by tier s from phase state j at area node v
            density = lam_s[s] * b[:, None] * big_lambda * p[q] * win[s][q]  # (J, R) per dv·π
            served = avg @ within  # (J, R)
            coverage += float(np.sum(density * served * wv))
            mean_wait = avg @ (ahead / (c[s] * mu[s]))  # (J,)
            ttft += float(np.sum(density * (radio[None, :] + g[s, q] + mean_wait[:, None]) * wv))
    total = big_lambda
    return NodeModel(
        flood=h,
        coverage=coverage / total,
        mean_ttft=ttft / total,
        utilization=util,
        shown=tuple(beta),
        arrival_rate=rates,
        iterations=it,
        truncation=truncation,
        residual=residual,
    )


def _catchment(beta, shown_wait, lam_s, g, radio, wv, xi, alpha, type_rate, k, sample=0):
    """``λ_{s,q}(n)`` per tier ``(Q, J_s)`` and the win probabilities ``P_{s,q}(r, Ŵ(n))`` ``(Q, J_s, R)``.

    Among the ``k`` nearest nodes of each profile (eq. (11.11)): with the other tier-``t`` nodes at area
    coordinates ``a`` (a unit-rate Poisson process in ``a = π λ_t ρ²``) carrying i.i.d. shown states, a
    tier-``t`` node at ``a`` beats the request's node when ``a < c_t(n')``, ``c_t(n') = π λ_t ρ_t²``.
    With ``Φ(a) = Σ_{n'} β_t(n') (a − c_t(n'))_+``: ``k = 1`` gives ``Σ β e^{−c}``, ``k = 2`` gives
    ``½ Σ_{n', n''} β β e^{−max(c', c'')} (2 + |c' − c''|)``; the node's own tier (it must be one of the
    ``k`` nearest): ``e^{−a_r}`` (``k = 1``) or ``Σ β e^{−m} (m − c + 1)``, ``m = max(a_r, c)`` (``k = 2``).

    Power of ``d`` (``sample``, docs/model.md (11.16)): the law of the number of candidates that beat the node
    (:func:`_beaten` per tier) and the chance that the ``d`` sampled of the ``K = k S`` include the node and none
    of them (:func:`_sampled_win`); ``sample = 0`` (every candidate) is the formula above.
    """
    s_count, q_count = g.shape
    exponent = 2.0 / alpha
    ru = radio / xi  # r^α
    rates, wins = [], []
    marks = [_atoms(shown_wait[t] / xi, beta[t]) for t in range(s_count)]
    for s in range(s_count):
        full = shown_wait[s]
        grid = _own_grid(full)
        w = full[grid]
        log_win = np.zeros((q_count, w.size, ru.size))
        counts: list[FloatArray] = []
        a_r = math.pi * lam_s[s] * ru**exponent  # own-tier area coordinate of the node itself
        for t in range(s_count):
            offs, weights = marks[t]
            u = ru[None, None, :] + ((g[s][:, None] - g[t][:, None])[:, :, None] + w[None, :, None]) / xi  # (Q, J, R)
            c_t = math.pi * lam_s[t] * np.maximum(u[..., None] - offs, 0.0) ** exponent  # (Q, J, R, J')
            if sample:
                counts.append(_beaten(c_t, weights, a_r, k, own=t == s))
                continue
            if t == s:
                if k == 1:
                    part = np.broadcast_to(np.exp(-a_r), u.shape)
                else:
                    m = np.maximum(a_r[None, None, :, None], c_t)
                    part = np.exp(-m) * (m - c_t + 1.0) @ weights
            elif k == 1:
                part = np.exp(-c_t) @ weights
            else:
                part = _pair_sum(c_t, weights)
            log_win += np.log(np.maximum(part, 1e-300))
        if sample:
            log_win = np.log(np.maximum(_sampled_win(counts, sample, k), 1e-300))
        # back to every state: log P is interpolated linearly in the state between the grid states
        states = np.arange(full.size)
        log_full = np.stack([np.stack([np.interp(states, grid, log_win[q, :, i]) for i in range(ru.size)], axis=1) for q in range(q_count)])
        win = np.exp(log_full)
        wins.append(win)
        rates.append(type_rate[:, None] * (win * wv).sum(axis=2))  # (Q, J)
    return rates, wins


def _beaten(c: FloatArray, weights: FloatArray, a_r: FloatArray, k: int, *, own: bool) -> FloatArray:
    """Law of how many of one tier's candidates beat the node, ``(..., 3)`` over ``b = 0, 1, 2``.

    Other tier (the first two points ``a_1 < a_2`` of a unit-rate Poisson process, marks ``c'``, ``c''``):
    ``P_1 = P(a_1 < c') = 1 − e^{−c'}``, ``P_2 = P(a_2 < c'') = 1 − e^{−c''}(1 + c'')`` and both
    ``J = P_2 − 1{c' < c''} (e^{−c'} − e^{−c''}(1 + c'' − c'))``, so ``P(b = 2) = J``, ``P(b = 1) = P_1 + P_2 − 2J``;
    ``k = 1``: ``P(b = 1) = P_1``.  Own tier, with the node one of the ``k`` nearest: no point before it
    (``e^{−a_r}``; the next one beats it when ``a < c``: ``1 − e^{−(c − a_r)_+}``) or one (``k = 2``, ``a_r e^{−a_r}``,
    uniform on ``[0, a_r]``, beating it with ``min(c, a_r)/a_r``).  ``P(b = 0)`` is the closed form of
    :func:`_catchment` (:func:`_pair_sum` for another tier).
    """
    out = np.zeros(c.shape[:-1] + (3,))
    if own:
        a = a_r[None, None, :, None]
        first = np.exp(-a) * np.ones_like(c)
        beat = np.exp(-a) * (1.0 - np.exp(-np.maximum(c - a, 0.0)))
        if k == 2:
            first = first + np.exp(-a) * a
            beat = beat + np.exp(-a) * np.minimum(c, a)
        out[..., 1] = beat @ weights
        out[..., 0] = first @ weights - out[..., 1]
        return out
    p1 = (1.0 - np.exp(-c)) @ weights
    if k == 1:
        out[..., 0], out[..., 1] = 1.0 - p1, p1
        return out
    p2 = (1.0 - np.exp(-c) * (1.0 + c)) @ weights
    ci, cj = c[..., :, None], c[..., None, :]
    gap = np.where(ci < cj, np.exp(-ci) - np.exp(-cj) * (1.0 + cj - ci), 0.0)
    joint = p2 - np.einsum("...ij,i,j->...", gap, weights, weights)
    out[..., 0], out[..., 1], out[..., 2] = 1.0 - p1 - p2 + joint, p1 + p2 - 2.0 * joint, joint
    return out


def _sampled_win(counts: list[FloatArray], sample: int, per_profile: int) -> FloatArray:
    """``P(the node is sampled and no candidate that beats it is)`` from each tier's law of beaters.

    With ``K`` candidates, ``d`` of them sampled uniformly and ``b`` beating the node:
    ``C(K − 1 − b, d − 1) / C(K, d)``; ``b`` is the sum of the tiers' independent counts.
    """
    law: FloatArray = np.ones(counts[0].shape[:-1] + (1,))
    for part in counts:
        conv = np.zeros(law.shape[:-1] + (law.shape[-1] + 2,))
        for shift in range(3):
            conv[..., shift : shift + law.shape[-1]] += law * part[..., shift : shift + 1]
        law = conv
    total = per_profile * len(counts)  # K = k S candidates
    factor = np.array(
        [math.comb(total - 1 - x, sample - 1) if total - 1 - x >= sample - 1 else 0 for x in range(law.shape[-1])], dtype=float
    ) / math.comb(total, sample)
    return law @ factor


def _pair_sum(c: FloatArray, weights: FloatArray) -> FloatArray:
    """``½ Σ_{i,j} β_i β_j e^{−max(c_i, c_j)} (2 + |c_i − c_j|)`` over the last axis, ``c`` non-increasing in it.

    For ``i < j`` (``c_i ≥ c_j``) the term is ``e^{−c_i} (2 + c_i − c_j)``: with the tail sums
    ``B_i = Σ_{j>i} β_j`` and ``C_i = Σ_{j>i} β_j c_j`` the double sum is linear in the atoms.
    """
    e = np.exp(-c) * weights
    tail_b = np.cumsum(weights[::-1])[::-1] - weights
    tail_c = np.cumsum((c * weights)[..., ::-1], axis=-1)[..., ::-1] - c * weights
    return np.sum(e * ((2.0 + c) * tail_b - tail_c), axis=-1) + np.sum(e * weights, axis=-1)


def _atoms(offsets: FloatArray, weights: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The competitors' shown-wait law as at most ``MARK_ATOMS`` atoms (equal offsets merged, then
    equal-mass bins of the rest, each at its mean offset)."""
    keep = weights > MARK_FLOOR
    off, wt = offsets[keep], weights[keep] / weights[keep].sum()
    uniq, inverse = np.unique(off, return_inverse=True)
    mass = np.bincount(inverse, weights=wt)
    if uniq.size <= MARK_ATOMS:
        return uniq, mass  # type: ignore[return-value]
    edges = np.searchsorted(np.cumsum(mass), np.linspace(0.0, 1.0, MARK_ATOMS + 1)[1:-1])
    label = np.searchsorted(edges, np.arange(uniq.size), side="right")
    total = np.bincount(label, weights=mass)
    mean = np.bincount(label, weights=mass * uniq) / np.where(total > 0, total, 1.0)
    return mean[total > 0], total[total > 0]  # type: ignore[return-value]


def _own_grid(shown: FloatArray) -> npt.NDArray[np.int64]:
    """States at which the catchment is computed: the first state of each shown wait up to ``OWN_DENSE``
    distinct waits (both ends of each run), then geometrically spaced ones, always the last."""
    first = np.flatnonzero(np.r_[True, np.diff(shown) != 0])
    last = np.r_[first[1:] - 1, shown.size - 1]  # both ends of each run of equal waits (the run is flat)
    closing = np.flatnonzero(np.diff(shown) >= 0.5 * CLOSED)  # the admission threshold: both sides exactly
    if first.size <= OWN_DENSE:
        return np.unique(np.r_[first, last])
    tail = np.geomspace(first[OWN_DENSE], shown.size - 1, OWN_TAIL).round().astype(np.int64)
    return np.unique(np.r_[first[:OWN_DENSE], last[:OWN_DENSE], tail, closing, closing + 1, shown.size - 1])


def _board(rate: FloatArray, c: int, mu: float, h: float) -> tuple[FloatArray, FloatArray]:
    """Stationary board law ``β`` and per-start phase-average laws ``p̄_j`` ``(J, J)`` of one node.

    Birth rate ``rate[j]`` fixed by the shown state ``j`` (the phase start), death ``min(n, c) μ``; the
    top state ``N`` refuses arrivals.  ``h = 0``: the birth–death chain with rate ``rate[n]`` in state ``n``.
    """
    size = rate.size
    n = np.arange(size)
    death = np.minimum(n, c) * mu
    if h == 0.0:
        ratio = np.where(n[1:] > 0, rate[:-1] / death[1:], 0.0)
        log_pi = np.r_[0.0, np.cumsum(np.log(np.maximum(ratio, 1e-300)))]
        pi = np.exp(log_pi - log_pi.max())
        pi /= pi.sum()
        return pi, np.eye(size)
    births = np.asarray(rate, dtype=float)  # per start j (constant during the phase; the top state refuses below)
    gamma = float(births.max() + death.max()) or 1.0
    m = gamma * h
    from scipy.stats import poisson  # here, not at import: evaluate --json loads no scipy.stats

    k_max = int(poisson.ppf(1.0 - 1e-13, m)) + 1
    weights_end = poisson.pmf(np.arange(k_max + 1), m)
    weights_avg = gammainc(np.arange(k_max + 1) + 1.0, m) / m  # P(Poisson(m) > k) / m = (1/h) ∫_0^h P(N_t = k) dt
    vec = np.eye(size)  # row j: state law of a phase that started at j
    up = births[:, None] / gamma  # the birth rate of row j in every state (top state refuses)
    up_state = np.broadcast_to(up, (size, size)).copy()
    up_state[:, -1] = 0.0
    down = death[None, :] / gamma
    stay = 1.0 - up_state - down
    end = weights_end[0] * vec
    avg = weights_avg[0] * vec
    for k in range(1, k_max + 1):
        nxt = vec * stay
        nxt[:, 1:] += vec[:, :-1] * up_state[:, :-1]
        nxt[:, :-1] += vec[:, 1:] * down[:, 1:]
        vec = nxt
        end += weights_end[k] * vec
        avg += weights_avg[k] * vec
    end /= end.sum(axis=1, keepdims=True)
    avg /= avg.sum(axis=1, keepdims=True)
    # stationary law of the board chain: β T = β
    a = end.T - np.eye(size)
    a[-1, :] = 1.0
    rhs = np.zeros(size)
    rhs[-1] = 1.0
    beta = np.linalg.solve(a, rhs)
    beta = np.maximum(beta, 0.0)
    return beta / beta.sum(), avg


def _erlang_cdf(stages: npt.ArrayLike, rate: float, x: FloatArray) -> FloatArray:
    """``P(W ≤ x)`` for ``W`` the sum of ``stages`` Exp(``rate``) (``stages = 0``: ``W = 0``); 0 for ``x < 0``."""
    stages = np.asarray(stages)
    xs = np.maximum(x, 0.0) * rate
    with np.errstate(invalid="ignore"):
        cdf = np.where(stages > 0, 1.0 - gammaincc(np.maximum(stages, 1), xs), 1.0)
    return np.where(x >= 0, cdf, 0.0)
