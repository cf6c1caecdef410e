"""evaluate() reproduces the numbers of the single-function evaluate it replaced (docs/model.md §8).

``tests/data/evaluation_reference.json`` holds, for every shipped instance (``placement/data/*.toml`` and
``benchmarks/instances/*.toml``) under every policy, queue model (router), queue law and three operating
points (the default mix, a mix without the first profile, and thrice the request intensity), the full
``Evaluation.to_dict()`` report, the evaluation's per-tier arrays and its coverage curve -- or the one-line
error when the combination is refused (e.g. ``--queue-law engine`` on an instance without ``[engine]``).
The RuntimeWarnings a case emits are stored too.

Each section of the record (each key of the report, the fields, the curve, ...) is stored as a *sketch*:
its strings, booleans and ``None`` exactly (a digest), and its floats as their count, their NaN/±inf counts
and three sums of the finite ones (``Σ x``, ``Σ |x|`` and ``Σ x_i sin(i + 1)``), compared within ``RTOL`` of
``Σ |x|`` plus ``ATOL`` per float: a change is caught when it moves a section's sums by more than that
(a 10⁻⁵ change of ``H_ref`` moved 348 cases).  Bits are not portable: the BLAS kernel OpenBLAS picks for the CPU (and numpy's SIMD loops)
round differently, and between OpenBLAS's Haswell and SkylakeX kernels on one machine 264 of the 598
cases differed in their last bits, by at most 3·10⁻⁷ of a section's ``Σ |x|`` (a coverage of 10⁻⁶), most
by under 10⁻¹⁰.  The counts of a fixed point's iterations and evaluations and its final residual are left
out (a different rounding may stop one step earlier), and a point the solver did not converge to is
compared by its ``converged`` flag alone: MINPACK's path from a stalled Newton is
chaotic (mooncake_engine without the kernel's Jacobian moved by a factor 4 between the two kernels).

The fixture was first generated from the code before the pipeline refactoring (commit 919d5b6, where
``evaluate`` was one function) with::

    python tests/test_evaluation_reference.py --write

``python tests/test_evaluation_reference.py --diff`` lists the cases (and the sections of each) that differ
from the fixture.  Regenerate it with ``--write`` only when a change of the numbers is intended, after
checking with ``--diff`` that only the intended cases moved (and say so in the commit).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from edgeprefix.placement.model.evaluation import Evaluation, evaluate
from edgeprefix.placement.model.instance import Instance, load_instance
from edgeprefix.placement.model.policies import POLICIES
from edgeprefix.placement.model.spatial import AnalyticKernel

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "evaluation_reference.json"
QUEUE_MODELS = ("meanfield", "cell")  # the public names of the router predictions (docs/model.md §14)
QUEUE_LAWS = ("slots", "engine")  # the public names of --queue-law (docs/model.md §17.10)
QUADRATURE_CASES = ("placement/data/paper_baseline", "benchmarks/instances/serving_chunked")  # Erlang C and M/G/c slots
SKIPPED_FIELDS = {"instance", "kernel", "fixed_point"}  # compared through to_dict() and below
UNSET_SKIPPED = {
    "wait_delay",
    "wait_shift",
    "shift_weight",
}  # fields added after the fixture: in the record only where set (the engine law's, (17.25), (17.26))


@dataclasses.dataclass(frozen=True)
class PlainJacobianKernel:
    """The analytic kernel without the contracted Newton sums: the fixed point's per-tier ``∂A/∂b`` path."""

    inner: AnalyticKernel = AnalyticKernel()
    provides_jacobian = True

    def association(self, lam: Any, b: Any, alpha: float) -> Any:
        return self.inner.association(lam, b, alpha)

    def association_jacobian(self, lam: Any, b: Any, alpha: float) -> Any:
        return self.inner.association_jacobian(lam, b, alpha)

    def truncated(self, lam: Any, b: Any, alpha: float, u_cut: Any, tilt: Any) -> Any:
        return self.inner.truncated(lam, b, alpha, u_cut, tilt)

    def moments(self, lam: Any, b: Any, alpha: float) -> Any:
        return self.inner.moments(lam, b, alpha)

    def error(self, lam: Any, b: Any, alpha: float) -> Any:
        return self.inner.error(lam, b, alpha)


@dataclasses.dataclass(frozen=True)
class NoJacobianKernel(PlainJacobianKernel):
    """The analytic kernel seen as one without derivatives: the fixed point without a Jacobian."""

    provides_jacobian = False


def shipped() -> list[Path]:
    return sorted((ROOT / "placement" / "data").glob("*.toml")) + sorted((ROOT / "benchmarks" / "instances").glob("*.toml"))


def operating_points(key: str, instance: Instance) -> Iterator[tuple[str, Instance, Any]]:
    """``(name, instance, mix)``: the default mix (uniform when the instance has none), a mix without the first
    profile, thrice the load and, for :data:`QUADRATURE_CASES`, the radio exponent 3."""
    n = len(instance.profile_ids)
    default = None if instance.placement.mix is not None else np.full(n, 1.0 / n)
    yield "default", instance, default
    if n > 1:
        mix = np.full(n, 1.0 / (n - 1))
        mix[0] = 0.0
        yield "without_first", instance, mix
    yield "thrice_load", instance.with_network(request_intensity=3.0 * instance.network.request_intensity), default
    if key in QUADRATURE_CASES:  # every shipped instance has α = 2: the quadrature paths at α = 3
        yield "alpha_3", instance.with_network(radio_exponent=3.0), default


