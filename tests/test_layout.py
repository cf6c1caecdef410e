"""The package's shape: one top-level name, imports that point one way, no import cycle.

The import graph is read from the source files (``ast``), so a cycle hidden inside a function
body counts too; imports under ``if TYPE_CHECKING:`` are annotations only and do not.
"""

from __future__ import annotations

import ast
import graphlib
import importlib
import importlib.metadata
import tomllib
from pathlib import Path

import pytest

import edgeprefix

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {  # sub-package → repository folder (pyproject's package-dir)
    "edgeprefix": "edgeprefix",
    "edgeprefix.placement": "placement",
    "edgeprefix.formulations": "formulations",
    "edgeprefix.solvers": "solvers",
    "edgeprefix.benchmarks": "benchmarks",
}
# Layers, lowest first: a module may import its own layer and the ones below it.
LAYERS = ("edgeprefix.placement", "edgeprefix.formulations", "edgeprefix.solvers", "edgeprefix.benchmarks", "edgeprefix")
LEAVES = {"edgeprefix._version"}  # imported from anywhere, imports nothing


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for package, folder in FOLDERS.items():
        base = ROOT / folder
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            names = [stem] + [f"{stem}.{a.name}" for a in node.names]
        else:
            for child in ast.iter_child_nodes(node):
                visit(child)
            return
        for name in names:
            # the longest known module that the name refers to
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)

    visit(tree)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {m: _imports(m, p, known) for m, p in modules.items()}


def _layer(module: str) -> int:
    if module in LEAVES:
        return -1
    return max(i for i, prefix in enumerate(LAYERS) if module == prefix or module.startswith(prefix + "."))


def test_imports_point_down_the_layers(graph: dict[str, set[str]]) -> None:
    upward = sorted(f"{m} → {d}" for m, deps in graph.items() for d in deps if _layer(d) > _layer(m))
    assert upward == [], "imports must point down (model ← problems ← methods ← benchmarks ← CLI):\n" + "\n".join(upward)


def test_no_import_cycle(graph: dict[str, set[str]]) -> None:
    # a package imports its own __init__ implicitly; only explicit edges count here
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"import cycle: {' → '.join(exc.args[1])}")


def test_the_cycle_check_can_fail() -> None:
    """The checker itself: a planted cycle is reported."""
    with pytest.raises(graphlib.CycleError):
        tuple(graphlib.TopologicalSorter({"a": {"b"}, "b": {"c"}, "c": {"a"}}).static_order())


def test_pyproject_lists_every_package_folder() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert config["package-dir"] == FOLDERS
    on_disk = {m for m, p in _modules().items() if p.name == "__init__.py"}
    declared = {p for p in config["packages"] if (ROOT / FOLDERS[_mapped_root(p)] / _rest(p) / "__init__.py").is_file()}
    assert on_disk == declared, f"packages missing from pyproject: {sorted(on_disk - declared)}"


def _mapped_root(package: str) -> str:
    return max((p for p in FOLDERS if package == p or package.startswith(p + ".")), key=len)


def _rest(package: str) -> Path:
    root = _mapped_root(package)
    return Path(*package[len(root) + 1 :].split(".")) if package != root else Path()


def test_the_distribution_installs_one_top_level_name() -> None:
    provided = {name for name, dists in importlib.metadata.packages_distributions().items() if "edgeprefix" in dists}
    assert provided == {"edgeprefix"}


@pytest.mark.parametrize("name", ["placement", "formulations", "solvers", "benchmarks"])
def test_generic_names_are_not_importable(name: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


def test_the_tests_import_the_installed_mapping() -> None:
    """``python -m pytest`` at the root must not pick up the bare ``edgeprefix/`` folder."""
    placement = importlib.import_module("edgeprefix.placement")
    assert Path(placement.__file__).resolve().parent.name in {"placement"}
    assert Path(edgeprefix.__file__).resolve().parent.joinpath("cli.py").is_file()


def test_facade_exports_resolve() -> None:
    for name in edgeprefix.__all__:
        assert getattr(edgeprefix, name) is not None, name
    assert edgeprefix.__version__ == importlib.metadata.version("edgeprefix")
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):
        edgeprefix.nonsense  # noqa: B018


def test_python_dash_m_works_at_the_repository_root() -> None:
    """A user's ``python -m edgeprefix.benchmarks.speed.perf`` at the root must find the sub-packages even
    though the root's ``edgeprefix/`` folder (the CLI alone) comes first on sys.path."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}
    code = "import edgeprefix.placement.model.evaluation, edgeprefix.benchmarks.datasets as d; print(d.MOONCAKE_TRACE.is_file())"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


# The benchmarks' rooms, by question (benchmarks/README.md): a newcomer finds the file that measures X from
# the folder names.  Foundations (paths, seeded instances, sweeps) serve the question rooms and import none.
FOUNDATIONS = ("workloads", "sweeps")
QUESTION_ROOMS = ("optimisers", "accuracy", "speed", "memory", "paper")
DATA_FOLDERS = ("instances", "data")


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["edgeprefix", "benchmarks"] or len(parts) < 4:
        return None
    return parts[2]


def test_benchmarks_live_in_rooms() -> None:
    base = ROOT / "benchmarks"
    loose = sorted(p.name for p in base.glob("*.py") if p.name not in {"__init__.py", "datasets.py"})
    assert loose == [], f"benchmark modules outside a room: {loose}"
    folders = sorted(p.name for p in base.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted((*FOUNDATIONS, *QUESTION_ROOMS, *DATA_FOLDERS))
    for module, path in _modules().items():
        if _room(module) in QUESTION_ROOMS and path.name not in {"__init__.py", "_common.py"}:
            assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), f"{module}: no docstring saying what it measures"


def test_room_imports_point_one_way(graph: dict[str, set[str]]) -> None:
    """Foundations import no question room; the rooms' own graph has no cycle."""
    upward = sorted(f"{m} → {d}" for m, deps in graph.items() if _room(m) in FOUNDATIONS for d in deps if _room(d) in QUESTION_ROOMS)
    assert upward == [], "foundations must not import question rooms:\n" + "\n".join(upward)
    rooms: dict[str, set[str]] = {}
    for m, deps in graph.items():
        a = _room(m)
        if a is None:
            continue
        rooms.setdefault(a, set()).update(b for b in map(_room, deps) if b is not None and b != a)
    try:
        tuple(graphlib.TopologicalSorter(rooms).static_order())
    except graphlib.CycleError as exc:
        pytest.fail(f"benchmark rooms import in a cycle: {' → '.join(exc.args[1])}")
