"""The paper's figures and Sec. VI targets (``edgeprefix reproduce``, :mod:`.figures`) and the calibration
of the instances that meet them (:mod:`.calibration`; benchmarks/README.md §8)."""
