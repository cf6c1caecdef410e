"""Grid search on Dask distributed (docs/model.md §10.3): a ``LocalCluster`` or a scheduler address.

The lattice is cut into chunks; each chunk is one task that scores its points in one batched
evaluation, every fixed point starting cold (docs/model.md §16).  A task is therefore a pure
function of its chunk, and gathering the tasks in order gives the same scores, bit for bit,
whether they ran on a cluster or one after the other in this process (``client=None``).  The
standard grid search then walks the lattice over the gathered table, so the
:class:`edgeprefix.solvers.result.Result` (history, best point, ``history.csv``) is the one a
single-process run writes.  (The plain ``grid`` method starts each chunk from the previous
chunk's last point; its values agree within the fixed point's tolerance.)"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from edgeprefix.formulations.linear import LinearConstraints
from edgeprefix.formulations.objective import Score
from edgeprefix.placement.errors import plain
from edgeprefix.solvers.api import solve
from edgeprefix.solvers.certificate import certify_point
from edgeprefix.solvers.grid import GridSolver, feasible_lattice
from edgeprefix.solvers.result import Result
from edgeprefix.solvers.tracking import Callback, Problem

FloatArray = npt.NDArray[np.float64]
T = TypeVar("T")
R = TypeVar("R")
Row = tuple[float, float, bool, float]  # value, coverage, feasible, overload
CONNECT_TIMEOUT = "10s"  # how long a scheduler address may take to answer


CLUSTER_START_SECONDS = 6.0  # start-up of a LocalCluster plus scattering the problem, measured on 2 cores (benchmarks/README.md)


def usable_cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def local_cluster_pays(workers: int | None, tasks: int, seconds_per_task: float) -> str | None:
    """``None`` when a LocalCluster of ``workers`` processes (default: one per core) should beat
    running ``tasks`` tasks of ``seconds_per_task`` here; else the reason to stay serial.

    The cluster costs :data:`CLUSTER_START_SECONDS` and spreads the work over at most
    ``min(workers, cores, tasks)`` processes.  Without an explicit ``workers``, machines with two
    cores or fewer stay serial: the scheduler, the workers and this process share them.
    """
    cores = usable_cores()
    if workers is None and cores <= 2:
        return f"{cores} cores: a local Dask cluster would share them with its scheduler and this process (--workers N forces one)"
    n = min(workers or cores, cores, tasks)
    serial = tasks * seconds_per_task
    if n < 2 or CLUSTER_START_SECONDS + serial / n >= serial:
        return (
            f"{tasks} tasks × {seconds_per_task:.3g} s ≈ {serial:.1f} s here; {n} worker process(es) on {cores} cores "
            f"cannot win back a local cluster's ≈{CLUSTER_START_SECONDS:.0f} s start-up"
        )
    return None


WORKER_START_SECONDS = 1.0  # forking the Optuna workers and opening their storage connections (benchmarks/README.md)
SHARED_TRIAL_SECONDS = 0.05  # extra storage work per trial when processes share a study (locks, heartbeats; lower end measured)
PROBE_POINTS = 16  # warm points the cost probe times


def probe_seconds_per_point(problem: Problem, points: FloatArray, sample: int = PROBE_POINTS) -> float:
    """Seconds per point of a grid task, timed on up to ``sample`` points scored as one chunk after
    a first point that warms the caches (the first point alone costs several times a warm one)."""
    if len(points) < 2:
        start = time.perf_counter()
        score_chunk(problem, points[:1])
        return time.perf_counter() - start
    score_chunk(problem, points[:1])  # warm-up: imports, kernels, caches
    timed = points[1 : 1 + sample]
    start = time.perf_counter()
    score_chunk(problem, timed)
    return (time.perf_counter() - start) / len(timed)


def probe_seconds_per_evaluation(problem: Problem, points: FloatArray, sample: int = 3) -> float:
    """Seconds of one black-box evaluation (one trial's objective), the mean over ``sample`` points
    after a first one that warms the caches."""
    problem.score(points[0])
    timed = points[1 : 1 + sample] if len(points) > 1 else points[:1]
    start = time.perf_counter()
    for x in timed:
        problem.score(x)
    return (time.perf_counter() - start) / len(timed)


def local_workers_pay(workers: int, budget: int, seconds_per_evaluation: float) -> str | None:
    """``None`` when ``workers`` processes sharing one study should beat one process running the
    ``budget`` trials of ``seconds_per_evaluation`` each; else the reason to run serially.

    The processes cost :data:`WORKER_START_SECONDS` to start and :data:`SHARED_TRIAL_SECONDS` of
    extra storage work per trial; the evaluations spread over ``min(workers, cores, budget)``.
    """
    cores = usable_cores()
    n = min(workers, cores, budget)
    serial = budget * seconds_per_evaluation
    parallel = WORKER_START_SECONDS + budget * (seconds_per_evaluation / max(n, 1) + SHARED_TRIAL_SECONDS)
    if n < 2 or parallel >= serial:
        return (
            f"{budget} trials × {seconds_per_evaluation:.3g} s ≈ {serial:.2g} s here; {n} worker process(es) on {cores} "
            f"cores would need ≈{parallel:.2g} s (start-up ≈{WORKER_START_SECONDS:g} s, shared storage "
            f"≈{SHARED_TRIAL_SECONDS:g} s per trial)"
        )
    return None


@contextlib.contextmanager
def dask_client(address: str | None = None, workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client``: to the scheduler at ``address``, else to a new ``LocalCluster``.

    The local cluster has ``workers`` single-threaded worker processes (default: one per CPU).
    """
    from edgeprefix.solvers.extras import require
    from edgeprefix.solvers.optuna_common import redact, scrub

    require("distributed", "--dask" if address is not None else "a local Dask cluster (--workers, sweep)")
    from distributed import Client, LocalCluster

    if address is not None:
        shown = redact(address)  # tcp://user:secret@host: never echo the secret
        if workers is not None:
            raise ValueError(f"workers applies to the local cluster only, got workers={workers} with scheduler {shown!r}")
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError, TypeError) as exc:
            text = scrub(str(exc), address).strip()
            reason = text.splitlines()[0] if text else type(exc).__name__
            raise ValueError(f"--dask {shown!r}: cannot reach the Dask scheduler within {CONNECT_TIMEOUT} ({reason[:160]})") from None
        with client:
            yield client
        return
    n = (os.cpu_count() or 1) if workers is None else workers
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"workers must be a positive integer, got {plain(workers)}")
    with (
        LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=logging.ERROR) as cluster,
        Client(cluster) as client,
    ):
        yield client