def cases() -> Iterator[tuple[str, Instance, dict[str, Any]]]:
    """Every shipped instance × operating point × policy × queue model × queue law, plus the other fixed-point
    paths (damped iteration, warm start, history, the kernels' Jacobian paths) on the default point."""
    for path in shipped():
        base = load_instance(path)
        key = path.relative_to(ROOT).with_suffix("").as_posix()  # paper_baseline is shipped twice
        for point, instance, mix in operating_points(key, base):
            for policy in POLICIES:
                for model in QUEUE_MODELS:
                    for law in QUEUE_LAWS:
                        options = {"mix": mix, "policy": policy, "queue_model": model, "queue_law": law}
                        yield f"{key}/{point}/{policy}/{model}/{law}", instance, options
        law = "engine" if base.engine is not None else "slots"
        default = next(operating_points(key, base))[2]
        extra: dict[str, dict[str, Any]] = {
            "damped": {"method": "damped", "damping": 0.5, "max_iterations": 40, "record_history": True},
            "warm": {"warm_start": np.full(len(base.profile_ids), 0.01), "tol": 1e-9, "target": 0.7 * base.placement.target},
            "clip": {"rho_clip": 0.8},
            "plain_jacobian": {"kernel": PlainJacobianKernel()},
            "no_jacobian": {"kernel": NoJacobianKernel(), "record_history": True},
        }
        for name, options in extra.items():
            yield f"{key}/{name}/{law}", base, {"mix": default, "queue_law": law, **options}


def canonical(value: Any) -> Any:
    """JSON-ready with every float as its ``repr`` (exact, NaN and inf included)."""
    if isinstance(value, (bool, np.bool_)) or value is None or isinstance(value, str):
        return bool(value) if isinstance(value, np.bool_) else value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    if isinstance(value, np.ndarray):
        return [canonical(v) for v in value.tolist()] if value.ndim else canonical(value.item())
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    raise TypeError(f"canonical: no rule for {type(value).__name__}")


def record(ev: Evaluation) -> dict[str, Any]:
    """The report, the evaluation's fields, its instance's queue inputs and its coverage curve."""
    fields = {
        f.name: getattr(ev, f.name)
        for f in dataclasses.fields(ev)
        if f.name not in SKIPPED_FIELDS and not (f.name in UNSET_SKIPPED and getattr(ev, f.name) is None)
    }
    fp = ev.fixed_point
    taus = np.array([0.5, 1.0, 2.0, np.inf]) * ev.target
    return canonical(
        {
            "report": ev.to_dict(),
            "fields": fields,
            "fixed_point": None if fp is None else dataclasses.asdict(fp),
            "instance": {
                "first_token_time": ev.instance.first_token_time,
                "service_time": ev.instance.service_time,
                "concurrency": ev.instance.concurrency,
            },
            "coverage": ev.coverage(taus),
            "coverage_queue_free": ev.coverage_queue_free(taus),
            "coverage_by_pair": ev.coverage_by_pair(),
        }
    )


RTOL = 1e-6  # of a section's Σ |x| (the largest difference measured between two BLAS kernels: 3·10⁻⁷)
ATOL = 1e-12  # per float: the quadrature's own error estimate is rounding noise (8.5·10⁻¹⁴, moved by 10⁻¹⁶)
UNPORTABLE = ("iterations", "evaluations", "residual")  # a fixed point's counts and residual (module notes)


def _leaves(value: Any, floats: list[float], exact: list[Any]) -> None:
    if isinstance(value, dict):
        for key in sorted(value):
            if key not in UNPORTABLE:
                exact.append(key)
                _leaves(value[key], floats, exact)
    elif isinstance(value, list):
        exact.append(len(value))
        for item in value:
            _leaves(item, floats, exact)
    elif isinstance(value, str):
        try:
            floats.append(float(value))  # canonical() writes floats as their repr
        except ValueError:
            exact.append(value)
    else:
        exact.append(value)


def sketch(value: Any) -> list[Any]:
    """The section's exact parts and a tolerant summary of its floats (module notes)."""
    floats: list[float] = []
    exact: list[Any] = []
    _leaves(value, floats, exact)
    x = np.array(floats, dtype=float)
    finite = np.isfinite(x)
    y = x[finite]
    weight = np.sin(np.arange(1, y.size + 1))
    counts = [int(x.size), int(np.isnan(x).sum()), int((x == np.inf).sum()), int((x == -np.inf).sum())]
    sums = [float(y.sum()), float(np.abs(y).sum()), float(y @ weight)]
    return [hashlib.sha256(json.dumps(exact).encode()).hexdigest()[:20], *counts, *sums]


