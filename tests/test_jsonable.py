"""JSON-ready copies: non-finite numbers become null, numpy scalars plain numbers."""

from __future__ import annotations

import json
import math

import numpy as np

from edgeprefix.placement.jsonable import json_ready


def test_non_finite_numbers_become_null_at_any_depth():
    report = {"coverage": 0.5, "tau": math.nan, "waits": [1.0, math.inf, (-math.inf, np.float32("nan"))], 3: {"x": np.nan}}
    out = json_ready(report)
    assert out == {"coverage": 0.5, "tau": None, "waits": [1.0, None, [None, None]], "3": {"x": None}}
    json.dumps(out, allow_nan=False)  # raises on any NaN left


def test_numpy_scalars_become_python_numbers_of_the_same_kind():
    out = json_ready({"n": np.int64(7), "p": np.float32(0.25), "ok": np.bool_(True), "flag": False, "s": "text"})
    assert out == {"n": 7, "p": 0.25, "ok": True, "flag": False, "s": "text"}
    assert type(out["n"]) is int and type(out["p"]) is float and type(out["ok"]) is bool and type(out["flag"]) is bool
