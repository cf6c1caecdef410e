"""CITATION.cff: a Citation File Format 1.2.0 file that cites the software and, preferred, the paper."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
PAPER = "Spatial Prefix Caching for Wireless Edge LLM Inference: A Stochastic-Geometry and Queueing Framework"
REFERENCE_TYPES = {"article", "conference-paper", "preprint", "report", "generic", "unpublished"}


def citation() -> dict:
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def _valid_authors(authors: object) -> bool:
    """CFF persons need ``family-names`` or ``given-names``; entities need ``name``."""
    return (
        isinstance(authors, list)
        and len(authors) > 0
        and all(isinstance(a, dict) and (a.get("name") or a.get("family-names") or a.get("given-names")) for a in authors)
    )


def test_the_required_keys_of_cff_1_2_0():
    data = citation()
    assert data["cff-version"] == "1.2.0"
    assert isinstance(data["message"], str) and data["message"].strip()
    assert data["title"] == "edgeprefix" and data["type"] == "software"
    assert _valid_authors(data["authors"])
    assert set(data) <= {
        "cff-version",
        "message",
        "title",
        "authors",
        "type",
        "abstract",
        "license",
        "keywords",
        "version",
        "date-released",
        "repository-code",
        "url",
        "doi",
        "identifiers",
        "preferred-citation",
        "references",
    }


def test_the_license_is_the_packages():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert citation()["license"] == project["license"]


def test_the_preferred_citation_is_the_paper_the_model_comes_from():
    paper = citation()["preferred-citation"]
    assert " ".join(paper["title"].split()) == PAPER
    assert paper["type"] in REFERENCE_TYPES
    assert _valid_authors(paper["authors"])
    assert "authors" in paper["notes"] and "venue" in paper["notes"]  # says what the text does not state
    assert PAPER in " ".join((ROOT / "docs" / "model.md").read_text(encoding="utf-8").split())
