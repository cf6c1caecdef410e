"""Domain errors of edgeprefix, defined in one place.

Every error states the rule, the bad value and the field it came from, so that a user can
fix an instance file without reading the code.
"""

from __future__ import annotations

from collections.abc import Iterable

LIST_LIMIT = 5  # entries of a list shown in a message


def few(items: Iterable[object], limit: int = LIST_LIMIT) -> str:
    """``[a, b, c, … (N in all)]``: a list for an error message, cut after ``limit`` entries."""
    values = list(items)
    shown = ", ".join(repr(v) if isinstance(v, str) and "=" not in v else str(v) for v in values[:limit])
    return f"[{shown}]" if len(values) <= limit else f"[{shown}, … ({len(values)} in all)]"


class InstanceError(ValueError):
    """An instance (file or in-memory data) breaks the schema or a model rule.

    ``field`` is the dotted path of the offending field (``requests[1].probability``).
    """

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class MixError(ValueError):
    """A profile mix ``π`` is not a valid point for the instance."""


class InfeasibleConstraintsError(ValueError):
    """The linear placement constraints (simplex, budget, fallback, caps) admit no point."""


class ConvergenceError(RuntimeError):
    """A numerical procedure did not reach its tolerance (raised only on explicit request)."""


def plain(value: object) -> str:
    """``repr`` of ``value`` for a message, with numpy scalars and arrays shown as Python numbers and lists.

    ``plain(np.float64(1.1))`` is ``'1.1'``, not ``'np.float64(1.1)'``; strings keep their quotes.
    """
    return repr(_python(value))


def _python(value: object) -> object:
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return value.tolist()  # numpy scalar → int/float/bool/str, array → nested lists
    if isinstance(value, (list, tuple)):
        return type(value)(_python(v) for v in value)
    if isinstance(value, dict):
        return {_python(k): _python(v) for k, v in value.items()}
    return value


class NumericalError(ArithmeticError):
    """A computed quantity is NaN/inf or outside its mathematical range (a bug or an input beyond
    the ranges of docs/model.md §20); raised instead of returning or clamping it."""
