"""MkDocs hooks: the documentation site is generated from the repository's own Markdown.

Nothing is written twice.  ``README.md`` is the getting-started page, ``docs/model.md`` is split
into one page per chapter (its headings, hence its anchors, unchanged, so every ``docs/model.md §N``
citation still names one place), each CLI command gets a page with its README paragraph and its
``--help`` text, and ``benchmarks/README.md`` (with its figures) is the benchmarks page.  Links
between these files are rewritten to the pages they became; links to repository files that are not
pages (instances, data) become plain code spans naming the path.

``mkdocs build --strict`` (run by ``.ci/run``) turns every warning, a broken link included, into an
error.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)\)")
IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
CHAPTER = re.compile(r"^## (.+)$", re.MULTILINE)
SECTION = re.compile(r"^#{1,3} ", re.MULTILINE)
COMMAND_LINE = re.compile(r"^\*\*`edgeprefix ([a-z-]+)", re.MULTILINE)

# repository file → page it becomes (model.md is split: see :func:`model_chapters`)
PAGES = {
    "README.md": "index.md",
    "docs/instances.md": "instances.md",
    "docs/distributed.md": "distributed.md",
    "benchmarks/README.md": "benchmarks/index.md",
    "benchmarks/paper/calibration/README.md": "benchmarks/calibration.md",
}

API_PAGES = {
    "model": (
        "The model",
        [
            "edgeprefix.placement.model.instance.load_instance",
            "edgeprefix.placement.model.instance.Instance",
            "edgeprefix.placement.model.evaluation.evaluate",
            "edgeprefix.placement.model.evaluation.Evaluation",
            "edgeprefix.placement.model.batch.evaluate_batch",
            "edgeprefix.placement.model.sensitivity.sensitivity",
        ],
    ),
    "problems": (
        "Problems",
        [
            "edgeprefix.formulations.placement.placement_problem",
            "edgeprefix.formulations.placement.PlacementProblem",
            "edgeprefix.formulations.density.density_problem",
            "edgeprefix.formulations.migration.load_migration",
        ],
    ),
    "methods": (
        "Methods",
        [
            "edgeprefix.solvers.api.solve",
            "edgeprefix.solvers.result.Result",
            "edgeprefix.solvers.polish.certify",
            "edgeprefix.solvers.certificate.Certificate",
            "edgeprefix.solvers.density.plan_density",
            "edgeprefix.solvers.migration.solve_migration",
        ],
    ),
}


@dataclass(frozen=True)
class Chapter:
    """One page of the model reference: its site path, title and Markdown."""

    path: str
    title: str
    text: str


def slugify(title: str) -> str:
    """The anchor Python-Markdown's ``toc`` extension gives a heading (its default slugify)."""
    from markdown.extensions.toc import slugify as toc_slugify

    return str(toc_slugify(title, "-"))


def model_chapters(text: str) -> list[Chapter]:
    """``docs/model.md`` cut at its ``## `` headings: the preface (title and contents) and one page
    per chapter, every line kept in order."""
    marks = [m for m in CHAPTER.finditer(text) if m.group(1).strip() != "Contents"]
    if not marks:
        return [Chapter("model/index.md", "Model reference", text)]
    chapters = [Chapter("model/index.md", "Model reference", text[: marks[0].start()])]
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        title = mark.group(1).strip()
        number = re.match(r"§(\d+)", title)
        name = f"{int(number.group(1)):02d}" if number else slugify(title)[:40]
        chapters.append(Chapter(f"model/{name}.md", title, text[mark.start() : end]))
    return chapters


def anchors_of(chapters: list[Chapter]) -> dict[str, str]:
    """Heading anchor → the chapter page that holds it."""
    found: dict[str, str] = {}
    for chapter in chapters:
        for line in chapter.text.splitlines():
            if line.startswith("#"):
                found.setdefault(slugify(line.lstrip("#").strip()), chapter.path)
    return found


def headings(text: str) -> list[int]:
    """Offsets of the Markdown headings of ``text`` (``#`` lines outside fenced code)."""
    found, offset, fenced = [], 0, False
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and SECTION.match(line):
            found.append(offset)
        offset += len(line)
    return found


def command_pages(readme: str) -> dict[str, str]:
    """CLI command → its README paragraphs (each from a bold ``**`edgeprefix NAME …`**`` synopsis to
    the next synopsis or section heading)."""
    stops = sorted({m.start() for m in COMMAND_LINE.finditer(readme)} | set(headings(readme)) | {len(readme)})
    pages: dict[str, str] = {}
    for mark in COMMAND_LINE.finditer(readme):
        end = next(stop for stop in stops if stop > mark.start())
        pages[mark.group(1)] = pages.get(mark.group(1), "") + readme[mark.start() : end].rstrip() + "\n\n"
    return pages


def help_texts() -> dict[str, str]:
    """Each command's ``--help`` text, as argparse prints it at 100 columns."""
    import contextlib
    import io
    import os

    from edgeprefix.cli import COMMANDS, build_parser

    os.environ["COLUMNS"] = "100"
    texts: dict[str, str] = {}
    for name in COMMANDS:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            build_parser([name]).parse_args([name, "--help"])
        texts[name] = out.getvalue()
    return texts


