"""``edgeprefix benchmark-instance``: instances whose optimum is known exactly (docs/model.md §18).

``classical`` writes geographic caching (J files, K per node, Zipf popularity, a reach of c nodes)
as an instance of the model, with the exact optimum ``P*``, the optimal file marginals and one
optimal mix in the file's ``[metadata]``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from edgeprefix.commands._common import plain_text


def _sizes(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive numbers, got {text!r}") from None


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "benchmark-instance",
        help="write a benchmark instance with a known optimum",
        description=plain_text(__doc__.splitlines()[0]),
    )
    families = parser.add_subparsers(dest="family", required=True, metavar="FAMILY")
    classical = families.add_parser(
        "classical",
        help="geographic caching of J files, K per node (exact optimum by water-filling)",
        description="Geographic caching as an exact special case of the model: coverage "
        "Σ_j p_j (1 − exp(−c a_j)) with a_j the share of nodes holding file j (docs/model.md §18).",
    )
    classical.add_argument("--files", type=int, required=True, metavar="J", help="number of files (J >= 2)")
    classical.add_argument("--cache", type=int, required=True, metavar="K", help="files held by each node (1 <= K < J)")
    classical.add_argument("--zipf", type=float, default=0.8, metavar="s", help="Zipf exponent of the popularity (default: 0.8)")
    classical.add_argument(
        "--reach", type=float, default=2.0, metavar="c", help="mean number of nodes within the reach radius (default: 2)"
    )
    classical.add_argument("--alpha", type=float, default=2.0, metavar="α", help="radio exponent (default: 2)")
    classical.add_argument(
        "--fallback-min", type=float, default=None, metavar="π_min", help="add an empty fallback profile with at least this share"
    )
    classical.add_argument(
        "--sizes", type=_sizes, default=None, metavar="W1,W2,...", help="relative file sizes (J numbers; default: all 1)"
    )
    classical.add_argument(
        "--memory-budget",
        type=float,
        default=None,
        metavar="FRACTION",
        help="fleet memory budget as a fraction of what the K largest files need on every node",
    )
    classical.add_argument(
        "--max-share",
        type=float,
        default=None,
        metavar="u",
        help="cap every cached profile's share (optimum by a convex program, not in closed form)",
    )
    classical.add_argument(
        "--node-capacity",
        type=float,
        default=None,
        metavar="C",
        help="largest total relative size per node; bigger subsets get no share (convex program)",
    )
    classical.add_argument("--name", default=None, help="instance name (default: classical_J<J>_K<K>)")
    classical.add_argument("--out", default=None, metavar="FILE", help="write the instance (.toml or .json)")
    classical.add_argument("--json", action="store_true", help="print one JSON object instead of a summary")
    classical.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from edgeprefix.benchmarks.optimisers.classical import ClassicalSpec, classical_instance
    from edgeprefix.commands._common import print_json
    from edgeprefix.placement.model.instance import load_instance, write_instance

    spec = ClassicalSpec(
        files=args.files,
        cache=args.cache,
        zipf=args.zipf,
        reach=args.reach,
        alpha=args.alpha,
        fallback_min=args.fallback_min,
        sizes=args.sizes,
        memory_budget=args.memory_budget,
        max_share=args.max_share,
        node_capacity=args.node_capacity,
    )
    instance = classical_instance(spec, name=args.name)
    meta = instance.metadata
    summary: dict[str, Any] = {
        "instance": instance.name,
        "profiles": len(instance.profiles),
        "request_types": len(instance.requests),
        "known_optimum": meta["known_optimum"],
        "optimum_method": meta["optimum_method"],
        "optimal_marginals": meta["optimal_marginals"],
        "optimal_mix": meta["optimal_mix"],
        "written": args.out,
    }
    if args.json:
        print_json(summary)
    else:
        marginals = "  ".join(f"{k}={v:.4f}" for k, v in meta["optimal_marginals"].items())
        print(f"instance {instance.name}: {len(instance.profiles)} profiles, {len(instance.requests)} request types")
        print(f"known optimum  {meta['known_optimum']:.10f}  ({meta['optimum_method']})")
        print(f"file shares    {marginals}")
    sys.stdout.flush()  # the answer is out before the disk is touched
    if args.out is not None:
        write_instance(instance, args.out)
        load_instance(args.out)  # the written file loads back
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
