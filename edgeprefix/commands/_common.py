"""Shared pieces of the CLI commands: instance argument, overrides, mix parsing, output."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TYPE_CHECKING, Any

from edgeprefix.placement.errors import InstanceError
from edgeprefix.placement.jsonable import json_ready
from edgeprefix.placement.model.evaluation_registry import QUEUE_LAW_REGISTRY, ROUTER_PREDICTION_REGISTRY
from edgeprefix.placement.model.router import (
    DISAGREEMENT,
    PREDICTION_ROUTERS,
    QUEUE_MODEL_OF_ROUTER,
    ROUTER_OF_QUEUE_MODEL,
    other_router,
)

if TYPE_CHECKING:
    from edgeprefix.placement.model.instance import Instance


def add_instance_argument(parser: argparse.ArgumentParser, density_help: str = "override network.edge_density") -> None:
    """``[INSTANCE]`` (file or embedded name) plus ``--intensity``/``--density`` overrides."""
    parser.add_argument(
        "instance",
        nargs="?",
        default=None,
        metavar="INSTANCE",
        help="instance file (.toml or .json) or embedded name; default: paper_baseline",
    )
    parser.add_argument("--intensity", type=float, default=None, metavar="Λ", help="override network.request_intensity")
    parser.add_argument("--density", type=float, default=None, metavar="λ_b", help=density_help)


def instance_from_args(args: argparse.Namespace) -> Instance:
    """Load the instance named on the command line and apply the network overrides."""
    from edgeprefix.placement.model.instance import load_instance

    instance = load_instance(args.instance)
    changes = {}
    if getattr(args, "intensity", None) is not None:
        changes["request_intensity"] = args.intensity
    if getattr(args, "density", None) is not None:
        changes["edge_density"] = args.density
    if not changes:
        return instance
    try:
        return instance.with_network(**changes)
    except InstanceError as exc:
        flag = {"network.request_intensity": "--intensity", "network.edge_density": "--density"}.get(exc.field)
        if flag is None:
            raise
        raise InstanceError(f"{flag} (overrides {exc.field})", exc.reason) from None


def plain_text(text: str) -> str:
    """A docstring line as ``--help`` shows it: reST roles and literals (``x``, :func:`x`) as plain words."""
    import re

    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text)
    return text.replace("``", "")


def at_least(args: argparse.Namespace, least: int, *flags: str) -> None:
    """Raise a one-line error naming the flag when an integer option given as ``--flag`` is below ``least``."""
    for flag in flags:
        value = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if value is not None and value < least:
            raise ValueError(f"{flag} must be an integer >= {least}, got {value!r}")


def network_text(instance: Instance, args: argparse.Namespace) -> str:
    """``Λ = 4 (--intensity)  λ_b = 1``: the network a run used, naming the options that changed it."""
    net = instance.network
    parts = []
    for symbol, value, flag in (("Λ", net.request_intensity, "intensity"), ("λ_b", net.edge_density, "density")):
        given = getattr(args, flag, None) is not None
        parts.append(f"{symbol} = {value:g}" + (f" (--{flag})" if given else ""))
    return "  ".join(parts)


def target_text(symbol: str, target: float, args: argparse.Namespace) -> str:
    """``target τ_0 = 0.8 s``, marked ``(--target)`` when the option set it."""
    return f"target {symbol} = {target:g} s" + (" (--target)" if getattr(args, "target", None) is not None else "")


def wrote(path: object) -> None:
    """The ``wrote PATH`` line (stderr) every command prints for each file it writes."""
    print(f"wrote {path}", file=sys.stderr)


MIX_LABELS = ("best", "mix")  # words before the pairs in the lines solve/evaluate print ("best mix  none=0.1000 …")


def parse_mix(text: str | None, option: str = "--mix") -> dict[str, float] | None:
    """``"none=0.3,shallow=0.5"`` or ``"none=0.3000  shallow=0.5000"`` (what ``solve`` prints, a
    leading ``best mix`` allowed) → ``{"none": 0.3, "shallow": 0.5}``; ``None`` passes through."""
    if text is None:
        return None
    mix: dict[str, float] = {}
    items = [part for part in text.replace(",", " ").split() if part]
    while items and items[0].lower() in MIX_LABELS and not mix:
        items.pop(0)
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option}: expected PROFILE=SHARE pairs separated by commas or spaces, got {item!r}")
        try:
            share = float(value)
        except ValueError:
            raise ValueError(f"{option}: share of {key.strip()!r} must be a number, got {value!r}") from None
        if key.strip() in mix:
            raise ValueError(f"{option}: profile {key.strip()!r} is given twice")
        mix[key.strip()] = share
    if not mix:
        raise ValueError(f"{option}: no PROFILE=SHARE pairs given")
    return mix


def add_mix_arguments(parser: argparse.ArgumentParser, help: str) -> None:
    """``--mix PAIRS`` and ``--mix-from FILE`` (one of the two; read by :func:`mix_from_args`)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--mix", default=None, help=help + "; the line solve prints (none=0.1000  deep=0.9000, quoted) works too")
    group.add_argument(
        "--mix-from",
        default=None,
        metavar="FILE",
        help="take the mix from FILE: a solve result.json, the JSON of solve/evaluate/replay/validate --json, "
        "or an instance file (its placement.mix)",
    )


