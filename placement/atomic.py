"""Atomic file output: write to a temporary file in the target folder, then rename.

A reader never sees a half-written result, and an interrupted run leaves the previous file
intact.  Files get the usual mode (``0666`` minus the umask), not ``mkstemp``'s ``0600``.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any


def followed(path: str | os.PathLike[str]) -> Path:
    """``path``, or where it points when it is a symbolic link (followed to the end, also when dangling).

    Outputs follow a link instead of replacing it: the link stays, the file or folder it names is written.
    """
    target = Path(path)
    return Path(os.path.realpath(target)) if target.is_symlink() else target


def check_output_path(path: str | os.PathLike[str], flag: str, kind: str) -> Path:
    """Check, before any work, that ``path`` can receive a ``kind`` (``"file"`` or ``"folder"``) output.

    Refused with one line naming ``flag``: an empty path, a folder where a file is written or a file
    where a folder is, and a parent folder that is not writable.  A symbolic link is followed.
    """
    if not str(path).strip():
        raise ValueError(f"{flag} is empty: name the {kind} to write")
    target = followed(path)
    shown = str(path) if target == Path(path) else f"{str(path)} (a link to {str(target)})"
    if kind == "folder" and target.exists() and not target.is_dir():
        raise ValueError(f"{flag} {shown!r} is a file, not a folder: name a new or an earlier output folder")
    if kind == "file" and target.is_dir():
        raise ValueError(f"{flag} {shown!r} is a folder: name the file to write inside it (e.g. {str(Path(path) / 'instance.toml')!r})")
    existing = target.parent if target.is_absolute() else (Path.cwd() / target).parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {shown!r}: folder {str(existing)!r} is not writable")
    return target


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, creating the folder if needed (a symbolic link is followed)."""
    if not str(path).strip():
        raise ValueError("the output path is empty: name the file to write")
    target = followed(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())  # the data is on disk before the name points at it
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write UTF-8 ``text`` to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_savefig(figure: Any, path: str | os.PathLike[str], *, dpi: int = 120) -> None:
    """Render a matplotlib figure to PNG and write it atomically."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    atomic_write_bytes(path, buffer.getvalue())


# --------------------------------------------------------------------------------------------
# Output sets: several files that must change together
# --------------------------------------------------------------------------------------------
_RENAME_EXCHANGE = 2  # renameat2 flag: swap two paths atomically (Linux ≥ 3.15)
_AT_FDCWD = -100


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap the directories ``a`` and ``b`` in one step; ``False`` where the system cannot."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: this file system cannot exchange
        return False
    raise OSError(err, os.strerror(err), str(b))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_stale(folder: Path) -> None:
    """Remove temporaries of earlier writers of ``folder`` that died (``.NAME.set-PID-*``)."""
    import shutil

    for entry in folder.parent.glob(f".{folder.name}.set-*"):
        try:
            pid = int(entry.name.split(".set-", 1)[1].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            if entry.is_symlink():  # a link swapped aside by an earlier version that replaced links
                entry.unlink(missing_ok=True)
            else:
                shutil.rmtree(entry, ignore_errors=True)


def check_output_folder(folder: str | os.PathLike[str], flag: str, owned: Iterable[str]) -> Path:
    """Check, before any work, that ``folder`` can receive an output set; returns it as a path.

    It must be absent or a folder that holds only files named in ``owned`` (an earlier output
    set: replacing it must not delete a user's other files), and its parent must be writable.
    """
    if not str(folder).strip():
        raise ValueError(f"{flag} is empty: name the output folder")
    path = followed(folder)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{flag} {str(path)!r} is a file, not a folder: name a new or an earlier output folder")
    parent = path.resolve().parent
    existing = parent
    while not existing.exists():
        existing = existing.parent
    if not os.access(existing, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK | os.X_OK)):
        raise ValueError(f"{flag} {str(path)!r}: folder {str(existing if not path.exists() else path)!r} is not writable")
    if path.is_dir():
        allowed = set(owned)
        foreign = sorted(p.name for p in path.iterdir() if p.name not in allowed and not p.name.startswith("."))
        if foreign:
            shown = ", ".join(foreign[:3]) + (f", … ({len(foreign)} in all)" if len(foreign) > 3 else "")
            raise ValueError(
                f"{flag} {str(path)!r} holds files this command did not write ({shown}): "
                "name a new folder (the output set replaces the whole folder)"
            )
    return path


def write_output_set(folder: str | os.PathLike[str], files: Mapping[str, bytes], keep: Iterable[str] = ()) -> None:
    """Replace the output set in ``folder`` by ``files`` (name → bytes) as a whole.

    The files are written and fsynced in a temporary sibling folder, files named in ``keep`` that
    exist in ``folder`` (e.g. a study the run appended to) are hard-linked beside them, and the
    two folders are swapped in one ``renameat2(RENAME_EXCHANGE)``; a reader (or a run killed at
    any instant) sees the old set or the new one, complete.  Where the file system cannot
    exchange, the old folder is moved aside and the new one renamed in (a crash between the two
    renames leaves the old set beside, named ``.NAME.set-PID-*``).
    """
    import shutil

    if not str(folder).strip():
        raise ValueError("the output folder is empty: name the folder to write")
    target = followed(folder)  # a link to a folder: the folder it names is replaced, the link stays
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(target)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.set-{os.getpid()}-"))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)
        for name, data in files.items():
            with open(staging / name, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(staging / name, 0o666 & ~umask)
        if target.is_dir():
            for name in keep:
                source = target / name
                if source.is_file() and name not in files:
                    try:
                        os.link(source, staging / name)
                    except OSError:
                        shutil.copy2(source, staging / name)
        _fsync_dir(staging)
        if not target.exists():
            os.rename(staging, target)
        elif not _exchange(staging, target):
            aside = staging.with_name(staging.name + "-old")
            os.rename(target, aside)
            os.rename(staging, target)
            staging = aside
        _fsync_dir(target.parent)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
