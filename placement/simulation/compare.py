"""Analytical model vs simulation: the validation tables (docs/model.md §13).

:func:`analytical_router` turns an :class:`~edgeprefix.placement.model.evaluation.Evaluation` into the
online router's special case that *is* its policy (tier-level advertised delay, no
admission control), so a simulation routes exactly by Theorem 1 and only the queues
differ from the analysis.  :func:`compare_coverage` then puts, side by side, eq. (39), the
Gamma-law correction, the node-level Erlang-C coverage and the simulated coverage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import plain
from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.simulation.correction import (
    VORONOI_SHAPE,
    corrected_coverage,
    node_erlang_coverage,
)
from edgeprefix.placement.simulation.layout import LayoutSpec
from edgeprefix.placement.simulation.network import SimulationSpec, simulate_network
from edgeprefix.placement.simulation.routers import BASELINES, OnlineRouter

FloatArray = npt.NDArray[np.float64]
ANALYTICAL_POLICIES = ("load_aware", "prefix", "nearest")
VALIDATION_SPEC = SimulationSpec(horizon=80.0, warmup=60.0, layout=LayoutSpec(mean_nodes=1000.0, counts="exact"))


def analytical_router(evaluation) -> OnlineRouter:
    """The online router that reproduces ``evaluation.policy`` (Theorem 1's tier rule)."""
    wait = tuple(float(w) for w in np.nan_to_num(np.asarray(evaluation.advertised_wait, dtype=float)))
    return OnlineRouter(policy=evaluation.policy, delay="tier", tier_wait=wait)


@dataclass(frozen=True)
class CoverageRow:
    """One (Λ, policy) line of the comparison.

    Attributes
    ----------
    analytical : eq. (39) (every node of a tier has the tier's Poisson load).
    gamma : :func:`corrected_coverage` with the Voronoi Gamma shape.
    node_erlang : :func:`node_erlang_coverage` (per-node loads and distances jointly sampled).
    simulated : mean coverage over the replications; ``simulated_se`` its standard error
        (spread across replications, or batch means when there is one).
    cell : the cell-load queue model (docs/model.md §14) at the same operating point.
    online, online_se : the online router with fresh per-node telemetry (docs/model.md §11) on
        the same networks and arrivals (load-aware rows with ``online=True``; else NaN).
    """

    intensity: float
    policy: str
    analytical: float
    gamma: float
    node_erlang: float
    simulated: float
    simulated_se: float
    requests: int
    utilization_analytical: FloatArray = field(repr=False)
    utilization_simulated: FloatArray = field(repr=False)
    cell: float = float("nan")
    online: float = float("nan")
    online_se: float = float("nan")

    def closest(self) -> str:
        """Which model is nearest to the simulation."""
        errors = {"analytical": self.analytical, "gamma": self.gamma, "node_erlang": self.node_erlang, "cell": self.cell}
        errors = {k: v for k, v in errors.items() if np.isfinite(v)}
        return min(errors, key=lambda k: abs(errors[k] - self.simulated))

    def to_dict(self) -> dict:
        return {
            "intensity": self.intensity,
            "policy": self.policy,
            "analytical": self.analytical,
            "gamma": self.gamma,
            "node_erlang": self.node_erlang,
            "simulated": self.simulated,
            "simulated_se": self.simulated_se,
            "error_analytical": self.analytical - self.simulated,
            "error_gamma": self.gamma - self.simulated,
            "error_node_erlang": self.node_erlang - self.simulated,
            "meanfield": self.analytical,
            "cell": self.cell,
            "error_cell": self.cell - self.simulated,
            "online": self.online,
            "online_se": self.online_se,
            "closest": self.closest(),
            "requests": self.requests,
            "utilization_analytical": [float(v) for v in self.utilization_analytical],
            "utilization_simulated": [float(v) for v in self.utilization_simulated],
        }


def compare_coverage(
    instance,
    mix=None,
    *,
    intensities: Iterable[float] = (1.0, 2.0, 3.0),
    policies: Sequence[str] = ANALYTICAL_POLICIES,
    spec: SimulationSpec = VALIDATION_SPEC,
    replications: int = 2,
    tau: float | None = None,
    seed: int | None = 0,
    node_points: int = 300,
    online: bool = False,
) -> list[CoverageRow]:
    """Simulated vs analytical TTFT coverage for each (Λ, policy).

    Each replication draws its own network and arrivals from ``seed``; the same seeds are
    used for every policy (common random numbers).  The node-level Erlang-C coverage uses
    a network of the simulation's size with ``node_points`` request locations per node.
    ``online`` also simulates, on the load-aware rows, the online router with fresh per-node
    telemetry (k = 2 candidates per profile) on the same seeds.
    """
    if replications < 1:
        raise ValueError(f"replications: must be >= 1, got {plain(replications)}")
    tau = float(instance.placement.target if tau is None else tau)
    rows = []
    seeds = np.random.SeedSequence(seed).spawn(replications)
    for lam in intensities:
        inst = instance.with_network(request_intensity=float(lam))
        for policy in policies:
            ev = evaluate(inst, mix, policy, target=tau)
            router = analytical_router(ev)
            runs = [simulate_network(inst, mix, router, spec, seed=np.random.default_rng(s)) for s in seeds]
            covs = np.array([r.coverage(tau) for r in runs])
            se = _standard_error(covs, runs, tau)
            online_cov = online_se = float("nan")
            if online and policy == "load_aware":
                live = OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
                online_runs = [simulate_network(inst, mix, live, spec, seed=np.random.default_rng(s)) for s in seeds]
                online_covs = np.array([r.coverage(tau) for r in online_runs])
                online_cov, online_se = float(online_covs.mean()), _standard_error(online_covs, online_runs, tau)
            rows.append(
                CoverageRow(
                    intensity=float(lam),
                    policy=policy,
                    analytical=float(ev.coverage(tau)),
                    gamma=corrected_coverage(ev, tau, shape=VORONOI_SHAPE),
                    node_erlang=node_erlang_coverage(
                        ev,
                        tau,
                        mean_nodes=spec.layout.mean_nodes,
                        points_per_node=node_points,
                        seed=np.random.default_rng(seeds[0]).integers(2**32),
                    ),
                    simulated=float(covs.mean()),
                    simulated_se=se,
                    requests=int(sum(r.requests for r in runs)),
                    utilization_analytical=np.nan_to_num(np.asarray(ev.utilization, dtype=float)),
                    utilization_simulated=mean_over_runs([r.tier_utilization() for r in runs]),
                    cell=float(evaluate(inst, mix, policy, target=tau, queue_model="cell").coverage(tau)),
                    online=online_cov,
                    online_se=online_se,
                )
            )
    return rows


def mean_over_runs(rows) -> FloatArray:
    """Per-column mean over runs, ignoring NaN (a profile without nodes in a run); NaN where no run
    has a value -- what ``numpy.nanmean`` gives, without its "Mean of empty slice" warning."""
    values = np.asarray(rows, dtype=float)
    seen = ~np.isnan(values)
    counts = seen.sum(axis=0)
    sums = np.where(seen, values, 0.0).sum(axis=0)
    return np.divide(sums, counts, out=np.full(sums.shape, np.nan), where=counts > 0)


def _standard_error(covs: FloatArray, runs, tau: float) -> float:
    """Spread across replications, or batch means within the one run."""
    if covs.size > 1:
        return float(covs.std(ddof=1) / np.sqrt(covs.size))
    return runs[0].coverage_standard_error(tau)


def policy_table(
    instance,
    mix=None,
    *,
    intensities: Iterable[float] = (1.0, 2.0, 3.0, 4.0),
    baselines: Mapping[str, object] | None = None,
    online: bool = True,
    spec: SimulationSpec = VALIDATION_SPEC,
    tau: float | None = None,
    seed: int | None = 0,
    queue_model: str = "meanfield",
) -> list[dict]:
    """Coverage, p50/p95/p99 TTFT and per-tier utilisation for every policy and Λ.

    ``analytical_coverage`` of the analytical rows is the ``queue_model``'s (docs/model.md §14).

    Rows: the three analytical policies (simulated as Theorem 1's rule), the online
    router with live telemetry (``load_aware_online``), and the production baselines
    (default knobs, distance-blind) — all on the same network and arrivals per Λ.
    """
    tau = float(instance.placement.target if tau is None else tau)
    routers_extra = dict(baselines) if baselines is not None else {name: cls() for name, cls in BASELINES.items()}
    rows = []
    for lam in intensities:
        inst = instance.with_network(request_intensity=float(lam))
        routers: list[tuple[Any, float | None]] = []
        for policy in ANALYTICAL_POLICIES:
            ev = evaluate(inst, mix, policy, target=tau, queue_model=queue_model)
            routers.append((analytical_router(ev), float(ev.coverage(tau))))
        if online:
            routers.append((OnlineRouter("load_aware", "telemetry", candidates_per_profile=2), None))
        routers += [(r, None) for r in routers_extra.values()]
        for router, analytic in routers:
            res = simulate_network(inst, mix, router, spec, seed=seed)
            row = res.summary(tau)
            row["intensity"] = float(lam)
            row["analytical_coverage"] = analytic
            rows.append(row)
    return rows


def staleness_sweep(
    instance,
    mix=None,
    *,
    periods: Iterable[float] = (0.0, 0.5, 2.0, 8.0),
    accounting: Iterable[bool] = (False, True),
    router: OnlineRouter | None = None,
    spec: SimulationSpec = VALIDATION_SPEC,
    tau: float | None = None,
    seed: int | None = 0,
) -> list[dict]:
    """Coverage of the online router as the telemetry period ``Δt`` grows.

    Each period is run without and with the router's local accounting of its own
    in-flight requests (:class:`SimulationSpec` ``local_accounting``).
    """
    from dataclasses import replace

    tau = float(instance.placement.target if tau is None else tau)
    router = router or OnlineRouter("load_aware", "telemetry", candidates_per_profile=2)
    rows = []
    for period in periods:
        for local in accounting:
            run_spec = replace(spec, refresh_period=float(period), local_accounting=bool(local))
            res = simulate_network(instance, mix, router, run_spec, seed=seed)
            row = res.summary(tau)
            row["refresh_period"] = float(period)
            row["local_accounting"] = bool(local)
            rows.append(row)
    return rows
