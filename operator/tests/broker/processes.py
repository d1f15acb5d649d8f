"""Test helpers: the coordinator and real consumers, each in its own process, on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e.localcluster.ports import free_port

ROOT = Path(__file__).resolve().parents[3]


START_TIMEOUT_S = 120.0
"""A bound, not a measure: on a loaded shared machine a cold start of the coordinator has taken 28 s."""


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def _env(root: Path = ROOT) -> dict[str, str]:
    paths = [str(root / "operator"), str(root)]
    return dict(os.environ, PYTHONPATH=os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]))


class CoordinatorProcess:
    """`staticfleet coordinator` on random loopback ports, restartable on the same ports and data dir."""

    def __init__(self, data_dir: Path, *extra: str, root: Path = ROOT) -> None:
        self.data_dir = data_dir
        self.root = root  # the source tree whose coordinator runs
        self.port = free_port()
        self.http_port = free_port()
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir.parent / f"{data_dir.name}.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        command = [
            sys.executable, "-m", "staticfleet.cli", "coordinator",
            "--listen", self.bootstrap, "--data-dir", str(self.data_dir),
            "--http", f"127.0.0.1:{self.http_port}",
            "--group-initial-rebalance-delay-ms", "0", "--group-min-session-timeout-ms", "1000",
            *self.extra,
        ]  # fmt: skip
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=_env(self.root))
        log.close()
        try:
            wait_until(self._ready, timeout, "the coordinator to be ready")
        except BaseException:
            self.stop()  # no process left behind: callers' finally blocks begin after start
            raise

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"coordinator exited with {self.process.returncode}; see {self.log_path}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/readyz", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def api(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=5) as r:
            return json.loads(r.read())

    def group(self, group_id: str) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = self.api(f"/api/groups/{group_id}")
            return result
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise

    def events(self) -> list[dict[str, Any]]:
        path = self.data_dir / "events" / "events.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)

    def rss_kib(self) -> int:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")


class ConsumerProcess:
    """A consumer of one client library in its own process; its JSON-lines output is collected."""

    def __init__(
        self,
        client: str,
        bootstrap: str,
        group: str,
        instance: str,
        topic: str,
        session_ms: int,
        *,
        sasl_ssl: tuple[str, str, str, str] | None = None,
        group_protocol: str = "classic",
    ) -> None:
        """`sasl_ssl` is (mechanism, user, password, CA file) for a SASL_SSL connection."""
        command = [
            sys.executable, "-m", "tests.broker.consumer_process", "--client", client,
            "--bootstrap", bootstrap, "--group", group, "--instance", instance, "--topic", topic,
            "--session-ms", str(session_ms), "--group-protocol", group_protocol,
        ]  # fmt: skip
        env = _env()
        if sasl_ssl is not None:
            mechanism, user, password, ca_file = sasl_ssl
            command += [
                "--sasl-ssl",
                "--sasl-mechanism",
                mechanism,
                "--sasl-username",
                user,
                "--ssl-cafile",
                ca_file,
            ]
            env["KAFKA_SASL_PASSWORD"] = password
        self.instance = instance
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(ROOT / "operator")
        )
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            with self._lock:
                self.stderr.append(raw.decode(errors="replace"))
                del self.stderr[:-400]

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["event"] == kind]

    def assignment(self) -> list[int] | None:
        assigned = self.of("assigned")
        return assigned[-1]["partitions"] if assigned else None

    def values(self) -> set[str]:
        return {r[2] for e in self.of("records") for r in e["records"]}

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)

    def describe(self) -> str:
        return f"{self.instance}: events={self.events[-5:]} stderr={''.join(self.stderr[-60:])}"
