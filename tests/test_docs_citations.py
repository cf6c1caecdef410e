"""Citations of the model reference resolve, and nothing points outside the repository.

Every ``docs/model.md §N`` / ``§N.k`` and every ``eq. (N)`` / ``eqs. (N)–(M)`` in the repository's
``.py``, ``.md`` and ``.toml`` files must name a heading or an equation label of
``docs/model.md`` (or, for a section docs/model.md does not have yet, of a draft in ``docs/drafts/``).
Nothing may cite the source specification's file, a folder beside the repository, a machine
path or an issue number.  Every code name that docs/model.md gives must be importable.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "docs" / "model.md"
DRAFTS = ROOT / "docs" / "drafts"
SUFFIXES = (".py", ".md", ".toml")
THIS = Path(__file__).resolve()

NUMBER = r"\d+(?:\.\d+)*"
HEADING = re.compile(rf"^#{{1,6}}\s*§({NUMBER})\b", re.MULTILINE)
LABEL = re.compile(rf"^\*\*\(({NUMBER})\)(?:\s*[–-]\s*\(({NUMBER})\))?\*\*", re.MULTILINE)
DRAFT_LABEL = re.compile(r"\(((?:1[4-9]|20)\.\d+)\)")
# ``docs/model.md §5–8``, ``docs/model.md`` §3, ``docs/model.md §1–§5, §8, §11``, ``§9.3(c)``
SECTION_LIST = rf"§{NUMBER}(?:\([a-z]\)|[a-z])?(?:\s*(?:[–-]|,|and)\s*§?{NUMBER}(?:\([a-z]\)|[a-z])?)*"
MODEL_CITATION = re.compile(rf"docs/model\.md`{{0,2}}\s*({SECTION_LIST})")
BARE_SECTION = re.compile(rf"(?<![\w/])({SECTION_LIST})")
EQUATION = re.compile(rf"\beqs?\.\s*\(({NUMBER})\)(?:\s*[–-]\s*\(({NUMBER})\))?")
OTHER_FILE = re.compile(r"README(?:\.md)?`{0,2}\s*$")  # ``README.md`` §4 is that file's section
INNER_LABEL = re.compile(r"\((\d+\.\d+)\)")  # (6.12) inside docs/model.md
FORBIDDEN = {
    "the source specification's file (cite docs/model.md)": re.compile(r"MODEL\.md"),
    "a folder beside the repository": re.compile(r"\.\./shared|\bshared/(?:seed|data|MODEL)"),
    "a machine path": re.compile(r"(?<![\w.~])/(?:work|root|opt|tmp)/"),
    "an issue number": re.compile(r"\bissues?\s*(?:show\s*)?#?\d+", re.IGNORECASE),
    "a paper label nobody can look up (write eq. (N))": re.compile(r"\bP-\d+\b"),
    "the deleted model notes (folded into docs/model.md)": re.compile(r"model-notes"),
}


def repository_files() -> list[Path]:
    """Tracked (and new, unignored) .py/.md/.toml files; a plain walk outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split("\n")
        files = [ROOT / name for name in out if name.endswith(SUFFIXES)]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", "build", "dist", ".venv", "venv", "__pycache__"}
        files = [p for p in ROOT.rglob("*") if p.suffix in SUFFIXES and not skip & set(p.relative_to(ROOT).parts)]
    return sorted(p for p in files if p.is_file() and not p.name.endswith(".egg-info"))


def numbers(section_list: str) -> list[str]:
    return [n.rstrip(".") for n in re.findall(NUMBER, section_list)]


def targets() -> tuple[set[str], set[str]]:
    """Section numbers and equation labels defined by docs/model.md and the drafts.

    A draft only counts for a section docs/model.md does not have yet: once a section is folded,
    its citations must resolve in docs/model.md itself.
    """
    text = MODEL.read_text(encoding="utf-8")
    sections = set(HEADING.findall(text))
    labels = {n for pair in LABEL.findall(text) for n in pair if n}
    folded = {n for n in sections if "." not in n}
    drafted_sections: set[str] = set()
    for draft in sorted(DRAFTS.glob("*.md")) if DRAFTS.is_dir() else []:
        body = draft.read_text(encoding="utf-8")
        drafted_sections |= {n for n in HEADING.findall(body) if n.split(".")[0] not in folded}
        labels |= {n for n in DRAFT_LABEL.findall(body) if n.split(".")[0] not in folded}
    return sections | drafted_sections, labels


