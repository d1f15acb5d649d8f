"""A Java program in its own process whose stdout is JSON lines: the Java consumer driver
(conformance/javaclient) and the example Kafka Streams application (examples/streams)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from conformance.kafka_broker import java_executable, parent_death_prefix

STOP_TIMEOUT_S = 40.0
JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# Kafka's client logging (slf4j-simple) on stderr: warnings and errors only.
LOGGING = ("-Dorg.slf4j.simpleLogger.logFile=System.err", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn")


def wait_until(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    """Polls `condition` until it returns something true (returned), bounded by `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class JavaProcess:
    """`java -jar JAR ARGS` with `env` added to this process's environment; events are its JSON lines."""

    def __init__(
        self,
        jar: Path,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        *,
        name: str = "java",
        log_levels: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        levels = [
            f"-Dorg.slf4j.simpleLogger.log.{logger}={level}" for logger, level in (log_levels or {}).items()
        ]
        command = [
            *parent_death_prefix(),
            java_executable(),
            *JVM_OPTIONS,
            *LOGGING,
            *levels,
            "-jar",
            str(jar),
            *args,
        ]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if isinstance(event, dict):
                with self._lock:
                    self.events.append(event)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            with self._lock:
                self.stderr.append(raw.decode(errors="replace"))
                del self.stderr[:-2000]

    def of(self, kind: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e.get("event") == kind]

    def last(self, kind: str) -> dict[str, Any] | None:
        found = self.of(kind)
        return found[-1] if found else None

    def stderr_text(self) -> str:
        with self._lock:
            return "".join(self.stderr)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def drain(self, timeout: float = 5.0) -> None:
        """Once the process has exited: waits until every line it wrote has been read."""
        self.process.wait(timeout=timeout)
        for reader in self._readers:
            reader.join(timeout=timeout)

    def kill(self) -> None:
        """A crash: SIGKILL, no close."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM (the program closes as it does in a pod), then SIGKILL after `timeout` seconds."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.drain()
        return self.process.returncode

    def describe(self) -> str:
        """The last events and stderr lines, for failure messages."""
        with self._lock:
            events = "\n".join(json.dumps(e) for e in self.events[-15:])
            errors = "".join(self.stderr[-40:])
        return f"--- {self.name} events:\n{events}\n--- {self.name} stderr:\n{errors}"
