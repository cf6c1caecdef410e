"""Length-resolved request types (docs/model.md §2.3).

A declared request type may carry the distribution of its requests' input lengths (and decode
times) as weighted sub-types ``k`` with ``(L_{q,k}, D_{q,k}, w_{q,k})``.  The instance expands such a
type into sub-types ``q~1 … q~K`` with the declared type's path ``P_q`` (so the same hit depths
``h_{s,q}``), their own ``L`` and ``D`` and arrival share ``p_q w_{q,k}``; every quantity of the model
is a sum over types weighted by ``p``, so it integrates over the lengths with no change to the core.
:func:`type_groups` maps the sub-types back to their declared type for per-type reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from edgeprefix.placement.errors import InstanceError, plain
from edgeprefix.placement.model.instance_fields import keys
from edgeprefix.placement.model.workload import RequestType

FloatArray = npt.NDArray[np.float64]
SEPARATOR = "~"  # sub-type k of type q is named f"{q}~{k}" (k from 1)
MEAN_TOLERANCE = 1e-6  # relative: a declared length/decode must be the weighted mean of its sub-types'
LENGTH_KEYS = keys("requests[].lengths")  # required and optional fields of a lengths table (the field table)


def _numbers(where: str, value: Any) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        raise InstanceError(where, f"must be a non-empty list of numbers, got {plain(value)}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(float(v)):
            raise InstanceError(f"{where}[{i}]", f"must be a finite number, got {plain(v)}")
        out.append(float(v))
    return tuple(out)


def _check_mean(where: str, declared: float, values: Sequence[float], weights: FloatArray, what: str) -> None:
    mean = float(np.dot(weights, values))
    if not abs(declared - mean) <= MEAN_TOLERANCE * max(abs(mean), 1.0):
        raise InstanceError(where, f"must equal the weighted mean of {what} ({mean:.10g}), got {plain(declared)}: set it to {mean:.10g}")


def expand_type(where: str, request: RequestType, data: Any) -> tuple[RequestType, ...]:
    """The sub-types of ``request`` from its ``lengths`` table ``{input, decode?, weight?}`` (``where``
    names the declared type, e.g. ``requests[3]``).  ``weight`` defaults to equal shares and is
    normalised; ``decode`` defaults to the type's ``D_q`` for every sub-type; the type's ``length``
    (and ``decode``, when ``lengths.decode`` is given) must be the weighted means."""
    if not isinstance(data, Mapping):
        raise InstanceError(f"{where}.lengths", f"must be a table {{input = [...], decode = [...], weight = [...]}}, got {plain(data)}")
    required, optional = LENGTH_KEYS
    unknown = sorted(set(data) - required - optional)
    if unknown:
        raise InstanceError(f"{where}.lengths.{unknown[0]}", f"unknown field (allowed: {sorted(required | optional)})")
    if "input" not in data:
        raise InstanceError(f"{where}.lengths.input", "required field is missing")
    inputs = _numbers(f"{where}.lengths.input", data["input"])
    n = len(inputs)
    decodes = _numbers(f"{where}.lengths.decode", data["decode"]) if "decode" in data else (request.decode,) * n
    weights = _numbers(f"{where}.lengths.weight", data["weight"]) if "weight" in data else (1.0,) * n
    for key, values in (("decode", decodes), ("weight", weights)):
        if len(values) != n:
            raise InstanceError(f"{where}.lengths.{key}", f"must have one entry per input length ({n}), got {len(values)}")
    w = np.asarray(weights)
    if np.any(w < 0) or not w.sum() > 0:
        raise InstanceError(f"{where}.lengths.weight", f"must be >= 0 with a positive sum, got {list(weights)[:8]!r}")
    if abs(w.sum() - 1.0) > 1e-12:  # a normalised table (as written) is kept as is, so files round-trip
        w = w / w.sum()
    _check_mean(f"{where}.length", request.length, inputs, w, "lengths.input")
    if "decode" in data:
        _check_mean(f"{where}.decode", request.decode, decodes, w, "lengths.decode")
    bins: list[tuple[float, float] | None] = [None] * n
    if "edges" in data:
        edges = _numbers(f"{where}.lengths.edges", data["edges"]) if n > 1 else ()
        if n > 1 and len(edges) != n - 1:
            raise InstanceError(f"{where}.lengths.edges", f"must have one entry between consecutive sub-types ({n - 1}), got {len(edges)}")
        bounds = (-np.inf, *edges, np.inf)
        if any(not bounds[k] <= inputs[k] < bounds[k + 1] for k in range(n)):
            raise InstanceError(
                f"{where}.lengths.edges",
                f"must be increasing with each input length inside its bin, edges[k-1] <= input[k] < edges[k]; got edges {list(edges)[:8]!r}",
            )
        bins = [(float(bounds[k]), float(bounds[k + 1])) for k in range(n)]
    return tuple(
        RequestType(
            id=f"{request.id}{SEPARATOR}{k + 1}",
            probability=request.probability * float(w[k]),
            length=inputs[k],
            decode=decodes[k],
            path=request.path,
            group=request.id,
            share=float(w[k]),
            group_probability=request.probability,
            bin=bins[k],
        )
        for k in range(n)
    )


def lengths_entry(subtypes: Sequence[RequestType]) -> dict[str, Any]:
    """The file form of one declared type from its sub-types (inverse of :func:`expand_type`)."""
    p = np.array([q.probability for q in subtypes])
    shares = np.array([q.share for q in subtypes])
    declared = subtypes[0].group_probability
    if declared is not None and all(q.probability == declared * q.share for q in subtypes):
        total, w = declared, shares  # as loaded: exactly the file's numbers
    else:  # probabilities replaced since (Instance.with_probabilities): the shares follow them
        total = float(p.sum())
        w = p / total if total > 0 else shares
    inputs = [q.length for q in subtypes]
    decodes = [q.decode for q in subtypes]
    first = subtypes[0]
    assert first.group is not None
    uppers = [q.bin[1] for q in subtypes if q.bin is not None]  # the bins' edges when every sub-type has its bin
    edges = uppers[:-1]
    return {
        "id": first.group,
        "probability": float(total),
        "length": float(np.dot(w, inputs)),
        "decode": float(np.dot(w, decodes)),
        "path": list(first.path),
        "lengths": {"input": inputs, "decode": decodes, "weight": w.tolist()} | ({"edges": edges} if len(uppers) == len(subtypes) else {}),
    }


def requests_entries(requests: Sequence[RequestType]) -> list[dict[str, Any]]:
    """The ``[[requests]]`` entries of an instance's (expanded) request types: sub-types collapse
    back into their declared type with a ``lengths`` table."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(requests):
        q = requests[i]
        if q.group is None:
            out.append({"id": q.id, "probability": q.probability, "length": q.length, "decode": q.decode, "path": list(q.path)})
            i += 1
            continue
        j = i
        while j < len(requests) and requests[j].group == q.group:
            j += 1
        out.append(lengths_entry(requests[i:j]))
        i = j
    return out


