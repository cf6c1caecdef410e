"""The analytical model (``docs/model.md`` §1–8): instance → fixed point → :class:`Evaluation`.

Import from the modules (``edgeprefix.placement.model.evaluation`` …) or from the facade
``import edgeprefix as ep``; this package itself imports nothing so that start-up stays fast.
"""
