"""Every figure renders once (Agg, quick mode) with its titles and axis labels set, and states its
instance and load; ``reproduce --all`` counts the paper targets and rewrites the README table."""

from __future__ import annotations

import json

import pytest

from edgeprefix.benchmarks.paper.figures import FIGURES
from edgeprefix.benchmarks.paper.figures.report import BEGIN, END, markdown_table, replace_section
from edgeprefix.cli import main as cli_main

LOAD_WORDS = ("Λ", "load", "ρ")


@pytest.fixture(scope="module")
def rendered(figure_report):
    report, texts, out = figure_report
    return texts, report, out


def test_every_figure_has_titles_labels_instance_and_load(rendered):
    seen, report, out = rendered
    assert sorted(seen) == sorted(f"fig{n}.png" for n in FIGURES)
    for name, t in seen.items():
        titles = " ".join([t["suptitle"], *(a["title"] for a in t["axes"])])
        assert titles.strip(), name
        assert "paper_section6" in titles or "instance-independent" in titles, f"{name}: instance not stated ({titles!r})"
        assert any(word in titles for word in LOAD_WORDS), f"{name}: load not stated ({titles!r})"
        for a in t["axes"]:
            if not a["image"]:
                assert a["xlabel"] and a["ylabel"], f"{name}: unlabelled axes {a}"
        assert (out / name).stat().st_size > 5000


def test_every_figure_passes_the_shared_plot_checks(rendered):
    problems = {name: t["problems"] for name, t in rendered[0].items() if t["problems"]}
    assert problems == {}


def test_fig1_has_one_legend_for_both_panels(rendered):
    t = rendered[0]["fig1.png"]
    assert t["legends"] == 1 and not any(a["legend"] for a in t["axes"])


def test_reproduce_all_counts_the_targets_and_they_hold(rendered):
    report = rendered[1]
    t = report["targets"]
    assert t["checked"] == len(report["checks"]) >= 35
    for row in report["checks"]:
        assert row["paper"] is not None and "tolerance" in row and "relation" in row
    assert t["hold"] == t["checked"], t["failing"]
    table = markdown_table(report)
    assert table.count("\n| ") == t["checked"] and f"{t['hold']} of {t['checked']}" in table


def test_readme_section_is_rewritten(tmp_path):
    path = tmp_path / "README.md"
    path.write_text(f"# x\n\n{BEGIN}\nold\n{END}\n\ntail\n")
    replace_section(path, "| new |")
    assert path.read_text() == f"# x\n\n{BEGIN}\n| new |\n{END}\n\ntail\n"
    (tmp_path / "plain.md").write_text("no markers\n")
    with pytest.raises(ValueError, match="markers"):
        replace_section(tmp_path / "plain.md", "x")


def test_cli_all_json_and_readme_errors(capsys, tmp_path, monkeypatch):
    import edgeprefix.benchmarks.paper.figures.report as report_module

    fake = {
        "figures": [],
        "quick": True,
        "checks": [
            {
                "figure": 8,
                "instance": "i",
                "series": "s",
                "x": 1,
                "ours": 0.5,
                "paper": 0.52,
                "tolerance": 0.03,
                "relation": "≈",
                "holds": True,
            }
        ],
        "targets": {"checked": 1, "hold": 1, "failing": []},
    }
    monkeypatch.setattr(report_module, "run_all", lambda *a, **k: fake)
    assert cli_main(["reproduce", "--all", "--json", "--quick"]) == 0
    assert json.loads(capsys.readouterr().out)["targets"] == {"checked": 1, "hold": 1, "failing": []}
    (tmp_path / "R.md").write_text("no markers\n")
    assert cli_main(["reproduce", "--all", "--readme", str(tmp_path / "R.md")]) == 2
    assert "markers" in capsys.readouterr().err
    assert cli_main(["reproduce", "--figure", "3", "--readme", str(tmp_path / "R.md")]) == 2