@dataclass(frozen=True)
class DeclaredTypes:
    """Declared request types of an instance and the (sub-)type columns of each.

    ids : declared type ids, in file order; ``index`` : ``(Q,)`` declared type of each column;
    weights : ``(Q,)`` column's share of its declared type (``p_q / Σ p``, the stored share where the
    declared type has probability 0); ``resolved`` : whether any type carries a length distribution.
    """

    ids: tuple[str, ...]
    index: npt.NDArray[np.intp]
    weights: FloatArray
    resolved: bool

    def aggregate(self, values: npt.ArrayLike) -> FloatArray:
        """``Σ_{k ∈ Q} w_k x_{…,k}`` over each declared type's columns (last axis ``Q`` → ``len(ids)``)."""
        x = np.asarray(values, dtype=float)
        out = np.zeros(x.shape[:-1] + (len(self.ids),))
        np.add.at(out, (..., self.index), x * self.weights)  # type: ignore[arg-type]
        return out


def type_groups(requests: Sequence[RequestType]) -> DeclaredTypes:
    """The :class:`DeclaredTypes` of expanded request types (identity when no type has lengths)."""
    ids: list[str] = []
    index = np.empty(len(requests), dtype=np.intp)
    for j, q in enumerate(requests):
        name = q.id if q.group is None else q.group
        if not ids or ids[-1] != name or q.group is None:
            ids.append(name)
        index[j] = len(ids) - 1
    p = np.array([q.probability for q in requests], dtype=float)
    totals = np.bincount(index, weights=p, minlength=len(ids))
    shares = np.array([q.share for q in requests], dtype=float)
    weights = np.where(totals[index] > 0, p / np.where(totals[index] > 0, totals[index], 1.0), shares)
    return DeclaredTypes(tuple(ids), index, weights, any(q.group is not None for q in requests))


