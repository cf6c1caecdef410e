"""The type check cannot pass by not seeing the package (pyproject.toml [tool.mypy], .ci/typecheck).

mypy runs over an installed copy (``mypy -p edgeprefix``), where every ``edgeprefix.*`` import resolves.
An import that did not resolve would be read as ``Any`` -- and checked no further -- only if the
configuration skipped missing imports for it; these checks keep that switch off for the package itself
and keep ``py.typed`` (PEP 561) shipped, so the installed copy is the one mypy checks.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
MYPY = PYPROJECT["tool"]["mypy"]


def _loosened(section: dict) -> list[str]:
    """The switches in ``section`` that let an import or a module go unchecked."""
    switches = [key for key in ("ignore_missing_imports", "ignore_errors") if section.get(key) is True]
    return switches + (["follow_imports"] if section.get("follow_imports") in ("skip", "silent") else [])


def test_no_global_switch_reads_unresolved_imports_as_any() -> None:
    assert _loosened(MYPY) == []


def test_overrides_never_loosen_the_package() -> None:
    for override in MYPY.get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        if _loosened(override):
            hits = [m for m in modules if fnmatch.fnmatchcase("edgeprefix.x", m) or m.split(".")[0] == "edgeprefix"]
            assert hits == [], f"[tool.mypy] override {modules} skips imports or errors of edgeprefix itself"


def test_unannotated_bodies_are_checked_and_unused_ignores_are_errors() -> None:
    assert MYPY.get("check_untyped_defs") is True
    assert MYPY.get("warn_unused_ignores") is True


def test_py_typed_ships_with_the_package() -> None:
    assert (ROOT / "edgeprefix" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["edgeprefix"]


def test_ci_runs_the_type_check_over_the_installed_namespace() -> None:
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    check = (ROOT / ".ci" / "typecheck").read_text(encoding="utf-8")
    assert "bash .ci/typecheck" in run
    assert "--target" in check and "-p edgeprefix" in check
