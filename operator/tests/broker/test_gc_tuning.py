"""The coordinator process's garbage-collector settings (see commands/coordinator.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from staticfleet.commands.coordinator import GC_THRESHOLDS, tune_garbage_collector


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_gc")
def test_loaded_objects_are_frozen_and_full_collections_are_rarer() -> None:
    gc.unfreeze()
    tune_garbage_collector()
    assert gc.get_freeze_count() > 10_000  # the modules and the Kafka schema loaded so far
    assert gc.get_threshold() == GC_THRESHOLDS
    young, middle, full = GC_THRESHOLDS
    assert (young, middle) == (700, 10)  # young generations as CPython's defaults: short pauses
    assert full == 100  # a full collection considered after 100 middle ones, not 10


@pytest.mark.usefixtures("restored_gc")
def test_garbage_cycles_made_after_tuning_are_still_collected() -> None:
    tune_garbage_collector()

    class Node:
        other: Node | None = None

    a, b = Node(), Node()
    a.other, b.other = b, a
    del a, b
    assert gc.collect() >= 2
