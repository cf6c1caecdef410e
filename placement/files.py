"""Reading user files with one-line errors that name the file (never a traceback).

Every reader of a user-supplied file (instances, epochs, calibration tables, model configs)
goes through :func:`read_text` and :func:`parse_document`, so an unreadable, non-UTF-8 or
absurdly nested file is reported as a :class:`ValueError` naming the file and the fix.
"""

from __future__ import annotations

import json
import os
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


def parse_document(text: str, fmt: str, what: str, kind: str = "") -> Any:
    """Parse TOML (``fmt='toml'``) or JSON text; syntax errors and too-deep nesting name ``what``."""
    try:
        return tomllib.loads(text) if fmt == "toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what}: cannot parse the {fmt.upper()}{' ' + kind if kind else ''}: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise ValueError(f"{what}: tables or lists nested too deeply to parse (no instance field nests more than 4 levels)") from None