def length_bins(
    values: npt.ArrayLike,
    weights: npt.ArrayLike,
    parts: int,
    paired: npt.ArrayLike | None = None,
    *,
    iterations: int = 100,
    edges: npt.ArrayLike = (),
    return_edges: bool = False,
) -> tuple[FloatArray, ...]:
    """At most ``parts`` contiguous bins of the weighted ``values`` that minimise the weighted
    within-bin variance (1-D k-means: Lloyd's iteration from equal-weight quantile bins), each
    represented by its conditional mean, with the conditional mean of ``paired`` in the same bins.

    For a prefill law ``g(n) = g_0 + a n + b n²`` the bins' error is exact: ``E g(L − h) − Σ_k w_k
    g(L̄_k − h) = b Σ_k w_k Var_k(L)`` at any hit depth ``h`` (docs/model.md §2.3), and the weighted
    mean is kept.  ``edges``: lengths no bin may straddle — a bin holding values on both sides of an
    edge is split there (a value equal to an edge goes above it), so at most ``parts + len(edges)``
    bins (the threshold lengths of the target, (2.10)).  Returns ``(means, paired_means, bin
    weights)``; empty bins are dropped.  ``return_edges``: also the ``K − 1`` lengths between consecutive bins
    (bin ``k`` holds ``edge_{k−1} ≤ x < edge_k``): a threshold of ``edges`` where one separates them, else the
    midpoint between the last value of one bin and the first of the next (docs/model.md (2.8)).
    """
    x = np.asarray(values, dtype=float)
    wt = np.asarray(weights, dtype=float)
    y = x if paired is None else np.asarray(paired, dtype=float)
    if parts < 1:
        raise ValueError(f"parts must be >= 1, got {parts!r}")
    order = np.argsort(x, kind="stable")
    x, wt, y = x[order], wt[order], y[order]
    del order
    mid = np.cumsum(wt)
    total = mid[-1]
    mid -= 0.5 * wt
    mid /= total  # each point's mid-quantile (cum − w/2) / Σw: a point falls in one bin, never split
    bin_of = np.minimum((mid * parts).astype(np.intp), parts - 1)
    del mid

    def means(b: npt.NDArray[np.intp]) -> tuple[FloatArray, FloatArray]:
        mass = np.bincount(b, weights=wt, minlength=parts)
        keep = mass > 0
        return np.bincount(b, weights=wt * x, minlength=parts)[keep] / mass[keep], mass  # type: ignore[return-value]

    centre, _ = means(bin_of)
    for _ in range(iterations):  # Lloyd on a line: nearest centre = between the midpoints
        new = np.searchsorted(0.5 * (centre[1:] + centre[:-1]), x, side="right")
        if np.array_equal(new, bin_of):
            break
        bin_of = new
        centre, _ = means(bin_of)
    cuts = np.unique(np.asarray(edges, dtype=float))
    if cuts.size:  # split the bins at the edges: both labels rise with x, so their pairs are contiguous
        side = np.searchsorted(cuts, x, side="right")
        bin_of = np.unique(bin_of * (cuts.size + 1) + side, return_inverse=True)[1].reshape(-1)
    mass = np.bincount(bin_of, weights=wt)
    keep = mass > 0
    mean_x = np.bincount(bin_of, weights=wt * x)[keep] / mass[keep]
    mean_y = np.bincount(bin_of, weights=wt * y)[keep] / mass[keep]
    if not return_edges:
        return mean_x, mean_y, mass[keep] / mass.sum()
    starts = np.flatnonzero(np.diff(bin_of)) + 1  # x is sorted and the bins contiguous: where each next bin starts
    below, above = x[starts - 1], x[starts]
    between = 0.5 * (below + above)
    if cuts.size:  # the largest threshold in (below, above], when one separates the two bins
        j = np.searchsorted(cuts, above, side="right") - 1
        hit = (j >= 0) & (cuts[np.maximum(j, 0)] > below)
        between = np.where(hit, cuts[np.maximum(j, 0)], between)
    return mean_x, mean_y, mass[keep] / mass.sum(), between


def replace_lengths(
    request: RequestType,
    inputs: Sequence[float] | FloatArray,
    decodes: Sequence[float] | FloatArray,
    weights: Sequence[float] | FloatArray,
    edges: Sequence[float] | FloatArray | None = None,
) -> tuple[RequestType, ...]:
    """Sub-types of a declared (scalar) ``request`` with the given lengths (one sub-type gives the
    declared type back unchanged); ``edges``: the ``K − 1`` lengths between their bins (``RequestType.bin``)."""
    if len(inputs) == 1:
        return (replace(request, length=float(inputs[0]), decode=float(decodes[0])),)
    w = np.asarray(weights, dtype=float)
    w = w / w.sum()
    bounds = None if edges is None else (-np.inf, *(float(e) for e in edges), np.inf)
    return tuple(
        replace(
            request,
            id=f"{request.id}{SEPARATOR}{k + 1}",
            probability=request.probability * float(w[k]),
            length=float(inputs[k]),
            decode=float(decodes[k]),
            group=request.id,
            share=float(w[k]),
            group_probability=request.probability,
            bin=None if bounds is None else (float(bounds[k]), float(bounds[k + 1])),
        )
        for k in range(len(inputs))
    )
