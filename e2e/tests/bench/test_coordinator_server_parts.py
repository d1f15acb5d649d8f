"""The coordinator benchmark's load generator: its own garbage collector stays out of timed windows."""

from __future__ import annotations

import gc

import pytest

from bench.coordinator_server import collector_paused


def test_no_collection_inside_a_timed_window_and_everything_restored_after() -> None:
    assert gc.isenabled()
    alive = [[index] for index in range(1_000)]
    with collector_paused():
        assert not gc.isenabled()
        assert gc.get_freeze_count() >= len(alive)  # what lived before is out of the collector's way
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_the_collector_comes_back_when_the_window_fails() -> None:
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a measurement failed")
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
