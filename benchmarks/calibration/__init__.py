"""Calibration of the embedded ``paper_calibrated`` instance.

- :mod:`~edgeprefix.benchmarks.calibration.targets`: the paper's numbers and the experiment settings;
- :mod:`~edgeprefix.benchmarks.calibration.model`: free parameters → instance (fixed design choices);
- :mod:`~edgeprefix.benchmarks.calibration.loss`: what is measured and minimised;
- ``python -m edgeprefix.benchmarks.calibration``: the search (Nelder–Mead over the package's own
  ``evaluate``), the report and ``--write``.

The reasoning and the final numbers are in ``README.md`` next to this file.
"""
