"""Draw a plot in a helper process that imports matplotlib while the main work runs.

Importing matplotlib's ``Figure`` and Agg canvas costs 0.35–0.45 s of CPU in a ``solve``
process (Pyomo's import hook adds ``pyplot``), as much as a 100-trial TPE search.  A command
that will write a plot starts a :class:`Prerenderer` as soon as its options are checked: a
forked helper imports the plotting modules on another core while the search runs, then
waits for one request ``(function, arguments)``, calls it and sends back the bytes it returns.
The main process pays only the drawing itself (and ~0.05 s for the fork).  Where every core is
busy the import costs the same CPU in the helper as it would here (benchmarks/README.md §5).

Where no helper can be had (no ``fork`` on this system, a process that already runs threads,
the modules already imported) or it fails (it died, the function raised), the function is
called in this process: the bytes are the same, and a real error surfaces with its traceback.
A helper whose parent dies sees its pipe close and exits.
"""

from __future__ import annotations

import gc
import importlib
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

WAIT_SECONDS = 300.0  # longest wait for the helper's answer before drawing here instead


def import_unhooked(modules: Sequence[str]) -> None:
    """Import ``modules`` without Pyomo's post-import hook and without sweeping the old heap.

    Once Pyomo is loaded, the first import of ``matplotlib`` also imports ``pyplot`` and ``pylab``
    for Pyomo's own plotting (~0.05 s of CPU that a figure drawn on an Agg canvas never uses);
    the hook stays registered and Pyomo runs it if it ever asks for matplotlib itself.  The
    thousands of objects an import creates also trigger a full garbage collection over
    everything the process holds (Pyomo, SciPy, Optuna: ~0.07 s); the objects that exist
    before the import are frozen (:func:`gc.freeze`) while it runs.
    """
    missing = [name for name in modules if name not in sys.modules]
    if not missing:
        return
    finder = getattr(sys.modules.get("pyomo.common.dependencies"), "DeferredImportCallbackFinder", None)
    callbacks = getattr(finder, "_callbacks", None)
    roots = {name.split(".", 1)[0] for name in missing} if isinstance(callbacks, dict) else set()
    held = {root: callbacks.pop(root) for root in roots if root in callbacks}
    freeze = gc.isenabled() and gc.get_freeze_count() == 0  # never thaw objects someone else froze
    if freeze:
        gc.freeze()
    try:
        for name in missing:
            importlib.import_module(name)
    finally:
        if freeze:
            gc.unfreeze()
        for root, hooks in held.items():
            callbacks.setdefault(root, []).extend(hooks)


def _serve(conn: Any, other: Any, modules: Sequence[str]) -> None:
    """The helper: import ``modules``, answer one request, exit (``None`` for any failure)."""
    other.close()  # the parent's end: its close by a dying parent must reach us as EOF
    gc.disable()  # short-lived: a collection would only copy the parent's pages (copy-on-write)
    try:
        import_unhooked(modules)
        func, args = conn.recv()
        answer = func(*args)
    except BaseException:  # EOF (the parent is gone or closed) or a failure the parent reproduces
        answer = None
    try:
        conn.send(answer)
    except OSError:
        pass
    finally:
        conn.close()


class Prerenderer:
    """A forked helper that imports ``modules`` now and later runs one function returning bytes.

    ``prerenderer(func, *args)`` returns ``func(*args)``, computed by the helper if it is up
    (``func`` and ``args`` must pickle), else here.  :meth:`close` ends an unused helper.
    """

    def __init__(self, modules: Sequence[str]) -> None:
        self._process: Any = None
        self._conn: Any = None
        if all(name in sys.modules for name in modules) or threading.active_count() > 1:
            return  # nothing to overlap, or forking a threaded process could deadlock the helper
        import multiprocessing

        if "fork" not in multiprocessing.get_all_start_methods() or multiprocessing.current_process().daemon:
            return  # a daemonic process (a pool's worker) may not start processes
        context = multiprocessing.get_context("fork")
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(theirs, ours, tuple(modules)), name="edgeprefix-prerender", daemon=True)
        previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
        if previous is not None:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the helper is born ignoring Ctrl-C: it is ours to handle
        try:
            process.start()
        except Exception:  # no process to be had (limits, memory): draw here
            ours.close()
            return
        finally:
            theirs.close()
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        self._process, self._conn = process, ours

    @property
    def started(self) -> bool:
        """Whether a helper process runs (else every call is computed here)."""
        return self._process is not None

    @property
    def pid(self) -> int | None:
        """The helper's process id while it runs."""
        return None if self._process is None else self._process.pid

    def __call__(self, func: Callable[..., bytes], *args: Any) -> bytes:
        answer = None
        if self._conn is not None:
            try:
                self._conn.send((func, args))
                if self._conn.poll(WAIT_SECONDS):
                    answer = self._conn.recv()
            except Exception:  # a pickling error, a dead helper: draw here (the same bytes)
                answer = None
            finally:
                self.close()
        return answer if isinstance(answer, bytes) else func(*args)

    def close(self) -> None:
        """End the helper (it exits on the closed pipe) and reap it."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.terminate()
                self._process.join()
            self._process = None

    def __del__(self) -> None:
        if getattr(self, "_conn", None) is not None:
            self._conn.close()  # a helper never asked exits on EOF; its process object reaps it
