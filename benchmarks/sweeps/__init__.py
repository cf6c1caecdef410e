"""Sweeps over loads × densities × instances × seeds on Dask (``edgeprefix sweep``) and the one meaning
of ``--seeds``."""
