"""Figs. 3–12 on the default instance ``paper_section6``: the paper's points and structural claims.

Every claim a figure checks is a point of its JSON (``holds`` with the tolerance used); here the
claims are also read from the figures' own numbers, so a change in the check code cannot hide a
regression.  ``paper_calibrated`` keeps its Fig. 8/12 numbers (``test_reproduce_calibration.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from edgeprefix.benchmarks.paper.calibration.targets import TOLERANCE


@pytest.fixture(scope="module")
def payloads(figure_report):
    report, _, _ = figure_report
    return {p["figure"]: p for p in report["figures"]}


def series(payload, name):
    return [p["ours"] for p in payload["points"] if p["series"] == name]


def test_every_checked_claim_holds(payloads):
    failing = [
        (n, p["series"], p["x"], p["ours"], p["paper"])
        for n, payload in payloads.items()
        for p in payload["points"]
        if "holds" in p and not p["holds"]
    ]
    assert failing == []
    assert all(payload["targets"]["checked"] >= 1 for n, payload in payloads.items() if n != 1)


def test_fig8_and_fig12_points_within_tolerance(payloads):
    for n, least in ((8, 8), (12, 3)):
        checked = [p for p in payloads[n]["points"] if p["paper"] is not None and p["series"] in ("load_aware", "prefix", "nearest")]
        assert len(checked) >= least
        for p in checked:
            assert abs(p["ours"] - p["paper"]) <= TOLERANCE and p["tolerance"] == TOLERANCE, p
    cov = {(p["series"], p["x"]): p["ours"] for p in payloads[8]["points"]}
    assert cov[("load_aware", 4.0)] >= cov[("prefix", 4.0)] + 0.3  # load awareness prevents the hotspot
    assert cov[("prefix", 4.0)] < cov[("nearest", 4.0)]  # cache awareness without load awareness is worse
    la = series(payloads[12], "load_aware")
    assert la == sorted(la)


def test_fig10_best_mixes_are_the_papers(payloads):
    best = payloads[10]["best"]
    assert best["light"]["mix"]["deep"] == pytest.approx(0.20) and best["moderate"]["mix"]["deep"] == pytest.approx(0.20)
    assert best["high"]["mix"]["deep"] == pytest.approx(0.15) and best["high"]["mix"]["shallow"] == pytest.approx(0.50)
    assert best["high"]["load"] > best["moderate"]["load"] > best["light"]["load"]


def test_fig11_adapting_the_mix_pays_at_high_load(payloads):
    r = payloads[11]
    assert r["gain"][r["high_load"]] > 0.02
    assert min(r["gain"].values()) >= -1e-9
    assert r["fixed_mix"] == payloads[10]["best"]["light"]["mix"]


def test_fig7_optimum_moves_shallower_and_collapses_past_it(payloads):
    r = payloads[7]
    opt = r["optimum"]["calibrated"]
    assert opt["heavy"]["depth"] < opt["light"]["depth"] and opt["moderate"]["depth"] <= opt["light"]["depth"]
    assert opt["heavy"]["concurrency"] > opt["light"]["concurrency"]  # concurrency is the bottleneck
    assert r["worst_past_optimum"]["calibrated"]["heavy"] <= opt["heavy"]["coverage"] - 0.1


def test_fig9_fallback_use_grows_and_offloading_falls(payloads):
    r = payloads[9]
    share, offload = series(r, "fallback share"), series(r, "offload ratio")
    assert np.all(np.diff(share) > 0) and np.all(np.diff(offload) < 0)
    assert series(r, "A[deep, long]") == sorted(series(r, "A[deep, long]"), reverse=True)


def test_fig3_collapse_inside_the_plotted_range(payloads):
    r = payloads[3]
    adv = [r["advantage_at_zero"][w] for w in sorted(r["advantage_at_zero"])]
    assert adv[0] > 0 and adv[-1] == 0.0 and np.all(np.diff(adv) <= 0)
    assert r["collapse_wait"] <= max(r["waits"])
