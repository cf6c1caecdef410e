"""Event-driven FCFS M/M/c and M/G/c simulation, checked against Erlang C (docs/model.md §5, §13)
and the M/G/c law (docs/model.md §19.6).

FCFS with ``c`` identical servers admits an exact one-pass recursion: customers start in
arrival order, each on the server that frees first, so with a heap of the ``c`` server
free times ``start_n = max(t_n, min free)`` and the freed slot becomes ``start_n + S_n``.
The loop runs over plain Python floats (no per-customer objects); 10⁶ customers take
well under a second.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain
from edgeprefix.placement.simulation.reference import (
    erlang_c,
    mmc_mean_wait,
    mmc_wait_cdf,
)

FloatArray = npt.NDArray[np.float64]


def fcfs_waits(arrival_times: npt.ArrayLike, service_times: npt.ArrayLike, servers: int) -> FloatArray:
    """Waiting times of a FCFS queue with ``c`` servers (times sorted ascending).

    Parameters
    ----------
    arrival_times : nondecreasing arrival epochs, shape ``(n,)``.
    service_times : service requirements, shape ``(n,)``.
    servers : c >= 1.
    """
    c = int(servers)
    if c < 1:
        raise ValueError(f"servers: c must be >= 1, got {plain(servers)}")
    arrivals = np.asarray(arrival_times, dtype=float)
    services = np.asarray(service_times, dtype=float)
    if arrivals.shape != services.shape or arrivals.ndim != 1:
        raise ValueError(f"service_times: shape {services.shape} must equal arrival_times' {arrivals.shape}")
    if arrivals.size > 1 and np.any(np.diff(arrivals) < 0):
        raise ValueError("arrival_times: must be sorted ascending (FCFS order)")
    free = [0.0] * c  # a valid heap
    waits = [0.0] * arrivals.size
    replace = heapq.heapreplace
    for i, (t, x) in enumerate(zip(arrivals.tolist(), services.tolist())):
        f = free[0]
        if f > t:
            waits[i] = f - t
            replace(free, f + x)
        else:
            replace(free, t + x)
    return np.asarray(waits)


@dataclass(frozen=True)
class MMcComparison:
    """Simulated vs Erlang-C statistics of one M/M/c queue.

    Attributes
    ----------
    waits : simulated waiting times after warm-up.
    wait_probability, mean_wait : simulated ``P(W > 0)`` and ``W̄``.
    erlang_wait_probability, erlang_mean_wait : ``P^W`` (eq. (17)) and ``W̄`` (eq. (18)).
    kolmogorov : ``sup_w |F̂_W(w) − F_W(w)|`` against eqs. (19)–(20).
    utilization : ``ρ = λq / (c μ)``.
    """

    arrival_rate: float
    service_rate: float
    servers: int
    waits: FloatArray = field(repr=False)
    wait_probability: float
    mean_wait: float
    erlang_wait_probability: float
    erlang_mean_wait: float
    kolmogorov: float

    @property
    def utilization(self) -> float:
        return self.arrival_rate / (self.servers * self.service_rate)

    def mean_wait_standard_error(self, batches: int = 50) -> float:
        """Batch-means standard error of the simulated ``W̄`` (waits are autocorrelated)."""
        means = np.array([b.mean() for b in np.array_split(self.waits, batches)])
        return float(means.std(ddof=1) / np.sqrt(batches))


def kolmogorov_distance(samples: npt.ArrayLike, arrival_rate: float, service_rate: float, servers: int) -> float:
    """``sup_w |F̂(w) − F_W(w)|`` of waiting-time samples against the Erlang-C CDF.

    The law has an atom ``1 − P^W`` at 0; both one-sided gaps are checked at every jump.
    """
    w = np.sort(np.asarray(samples, dtype=float))
    n = w.size
    f = mmc_wait_cdf(w, arrival_rate, service_rate, servers)
    upper = np.searchsorted(w, w, side="right") / n  # F̂(w), ties included
    lower = np.searchsorted(w, w, side="left") / n  # F̂(w−)
    f_left = np.where(w > 0, f, 0.0)  # F(w−): the atom 1 − P^W sits at 0
    return float(max(np.max(np.abs(upper - f)), np.max(np.abs(f_left - lower))))


def simulate_mmc(
    arrival_rate: float,
    service_rate: float,
    servers: int,
    customers: int = 1_000_000,
    *,
    seed: int | np.random.Generator | None = None,
    warmup: float = 0.05,
) -> MMcComparison:
    """Simulate a FCFS M/M/c queue and compare with Erlang C.

    Parameters
    ----------
    arrival_rate : λq > 0.
    service_rate : μ > 0 (exponential services of mean 1/μ).
    servers : c >= 1; needs ``ρ = λq/(c μ) < 1``.
    customers : number simulated (including the warm-up).
    seed : seed or generator.
    warmup : fraction of the first customers discarded (the queue starts empty).
    """
    if not (arrival_rate > 0 and service_rate > 0):
        raise ValueError(f"arrival_rate/service_rate: must be > 0, got {plain(arrival_rate)}, {plain(service_rate)}")
    if arrival_rate >= servers * service_rate:
        raise ValueError(f"arrival_rate: the queue needs ρ < 1, got ρ = {plain(arrival_rate / (servers * service_rate))}")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup: must lie in [0, 1), got {plain(warmup)}")
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1.0 / arrival_rate, customers))
    services = rng.exponential(1.0 / service_rate, customers)
    waits = fcfs_waits(times, services, servers)[int(warmup * customers) :]
    return MMcComparison(
        arrival_rate=float(arrival_rate),
        service_rate=float(service_rate),
        servers=int(servers),
        waits=waits,
        wait_probability=float(np.mean(waits > 0)),
        mean_wait=float(waits.mean()),
        erlang_wait_probability=erlang_c(arrival_rate / service_rate, servers),
        erlang_mean_wait=mmc_mean_wait(arrival_rate, service_rate, servers),
        kolmogorov=kolmogorov_distance(waits, arrival_rate, service_rate, servers),
    )


# --------------------------------------------------------------------------------------------
# General service: the M/G/c law of docs/model.md §19.6
# --------------------------------------------------------------------------------------------
SERVICE_KINDS = ("exponential", "deterministic", "two_point", "lognormal")


@dataclass(frozen=True)
class ServiceLaw:
    """A service-time law of mean ``1/μ`` and squared coefficient of variation ``C_S²``.

    ``exponential`` (``C² = 1``), ``deterministic`` (``C² = 0``), ``two_point`` (values
    ``m (1 ± √C²)`` with probability ½ each when ``C² ≤ 1``; ``0`` and ``m (1 + C²)`` with
    probabilities ``C² / (1 + C²)`` and ``1 / (1 + C²)`` above) or ``lognormal``
    (``σ² = ln(1 + C²)``, ``μ_ln = ln m − σ²/2``).
    """

    kind: str
    mean: float
    scv: float = 1.0

    def __post_init__(self) -> None:
        if self.kind not in SERVICE_KINDS:
            raise ValueError(f"kind: unknown service law {self.kind!r} (valid: {list(SERVICE_KINDS)})")
        if not (np.isfinite(self.mean) and self.mean > 0):
            raise ValueError(f"mean: the mean service time must be > 0, got {plain(self.mean)}")
        if not (np.isfinite(self.scv) and self.scv >= 0):
            raise ValueError(f"scv: C_S² must be finite and >= 0, got {plain(self.scv)}")
        fixed = {"exponential": 1.0, "deterministic": 0.0}.get(self.kind)
        if fixed is not None and self.scv != fixed:
            raise ValueError(f"scv: a {self.kind} law has C_S² = {fixed:g}, got {plain(self.scv)}")

    def sample(self, size: int, rng: np.random.Generator) -> FloatArray:
        m, s = self.mean, self.scv
        if self.kind == "exponential":
            return rng.exponential(m, size)
        if self.kind == "deterministic":
            return np.full(size, m)
        if self.kind == "lognormal":
            sigma2 = np.log1p(s)
            return rng.lognormal(np.log(m) - 0.5 * sigma2, np.sqrt(sigma2), size)
        if s <= 1.0:
            return m * (1.0 + np.sqrt(s) * np.where(rng.random(size) < 0.5, -1.0, 1.0))
        return np.where(rng.random(size) < 1.0 / (1.0 + s), m * (1.0 + s), 0.0)


def kolmogorov_to_law(samples: npt.ArrayLike, wait_probability: float, decay: float) -> float:
    """``sup_w |F̂(w) − F(w)|`` against ``F(w) = 1 − P^W e^{−θ w}`` (atom ``1 − P^W`` at 0), both
    one-sided gaps checked at every jump."""
    from edgeprefix.placement.model.queueing import waiting_cdf

    w = np.sort(np.asarray(samples, dtype=float))
    n = w.size
    f = waiting_cdf(w, wait_probability, decay)
    upper = np.searchsorted(w, w, side="right") / n
    lower = np.searchsorted(w, w, side="left") / n
    f_left = np.where(w > 0, f, 0.0)
    return float(max(np.max(np.abs(upper - f)), np.max(np.abs(f_left - lower))))


@dataclass(frozen=True)
class MGcComparison:
    """Simulated vs approximated statistics of one M/G/c queue (docs/model.md §19.6).

    ``wait_probability``/``mean_wait`` are simulated; ``approx_*`` the M/G/c law (Erlang C and
    eq. (19.20)); ``allen_cunneen_mean_wait`` ``W̄_MM (1 + C²)/2`` and ``erlang_mean_wait`` ``W̄_MM``
    for comparison; ``kolmogorov`` against the law (19.21), ``kolmogorov_mmc`` against Erlang C's.
    """

    arrival_rate: float
    law: ServiceLaw
    servers: int
    waits: FloatArray = field(repr=False)
    wait_probability: float
    mean_wait: float
    approx_wait_probability: float
    approx_mean_wait: float
    allen_cunneen_mean_wait: float
    erlang_mean_wait: float
    kolmogorov: float
    kolmogorov_mmc: float

    @property
    def utilization(self) -> float:
        return self.arrival_rate * self.law.mean / self.servers

    def mean_wait_standard_error(self, batches: int = 50) -> float:
        """Batch-means standard error of the simulated ``W̄``."""
        means = np.array([b.mean() for b in np.array_split(self.waits, batches)])
        return float(means.std(ddof=1) / np.sqrt(batches))

    def wait_probability_standard_error(self, batches: int = 50) -> float:
        """Batch-means standard error of the simulated ``P(W > 0)``."""
        means = np.array([b.mean() for b in np.array_split(self.waits > 0, batches)])
        return float(means.std(ddof=1) / np.sqrt(batches))


def simulate_mgc(
    arrival_rate: float,
    law: ServiceLaw,
    servers: int,
    customers: int = 1_000_000,
    *,
    seed: int | np.random.Generator | None = None,
    warmup: float = 0.05,
) -> MGcComparison:
    """Simulate a FCFS M/G/c queue (Poisson arrivals, i.i.d. services of ``law``) and compare with
    the M/G/c law of :mod:`edgeprefix.placement.model.mgc` (docs/model.md §19.6).

    Needs ``ρ = λq E[S] / c < 1``; ``warmup`` is the fraction of the first customers discarded.
    """
    from edgeprefix.placement.model.mgc import mgc_decay, mgc_mean_wait

    if not arrival_rate > 0:
        raise ValueError(f"arrival_rate: must be > 0, got {plain(arrival_rate)}")
    if int(servers) < 1:
        raise ValueError(f"servers: c must be >= 1, got {plain(servers)}")
    a = arrival_rate * law.mean
    if a >= servers:
        raise ValueError(f"arrival_rate: the queue needs ρ < 1, got ρ = {plain(a / servers)}")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup: must lie in [0, 1), got {plain(warmup)}")
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1.0 / arrival_rate, customers))
    waits = fcfs_waits(times, law.sample(customers, rng), servers)[int(warmup * customers) :]
    pw = erlang_c(a, servers)
    w_mm = mmc_mean_wait(arrival_rate, 1.0 / law.mean, servers)
    theta = float(mgc_decay(a, servers, law.mean, law.scv))
    return MGcComparison(
        arrival_rate=float(arrival_rate),
        law=law,
        servers=int(servers),
        waits=waits,
        wait_probability=float(np.mean(waits > 0)),
        mean_wait=float(waits.mean()),
        approx_wait_probability=pw,
        approx_mean_wait=float(mgc_mean_wait(a, servers, law.mean, law.scv)),
        allen_cunneen_mean_wait=w_mm * (1.0 + law.scv) / 2.0,
        erlang_mean_wait=w_mm,
        kolmogorov=kolmogorov_to_law(waits, pw, theta),
        kolmogorov_mmc=kolmogorov_to_law(waits, pw, servers / law.mean - arrival_rate),
    )
