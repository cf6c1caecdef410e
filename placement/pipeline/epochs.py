"""Epochs measured on a trace: windows, their intensities and type mixes (docs/model.md §17, §10.5).

:func:`cut_epochs` cuts a :class:`~edgeprefix.placement.pipeline.trace_workload.TraceWorkload`
into consecutive windows of ``window`` seconds (the trace's clock) and gives each:

- its arrival intensity ``Λ^e = Λ · r_e / r̄`` per unit area, with ``r_e`` the window's request
  rate, ``r̄ = (n − 1) / span`` the mean rate of the whole cut part and ``Λ`` the reference
  intensity (the instance's): the same mapping as trace replay's time rescaling, so the
  windows of a replayed trace arrive at these intensities (to one request per window);
- its request-type distribution ``p^e_q`` over the instance's types (every type listed, zeros
  included, so the epoch overrides the whole of ``p``);
- a weight ``w_e = n_e / n̄`` (its requests over the mean per epoch), so ``Σ_e w_e P^e_cov`` is
  proportional to the coverage over the trace's requests;
- its length distribution: with length sub-types (docs/model.md §2.3) ``p^e_q`` is over the sub-types,
  each request counted in the sub-type of nearest length, so the epoch's mix carries its lengths to
  the planner; ``lengths`` summarises them (mean and quantiles of the input tokens).

Windows start at the first request; the last one keeps the remainder if it spans at least
half a window and is merged into the previous one otherwise; empty windows are dropped
(counted).  :func:`epochs_mapping` gives the file that ``edgeprefix migrate`` reads
(:func:`edgeprefix.formulations.migration.load_migration`), each epoch with its ``start``/``end``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import tomli_w

from edgeprefix.placement.atomic import atomic_write_text
from edgeprefix.placement.model.instance import Instance
from edgeprefix.placement.pipeline.trace_workload import TraceWorkload

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TraceEpoch:
    """One window ``[start, end)`` of the trace (seconds on the trace's clock)."""

    name: str
    start: float
    end: float
    requests: int
    rate: float  # r_e, requests per trace second
    intensity: float  # Λ^e per unit area per second
    weight: float  # w_e
    mix_of_types: dict[str, float] = field(repr=False)
    # the window's input lengths (mean, quantiles; tokens): with length sub-types (docs/model.md §2.3)
    # mix_of_types carries their distribution to the planner, this summarises it
    lengths: dict[str, float] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The ``edgeprefix epochs --json`` entry (contract: ``start``, ``end``, ``intensity``, ``mix_of_types``)."""
        return {
            "name": self.name,
            "start": self.start,
            "end": self.end,
            "intensity": self.intensity,
            "mix_of_types": dict(self.mix_of_types),
            "requests": self.requests,
            "rate": self.rate,
            "weight": self.weight,
            "lengths": dict(self.lengths),
        }


@dataclass(frozen=True)
class EpochCut:
    """The epochs of a trace part and how they were measured."""

    epochs: tuple[TraceEpoch, ...]
    window: float
    reference_intensity: float  # Λ ↔ the mean rate r̄
    mean_rate: float  # r̄
    dropped_empty: int


def _edges(times: FloatArray, window: float) -> FloatArray:
    """Window edges from the first to the last request (see the module docstring)."""
    t0, t1 = float(times[0]), float(times[-1])
    m = max(int(math.floor((t1 - t0) / window)), 1)
    edges = t0 + window * np.arange(m + 1, dtype=float)
    if t1 - edges[-1] >= 0.5 * window:
        return np.append(edges, t1)
    edges[-1] = t1  # a short remainder joins the last whole window
    return edges


def cut_epochs(workload: TraceWorkload, instance: Instance, window: float, *, intensity: float | None = None) -> EpochCut:
    """Windows of ``window`` seconds with ``Λ^e``, ``p^e_q`` and ``w_e`` (see the module docstring).

    Parameters
    ----------
    workload : the requests (trace order); their types index ``instance.requests``.
    instance : gives the types and the reference intensity ``Λ`` (``network.request_intensity``).
    window : epoch length in the trace's seconds.
    intensity : reference ``Λ`` instead of the instance's.
    """
    if not (np.isfinite(window) and window > 0):
        raise ValueError(f"--window must be > 0 seconds, got {window!r}")
    lam = float(instance.network.request_intensity if intensity is None else intensity)
    if not (np.isfinite(lam) and lam > 0):
        raise ValueError(f"--intensity Λ must be > 0, got {intensity!r}")
    times = workload.time
    if times.size < 2 or not times[-1] > times[0]:
        raise ValueError("the trace needs at least 2 requests at different times to measure epochs")
    if np.any(np.diff(times) < 0):
        raise ValueError("trace timestamps must be nondecreasing (the trace must be in time order)")
    span = float(times[-1] - times[0])
    if window > span:
        raise ValueError(f"--window {window:g} s is longer than the trace's span {span:g} s: use a shorter window")
    mean_rate = (times.size - 1) / span
    edges = _edges(times, window)
    which = np.minimum(np.searchsorted(edges, times, side="right") - 1, edges.size - 2)  # the last request: last window
    ids = instance.request_ids
    epochs, dropped = [], 0
    per_epoch = times.size / (edges.size - 1)
    for e in range(edges.size - 1):
        mask = which == e
        n_e = int(mask.sum())
        start, end = float(edges[e]), float(edges[e + 1])
        if n_e == 0:
            dropped += 1
            continue
        rate = n_e / (end - start)
        counts = np.bincount(workload.kind[mask], minlength=len(ids))
        epochs.append(
            TraceEpoch(
                name=f"t{start:.0f}-{end:.0f}s",
                start=start,
                end=end,
                requests=n_e,
                rate=rate,
                intensity=lam * rate / mean_rate,
                weight=n_e / per_epoch,
                mix_of_types={q: float(c / n_e) for q, c in zip(ids, counts)},
                lengths=window_lengths(workload.length[mask]),
            )
        )
    return EpochCut(tuple(epochs), float(window), lam, mean_rate, dropped)


def window_lengths(lengths: npt.ArrayLike) -> dict[str, float]:
    """Mean, median, 90th and 99th percentile of a window's input lengths (tokens)."""
    x = np.asarray(lengths, dtype=float)
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return {"mean_input": float(x.mean()), "p50_input": float(p50), "p90_input": float(p90), "p99_input": float(p99)}


def epochs_mapping(
    cut: EpochCut,
    instance_ref: str | None,
    *,
    current_mix: dict[str, float] | None = None,
    change_budget: float | None = None,
    byte_weight: float = 0.0,
    target: float | None = None,
) -> dict[str, Any]:
    """The epochs file mapping that ``edgeprefix migrate`` reads (TOML/JSON)."""
    out: dict[str, Any] = {}
    if instance_ref is not None:
        out["instance"] = instance_ref
    if current_mix is not None:
        out["current_mix"] = dict(current_mix)
    if change_budget is not None:
        out["change_budget"] = float(change_budget)
    out["byte_weight"] = float(byte_weight)
    if target is not None:
        out["target"] = float(target)
    out["epochs"] = [
        {
            "name": e.name,
            "start": e.start,
            "end": e.end,
            "request_intensity": e.intensity,
            "weight": e.weight,
            "probabilities": dict(e.mix_of_types),
        }
        for e in cut.epochs
    ]
    return out


def instance_reference(instance_path: str | os.PathLike[str], epochs_path: str | os.PathLike[str]) -> str:
    """The instance path as the epochs file should name it: relative to the file's folder when
    possible (the loader resolves it there), else absolute; embedded names pass through."""
    source = Path(instance_path)
    if not source.is_file():
        return str(instance_path)
    base = Path(epochs_path).resolve().parent
    try:
        return os.path.relpath(source.resolve(), base)
    except ValueError:  # another drive
        return str(source.resolve())


def write_epochs(path: str | os.PathLike[str], mapping: dict[str, Any]) -> None:
    """Write the epochs file atomically (TOML, or JSON when the suffix is ``.json``)."""
    import json

    text = json.dumps(mapping, indent=2) + "\n" if str(path).lower().endswith(".json") else tomli_w.dumps(mapping)
    atomic_write_text(path, text)