def sketches_agree(now: list[Any], then: list[Any]) -> bool:
    """Equal exact parts and counts, and each sum within ``RTOL Σ |x| + ATOL n``."""
    if now[:5] != then[:5]:
        return False
    bound = RTOL * max(abs(now[6]), abs(then[6])) + ATOL * now[1]
    return all(abs(a - b) <= bound for a, b in zip(now[5:], then[5:]))


def outcome(instance: Instance, options: dict[str, Any]) -> dict[str, Any]:
    """The case's sketches, section by section (with the coverage in clear), its warnings, or its error."""
    options = dict(options)
    mix = options.pop("mix", None)
    policy = options.pop("policy", "load_aware")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ev = evaluate(instance, mix, policy, **options)
            full = record(ev)
        except ValueError as exc:  # a refused combination: its one-line message is part of the contract
            full = {"error": f"{type(exc).__name__}: {exc}"}
    out: dict[str, Any] = {"warnings": sorted({f"{w.category.__name__}: {w.message}" for w in caught})}
    if "error" in full:
        return out | full
    report = full.pop("report")
    fixed_point = full["fixed_point"] or {"converged": True, "method": None}
    return out | {
        "converged": fixed_point["converged"],
        "method": fixed_point["method"],
        "coverage_at_target": report["coverage"],
        "report": {key: sketch(value) for key, value in report.items()},
        **{key: sketch(value) for key, value in full.items()},
    }


def differences(now: dict[str, Any], then: dict[str, Any] | None) -> list[str]:
    """The sections in which ``now`` differs from the stored ``then`` (module notes); empty if they agree."""
    if then is None:
        return ["new case"]
    if "error" in now or "error" in then:
        return [] if now == then else sorted(k for k in set(now) | set(then) if now.get(k) != then.get(k))
    plain = ["warnings", "converged", "method"]
    if not then["converged"]:  # a stalled solve's numbers, warnings and last method are not portable (module notes)
        return ["converged"] if now.get("converged") else []
    out = [k for k in plain if now.get(k) != then.get(k)]
    if not math.isclose(float(now["coverage_at_target"]), float(then["coverage_at_target"]), rel_tol=RTOL, abs_tol=1e-300):
        out.append("coverage_at_target")
    for section in sorted(set(now) | set(then)):
        if section in plain or section == "coverage_at_target":
            continue
        a, b = now.get(section), then.get(section)
        if section == "report":
            keys = sorted(set(a) | set(b))
            out += [f"report.{k}" for k in keys if k not in a or k not in b or not sketches_agree(a[k], b[k])]
        elif a is None or b is None or not sketches_agree(a, b):
            out.append(section)
    return out


def write() -> None:
    results = {name: outcome(instance, options) for name, instance, options in cases()}
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{json.dumps(name)}: {json.dumps(results[name], sort_keys=True, ensure_ascii=False)}" for name in sorted(results)]
    FIXTURE.write_text("{\n" + ",\n".join(lines) + "\n}\n")  # one case per line: a diff names the cases
    print(f"wrote {len(results)} cases to {FIXTURE}")


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


CASES = list(cases())


def test_the_fixture_holds_every_case():
    assert sorted(_load()) == sorted(name for name, _, _ in CASES)


def test_the_sketch_tolerates_rounding_and_catches_a_change():
    """A last-bit change of every float passes; one float moved by twice the bound (``RTOL Σ |x|``), a changed
    string or a NaN in place of a number does not."""
    values = {"a": [repr(float(x)) for x in np.linspace(0.1, 3.0, 50)], "b": "sys", "c": [repr(0.7), repr(np.inf)]}
    stored = sketch(canonical(values))
    rounded = {**values, "a": [repr(float(np.nextafter(float(x), 9.0))) for x in values["a"]]}
    assert sketches_agree(sketch(rounded), stored)
    bound = RTOL * float(np.linspace(0.1, 3.0, 50).sum() + 0.7)
    for step, caught in ((2.0 * bound, True), (0.4 * bound, False)):
        moved = {**values, "a": values["a"][:7] + [repr(float(values["a"][7]) + step)] + values["a"][8:]}
        assert sketches_agree(sketch(moved), stored) is not caught
    assert not sketches_agree(sketch({**values, "b": "tool"}), stored)
    assert not sketches_agree(sketch({**values, "c": [repr(0.7), repr(np.nan)]}), stored)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=lambda case: case[0])
def test_evaluate_reproduces_the_reference(case):
    name, instance, options = case
    assert differences(outcome(instance, options), _load()[name]) == []


def diff() -> int:
    """Print the cases (and their sections) that differ from the fixture; the number of such cases."""
    stored, changed = _load(), 0
    for name, instance, options in cases():
        moved = differences(outcome(instance, options), stored.get(name))
        if moved:
            changed += 1
            print(f"{name}: {', '.join(moved)}")
    print(f"{changed} of {len(stored)} cases differ")
    return changed


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    elif sys.argv[1:] == ["--diff"]:
        sys.exit(1 if diff() else 0)
    else:
        sys.exit("usage: python tests/test_evaluation_reference.py --write | --diff")
