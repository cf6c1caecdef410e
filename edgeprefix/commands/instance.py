"""``edgeprefix instance``: print an instance as TOML (a starting file) or the instance JSON Schema.

``instance show [NAME|FILE]`` prints an embedded instance as shipped (with its comments), or
any instance, with ``--intensity``/``--density`` applied, as TOML that loads back to the same
instance (``--json``: as JSON).  ``instance schema`` prints the JSON Schema that TOML and JSON
instance files share (``--markdown``: the field reference of docs/instances.md).

Top-level imports stay light (no numpy): the model is imported inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys

EMBEDDED = ("paper_baseline", "paper_calibrated", "paper_section6")  # the loader's list, checked by the tests


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "instance",
        help="print an instance as TOML (a starting file) or the instance file's JSON Schema",
        description="Print an embedded or given instance as TOML that loads back, or the JSON Schema of "
        "instance files (field reference: docs/instances.md).",
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser(
        "show",
        help="print an instance as TOML (or JSON)",
        description="Print an instance as TOML that `edgeprefix` loads back. An embedded instance without "
        f"overrides is printed as shipped, comments included (embedded: {', '.join(EMBEDDED)}).",
    )
    show.add_argument(
        "instance",
        nargs="?",
        default=None,
        metavar="NAME|FILE",
        help="embedded instance name or instance file (.toml or .json); default: paper_baseline",
    )
    show.add_argument("--intensity", type=float, default=None, metavar="Λ", help="override network.request_intensity")
    show.add_argument("--density", type=float, default=None, metavar="λ_b", help="override network.edge_density")
    show.add_argument("--json", action="store_true", help="print the instance as one JSON object instead of TOML")
    show.set_defaults(handler=run_show)
    schema = actions.add_parser(
        "schema",
        help="print the JSON Schema of instance files",
        description="Print the JSON Schema (draft 2020-12) that TOML and JSON instance files share.",
    )
    schema.add_argument("--markdown", action="store_true", help="print the field reference table instead (docs/instances.md)")
    schema.set_defaults(handler=run_schema)


def run_show(args: argparse.Namespace) -> int:
    from edgeprefix.commands._common import instance_from_args
    from edgeprefix.placement.model.instance import instance_to_mapping

    instance = instance_from_args(args)
    overridden = args.intensity is not None or args.density is not None
    if args.json:
        json.dump(instance_to_mapping(instance), sys.stdout, indent=2, ensure_ascii=False, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    name = "paper_baseline" if args.instance is None else args.instance
    if name in EMBEDDED and not overridden:
        from importlib import resources

        sys.stdout.write(resources.files("edgeprefix.placement").joinpath("data", f"{name}.toml").read_text(encoding="utf-8"))
        return 0
    import tomli_w

    header = f"# {instance.name}: printed by `edgeprefix instance show`; every field is explained in docs/instances.md\n"
    sys.stdout.write(header + tomli_w.dumps(instance_to_mapping(instance)))
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from edgeprefix.placement.model.instance_schema import field_reference, schema_text

    sys.stdout.write(field_reference() if args.markdown else schema_text())
    return 0
