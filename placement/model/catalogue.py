"""A catalogue with false positives and staleness (docs/model.md §19.7).

Each node advertises the prefixes it holds in a Bloom filter of ``m`` bits and ``k`` hashes,
refreshed every ``T_r`` seconds; between refreshes a node may change state (it re-draws its
profile from ``π`` at rate ``γ``).  The router reads the filters, so a type-``q`` request sees at a
node of catalogue profile ``s``:

- the advertised depth ``ĥ``: the held prefix of ``P_q`` and then every further path vertex that
  tests positive, in order from the root (eq. (19.27)); a false positive has probability
  ``f_s = (1 − e^{−k n_s / m})^k`` with ``n_s = |C_s|`` entries (eq. (19.25));
- the node's true profile ``s'``: ``s`` with probability ``p_fresh + (1 − p_fresh) π_s``, else
  ``s' ≠ s`` with ``(1 − p_fresh) π_{s'}``, ``p_fresh = (1 − e^{−γ T_r}) / (γ T_r)`` (eq. (19.28)).

Every combination ``j = (s, s', ĥ)`` is an independent thinning of the node PPP (the filters are
salted per node, the churn is independent per node), a *sub-tier* of density
``λ_j = λ_b π_s P(s'|s) P(ĥ|s, q)`` for type ``q``.  Theorem 1 holds over the sub-tiers with the
bias the router believes, ``β_j = T^adv_{s,q}(ĥ) + W̄_s``, while the request is served by the
true profile: prefill ``T^ft_{s',q}`` (verification before reuse, docs/model.md §11) and the queue of
tier ``s'`` (eqs. (19.29)–(19.30)).  :func:`catalogue_evaluation` solves that fixed point.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import InstanceError, plain
from edgeprefix.placement.model.fixed_point import FixedPointReport, solve_fixed_point
from edgeprefix.placement.model.mgc import mgc_advertised_wait_and_slopes, variability_factor
from edgeprefix.placement.model.policies import check_policy, needs_fixed_point
from edgeprefix.placement.model.queueing import RHO_CLIP, advertised_wait, erlang_c
from edgeprefix.placement.model.spatial import AnalyticKernel, SpatialKernel
from edgeprefix.placement.model.tier_loads import lift_exponents, unlift

if TYPE_CHECKING:
    from edgeprefix.placement.model.instance import Instance

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Catalogue:
    """The catalogue of ``[catalogue]`` (docs/model.md §19.7).

    ``bits`` ``m`` per node filter (``math.inf``: an exact catalogue), ``hashes`` ``k``,
    ``refresh`` ``T_r`` seconds between refreshes (0: always fresh) and ``churn`` ``γ`` state
    changes per node per second (0: the placement never changes).
    """

    bits: float
    hashes: int = 1
    refresh: float = 0.0
    churn: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or not (self.bits >= 1 and (math.isinf(self.bits) or float(self.bits).is_integer())):
            raise InstanceError("catalogue.bits", f"must be a whole number of bits >= 1, got {plain(self.bits)}")
        if isinstance(self.hashes, bool) or not (float(self.hashes).is_integer() and self.hashes >= 1):
            raise InstanceError("catalogue.hashes", f"must be a whole number >= 1, got {plain(self.hashes)}")
        for name in ("refresh", "churn"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise InstanceError(f"catalogue.{name}", f"must be a finite number >= 0, got {plain(value)}")

    @property
    def exact(self) -> bool:
        """No false positive and never stale."""
        return math.isinf(self.bits) and (self.refresh == 0 or self.churn == 0)

    def false_positive(self, entries: npt.ArrayLike) -> FloatArray:
        """``f = (1 − e^{−k n / m})^k`` for ``n`` entries (eq. (19.25)); 0 for an empty filter or ``m = ∞``."""
        n = np.asarray(entries, dtype=float)
        if math.isinf(self.bits):
            return np.zeros_like(n)
        return (-np.expm1(-self.hashes * n / self.bits)) ** self.hashes

    def false_positive_run(self, entries: int, run: int, *, exact: bool = False) -> float:
        """Probability that ``run`` given absent keys all test positive in a filter of ``n`` entries.

        ``exact=False``: ``f^run`` with (19.25) (independent tests).  ``exact=True``: with salted
        random-oracle hashes the ``k n`` set positions are uniform, the tests are independent given the
        number ``X`` of set bits, and the probability is ``E[(X/m)^{k·run}]`` over the occupancy law of
        ``X`` (eq. (19.26)); it is 1 for ``m = 1`` where the classic formula gives ``1 − e^{−kn}``.
        """
        if run == 0:
            return 1.0
        if math.isinf(self.bits) or entries == 0:
            return 0.0
        if not exact:
            return float(self.false_positive(entries)) ** run
        m, throws = int(self.bits), int(self.hashes) * int(entries)
        law = np.zeros(min(m, throws) + 1)
        law[0] = 1.0
        for _ in range(throws):  # occupancy recursion: a throw hits a free bit w.p. (m − x)/m
            x = np.arange(law.size)
            moved = law * (m - x) / m
            law = law * x / m
            law[1:] += moved[:-1]
        return float(law @ (np.arange(law.size) / m) ** (int(self.hashes) * run))

    @property
    def fresh_probability(self) -> float:
        """``p_fresh = (1 − e^{−γ T_r}) / (γ T_r)``, the chance a node did not change since the last
        refresh (refreshes at multiples of ``T_r``, request times uniform between them; eq. (19.28))."""
        x = self.churn * self.refresh
        return 1.0 if x == 0 else float(-math.expm1(-x) / x)


def advertised_depth_law(instance, catalogue: Catalogue, *, exact: bool = False) -> list[list[list[tuple[float, float]]]]:
    """Per catalogue profile ``s`` and type ``q``: ``[(ĥ, P(ĥ | s, q)), …]`` (eq. (19.27)).

    The first entry is the true hit ``h_{s,q}``; the ``i``-th path vertex beyond it is advertised when
    it and every vertex before it test positive: ``P(J ≥ i) = f_s^i`` (or its occupancy-exact form,
    ``exact=True``), ``P(ĥ = ℓ_i) = P(J ≥ i) − P(J ≥ i + 1)``.
    """
    depth = {p.id: float(p.depth) for p in instance.prefixes}
    out = []
    for i, s in enumerate(instance.profiles):
        held = set(s.prefixes)
        runs = {}
        rows = []
        for j, q in enumerate(instance.requests):
            beyond = [depth[v] for v in q.path if v not in held]
            levels = [float(instance.hit_depth[i, j])] + beyond
            for r in range(len(beyond) + 1):
                if r not in runs:
                    runs[r] = catalogue.false_positive_run(len(s.prefixes), r, exact=exact)
            tail = [runs[r] for r in range(len(beyond) + 1)] + [0.0]
            probs = [tail[r] - tail[r + 1] for r in range(len(beyond) + 1)]
            rows.append([(h, p) for h, p in zip(levels, probs) if p > 0])
        out.append(rows)
    return out


def advertised_first_token(instance, s: int, q: int, depth: float) -> float:
    """``T^adv_{s,q}(ĥ)``: the instance's ``T^ft_{s,q}`` for the true hit, else the (chunked) prefill of
    the tokens beyond a phantom state ``g_C(L_q − ĥ)`` (the router prices it as an HBM hit)."""
    if depth == instance.hit_depth[s, q]:
        return float(instance.first_token_time[s, q])
    g = instance.prefill if instance.serving is None else instance.serving.first_token_prefill(instance.prefill)
    return float(np.asarray(g(instance.lengths[q] - depth)))


@dataclass(frozen=True)
class SubTiers:
    """The sub-tiers of one type: arrays over ``j`` (eq. (19.29))."""

    share: FloatArray  # λ_j / λ_b
    believed: npt.NDArray[np.int64]  # catalogue profile s
    true: npt.NDArray[np.int64]  # true profile s'
    advertised: FloatArray  # T^adv_{s,q}(ĥ)
    false_hit: npt.NDArray[np.bool_]  # ĥ > h_{s',q}: the router expects more reuse than the node has


def sub_tiers(instance, mix: FloatArray, catalogue: Catalogue, *, exact: bool = False) -> list[SubTiers]:
    """Sub-tiers ``(s, s', ĥ)`` of every type with ``λ_j / λ_b = π_s P(s'|s) P(ĥ|s, q)`` (zero shares dropped)."""
    law = advertised_depth_law(instance, catalogue, exact=exact)
    fresh = catalogue.fresh_probability
    pi = np.asarray(mix, dtype=float)
    active = np.flatnonzero(pi > 0)
    out = []
    for q in range(len(instance.requests)):
        share, believed, true, adv, false = [], [], [], [], []
        for s in active:
            for t in active:
                p_true = (1.0 - fresh) * pi[t] + (fresh if t == s else 0.0)
                if p_true <= 0:
                    continue
                for depth, p in law[s][q]:
                    share.append(pi[s] * p_true * p)
                    believed.append(s)
                    true.append(t)
                    adv.append(advertised_first_token(instance, int(s), q, depth))
                    false.append(depth > instance.hit_depth[t, q])
        out.append(
            SubTiers(
                np.array(share),
                np.array(believed, dtype=np.int64),
                np.array(true, dtype=np.int64),
                np.array(adv),
                np.array(false, dtype=bool),
            )
        )
    return out


@dataclass(frozen=True)
class CatalogueEvaluation:
    """Result of :func:`catalogue_evaluation`; per-tier arrays ``(S,)`` by true profile (NaN when inactive)."""

    instance: Instance
    catalogue: Catalogue
    policy: str
    mix: FloatArray
    target: float
    tiers: list[SubTiers] = field(repr=False)
    association: list[FloatArray] = field(repr=False)  # A_{j,q} per type
    advertised_wait: FloatArray
    utilization: FloatArray
    wait_probability: FloatArray
    decay: FloatArray
    false_positive: FloatArray  # f_s per profile
    fixed_point: FixedPointReport | None
    kernel: SpatialKernel = field(repr=False)

    @cached_property
    def false_hit_share(self) -> float:
        """``Σ_q p_q Σ_{j: ĥ > h_{s',q}} A_{j,q}``: requests sent on a phantom (false or stale) hit."""
        p = self.instance.probabilities
        return float(sum(p[q] * a[t.false_hit].sum() for q, (t, a) in enumerate(zip(self.tiers, self.association))))

    @cached_property
    def stale_share(self) -> float:
        """Requests served by a node whose state changed since its catalogue entry."""
        p = self.instance.probabilities
        return float(sum(p[q] * a[t.believed != t.true].sum() for q, (t, a) in enumerate(zip(self.tiers, self.association))))

    def association_by_profile(self) -> FloatArray:
        """``A_{s',q}`` by the serving node's true profile, ``(S, Q)``."""
        out = np.zeros((self.mix.size, len(self.tiers)))
        for q, (t, a) in enumerate(zip(self.tiers, self.association)):
            np.add.at(out[:, q], t.true, a)
        return out

    def coverage(self, tau: float | None = None, *, queues: str = "class") -> float:
        """``P_cov(τ) = Σ_q p_q Σ_j [P1_j − P^W P2_j]`` over the sub-tiers (eq. (19.30)).

        ``queues="class"`` (default): a node of sub-tier ``j`` has the load of its own class, its
        type-``q`` share plus the mean of its ``(s, s')`` population for the other types (eq. (19.31)):
        a node that falsely advertises a prefix, or shows a profile it no longer holds, draws the
        requests of what it advertises; ``"tier"``: every node of true profile ``s'`` has the tier's
        queue (the paper's approximation, measured worse under staleness).
        """
        if queues not in ("tier", "class"):
            raise ValueError(f"queues: must be 'tier' or 'class', got {queues!r}")
        inst = self.instance
        t = self.target if tau is None else float(tau)
        if not t >= 0:
            raise ValueError(f"target: τ must be >= 0 seconds, got {plain(t)}")
        xi, alpha = inst.network.radio_scale, inst.network.radio_exponent
        classes = self.class_queues() if queues == "class" else None
        total = 0.0
        for q, sub in enumerate(self.tiers):
            first = inst.first_token_time[sub.true, q]
            if classes is None:
                pw, decay = self.wait_probability[sub.true], self.decay[sub.true]
                stable = self.utilization[sub.true] < 1.0
            else:
                pw, decay, stable = classes[q]
            bias = self._bias(sub)
            tilt = np.where(decay > 0, decay, 0.0)[:, None] * xi
            lam = sub.share * inst.network.edge_density
            p1, p2 = self.kernel.truncated(lam, bias[:, None] / xi, alpha, ((t - first) / xi)[:, None], tilt)
            pairs = p1[:, 0] - pw * p2[:, 0]
            total += inst.probabilities[q] * float(np.where(stable, np.maximum(pairs, 0.0), 0.0).sum())
        return min(1.0, max(0.0, total))

    def class_queues(self) -> list[tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]]:
        """Per type, per sub-tier ``j``: ``P^W``, ``θ`` and stability of the class queue (eq. (19.31))."""
        inst = self.instance
        net = inst.network
        p = inst.probabilities
        s_count = self.mix.size
        service, second = inst.service_time, inst.service_second_moment
        # per (s, s') population: mean per-node rate, work and second moment of every type
        pair_share = np.zeros((s_count, s_count))
        for sub in self.tiers[:1]:
            np.add.at(pair_share, (sub.believed, sub.true), sub.share)
        pair = np.zeros((3, len(self.tiers), s_count, s_count))
        own = []
        for q, (sub, a) in enumerate(zip(self.tiers, self.association)):
            rate = net.request_intensity * p[q] * a / (sub.share * net.edge_density)  # per node of j
            loads = np.vstack([rate, rate * service[sub.true, q], rate * second[sub.true, q]])
            own.append(loads)
            for k in range(3):
                np.add.at(pair[k, q], (sub.believed, sub.true), loads[k] * sub.share)
        with np.errstate(divide="ignore", invalid="ignore"):
            pair = np.where(pair_share > 0, pair / np.where(pair_share > 0, pair_share, 1.0), 0.0)
        totals = pair.sum(axis=1)  # (3, s, s')
        mgc = inst.queue_law == "mgc"
        out = []
        for q, (sub, loads) in enumerate(zip(self.tiers, own)):
            rest = totals[:, sub.believed, sub.true] - pair[:, q, sub.believed, sub.true]
            arrivals, work, moment = loads + rest
            c = inst.concurrency[sub.true].astype(float)
            busy = arrivals > 0
            mean = np.where(busy, work / np.where(busy, arrivals, 1.0), service[sub.true].min(axis=1))
            pw = erlang_c(work, c)
            with np.errstate(divide="ignore", invalid="ignore"):
                decay = (c - work) / mean
                if mgc:
                    scv = np.maximum(np.where(busy, moment / np.where(busy, arrivals, 1.0), 0.0) / mean**2 - 1.0, 0.0)
                    decay = decay / variability_factor(work, c, scv)
            out.append((pw, decay, work < c))
        return out

    def _bias(self, sub: SubTiers) -> FloatArray:
        if self.policy == "nearest":
            return np.zeros(sub.share.size)
        if self.policy == "prefix":
            return sub.advertised.copy()
        return sub.advertised + self.advertised_wait[sub.believed]

    @property
    def coverage_at_target(self) -> float:
        return float(self.coverage(self.target))

    def report(self) -> dict:
        """The ``catalogue`` block of ``Evaluation.to_dict`` (docs/model.md §19.7)."""
        return {
            "bits": None if math.isinf(self.catalogue.bits) else int(self.catalogue.bits),
            "hashes": int(self.catalogue.hashes),
            "refresh": self.catalogue.refresh,
            "churn": self.catalogue.churn,
            "false_positive": dict(zip(self.instance.profile_ids, map(float, self.false_positive))),
            "fresh_probability": self.catalogue.fresh_probability,
            "coverage": self.coverage_at_target,
            "coverage_tier_queues": self.coverage(queues="tier"),
            "false_hit_share": self.false_hit_share,
            "stale_share": self.stale_share,
        }


def catalogue_evaluation(
    instance,
    mix=None,
    policy: str = "load_aware",
    *,
    catalogue: Catalogue | None = None,
    target: float | None = None,
    rho_clip: float = RHO_CLIP,
    kernel: SpatialKernel | None = None,
    exact_false_positives: bool = False,
) -> CatalogueEvaluation:
    """Evaluate a mix under a catalogue with false positives and staleness (docs/model.md §19.7).

    ``catalogue`` defaults to the instance's ``[catalogue]``.  The load-aware fixed point runs over
    the true tiers: ``λq_{s'} = (Λ / λ_{s'}) Σ_q p_q Σ_{j: s'(j) = s'} A_{j,q}``, work with the true
    occupancies ``1/μ_{s',q}``, the queue law of the instance (Erlang C or M/G/c), and the router
    advertising ``W̄_s`` of the profile it believes.  ``exact_false_positives`` uses the occupancy-exact
    run probabilities (19.26) instead of the classic formula (19.25).
    """
    check_policy(policy)
    cat = catalogue if catalogue is not None else getattr(instance, "catalogue", None)
    if cat is None:
        raise ValueError("catalogue: the instance has no [catalogue]; pass catalogue=Catalogue(bits, hashes, ...)")
    pi = instance.mix_vector(mix)
    tau = instance.placement.target if target is None else float(target)
    kernel = kernel or AnalyticKernel()
    net = instance.network
    xi, alpha = net.radio_scale, net.radio_exponent
    tiers = sub_tiers(instance, pi, cat, exact=exact_false_positives)
    active = pi > 0
    lam_tier = np.where(active, pi * net.edge_density, np.nan)
    c = instance.concurrency.astype(float)
    service, second = instance.service_time, instance.service_second_moment
    mgc = instance.queue_law == "mgc"
    p = instance.probabilities
    idx = np.flatnonzero(active)

    def associate(w: FloatArray) -> list[FloatArray]:
        out = []
        for sub in tiers:
            lam = sub.share * net.edge_density
            if policy == "nearest":
                out.append(sub.share / sub.share.sum())
                continue
            bias = sub.advertised + (w[sub.believed] if policy == "load_aware" else 0.0)
            out.append(kernel.association(lam, bias[:, None] / xi, alpha)[:, 0])
        return out

    def queues(assoc: list[FloatArray]) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray | None]:
        # sums lifted per true tier by 2^k out of underflow, as in evaluate (edgeprefix.placement.model.tier_loads)
        top = np.zeros(pi.size)
        for sub, a in zip(tiers, assoc):
            np.maximum.at(top, sub.true, a)
        k = lift_exponents(top[:, None])
        arrivals, work, moment = (np.zeros(pi.size) for _ in range(3))
        for q, (sub, a) in enumerate(zip(tiers, assoc)):
            a = np.ldexp(a, k[sub.true]) if k.any() else a
            np.add.at(arrivals, sub.true, p[q] * a)
            np.add.at(work, sub.true, p[q] * a * service[sub.true, q])
            np.add.at(moment, sub.true, p[q] * a * second[sub.true, q])
        scale = net.request_intensity / np.where(active, lam_tier, 1.0)
        arrivals, work, moment = arrivals * scale, work * scale, moment * scale
        busy = arrivals > 0
        mean = np.where(busy, work / np.where(busy, arrivals, 1.0), service.min(axis=1))
        scv = np.maximum(np.where(busy, moment / np.where(busy, arrivals, 1.0), 0.0) / mean**2 - 1.0, 0.0) if mgc else None
        return unlift(arrivals, k), unlift(work, k), mean, scv

    def advertise(w_active: FloatArray) -> FloatArray:
        w = np.zeros(pi.size)
        w[idx] = w_active
        _, work, mean, scv = queues(associate(w))
        if scv is not None:  # the M/G/c law (mgc)
            return mgc_advertised_wait_and_slopes(work[idx], c[idx], mean[idx], scv[idx], rho_clip)[0]
        return advertised_wait(work[idx], c[idx], mean[idx], rho_clip)

    report = None
    w_full = np.zeros(pi.size)
    if needs_fixed_point(policy):
        w_active, report = solve_fixed_point(advertise, np.zeros(idx.size), method="robust", w_shift=0.05 * float(service[idx].mean()))
        w_full[idx] = w_active
    assoc = associate(w_full)
    _, work, mean, scv = queues(assoc)
    rho = np.where(active, work / np.where(c > 0, c, 1.0), np.nan)
    pw = np.where(active, erlang_c(np.where(active, work, 0.0), np.where(active, c, 1.0)), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        decay = (c - work) / mean
        if mgc:
            assert scv is not None  # queues() returns the SCV exactly when mgc
            decay = decay / variability_factor(work, c, scv)
    decay = np.where(active, decay, np.nan)
    adv = np.full(pi.size, np.nan)
    if needs_fixed_point(policy):
        adv[idx] = w_full[idx]
    return CatalogueEvaluation(
        instance=instance,
        catalogue=cat,
        policy=policy,
        mix=pi,
        target=tau,
        tiers=tiers,
        association=assoc,
        advertised_wait=np.where(active, np.nan_to_num(adv), np.nan),
        utilization=rho,
        wait_probability=pw,
        decay=decay,
        false_positive=cat.false_positive([len(s.prefixes) for s in instance.profiles]),
        fixed_point=report,
        kernel=kernel,
    )