class Linker:
    """Rewrites one page's links from repository paths to site pages."""

    def __init__(self, anchors: dict[str, str], model_pages: set[str]):
        self.anchors = anchors
        self.model_pages = model_pages

    def target(self, source: str, link: str) -> str | None:
        """The site page (with anchor) a link of repository file ``source`` points at, or ``None``."""
        path, _, anchor = link.partition("#")
        repo = posixpath.normpath(posixpath.join(posixpath.dirname(source), path)) if path else source
        if repo == "docs/model.md":
            page = self.anchors.get(anchor, "model/index.md") if anchor else "model/index.md"
        elif repo in PAGES:
            page = PAGES[repo]
        else:
            return None
        return page + (f"#{anchor}" if anchor else "")

    def rewrite(self, source: str, page: str, text: str) -> str:
        def link(m: re.Match[str]) -> str:
            label, href = m.group(1), m.group(2)
            if re.match(r"[a-z]+://|mailto:", href):
                return m.group(0)
            target = self.target(source, href)
            if target is None:
                return f"{label} (`{posixpath.normpath(posixpath.join(posixpath.dirname(source), href))}`)"
            rel = posixpath.relpath(target.partition("#")[0], posixpath.dirname(page) or ".")
            anchor = target.partition("#")[2]
            return f"[{label}]({rel}{'#' + anchor if anchor else ''})"

        return LINK.sub(link, text)


def site_pages() -> tuple[dict[str, str], dict[str, bytes]]:
    """Every page of the site (path → Markdown) and every binary file it needs (path → bytes)."""
    read = {name: (ROOT / name).read_text(encoding="utf-8") for name in [*PAGES, "docs/model.md"]}
    chapters = model_chapters(read["docs/model.md"])
    linker = Linker(anchors_of(chapters), {c.path for c in chapters})
    pages: dict[str, str] = {}
    for source, page in PAGES.items():
        pages[page] = linker.rewrite(source, page, read[source])
    for chapter in chapters:
        pages[chapter.path] = linker.rewrite("docs/model.md", chapter.path, chapter.text)
    helps = help_texts()
    paragraphs = command_pages(read["README.md"])
    for name, help_text in helps.items():
        body = linker.rewrite("README.md", f"commands/{name}.md", paragraphs.get(name, ""))
        pages[f"commands/{name}.md"] = f"# edgeprefix {name}\n\n{body}```text\n{help_text}```\n"
    for name, (title, objects) in API_PAGES.items():
        pages[f"api/{name}.md"] = f"# {title}\n\n" + "".join(f"::: {obj}\n\n" for obj in objects)
    linked = {m.group(2) for m in IMAGE.finditer(read["benchmarks/README.md"])}
    binaries = {f"benchmarks/{name}": (ROOT / "benchmarks" / name).read_bytes() for name in sorted(linked) if name.endswith(".png")}
    return pages, binaries


def source_tree(into: Path) -> Path:
    """The ``edgeprefix`` namespace as installed, laid out under ``into`` with symbolic links, so that
    the API reference reads the docstrings of this checkout (pyproject.toml's ``package-dir`` maps
    the repository's folders into the one package)."""
    import tomllib

    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["package-dir"]
    top = into / "edgeprefix"
    top.mkdir(parents=True, exist_ok=True)
    for entry in (ROOT / mapping["edgeprefix"]).iterdir():
        if entry.name != "__pycache__":
            (top / entry.name).symlink_to(entry)
    for package, folder in mapping.items():
        if package != "edgeprefix":
            (top / package.split(".", 1)[1]).symlink_to(ROOT / folder)
    return into


def navigation(pages: dict[str, str]) -> list[dict[str, object]]:
    """The site's table of contents, in reading order."""

    def title(path: str) -> str:
        first = pages[path].lstrip().splitlines()[0]
        return first.lstrip("#").strip() if first.startswith("#") else path

    def group(prefix: str) -> list[dict[str, str]]:
        return [{title(p): p} for p in pages if p.startswith(prefix)]

    return [
        {"Getting started": "index.md"},
        {"Commands": group("commands/")},
        {"Instances": "instances.md"},
        {"Running across machines": "distributed.md"},
        {"Model reference": group("model/")},
        {"Benchmarks": group("benchmarks/")},
        {"API": group("api/")},
    ]


_GENERATED: dict[str, tuple[dict[str, str], dict[str, bytes]]] = {}
_TREES: list[Path] = []


@event_priority(100)  # before mkdocstrings reads its handlers' options
def on_config(config):  # noqa: ANN001, ANN201 (MkDocs' hook signature)
    """Generate the pages once, set the navigation, and point the API reference at this checkout."""
    import tempfile

    pages, binaries = _GENERATED.setdefault("site", site_pages())
    config["nav"] = navigation(pages)
    tree = source_tree(Path(tempfile.mkdtemp(prefix="edgeprefix-api-")))
    _TREES.append(tree)
    handlers = config["plugins"]["mkdocstrings"].config.setdefault("handlers", {})
    handlers.setdefault("python", {})["paths"] = [str(tree)]
    return config


def on_files(files, config):  # noqa: ANN001, ANN201 (MkDocs' hook signature)
    """Replace the files MkDocs found in ``docs/`` with the generated site."""
    from mkdocs.structure.files import File, Files

    pages, binaries = _GENERATED.setdefault("site", site_pages())
    generated = [File.generated(config, path, content=text) for path, text in pages.items()]
    generated += [File.generated(config, path, content=data) for path, data in binaries.items()]
    return Files(generated)


def on_post_build(config):  # noqa: ANN001, ANN201 (MkDocs' hook signature)
    """Remove the linked source trees."""
    import shutil

    while _TREES:
        shutil.rmtree(_TREES.pop(), ignore_errors=True)
