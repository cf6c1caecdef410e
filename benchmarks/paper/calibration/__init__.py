"""Calibration of the embedded instances to the paper's Sec. VI (see ``README.md`` next to this file).

``paper_section6`` (every Sec. VI target, the figures' default):

- :mod:`~edgeprefix.benchmarks.paper.calibration.checks`: the paper's claims as checks with tolerances;
- :mod:`~edgeprefix.benchmarks.paper.calibration.section6`: the 16 free parameters → instance, figure loads;
- :mod:`~edgeprefix.benchmarks.paper.calibration.assess`: staged measurement of every target (early rejection);
- :mod:`~edgeprefix.benchmarks.paper.calibration.search`: CMA-ES over the family, search log, Pareto front;
- ``python -m edgeprefix.benchmarks.paper.calibration``: search, ``--check``, ``--pareto``, ``--write``.

``paper_calibrated`` (Figs 8/12 only, kept): :mod:`~edgeprefix.benchmarks.paper.calibration.targets`,
:mod:`~edgeprefix.benchmarks.paper.calibration.model`, :mod:`~edgeprefix.benchmarks.paper.calibration.loss`,
``python -m edgeprefix.benchmarks.paper.calibration --legacy``.
"""
