"""The fixed-point overload benchmark (benchmarks/accuracy/fixed_point/overload.py, docs/model.md §7.1)."""

from __future__ import annotations

import numpy as np

from edgeprefix.benchmarks.accuracy.fixed_point import overload


def test_every_draw_is_counted_once_by_its_method():
    counts, cpu = overload.run(12, seed=3)
    methods = [*overload.METHODS, "unconverged"]
    assert sum(c[m] for c in counts.values() for m in methods) == 12
    assert set(k for c in counts.values() for k in c) <= set(methods)
    assert all(v >= 0.0 for c in cpu.values() for v in c.values()) and sum(sum(c.values()) for c in cpu.values()) > 0.0
    table = overload.render(counts, cpu).splitlines()
    assert len(table) == 2 + len(overload.FACTORS) + 1 and table[-1].startswith("| all |")


def test_the_draws_are_seeded_and_valid():
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    for _ in range(5):
        (ia, ma, fa), (ib, mb, fb) = overload.draw(a), overload.draw(b)
        assert ia == ib and np.array_equal(ma, mb) and fa == fb
        assert ma.min() >= 0 and abs(ma.sum() - 1.0) < 1e-12 and fa in overload.FACTORS


def test_no_instances_is_a_one_line_error(capsys):
    assert overload.main(["--instances", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--instances" in err[0]
