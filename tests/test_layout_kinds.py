"""Nodes built once per kind (attributes, profile, corruption) keep their own states and verified hits."""

from __future__ import annotations

import numpy as np

from edgeprefix.placement.model.instance import default_instance
from edgeprefix.placement.simulation.layout import LayoutSpec, expected_record, sample_layout, verify_reuse


def test_every_node_verifies_its_own_states():
    instance = default_instance()
    spec = LayoutSpec(mean_nodes=300, foreign_fraction=0.1, stale_fraction=0.1, mismatch_fraction=0.3)
    layout = sample_layout(instance, None, spec, seed=4)
    depths = {p.id: float(p.depth) for p in instance.prefixes}
    expected = {v: expected_record(layout.current, v) for v in depths}
    downgraded = 0
    for x in range(layout.nodes):
        own = {v: expected_record(layout.attributes[x], v) for v in instance.profiles[layout.profile[x]].prefixes}
        assert set(layout.states[x]) == set(own)
        for q, req in enumerate(instance.requests):
            depth, used = verify_reuse(layout.states[x], expected, req.path, depths)
            assert layout.verified_hit[x, q] == depth and layout.reused_vertex[x][q] == used
        downgraded += bool(np.any(layout.verified_hit[x] < layout.advertised_hit[x]))
    assert downgraded > 10  # corrupted and stale nodes are there
    assert layout.states[0] is not layout.states[1]  # each node its own mapping
