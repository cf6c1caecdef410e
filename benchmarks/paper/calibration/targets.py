"""The paper's reported numbers (Sec. VI, docs/model.md §13) and the experiment settings we fix.

One source of truth for the calibration loss, the figure tables and the tests.  Coverage is
always at the TTFT target ``τ = 0.8 s``.
"""

from __future__ import annotations

TARGET = 0.8  # τ, seconds
TOLERANCE = 0.03  # the calibration's acceptance band on every Fig. 8 / Fig. 12 point

# Fig. 8: coverage vs request intensity Λ at the default mix (λ_b = 1).
FIG8_PAPER: dict[tuple[str, float], float] = {
    ("load_aware", 3.0): 0.69,
    ("prefix", 3.0): 0.55,
    ("load_aware", 4.0): 0.63,
    ("prefix", 4.0): 0.23,
}
NEAREST_PLATEAU = 0.52  # nearest-node coverage "around 0.52" at every load and density
NEAREST_LOADS = (1.0, 2.0, 3.0, 4.0)  # loads at which the calibration holds nearest at 0.52

# Fig. 12: coverage vs edge density λ_b at a fixed demand.  The paper does not state the
# demand; we fix it at Fig. 8's moderate load (see benchmarks/paper/calibration/README.md).
FIG12_INTENSITY = 3.0
FIG12_PAPER: dict[tuple[str, float], float] = {
    ("load_aware", 0.5): 0.48,
    ("load_aware", 3.0): 0.94,
    ("nearest", 3.0): NEAREST_PLATEAU,
}

# Fig. 10/11: the best mix among the candidates at light, moderate and high load.
FIG10_LOADS: dict[str, float] = {"light": 1.0, "moderate": 2.0, "high": 4.0}
FIG10_PAPER: dict[str, dict[str, float]] = {
    "light": {"deep": 0.20},
    "moderate": {"deep": 0.20},
    "high": {"deep": 0.15, "shallow": 0.50},
}

# Fig. 7: uniform cached depth at light / moderate / heavy load.
FIG7_LOADS: dict[str, float] = {"light": 1.0, "moderate": 3.0, "heavy": 4.0}  # as Fig. 8
