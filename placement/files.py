"""Reading user files with one-line errors that name the file (never a traceback).

Every reader of a user-supplied file (instances, epochs, calibration tables, model configs)
goes through :func:`read_text` and :func:`parse_document`, so an unreadable, non-UTF-8 or
absurdly nested file is reported as a :class:`ValueError` naming the file and the fix.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any


def read_text(path: str | os.PathLike[str], what: str) -> str:
    """The UTF-8 text of ``path``; ``what`` names the file's role in messages (``"instance file"``)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{what} {str(p)!r}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None
    except FileNotFoundError:
        raise ValueError(f"{what} {str(p)!r} does not exist") from None
    except OSError as exc:
        raise ValueError(f"{what} {str(p)!r}: cannot read it ({exc.strerror or type(exc).__name__})") from None


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice (JSON would silently keep the last)."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of :func:`json.loads` that refuses a repeated key instead of keeping the last."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(f"key {key!r} appears twice in one object (give each key once; TOML refuses it too)")
        out[key] = value
    return out


def parse_document(text: str, fmt: str, what: str, kind: str = "") -> Any:
    """Parse TOML (``fmt='toml'``) or JSON text; syntax errors and too-deep nesting name ``what``."""
    try:
        return tomllib.loads(text) if fmt == "toml" else json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKeyError as exc:
        raise ValueError(f"{what}: {exc}") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what}: cannot parse the {fmt.upper()}{' ' + kind if kind else ''}: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise ValueError(f"{what}: tables or lists nested too deeply to parse (no instance field nests more than 4 levels)") from None
    except ValueError as exc:  # Python refuses to read integers of more than sys.get_int_max_str_digits() digits
        if "digits" not in str(exc):
            raise
        raise ValueError(f"{what}: {huge_integer(text)}") from None


_HUGE_INTEGER = re.compile(r'(?:"?([\w.\-]+)"?\s*[:=]\s*\[?\s*)?[-+]?(\d{4301,})')


def huge_integer(text: str) -> str:
    """The message for an integer too long to read: its line, its key when one precedes it, its length."""
    match = _HUGE_INTEGER.search(text)
    if match is None:
        return "an integer has too many digits to read (far beyond the largest value any field accepts, docs/model.md §20)"
    line = text.count("\n", 0, match.start(2)) + 1
    key = f" {match.group(1)!r}" if match.group(1) else ""
    return (
        f"line {line}: field{key} is an integer of {len(match.group(2))} digits; "
        "far beyond the largest value any field accepts (docs/model.md §20)"
    )
