"""Unit tests of process handling (real processes, no cluster) and of the runner's watch/relist loop."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from e2e.helpers import wait_until
from e2e.localcluster import procs
from e2e.localcluster.kubeapi import WatchExpired
from e2e.localcluster.podrunner import PodRunner, RunnerConfig
from e2e.localcluster.podspec import Manifest, Probe
from e2e.localcluster.ports import closed_port
from e2e.localcluster.probes import ProbeTracker, run_probe
from e2e.tests.workloads import process_alive

REPO_ROOT = Path(__file__).resolve().parent.parent.parent

# A parent that starts `sleep` through procs.spawn, prints the child's pid, then waits to be killed.
PARENT = """
import subprocess, sys, time
from e2e.localcluster import procs
child = procs.spawn(["sleep", "60"], log=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
print(child.pid, flush=True)
time.sleep(60)
"""


def test_spawned_child_dies_when_its_parent_is_killed() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        assert process_alive(child_pid)
        parent.kill()
        parent.wait(timeout=10)
        wait_until(
            lambda: not process_alive(child_pid), timeout=5, what="the orphan to be killed by the kernel"
        )
    finally:
        parent.kill()
        parent.wait(timeout=10)


def test_stop_escalates_to_sigkill_for_a_process_that_ignores_sigterm(tmp_path: Path) -> None:
    ignore_term = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up'); time.sleep(60)"
    )
    with (tmp_path / "log").open("wb") as log:
        process = procs.spawn([sys.executable, "-u", "-c", ignore_term], log=log, env={})
    wait_until(lambda: (tmp_path / "log").read_text() == "up\n", timeout=10, what="the process to start")
    began = time.monotonic()
    code = procs.stop(process, grace_seconds=0.5)
    assert code == -signal.SIGKILL
    assert 0.4 <= time.monotonic() - began < 5


def test_sweep_kills_processes_carrying_the_marker(tmp_path: Path) -> None:
    marker_value = str(tmp_path)
    tagged = subprocess.Popen(["sleep", "60"], env={"PATH": "/usr/bin:/bin", "SWEEP_TEST": marker_value})
    untagged = subprocess.Popen(["sleep", "60"], env={"PATH": "/usr/bin:/bin", "SWEEP_TEST": "other"})
    try:
        assert procs.processes_with_env("SWEEP_TEST", marker_value) == [tagged.pid]
        assert procs.sweep("SWEEP_TEST", marker_value, grace_seconds=0.5) == 1
        assert tagged.wait(timeout=5) == -signal.SIGTERM
        assert untagged.poll() is None
    finally:
        for process in (tagged, untagged):
            process.kill()
            process.wait(timeout=5)


def _pod(name: str, resource_version: str) -> Manifest:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "resourceVersion": resource_version,
        }
    }


class ExpiringWatchApi:
    """Lists {a, b}; its first watch adds c then expires (410); the relist finds only a and c."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.lists = 0
        self.watched_from: list[str] = []

    def list_pods(self) -> tuple[list[Manifest], str]:
        self.lists += 1
        if self.lists == 1:
            return [_pod("a", "1"), _pod("b", "2")], "2"
        return [_pod("a", "1"), _pod("c", "3")], "5"

    def watch_pods(self, resource_version: str, timeout_seconds: int) -> Iterator[tuple[str, Manifest]]:
        self.watched_from.append(resource_version)
        if len(self.watched_from) == 1:
            yield "ADDED", _pod("c", "3")
            yield "BOOKMARK", {"metadata": {"resourceVersion": "4"}}
            raise WatchExpired("too old resource version")
        self.stop.wait(5)
        return

    # The watch loop makes none of the calls below.
    def bind_pod(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        raise AssertionError

    def patch_pod_status(self, namespace: str, name: str, status: Manifest) -> bool:
        raise AssertionError

    def force_delete_pod(self, namespace: str, name: str, uid: str) -> None:
        raise AssertionError

    def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        raise AssertionError

    def secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        raise AssertionError

    def claim(self, namespace: str, name: str) -> Manifest | None:
        raise AssertionError

    def mark_claim_bound(self, namespace: str, name: str, claim: Manifest) -> None:
        raise AssertionError

    def ensure_node(self, name: str, labels: Mapping[str, str], status: Manifest) -> None:
        raise AssertionError

    def service_account_token(
        self,
        namespace: str,
        service_account: str,
        pod_name: str,
        pod_uid: str,
        audience: str | None,
        expiration_seconds: int,
    ) -> str | None:
        raise AssertionError

    def api_server(self) -> tuple[str, str | None]:
        raise AssertionError


@pytest.fixture
def runner_and_api(tmp_path: Path) -> Iterator[tuple[PodRunner, ExpiringWatchApi]]:
    stop = threading.Event()
    api = ExpiringWatchApi(stop)
    runner = PodRunner(RunnerConfig(kubeconfig=tmp_path / "none", run_dir=tmp_path), api)
    runner.stop_event = stop
    yield runner, api
    stop.set()


def test_watch_relists_after_expiry_and_forgets_vanished_pods(
    runner_and_api: tuple[PodRunner, ExpiringWatchApi],
) -> None:
    runner, api = runner_and_api
    watcher = threading.Thread(target=runner._watch_loop, daemon=True)
    watcher.start()

    wait_until(lambda: len(api.watched_from) == 2, timeout=5, what="the second watch")

    assert api.lists == 2
    assert api.watched_from == ["2", "5"]  # the relist's resourceVersion, not the expired one
    assert sorted(runner._pods) == ["ns/a", "ns/c"]
    runner.stop_event.set()
    watcher.join(timeout=10)
    assert not watcher.is_alive()


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response({"/ok": 200, "/moved": 302}.get(self.path, 500))
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_run_probe_actions(tmp_path: Path) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = int(server.server_address[1])
    try:

        def check(probe: Probe) -> bool:
            return run_probe(probe, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, mounts=[])

        assert check(Probe("http", port=port, path="/ok"))
        assert check(Probe("http", port=port, path="/moved"))
        assert not check(Probe("http", port=port, path="/broken"))
        assert check(Probe("tcp", port=port))
        with closed_port() as nothing_listens:
            assert not check(Probe("tcp", port=nothing_listens))
        (tmp_path / "flag").write_text("")
        assert check(Probe("exec", command=("test", "-f", "flag")))
        assert not check(Probe("exec", command=("test", "-f", "absent")))
        slow = Probe("exec", command=("sleep", "5"), timeout_seconds=0.2)
        began = time.monotonic()
        assert not check(slow)
        assert time.monotonic() - began < 2
    finally:
        server.shutdown()
        server.server_close()


def test_probe_tracker_thresholds() -> None:
    probe = Probe(
        "tcp", port=1, initial_delay_seconds=5, period_seconds=2, success_threshold=2, failure_threshold=3
    )
    tracker = ProbeTracker.start(probe, initially=False, now=100.0)
    assert tracker is not None and tracker.next_due == 105.0
    tracker.record(True, 105.0)
    assert not tracker.passing and tracker.next_due == 107.0
    tracker.record(True, 107.0)
    assert tracker.passing
    tracker.record(False, 109.0)
    tracker.record(False, 111.0)
    assert tracker.passing  # two failures are below the threshold of three
    tracker.record(False, 113.0)
    assert not tracker.passing
    assert ProbeTracker.start(None, initially=True, now=0.0) is None