def mix_from_args(args: argparse.Namespace) -> dict[str, float] | None:
    """The mix of ``--mix`` or ``--mix-from`` (``None``: the instance's default mix)."""
    source = getattr(args, "mix_from", None)
    if source is None:
        return parse_mix(getattr(args, "mix", None))
    return mix_from_file(source)


def mix_from_file(path: str, option: str = "--mix-from") -> dict[str, float]:
    """The ``mix`` of a JSON result (``solve --out``'s result.json, any ``--json`` output) or the
    ``placement.mix`` of an instance file (TOML or JSON)."""
    from pathlib import Path

    from edgeprefix.placement.files import parse_document, read_text

    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{option}: no such file {path!r}")
    kind = "toml" if file.suffix.lower() == ".toml" else "json"
    data = parse_document(read_text(file, f"{option} file"), kind, f"{option} file {path!r}")
    mix = data.get("mix") if isinstance(data, dict) else None
    if mix is None and isinstance(data, dict) and isinstance(data.get("placement"), dict):
        mix = data["placement"].get("mix")
    if not isinstance(mix, dict) or not mix:
        raise ValueError(f"{option}: {path!r} has no mix (expected a 'mix' table, or an instance with placement.mix)")
    out: dict[str, float] = {}
    for key, value in mix.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{option}: share of {key!r} in {path!r} must be a number, got {value!r}")
        out[str(key)] = float(value)
    return out


def mix_text(mix: dict[str, float]) -> str:
    """``none=0.1000  deep=0.9000``: the mix as every command prints it (``--mix`` reads it back)."""
    return "  ".join(f"{k}={v:.4f}" for k, v in mix.items())


def print_json(payload: dict[str, Any]) -> None:
    """One JSON object on stdout (non-finite floats become ``null``)."""
    json.dump(json_ready(payload), sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")


def fmt(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}f}"


QUEUE_MODELS = ROUTER_PREDICTION_REGISTRY.names()  # the registered router predictions (numpy-free: a fast start)


def add_queue_model_argument(parser: argparse.ArgumentParser) -> None:
    """``--queue-model meanfield|cell`` (docs/model.md §14); checked by :func:`queue_model_from_args`."""
    parser.add_argument(
        "--queue-model",
        default=None,
        metavar="{" + ",".join(QUEUE_MODELS) + "}",
        help="queue model of the coverage: meanfield (eq. (39), every node at its tier's load) or cell "
        "(per-node load law, docs/model.md §14); default: the one of --router (meanfield for online, cell for tier)",
    )
    add_queue_law_argument(parser)


QUEUE_LAWS = QUEUE_LAW_REGISTRY.names()  # the registered queue laws (docs/model.md §8.6)


def add_queue_law_argument(parser: argparse.ArgumentParser) -> None:
    """``--queue-law slots|engine`` (docs/model.md §17.10), orthogonal to ``--queue-model``."""
    parser.add_argument(
        "--queue-law",
        choices=QUEUE_LAWS,
        default=None,
        help="the node's queue law: slots (c_s FCFS slots, Erlang C or the M/G/c law of serving.queue; the default) or "
        "engine (the law fitted to the instance's [engine] continuous-batching node, docs/model.md §17.10); "
        "orthogonal to --queue-model",
    )


def queue_law_from_args(args: argparse.Namespace, instance: Any) -> str:
    """The ``--queue-law`` value (default: the instance's ``engine.queue_law``, else ``slots``); ``engine`` on an instance
    without ``[engine]`` is a one-line ``ValueError``."""
    engine = getattr(instance, "engine", None)
    value = getattr(args, "queue_law", None) or getattr(engine, "queue_law", None) or "slots"  # engine.queue_law: the default
    if value == "engine" and engine is None:
        raise ValueError(
            f"--queue-law engine: instance {getattr(instance, 'name', '?')!r} has no [engine] section; add "
            "[engine.timings] (model, hardware, tensor_parallel; docs/instances.md) or use --queue-law slots"
        )
    return value


