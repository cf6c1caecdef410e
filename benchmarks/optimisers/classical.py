"""Benchmark instances with a known optimum: classical geographic caching (docs/model.md §18).

Błaszczyszyn & Giovanidis' geographic caching ("Optimal geographic caching in cellular
networks", ICC 2015) is an exact special case of the model.  ``J`` files are ``J`` root prefixes
of ``L`` tokens; request type ``j`` is a whole file (``L_j = ℓ_j``, ``p_j`` Zipf with exponent
``s``); profiles are the ``K``-subsets of files; a miss costs ``g(L_j) > τ_0`` (never covered) and a
hit nothing (``g(0) = 0``); queueing is negligible (``Λ`` tiny, ``c_s`` in the tens, so ``P^W``
underflows to 0).  Then a type-``j`` request is covered iff the nearest node holding ``j`` lies
within the reach radius ``R = (τ_0/ξ)^{1/α}`` — those nodes form a PPP of density ``λ_b a_j`` with
``a_j = Σ_{s ∋ j} π_s`` — so, for every ``α``,

    ``P_cov(π) = Σ_j p_j (1 − exp(−c a_j))``,   ``c = π λ_b R²`` (the *reach*: nodes within reach).

The marginals of a distribution over ``K``-subsets fill the hypersimplex ``{0 ≤ a ≤ 1, Σ a = K}``,
so the optimum is a water-filling: ``a_j = clip(ln(c p_j / ν) / c, 0, 1)`` with ``ν`` set by
``Σ a_j = K`` (:func:`water_filling`).  Variants with a closed form: a fallback share (an empty
profile with ``π_0 ≥ π_min``: bounds scale by ``1 − π_min``) and a fleet memory budget over files of
different sizes (a second multiplier).  Variants without one (share caps on profiles, subsets
excluded by the per-node memory ``M``) keep a concave objective in ``π``, so their optimum is
computed exactly by a convex program (:func:`convex_optimum`) — the value is known to the
solver's tolerance, not in closed form.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.costs import QuadraticPrefill
from edgeprefix.placement.model.instance import Gpu, Instance, Network, PlacementSpec
from edgeprefix.placement.model.profiles import Profile
from edgeprefix.placement.model.workload import Prefix, RequestType

FloatArray = npt.NDArray[np.float64]
FAMILY = "classical"
FILE_TOKENS = 1024.0  # ℓ_j = L_j of a unit-size file
TARGET = 1.0  # τ_0, seconds
MISS_FACTOR = 2.0  # g(L_j) = MISS_FACTOR · τ_0 for the smallest file: a miss is never covered
INTENSITY = 1e-3  # Λ: P^W of an M/M/c with c ≈ 40 underflows to 0 at this load
DECODE = 1e-3  # D_q, seconds
SLOTS = 40  # memory units (m_run = 1) per unit file, and the slots left beside a full cache
KV_PER_TOKEN = SLOTS / FILE_TOKENS  # κ: a unit-size file costs SLOTS memory units
FALLBACK_ID = "none"
SOLVER_TOLERANCE = 1e-10  # Clarabel gap and feasibility tolerances of the convex optimum


@dataclass(frozen=True)
class ClassicalSpec:
    """One member of the family.

    files, cache : ``J`` files, ``K`` files per node (``1 ≤ K < J``).
    zipf : Zipf exponent ``s ≥ 0`` of the popularity ``p_j ∝ j^{−s}``.
    reach : ``c = π λ_b (τ_0/ξ)^{2/α} > 0``, the mean number of nodes within reach.
    alpha : radio exponent ``α``.
    fallback_min : adds the empty profile ``none`` with ``π_0 ≥ π_min`` (``None``: no fallback).
    sizes : relative file sizes (``ℓ_j = size_j · FILE_TOKENS``); ``None``: all 1.
    memory_budget : fleet budget ``B̄`` on ``Σ_s π_s B_s`` as a fraction of the budget that the
        ``K`` largest files would need everywhere (``None``: no budget).
    max_share : cap ``π_s ≤ max_share`` on every non-fallback profile (``None``: no caps).
    node_capacity : the largest total relative size a node can hold (``M`` then leaves
        ``c_s < 1`` for bigger subsets, which must get share 0); with integer sizes and an integer
        capacity every allowed subset keeps ``c_s ≥ 40`` (``None``: every subset fits).
    """

    files: int
    cache: int
    zipf: float = 0.8
    reach: float = 2.0
    alpha: float = 2.0
    fallback_min: float | None = None
    sizes: tuple[float, ...] | None = None
    memory_budget: float | None = None
    max_share: float | None = None
    node_capacity: float | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.files, int) and self.files >= 2):
            raise ValueError(f"files: J must be an integer >= 2, got {self.files!r}")
        if not (isinstance(self.cache, int) and 1 <= self.cache < self.files):
            raise ValueError(f"cache: K must be an integer in [1, J - 1] = [1, {self.files - 1}], got {self.cache!r}")
        if math.comb(self.files, self.cache) > 5000:
            raise ValueError(f"files/cache: C(J, K) = {math.comb(self.files, self.cache)} profiles; keep it <= 5000")
        checks = (("zipf", self.zipf, 0.0, False), ("reach", self.reach, 0.0, True), ("alpha", self.alpha, 0.0, True))
        for name, value, low, strict in checks:
            if not (math.isfinite(value) and (value > low if strict else value >= low)):
                raise ValueError(f"{name}: must be a finite number {'>' if strict else '>='} {low:g}, got {value!r}")
        if self.fallback_min is not None and not 0.0 <= self.fallback_min < 1.0:
            raise ValueError(f"fallback_min: π_min must lie in [0, 1), got {self.fallback_min!r}")
        if self.sizes is not None and (len(self.sizes) != self.files or not all(math.isfinite(x) and x > 0 for x in self.sizes)):
            raise ValueError(f"sizes: need {self.files} finite positive relative file sizes, got {self.sizes!r}")
        if self.memory_budget is not None and not 0.0 < self.memory_budget <= 1.0:
            raise ValueError(f"memory_budget: must lie in (0, 1] (a fraction of the largest need), got {self.memory_budget!r}")
        if self.max_share is not None and not 0.0 < self.max_share <= 1.0:
            raise ValueError(f"max_share: must lie in (0, 1], got {self.max_share!r}")
        if self.node_capacity is not None:
            sizes = sorted(self.sizes or (1.0,) * self.files)
            if not (math.isfinite(self.node_capacity) and self.node_capacity >= sum(sizes[: self.cache])):
                raise ValueError(
                    f"node_capacity: must be >= {sum(sizes[: self.cache]):g}, the K smallest files, so some subset fits; "
                    f"got {self.node_capacity!r}"
                )

    @property
    def closed_form(self) -> bool:
        """Whether the optimum has the water-filling closed form (no share caps, every subset fits)."""
        return self.max_share is None and self.node_capacity is None

    @property
    def capacity(self) -> float:
        """Relative size a node can hold (the ``K`` largest files when unconstrained)."""
        if self.node_capacity is not None:
            return float(self.node_capacity)
        return float(sum(sorted(self.sizes or (1.0,) * self.files)[-self.cache :]))


# ------------------------------------------------------------------------------------------
# Closed forms
# ------------------------------------------------------------------------------------------
def popularity(files: int, zipf: float) -> FloatArray:
    """``p_j ∝ j^{−s}``, ``j = 1..J``."""
    p = np.arange(1, files + 1, dtype=float) ** -zipf
    return p / p.sum()


def coverage_of_marginals(p: npt.ArrayLike, marginals: npt.ArrayLike, reach: float) -> float:
    """``Σ_j p_j (1 − exp(−c a_j))``."""
    p, a = np.asarray(p, dtype=float), np.asarray(marginals, dtype=float)
    return float(p @ -np.expm1(-reach * a))


def subset_matrix(subsets: Sequence[tuple[int, ...]], files: int) -> FloatArray:
    """``A[j, s] = 1`` iff file ``j`` is in subset ``s`` (``(J, S)``), so ``a = A π``."""
    out = np.zeros((files, len(subsets)))
    for s, members in enumerate(subsets):
        out[list(members), s] = 1.0
    return out


@dataclass(frozen=True)
class WaterFilling:
    """Optimal marginals ``a*``, the value ``P*`` and the multipliers (``ν`` of ``Σ a = total``,
    ``η`` of the budget ``Σ w_j a_j ≤ budget``)."""

    marginals: FloatArray
    value: float
    nu: float
    eta: float


def _fill(p: FloatArray, reach: float, upper: float, price: FloatArray, total: float) -> tuple[FloatArray, float]:
    """``a_j = clip(ln(c p_j / price_j(ν)) / c, 0, upper)`` with ``ν`` bisected so ``Σ a = total``.

    ``price_j(ν) = ν + extra_j`` (``extra`` = ``η w_j``); ``Σ a`` decreases in ``ν``.
    """
    lo = float(np.min(-price)) + 1e-300  # ν > −price_j keeps the log defined; below every level
    marg = reach * p
    lo = max(lo, float(np.min(marg * math.exp(-reach * upper) - price)) - 1.0)
    hi = float(np.max(marg - price)) + 1.0  # every a_j = 0 above this

    def amounts(nu: float) -> FloatArray:
        level = np.maximum(nu + price, 1e-300)
        return np.clip(np.log(marg / level) / reach, 0.0, upper)

    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if amounts(mid).sum() > total:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, abs(mid)):
            break
    nu = 0.5 * (lo + hi)
    a = amounts(nu)
    # put the bisection's last rounding on the free coordinates so that Σ a = total holds exactly
    free = (a > 0) & (a < upper)
    if free.any():
        a[free] += (total - a.sum()) / free.sum()
    return a, nu


def water_filling(
    p: npt.ArrayLike,
    reach: float,
    total: float,
    *,
    upper: float = 1.0,
    weights: npt.ArrayLike | None = None,
    budget: float | None = None,
) -> WaterFilling:
    """Maximise ``Σ_j p_j (1 − e^{−c a_j})`` over ``0 ≤ a_j ≤ upper``, ``Σ a_j = total`` and, when
    ``budget`` is given, ``Σ_j w_j a_j ≤ budget`` (KKT: ``c p_j e^{−c a_j} = ν + η w_j`` on free
    coordinates; concave objective, linear constraints, so KKT points are global optima)."""
    p = np.asarray(p, dtype=float)
    if not 0 < total <= upper * p.size:
        raise ValueError(f"total: Σ a = {total!r} must lie in (0, {upper * p.size!r}]")
    w = np.zeros_like(p) if weights is None else np.asarray(weights, dtype=float)
    a, nu = _fill(p, reach, upper, np.zeros_like(p), total)
    eta = 0.0
    if budget is not None and float(w @ a) > budget:
        least = _least_weight(w, total, upper)
        if budget < least - 1e-12:
            raise ValueError(f"budget: {budget!r} is below the least weight {least!r} of any feasible marginal vector")
        lo, hi = 0.0, 1.0
        while float(w @ _fill(p, reach, upper, hi * w, total)[0]) > budget:
            hi *= 2.0
            if hi > 1e12:
                break
        for _ in range(200):
            eta = 0.5 * (lo + hi)
            a, nu = _fill(p, reach, upper, eta * w, total)
            if float(w @ a) > budget:
                lo = eta
            else:
                hi = eta
            if hi - lo <= 1e-14 * max(1.0, hi):
                break
        eta = hi
        a, nu = _fill(p, reach, upper, eta * w, total)
    return WaterFilling(a, coverage_of_marginals(p, a, reach), nu, eta)


def _least_weight(w: FloatArray, total: float, upper: float) -> float:
    """The smallest ``Σ w_j a_j`` over ``0 ≤ a ≤ upper``, ``Σ a = total`` (fill the lightest first)."""
    left, out = total, 0.0
    for wj in np.sort(w):
        take = min(upper, left)
        out += take * wj
        left -= take
        if left <= 0:
            break
    return out


def mix_with_marginals(marginals: npt.ArrayLike, cache: int) -> dict[tuple[int, ...], float]:
    """A distribution over ``K``-subsets whose marginals are ``a`` (``0 ≤ a ≤ 1``, ``Σ a = K``).

    Systematic sampling: lay the ``a_j`` end to end on ``[0, K)``; for an offset ``u ∈ [0, 1)`` the
    points ``u, u + 1, …, u + K − 1`` fall in ``K`` distinct files (no file is longer than 1).  As
    ``u`` sweeps ``[0, 1)`` the chosen subset changes only at the fractional parts of the cumulative
    sums, so at most ``J + 1`` subsets get weight, each the length of its ``u``-interval.
    """
    a = np.asarray(marginals, dtype=float)
    if np.any(a < -1e-12) or np.any(a > 1 + 1e-12) or abs(a.sum() - cache) > 1e-9:
        raise ValueError(f"marginals must lie in [0, 1] and sum to K = {cache}, got sum {a.sum()!r}")
    edges = np.concatenate([[0.0], np.cumsum(np.clip(a, 0.0, 1.0))])
    edges[-1] = float(cache)
    cuts = np.unique(np.concatenate([[0.0, 1.0], np.mod(edges, 1.0)]))
    out: dict[tuple[int, ...], float] = {}
    for lo, hi in zip(cuts[:-1], cuts[1:]):
        if hi - lo <= 1e-15:
            continue
        u = 0.5 * (lo + hi)
        points = u + np.arange(cache)
        chosen = tuple(sorted(int(j) for j in np.searchsorted(edges, points, side="right") - 1))
        out[chosen] = out.get(chosen, 0.0) + float(hi - lo)
    return out


# ------------------------------------------------------------------------------------------
# The instance
# ------------------------------------------------------------------------------------------
def _sizes(spec: ClassicalSpec) -> FloatArray:
    return np.ones(spec.files) if spec.sizes is None else np.asarray(spec.sizes, dtype=float)


def _subset_id(members: tuple[int, ...]) -> str:
    return "+".join(f"f{j}" for j in members)


def optimum(spec: ClassicalSpec) -> WaterFilling:
    """The exact optimum of a closed-form member (no share caps)."""
    if not spec.closed_form:
        raise ValueError("max_share/node_capacity: caps and excluded subsets have no closed-form optimum; use convex_optimum()")
    p = popularity(spec.files, spec.zipf)
    keep = 1.0 - (spec.fallback_min or 0.0)
    w = _sizes(spec) * FILE_TOKENS * KV_PER_TOKEN
    budget = None if spec.memory_budget is None else _budget(spec)
    return water_filling(p, spec.reach, spec.cache * keep, upper=keep, weights=w, budget=budget)


def _budget(spec: ClassicalSpec) -> float:
    w = _sizes(spec) * FILE_TOKENS * KV_PER_TOKEN
    budget = spec.memory_budget
    if budget is None:
        raise ValueError("memory_budget: the spec has no memory budget")
    return float(budget) * float(np.sort(w)[-spec.cache :].sum())


def classical_instance(spec: ClassicalSpec, *, name: str | None = None) -> Instance:
    """The instance of ``spec`` with its known optimum in ``metadata``.

    ``metadata``: ``family``, the spec, ``known_optimum`` (``P*``), ``optimal_marginals`` (file →
    ``a_j*``), ``optimal_mix`` (profile → ``π_s``, one optimal mix among many), ``optimum_method``
    (``water-filling`` or ``convex program``) and ``reference`` (the derivation's section).
    """
    p = popularity(spec.files, spec.zipf)
    sizes = _sizes(spec)
    xi = TARGET * (math.pi / spec.reach) ** (spec.alpha / 2.0)  # c = π λ_b (τ/ξ)^{2/α} with λ_b = 1
    smallest = float(sizes.min()) * FILE_TOKENS
    prefill = QuadraticPrefill(linear=MISS_FACTOR * TARGET / smallest)
    prefixes = tuple(Prefix(f"f{j}", float(sizes[j] * FILE_TOKENS)) for j in range(spec.files))
    requests = tuple(RequestType(f"q{j}", float(p[j]), float(sizes[j] * FILE_TOKENS), DECODE, (f"f{j}",)) for j in range(spec.files))
    subsets = list(itertools.combinations(range(spec.files), spec.cache))
    profiles = [Profile(_subset_id(m), tuple(f"f{j}" for j in m)) for m in subsets]
    if spec.fallback_min is not None:
        profiles.insert(0, Profile(FALLBACK_ID))
    memory = SLOTS * (1.0 + spec.capacity)  # c_s = SLOTS (1 + capacity − size_s)
    caps = () if spec.max_share is None else tuple((pr.id, float(spec.max_share)) for pr in profiles if pr.id != FALLBACK_ID)
    placement = PlacementSpec(
        target=TARGET,
        memory_budget=None if spec.memory_budget is None else _budget(spec),
        fallback=FALLBACK_ID if spec.fallback_min is not None else None,
        fallback_min=float(spec.fallback_min or 0.0),
        max_share=caps,
    )
    label = name or f"classical_J{spec.files}_K{spec.cache}"
    base = Instance(
        label,
        Network(edge_density=1.0, request_intensity=INTENSITY, radio_scale=xi, radio_exponent=spec.alpha),
        Gpu(memory=memory, runtime_per_sequence=1.0, kv_per_token=KV_PER_TOKEN),
        prefill,
        prefixes,
        requests,
        tuple(profiles),
        placement,
    )
    if spec.closed_form:
        best = optimum(spec)
        keep = 1.0 - (spec.fallback_min or 0.0)
        weights = mix_with_marginals(best.marginals / keep, spec.cache)
        mix = {_subset_id(m): keep * share for m, share in weights.items()}
        if spec.fallback_min is not None:
            mix[FALLBACK_ID] = float(spec.fallback_min)
        value, method = best.value, "water-filling"
        marginals = best.marginals
    else:
        value, pi = convex_optimum(base, spec.reach)
        mix = {sid: float(x) for sid, x in zip(base.profile_ids, pi) if x > 1e-12}
        marginals = _marginals(base, pi)
        method = "convex program"
    metadata = {
        "family": FAMILY,
        "spec": {k: v for k, v in _spec_dict(spec).items() if v is not None},
        "known_optimum": float(value),
        "optimal_marginals": {f"f{j}": float(x) for j, x in enumerate(marginals)},
        "optimal_mix": mix,
        "optimum_method": method,
        "reference": "docs/model.md §18",
    }
    return base.replace(metadata=metadata)


def _spec_dict(spec: ClassicalSpec) -> dict[str, object]:
    out: dict[str, object] = {}
    for key in ("files", "cache", "zipf", "reach", "alpha", "fallback_min", "memory_budget", "max_share", "node_capacity"):
        out[key] = getattr(spec, key)
    out["sizes"] = None if spec.sizes is None else list(spec.sizes)
    return out


def _membership(instance: Instance) -> FloatArray:
    """``(J, S)``: file ``j`` (root prefix ``f<j>``) is held by profile ``s``."""
    index = {f"f{j}": j for j in range(len(instance.prefixes))}
    out = np.zeros((len(instance.prefixes), len(instance.profiles)))
    for s, profile in enumerate(instance.profiles):
        for v in profile.prefixes:
            out[index[v], s] = 1.0
    return out


def _marginals(instance: Instance, mix: npt.ArrayLike) -> FloatArray:
    return _membership(instance) @ np.asarray(mix, dtype=float)


def closed_form_coverage(instance: Instance, mix: npt.ArrayLike, reach: float | None = None) -> float:
    """``Σ_j p_j (1 − exp(−c a_j(π)))`` for a classical instance and any mix."""
    net = instance.network
    c = (
        reach
        if reach is not None
        else math.pi * net.edge_density * (instance.placement.target / net.radio_scale) ** (2.0 / net.radio_exponent)
    )
    return coverage_of_marginals(instance.probabilities, _marginals(instance, mix), c)


def convex_optimum(instance: Instance, reach: float | None = None) -> tuple[float, FloatArray]:
    """``max_π Σ_j p_j (1 − exp(−c (Aπ)_j))`` over the instance's linear constraints (simplex, caps,
    fallback minimum, memory budget, ``π_s = 0`` where ``c_s < 1``), by cvxpy's exponential cone.

    The objective is concave in ``π`` for this family, so the solver's optimum is global; returns
    ``(P*, π*)``.
    """
    import cvxpy as cp

    from edgeprefix.formulations.placement import placement_problem

    net = instance.network
    c = (
        reach
        if reach is not None
        else math.pi * net.edge_density * (instance.placement.target / net.radio_scale) ** (2.0 / net.radio_exponent)
    )
    linear = placement_problem(instance).constraints
    membership = _membership(instance)
    pi = cp.Variable(len(instance.profiles))
    cons = [linear.A_eq @ pi == linear.b_eq] if linear.A_eq.size else []
    if linear.A_ub.size:
        cons.append(linear.A_ub @ pi <= linear.b_ub)
    cons += [pi >= np.nan_to_num(linear.lower, neginf=0.0), pi <= np.nan_to_num(linear.upper, posinf=1.0)]
    p = np.asarray(instance.probabilities, dtype=float)
    objective = cp.Maximize(p @ (1 - cp.exp(-c * (membership @ pi))))
    problem = cp.Problem(objective, cons)
    problem.solve(solver=cp.CLARABEL, tol_gap_abs=SOLVER_TOLERANCE, tol_gap_rel=SOLVER_TOLERANCE, tol_feas=SOLVER_TOLERANCE)
    if problem.status != cp.OPTIMAL:
        raise RuntimeError(f"the convex program of the classical optimum ended {problem.status!r}")
    x = np.clip(np.asarray(pi.value, dtype=float), 0.0, None)
    x /= x.sum()
    return coverage_of_marginals(p, membership @ x, c), x


def suite(seed: int = 0) -> list[ClassicalSpec]:
    """The dimension ladder of the optimiser study: 6, 15, 45, 120 and 300 profiles."""
    rng = np.random.default_rng(seed)
    shapes = ((4, 2), (6, 2), (10, 2), (10, 3), (25, 2))
    return [ClassicalSpec(j, k, zipf=float(rng.uniform(0.6, 1.2)), reach=float(rng.uniform(1.0, 4.0))) for j, k in shapes]
