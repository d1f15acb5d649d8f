"""Fixtures shared by the e2e tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE_CONSUMER = Path(__file__).resolve().parents[2] / "examples" / "consumer" / "consumer.py"


@pytest.fixture(scope="module")
def consumer(request: pytest.FixtureRequest) -> ModuleType:
    """The example consumer (examples/consumer/consumer.py) loaded as a module of its own for each test
    module, for tests of its parts without a broker."""
    name = f"example_consumer_{request.module.__name__.rpartition('.')[2]}"
    spec = importlib.util.spec_from_file_location(name, EXAMPLE_CONSUMER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
