"""The online router at a telemetry age, sampled: the network of docs/model.md (11.7) under the telemetry of (11.10).

The board mean field of :mod:`edgeprefix.placement.model.stale_router` keeps one node and i.i.d. marks for the
others; what it leaves out (the ``k = 2`` candidate sets of neighbouring requests, the anti-correlated shown
states of neighbours at a refresh, the types' occupancies) costs it 0.02–0.1 of coverage near the stability
edge (docs/model.md (11.17)).  This prediction drops those approximations: it draws networks of the instance
and mix (``nodes`` nodes per replication, the mix's exact profile counts), space–time Poisson requests, and
routes them with the online router (``k = 2`` nearest per profile, cost (11.1)) reading every node's queue as
old as the telemetry says, with the blocks of :mod:`edgeprefix.placement.simulation.delayed_fast` (no Python
loop over requests).  It is a Monte Carlo estimate of the same stochastic model the network simulator
samples: its error is its sampling error (``coverage_se``, batch means over the replications) and nothing
else, so agreement with the simulator checks the implementation, not an approximation.  The seeds are fixed
(:data:`SEED`, independent of the benchmarks' seeds), so a prediction is a deterministic function of its
inputs, and the mixes of one decision share them (common random numbers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.model.telemetry import Telemetry

FloatArray = npt.NDArray[np.float64]
NODES = 1000  # nodes per sampled network (the layout's spread: sd 0.017 of coverage at 300 nodes, 0.007 at 1000)
REPLICATIONS = 3  # independent networks (the standard error is their spread)
SEED = 20_611  # fixed: a prediction is a function of its inputs; not a seed any benchmark uses
MIN_HORIZON = 40.0  # measured seconds, at least OCCUPANCIES mean occupancies
MIN_WARMUP = 30.0  # discarded seconds (queues start empty), at least OCCUPANCIES mean occupancies
OCCUPANCIES = 15.0
LOOP_REQUESTS = 300_000  # requests per prediction (all networks) when a mitigation takes the per-request loop
LOOP_MIN_NODES = 100  # ... but never fewer nodes per network than this


@dataclass(frozen=True)
class SampledPrediction:
    """Coverage at ``target``, mean TTFT and tier loads of the sampled online router.

    ``coverage_se``: the spread of the replications' coverages (``sd / sqrt(R)``), at least the pooled batch-means
    SE of the runs (a single network's batch means miss the spread between layouts: at paper_baseline, 15 % of the
    stability edge, 300-node networks, the batch-means SE was 0.004 and the sd over five networks 0.017).
    """

    coverage: float
    coverage_se: float
    mean_ttft: float
    utilization: FloatArray
    requests: int
    nodes: int = NODES  # nodes per sampled network
    loop: bool = False  # routed by the simulator's per-request loop (a mitigation block routing cannot hold)


def run_length(instance) -> tuple[float, float]:
    """``(horizon, warmup)`` [s]: 40 s and 30 s, or 15 mean occupancies when the instance serves longer."""
    service = float((np.asarray(instance.probabilities) * np.asarray(instance.service_time).mean(axis=0)).sum())
    return max(MIN_HORIZON, OCCUPANCIES * service), max(MIN_WARMUP, OCCUPANCIES * service)


def takes_loop(*, local_accounting: bool = False, sample: int = 0, admission: float = math.inf) -> bool:
    """Whether the simulator routes this router by its per-request loop: router-local in-flight counts change the
    next read within a block (a send moves the count), power of ``d`` draws its sample per request, and admission
    control keeps per-node open/closed states (docs/model.md (11.19))."""
    return bool(local_accounting or sample > 0 or math.isfinite(admission))


def loop_nodes(instance, replications: int = REPLICATIONS) -> int:
    """Nodes per network when the per-request loop routes: :data:`LOOP_REQUESTS` over the replications' expected
    requests (``Λ / λ_b`` per node over warm-up and horizon), at most :data:`NODES`, at least :data:`LOOP_MIN_NODES`.

    The loop costs 50–90 CPU-µs per request (paper_calibrated, 55 % of the edge, ``D = 2`` s: local accounting,
    admission ρ = 1, power of 2), so a prediction stays near 15–30 CPU-seconds."""
    horizon, warmup = run_length(instance)
    per_node = float(instance.network.request_intensity) / float(instance.network.edge_density) * (horizon + warmup)
    if not (math.isfinite(per_node) and per_node > 0):
        return NODES
    return int(min(NODES, max(LOOP_MIN_NODES, LOOP_REQUESTS / (replications * per_node))))


def predict_sampled(
    instance,
    mix,
    telemetry: Telemetry,
    *,
    target: float | None = None,
    nodes: int | None = None,
    replications: int = REPLICATIONS,
    seed: int = SEED,
    margin: float = 0.0,
    local_accounting: bool = False,
    sample: int = 0,
    admission: float = math.inf,
    candidates_per_profile: int = 2,
) -> SampledPrediction:
    """The online router's coverage, mean TTFT and tier loads at ``telemetry``, sampled (module docstring).

    Mitigations as in :func:`edgeprefix.placement.model.stale_router.predict_online`: ``margin`` ``z_δ``,
    ``local_accounting``, ``sample`` ``d`` (power of ``d``; 0: every candidate) and ``admission`` ``ρ``
    (``ρ^high = ρ^low = ρ``).  Those other than the margin take the simulator's per-request loop (:func:`takes_loop`);
    ``nodes`` None is :data:`NODES` per network on the block (or fresh) routing and :func:`loop_nodes` on the loop, so a
    prediction costs seconds, not minutes.
    """
    from edgeprefix.placement.simulation.layout import LayoutSpec
    from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
    from edgeprefix.placement.simulation.routers import OnlineRouter, SampledOnlineRouter

    if not (isinstance(replications, (int, np.integer)) and replications >= 1):
        raise ValueError(f"replications: must be an integer >= 1, got {replications}")
    loop = takes_loop(local_accounting=local_accounting, sample=sample, admission=admission)
    if nodes is None:
        nodes = loop_nodes(instance, int(replications)) if loop else NODES
    if not (isinstance(nodes, (int, np.integer)) and nodes >= 10):
        raise ValueError(f"nodes: the sampled prediction needs an integer >= 10 nodes per network, got {nodes}")
    tau = float(instance.placement.target if target is None else target)
    horizon, warmup = run_length(instance)
    spec = SimulationSpec(
        horizon=horizon,
        warmup=warmup,
        telemetry_delay=float(telemetry.delay),
        refresh_period=float(telemetry.refresh),
        local_accounting=bool(local_accounting),
        layout=LayoutSpec(mean_nodes=float(nodes), counts="exact"),
    )
    online = OnlineRouter(
        "load_aware", "telemetry", candidates_per_profile=candidates_per_profile, margin=margin, rho_high=admission, rho_low=admission
    )
    router = SampledOnlineRouter(online, sample) if sample > 0 else online
    covs, ses, ttfts, utils, count = [], [], [], [], 0
    for child in np.random.SeedSequence(seed).spawn(int(replications)):
        run = simulate_network(instance, mix, router, spec, seed=np.random.default_rng(child))
        covs.append(run.coverage(tau))
        ses.append(run.coverage_standard_error(tau))
        ttft = run.ttft[np.isfinite(run.ttft)]
        ttfts.append(float(ttft.mean()) if ttft.size else math.inf)
        utils.append(run.tier_utilization())
        count += run.requests
    se = float(np.sqrt(np.sum(np.square(ses)))) / len(ses)
    if len(covs) > 1:
        se = max(se, float(np.std(covs, ddof=1)) / math.sqrt(len(covs)))
    return SampledPrediction(float(np.mean(covs)), se, float(np.mean(ttfts)), np.mean(np.vstack(utils), axis=0), count, int(nodes), loop)
