"""JSON-ready copies of reports: the one place where a non-finite number becomes ``null``.

A report may hold a value the model leaves undefined (a quantile past the coverage, the delay of an
unstable tier); JSON has no NaN or infinity, so such a value is written as ``null`` — visibly absent,
never a number it is not.  Numpy scalars become Python numbers (without importing numpy: the command line's
start-up stays light); dictionary keys become strings.
"""

from __future__ import annotations

import math
import numbers
from typing import Any


def json_ready(value: Any) -> Any:
    """A copy of ``value`` that ``json.dumps(..., allow_nan=False)`` accepts."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if isinstance(value, bool) or getattr(getattr(value, "dtype", None), "kind", None) == "b":
        return bool(value)  # numpy's bool is not a number
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):  # float, numpy floats
        number = float(value)
        return number if math.isfinite(number) else None
    return value
