"""The coordinator benchmark's load generator: its own garbage collector stays out of timed windows, and
for the latencies it and the server each have a core."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import pytest

from bench.coordinator_server import collector_paused, cores_apart


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


def _affinities(pid: int) -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(int(tid))) for tid in os.listdir(f"/proc/{pid}/task")}


def test_the_generator_and_every_thread_of_the_server_get_a_core_each_then_all_of_them() -> None:
    cores = frozenset(os.sched_getaffinity(0))
    # A stand-in server with a second thread, and one more started while pinned.
    script = (
        "import sys, threading, time\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "sys.stdin.readline()\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "print('started', flush=True)\n"
        "sys.stdin.readline()\n"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        with cores_apart(server.pid):
            if len(cores) >= 2:
                assert os.sched_getaffinity(0) == {min(cores)}
                assert _affinities(server.pid) == {frozenset({max(cores)})}
            server.stdin.write("\n")
            server.stdin.flush()
            assert server.stdout.readline() == "started\n"
        assert os.sched_getaffinity(0) == cores
        assert len(os.listdir(f"/proc/{server.pid}/task")) == 3
        assert _affinities(server.pid) == {cores}
    finally:
        server.kill()
        server.wait()


def test_a_server_gone_before_the_end_of_the_window_leaves_the_generator_free() -> None:
    cores = os.sched_getaffinity(0)
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    with cores_apart(server.pid):
        server.kill()
        server.wait()
    assert os.sched_getaffinity(0) == cores