def add_router_argument(parser: argparse.ArgumentParser, default: str = "online", choices: tuple[str, ...] = PREDICTION_ROUTERS) -> None:
    """``--router tier|online``: the router the prediction is for (docs/model.md §14)."""
    parser.add_argument(
        "--router",
        choices=choices,
        default=None,
        help="the router the prediction is for: tier (Theorem 1's tier-level rule, predicted by the cell model) or "
        "online (a router that sees each node's queue, predicted by eq. (39)); docs/model.md §14. Default: the "
        f"instance's network.router, else {default}. With --queue-model as well, the two must agree",
    )


PREDICTED_FOR = {
    "online": "router online: a router that sees each node's own queue (fresh telemetry); for the tier-level rule use --router tier",
    "tier": "router tier: the tier-level rule (each tier's mean delay); for a router that sees each node's queue use --router online",
}


def router_line(queue_model: str) -> str:
    """The text line that names the router a prediction is for."""
    return f"predicted for {PREDICTED_FOR[ROUTER_OF_QUEUE_MODEL[queue_model]]}"


def queue_model_from_args(args: argparse.Namespace) -> str:
    """The ``--queue-model`` value (default meanfield), or a one-line ``ValueError`` naming the option."""
    value = getattr(args, "queue_model", None) or "meanfield"
    if value not in QUEUE_MODELS:
        raise ValueError(f"--queue-model: unknown {value!r} (valid: {', '.join(QUEUE_MODELS)})")
    return value


def prediction_from_args(
    args: argparse.Namespace, instance: Instance | None, default: str = "online", use_router_option: bool = True
) -> tuple[str, str]:
    """``(router, queue_model)`` of a command's prediction (docs/model.md §14).

    ``--router`` wins, then ``--queue-model`` (the router it predicts for), then the instance's
    ``network.router``, then ``default`` (the command's behaviour before the field existed).
    Both options given and naming different routers is a one-line ``ValueError``.
    ``use_router_option=False`` skips ``--router`` (it names a simulated router without a prediction).
    """
    router = getattr(args, "router", None) if use_router_option else None
    if router is not None and router not in QUEUE_MODEL_OF_ROUTER:
        raise ValueError(f"--router {router} has no analytical prediction (predictions exist for {', '.join(PREDICTION_ROUTERS)})")
    model = getattr(args, "queue_model", None)
    if model is not None:
        model = queue_model_from_args(args)
    if router is not None and model is not None and QUEUE_MODEL_OF_ROUTER[router] != model:
        raise ValueError(
            f"--router {router} is predicted by --queue-model {QUEUE_MODEL_OF_ROUTER[router]}, not {model}: "
            "give one of the two options (or make them agree)"
        )
    if router is None:
        if model is not None:
            router = ROUTER_OF_QUEUE_MODEL[model]
        else:
            stated = instance.network.router if instance is not None else None
            router = stated or default
    return router, QUEUE_MODEL_OF_ROUTER[router]


def router_note(router: str, value: float | None, other_value: float | None, what: str = "coverage") -> dict[str, Any] | None:
    """The other router's prediction of ``value`` (the dict goes in the JSON as ``other_router``), with a
    one-line ``note`` when the two differ by more than :data:`~edgeprefix.placement.model.router.DISAGREEMENT`
    (``None`` otherwise; :func:`print_router_note` prints it)."""
    other = other_router(router)
    if value is None or other_value is None or not (math.isfinite(value) and math.isfinite(other_value)):
        return None
    note = None
    if abs(other_value - value) > DISAGREEMENT:
        note = (
            f"note: the {other} router's prediction of the {what} is {other_value:.4f}, not {value:.4f} "
            f"(differs by {abs(other_value - value):.3f} > {DISAGREEMENT:g}); state --router {other} (or network.router) "
            "if that is the router you run"
        )
    return {
        "router": other,
        "queue_model": QUEUE_MODEL_OF_ROUTER[other],
        "coverage": other_value,
        "difference": other_value - value,
        "note": note,
    }


def print_router_note(entry: dict[str, Any] | None) -> None:
    """The one-line note of :func:`router_note` on stderr, after the command's output (when there is one)."""
    if entry is not None and entry.get("note"):
        sys.stdout.flush()
        print(entry["note"], file=sys.stderr)
