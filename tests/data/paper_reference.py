"""Writes paper_reference.json: the full ``evaluate(...).to_dict()`` of the paper's instances.

Run once on the code before the serving-system extensions (docs/model.md §19) landed:
``python tests/data/paper_reference.py``.  ``tests/test_serving_reference.py`` compares the
current code against the file bit for bit; rerun it only when a change of the paper's model
is intended.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from edgeprefix.placement.model.evaluation import evaluate
from edgeprefix.placement.model.instance import load_instance

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("paper_reference.json")
SOURCES = {
    "paper_baseline": "paper_baseline",
    "paper_calibrated": "paper_calibrated",
    "medium_forest": str(ROOT / "benchmarks" / "instances" / "medium_forest.toml"),
}
POLICIES = ("load_aware", "prefix", "nearest")


def uniform_mix(instance) -> list[float]:
    ok = (instance.concurrency >= 1).astype(float)
    return (ok / ok.sum()).tolist()


def cases():
    """(key, source, mix or None, policy): the default mix where there is one, and the uniform mix."""
    for name, source in SOURCES.items():
        instance = load_instance(source)
        mixes = {"uniform": uniform_mix(instance)}
        if instance.placement.mix is not None:
            mixes["default"] = None
        for label, mix in mixes.items():
            for policy in POLICIES:
                yield f"{name}/{label}/{policy}", source, mix, policy


def compute() -> dict[str, dict]:
    out = {}
    for key, source, mix, policy in cases():
        ev = evaluate(load_instance(source), mix, policy)
        out[key] = {
            "dict": ev.to_dict(),
            "ttft_quantile_0.9": ev.ttft_quantile(0.9),
            "coverage_curve": np.asarray(ev.coverage(np.linspace(0.1, 3.0, 7))).tolist(),
        }
    return out


if __name__ == "__main__":
    OUT.write_text(json.dumps(compute(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")
