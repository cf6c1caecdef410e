"""Shared fixtures: the embedded instance and a factory for modified instance mappings."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from placement.instance import default_instance, instance_from_mapping, instance_to_mapping


@pytest.fixture(scope="session")
def baseline():
    return default_instance()


@pytest.fixture()
def baseline_mapping(baseline) -> dict[str, Any]:
    return copy.deepcopy(instance_to_mapping(baseline))


@pytest.fixture()
def build():
    return instance_from_mapping
