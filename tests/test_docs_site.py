"""The documentation site's generator (docs/site_hooks.py): nothing lost, every link resolved.

The build itself (``mkdocs build --strict``) runs in .ci/run; these tests hold the pieces a broken
build would not name: the model reference split without losing a line, every command with a page,
and links between the repository's Markdown files rewritten to the pages they become.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def hooks():
    spec = importlib.util.spec_from_file_location("site_hooks", ROOT / "docs" / "site_hooks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_model_reference_splits_without_losing_a_line(hooks) -> None:
    text = (ROOT / "docs" / "model.md").read_text(encoding="utf-8")
    chapters = hooks.model_chapters(text)
    assert "".join(c.text for c in chapters) == text
    titles = [c.title for c in chapters[1:]]
    numbered = [t for t in titles if t.startswith("§")]
    assert [int(t[1:].split()[0]) for t in numbered] == list(range(1, len(numbered) + 1))
    assert len({c.path for c in chapters}) == len(chapters)
    # every chapter page starts with its own heading; the preface keeps the contents
    assert all(c.text.startswith("## ") for c in chapters[1:])
    assert "## Contents" in chapters[0].text


def test_model_anchors_point_at_the_chapter_that_holds_them(hooks) -> None:
    chapters = hooks.model_chapters((ROOT / "docs" / "model.md").read_text(encoding="utf-8"))
    anchors = hooks.anchors_of(chapters)
    fourteen = next(c for c in chapters if c.title.startswith("§14 "))
    assert anchors[hooks.slugify(fourteen.title)] == fourteen.path
    linker = hooks.Linker(anchors, {c.path for c in chapters})
    assert linker.target("README.md", "docs/model.md#" + hooks.slugify(fourteen.title)).startswith(fourteen.path + "#")


def test_links_are_rewritten_to_pages_or_named_as_paths(hooks) -> None:
    linker = hooks.Linker({}, set())
    out = linker.rewrite(
        "docs/model.md", "model/07.md", "see [the benchmarks](../benchmarks/README.md) and [a file](../placement/data/x.toml)"
    )
    assert "[the benchmarks](../benchmarks/index.md)" in out
    assert "a file (`placement/data/x.toml`)" in out
    assert linker.rewrite("README.md", "index.md", "[site](https://example.org/a)") == "[site](https://example.org/a)"


def test_every_command_has_a_page_with_its_synopsis_and_help(hooks) -> None:
    from edgeprefix.cli import COMMANDS

    pages, binaries = hooks.site_pages()
    for name in COMMANDS:
        page = pages[f"commands/{name}.md"]
        assert f"usage: edgeprefix {name}" in page
        assert f"**`edgeprefix {name}" in page, f"README.md has no synopsis paragraph for {name}"
    readme_figures = set(re.findall(r"!\[[^\]]*\]\(([^)\s]+\.png)\)", (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")))
    assert readme_figures, "benchmarks/README.md embeds no figure"
    assert set(binaries) == {f"benchmarks/{name}" for name in readme_figures}