def map_ordered(fn: Callable[[T], R], items: Sequence[T], client: Any = None, on_done: Callable[[], None] | None = None) -> list[R]:
    """``[fn(item) for item in items]``, as Dask tasks when ``client`` is given (results in item order).

    ``on_done()`` is called once per finished item (in completion order), e.g. to advance a progress bar.
    """
    tick = on_done or (lambda: None)
    if client is None:
        out = []
        for item in items:
            out.append(fn(item))
            tick()
        return out
    futures = client.map(fn, list(items), pure=False)
    if on_done is not None:
        from distributed import as_completed

        for _ in as_completed(futures):
            tick()
    return list(client.gather(futures))


def score_chunk(problem: Problem, points: FloatArray) -> list[Row]:
    """Score ``points`` (shape ``(n, S)``) in order: in one batched evaluation from a cold start
    (docs/model.md §16) when the problem has ``score_many``, else one by one, each fixed point
    warm-started from the previous one."""
    score_many = getattr(problem, "score_many", None)
    if score_many is not None:
        scores = score_many(list(points))
    else:
        scores, warm = [], None
        for point in points:
            scores.append(problem.score(point, warm_start=warm))
            warm = scores[-1].warm_start if scores[-1].warm_start is not None else warm
    return [(float(score.value), float(score.coverage), bool(score.feasible), float(score.overload)) for score in scores]


@dataclass(frozen=True)
class TabulatedProblem:
    """``problem`` with its black box replaced by a table of scores computed elsewhere.

    ``table`` maps a point's bytes (``np.float64``, as the lattice holds it) to its
    :data:`Row`; scoring any other point raises.
    """

    problem: Problem
    table: dict[bytes, Row]

    @property
    def constraints(self) -> LinearConstraints:
        return self.problem.constraints

    @property
    def variable_names(self) -> tuple[str, ...]:
        return self.problem.variable_names

    @property
    def dimension(self) -> int:
        return self.problem.dimension

    def initial_point(self) -> FloatArray:
        return self.problem.initial_point()

    def clean(self, x: npt.ArrayLike) -> FloatArray:
        return self.problem.clean(x)

    def score(self, x: npt.ArrayLike, warm_start: FloatArray | None = None) -> Score:
        key = np.asarray(x, dtype=np.float64).tobytes()
        if key not in self.table:
            raise ValueError(f"point {np.asarray(x).tolist()} is not in the table of {len(self.table)} scored points")
        value, coverage, feasible, overload = self.table[key]
        return Score(value=value, coverage=coverage, feasible=feasible, overload=overload, mix=self.clean(x), evaluation=None)


def grid_search(
    problem: Problem,
    *,
    resolution: int = 20,
    chunk: int = 64,
    client: Any = None,
    budget: int | None = None,
    callback: Callback | None = None,
) -> Result:
    """The ``grid`` method with the lattice scored as Dask tasks (``client``) or serially (``None``).

    Returns the :class:`Result` of ``solve(..., "grid")`` over the gathered scores, with the
    best point's ``evaluation`` recomputed here and ``seconds`` the whole wall time.
    """
    start = time.perf_counter()
    GridSolver(resolution=resolution, chunk=chunk)  # validates the options before any work
    points = feasible_lattice(problem.constraints, resolution)
    chunks = [points[i : i + chunk] for i in range(0, len(points), chunk)]
    if client is None:
        rows = [score_chunk(problem, part) for part in chunks]
    else:
        shared = client.scatter(problem, broadcast=True)
        rows = client.gather([client.submit(score_chunk, shared, part, pure=False) for part in chunks])
    table = {p.tobytes(): row for p, row in zip(points, (r for part in rows for r in part))}
    result = solve(TabulatedProblem(problem, table), "grid", budget=budget, callback=callback, resolution=resolution, chunk=chunk)
    extras = dict(result.extras, chunks=len(chunks), dask_workers=_worker_count(client))
    best = problem.score(result.x)
    seconds = time.perf_counter() - start
    certificate, note = certify_point(problem, best)
    return dataclasses.replace(
        result, evaluation=best.evaluation, seconds=seconds, extras=extras, certificate=certificate, certificate_note=note
    )


def _worker_count(client: Any) -> int:
    if client is None:
        return 0
    return len(client.scheduler_info().get("workers", {}))
