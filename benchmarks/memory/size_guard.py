"""The size guard of docs/model.md §20 (20.5) against the measured peak memory of ``evaluate --json``.

Run ``python -m edgeprefix.benchmarks.memory.size_guard [--sizes S:Q:α,...]``.  Each size writes a seeded
:func:`edgeprefix.benchmarks.workloads.synthetic.synthetic_instance`'s types with ``|S|`` profiles (:func:`many_profiles`) and runs,
in fresh child processes (:func:`edgeprefix.benchmarks.memory.memory_peak.run_child`), what ``edgeprefix evaluate
INSTANCE --json`` does, and the import + load alone (the floor, the reference of the same run).  The
ratio column is the guard's estimate (:func:`edgeprefix.placement.memory.evaluation_bytes`) over the
measured peak above the floor; the guard is accurate within 1.5× when it lies in ``[1/1.5, 1.5]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

DEFAULT_SIZES = "300:10:2,1000:10:2,100:200:2,200:200:2,100:100:2.5"


def many_profiles(types: int, profiles: int, alpha: float, seed: int = 0):
    """:func:`synthetic_instance`'s prefixes and types with ``profiles`` distinct profiles, each the union of
    one to three random root-to-vertex chains (so that a few types can have thousands of profiles)."""
    import dataclasses

    import numpy as np

    from edgeprefix.benchmarks.workloads.synthetic import synthetic_instance
    from edgeprefix.placement.model.profiles import Profile

    base = synthetic_instance(types, 2, alpha=alpha, seed=seed)
    parent = {p.id: p.parent for p in base.prefixes}

    def chain(v: str) -> list[str]:
        out = [v]
        while (up := parent[out[-1]]) is not None:
            out.append(up)
        return out

    rng = np.random.default_rng(seed)
    ids = [p.id for p in base.prefixes]
    if profiles > 2 ** len(ids):
        raise ValueError(f"{types} types give {len(ids)} prefixes: at most {2 ** len(ids)} distinct profiles, not {profiles}")
    seen: set[frozenset[str]] = {frozenset()}
    chosen = [Profile("none")]
    for _attempt in range(100 * profiles):
        if len(chosen) == profiles:
            break
        held = frozenset(v for _ in range(int(rng.integers(1, 4))) for v in chain(ids[int(rng.integers(len(ids)))]))
        if held not in seen:
            seen.add(held)
            order = [v for v in ids if v in held]  # parents first, as the forest lists them
            chosen.append(Profile(f"p{len(chosen)}", tuple(order)))
    if len(chosen) < profiles:
        raise ValueError(f"{types} types give too few distinct profiles ({len(chosen)} found, {profiles} asked)")
    mix = tuple((s.id, 1.0 / profiles) for s in chosen)
    mix = mix[:-1] + ((mix[-1][0], 1.0 - sum(v for _, v in mix[:-1])),)
    placement = dataclasses.replace(base.placement, mix=mix)
    return base.replace(profiles=tuple(chosen), placement=placement, name=f"many_{profiles}x{types}")


def measure(sizes: list[tuple[int, int, float]]) -> list[dict[str, float]]:
    from edgeprefix.benchmarks.memory.memory_peak import run_child
    from edgeprefix.placement.memory import evaluation_bytes
    from edgeprefix.placement.model.instance import write_instance
    from edgeprefix.placement.model.spatial import BLOCK_ELEMENTS

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for profiles, types, alpha in sizes:
            instance = many_profiles(types, profiles, alpha)
            path = Path(folder) / f"synthetic_{profiles}x{types}.toml"
            write_instance(instance, path)
            floor, _ = run_child(path, BLOCK_ELEMENTS, "load")
            peak, seconds = run_child(path, BLOCK_ELEMENTS, "report")
            active = int((instance.mix_vector() > 0).sum())
            estimate = evaluation_bytes(active, types, alpha, "load_aware") / 2**20
            rows.append(
                {
                    "profiles": profiles,
                    "active": active,
                    "types": types,
                    "alpha": alpha,
                    "floor_mb": floor,
                    "peak_mb": peak,
                    "above_mb": peak - floor,
                    "estimate_mb": estimate,
                    "ratio": estimate / max(peak - floor, 1.0),
                    "seconds": seconds,
                }
            )
    return rows


def render(rows: list[dict[str, float]]) -> str:
    lines = [
        "| \\|S\\| (active) × \\|Q\\| | α | floor MB (reference) | peak MB | above floor MB | estimate MB | estimate / measured | seconds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['profiles']} ({r['active']}) × {r['types']} | {r['alpha']:g} | {r['floor_mb']:.0f} | {r['peak_mb']:.0f} "
            f"| {r['above_mb']:.0f} | {r['estimate_mb']:.0f} | {r['ratio']:.2f} | {r['seconds']:.1f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edgeprefix.benchmarks.memory.size_guard", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help=f"S:Q:alpha,... (default {DEFAULT_SIZES})")
    args = parser.parse_args(argv)
    sizes = [(int(s), int(q), float(a)) for s, q, a in (part.split(":") for part in args.sizes.split(","))]
    print(render(measure(sizes)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
