"""Shared fixtures: the embedded instance and a factory for modified instance mappings."""

from __future__ import annotations

import copy
import os
import sys
from typing import Any

# `python -m pytest` at the repository root puts the checkout first on sys.path; there the
# folder `edgeprefix/` (the CLI alone) would shadow the installed package, whose sub-packages
# `edgeprefix.placement`, `.formulations`, ... are mapped from the sibling folders.  Test the
# installed mapping, as a user imports it.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _ROOT]

import pytest  # noqa: E402

from edgeprefix.placement.model.instance import (  # noqa: E402
    default_instance,
    instance_from_mapping,
    instance_to_mapping,
)


@pytest.fixture(scope="session")
def baseline():
    return default_instance()


@pytest.fixture()
def baseline_mapping(baseline) -> dict[str, Any]:
    return copy.deepcopy(instance_to_mapping(baseline))


@pytest.fixture()
def build():
    return instance_from_mapping
