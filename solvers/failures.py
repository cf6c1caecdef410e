"""Errors of the parallel searches that a command catches without importing Optuna (docs/distributed.md)."""

from __future__ import annotations


class WorkersFailed(RuntimeError):
    """Every local worker died before the study was done (re-running the command resumes it)."""