def line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def citations(path: Path) -> Iterator[tuple[int, str, str]]:
    """``(line, kind, number)`` of every citation in ``path``; kind is ``section`` or ``equation``."""
    text = path.read_text(encoding="utf-8")
    seen: set[int] = set()
    for m in MODEL_CITATION.finditer(text):
        seen.add(m.start(1))
        for n in numbers(m.group(1)):
            yield line_of(text, m.start()), "section", n
    bare = path.suffix == ".py" or path == MODEL
    for m in BARE_SECTION.finditer(text) if bare else ():
        # In code a bare § is the model reference, unless it follows a README's name.
        if m.start(1) in seen or OTHER_FILE.search(text[max(0, m.start() - 60) : m.start()]):
            continue
        for n in numbers(m.group(1)):
            yield line_of(text, m.start()), "section", n
    for m in EQUATION.finditer(text):
        for n in filter(None, m.groups()):
            yield line_of(text, m.start()), "equation", n
    if path == MODEL:
        for m in INNER_LABEL.finditer(text):
            yield line_of(text, m.start()), "equation", m.group(1)


def test_the_reference_defines_sections_and_labels():
    sections, labels = targets()
    assert {str(n) for n in range(1, 14)} <= sections  # §1–§13 keep the specification's numbering
    assert {"17", "18", "19", "20", "25", "33", "39", "49", "53"} <= labels  # the paper's numbers
    text = MODEL.read_text(encoding="utf-8")
    defined = [n for pair in LABEL.findall(text) for n in pair if n]
    assert len(defined) == len(set(defined)), "an equation label is defined twice in docs/model.md"


def test_every_citation_resolves():
    sections, labels = targets()
    dangling = []
    for path in repository_files():
        for line, kind, number in citations(path):
            known = sections if kind == "section" else labels
            if number not in known:
                what = f"§{number}" if kind == "section" else f"eq. ({number})"
                dangling.append(f"{path.relative_to(ROOT)}:{line}: {what} is not a heading or label of docs/model.md")
    assert not dangling, "\n".join(dangling)


def test_citation_parsing_sees_every_form(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""See docs/model.md §1–§5, §8, and ``docs/model.md`` §9.3(c); eqs. (19)–(20), eq. (6.12).\n'
        'README §4 is another file\'s section; §10.1 is ours."""\n',
        encoding="utf-8",
    )
    found = [(kind, n) for _, kind, n in citations(sample)]
    assert found == [
        ("section", "1"),
        ("section", "5"),
        ("section", "8"),
        ("section", "9.3"),
        ("section", "10.1"),
        ("equation", "19"),
        ("equation", "20"),
        ("equation", "6.12"),
    ]


def test_nothing_points_outside_the_repository():
    bad = []
    for path in repository_files():
        if path == THIS:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            for what, pattern in FORBIDDEN.items():
                if pattern.search(line):
                    bad.append(f"{path.relative_to(ROOT)}:{number}: cites {what}: {line.strip()[:100]}")
    assert not bad, "\n".join(bad)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_contents_list_exactly_the_sections_that_exist():
    text = MODEL.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    anchors = {github_slug(h) for h in headings if h != "Contents"}
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    linked = re.findall(r"\]\(#([^)]+)\)", contents)
    assert set(linked) == anchors, f"contents links {sorted(set(linked) ^ anchors)} do not match the headings"
    every_link = set(re.findall(r"\]\(#([^)]+)\)", text))
    all_anchors = {github_slug(h) for h in re.findall(r"^#{2,3} (.+)$", text, re.MULTILINE)}
    assert every_link <= all_anchors


def resolve(dotted: str) -> object:
    """Import the longest module prefix of ``dotted`` and walk the rest as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if hasattr(obj, name):
                obj = getattr(obj, name)
            elif name in getattr(obj, "__dataclass_fields__", {}):
                obj = obj.__dataclass_fields__[name]  # a dataclass field without a default
            else:
                raise AttributeError(f"{dotted}: {'.'.join(parts[: parts.index(name)])} has no {name!r}")
        return obj
    raise ModuleNotFoundError(dotted)


def code_names(text: str) -> list[str]:
    return sorted(set(re.findall(r"`(edgeprefix(?:\.\w+)+)`", text)))


@pytest.mark.parametrize("name", code_names(MODEL.read_text(encoding="utf-8")))
def test_every_code_name_exists(name):
    resolve(name)


def test_every_labelled_equation_names_its_code():
    text = MODEL.read_text(encoding="utf-8")
    blocks = re.split(r"\n(?=\*\*\(|#)", text)
    missing = [b.splitlines()[0][:40] for b in blocks if LABEL.match(b) and not code_names(b)]
    assert not missing, f"equations without a code name: {missing}"
