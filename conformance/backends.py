"""Backends for differential scenarios: something with a bootstrap address, started with given group settings.

`kafka` is a real Apache Kafka broker (the oracle). `staticfleet` is the embedded coordinator, started as

    staticfleet coordinator --listen 127.0.0.1:PORT --advertised-listener 127.0.0.1:PORT --data-dir DIR
        --http 127.0.0.1:PORT2 --group-initial-rebalance-delay-ms N --group-min-session-timeout-ms N
        --group-max-session-timeout-ms N [--group-max-size N]
"""

from __future__ import annotations

import abc
import asyncio
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance.driver import wait_until_serving
from conformance.kafka_broker import (
    GroupSettings,
    KafkaBroker,
    ensure_kafka_jars,
    free_port,
    kafka_version,
    parent_death_prefix,
)

KAFKA = "kafka"
STATICFLEET = "staticfleet"
BACKEND_KINDS = (KAFKA, STATICFLEET)

STATICFLEET_START_TIMEOUT_S = 30.0
STATICFLEET_STOP_TIMEOUT_S = 10.0


class Backend(abc.ABC):
    """A coordinator the driver connects to."""

    kind: str

    def __init__(self, settings: GroupSettings, workdir: Path) -> None:
        self.settings = settings
        self.workdir = workdir
        self.host = "127.0.0.1"
        self.port = 0

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    @abc.abstractmethod
    def version(self) -> str: ...

    @abc.abstractmethod
    async def start(self) -> None: ...

    @abc.abstractmethod
    def terminate(self) -> None:
        """Asks the backend to stop without waiting."""

    @abc.abstractmethod
    def wait_stopped(self) -> None:
        """Waits (bounded) until the backend has stopped; kills it if it does not."""

    def stop(self) -> None:
        self.terminate()
        self.wait_stopped()

    async def restart(self) -> None:
        """Stops cleanly and starts again on the same address and data directory."""
        await asyncio.to_thread(self.stop)
        await self.start()

    def logs(self) -> str:
        return str(self.workdir)


class KafkaBackend(Backend):
    kind = KAFKA

    def __init__(self, settings: GroupSettings, workdir: Path) -> None:
        super().__init__(settings, workdir)
        self._broker = KafkaBroker(settings, workdir, ensure_kafka_jars())
        self.port = self._broker.port

    @property
    def version(self) -> str:
        return f"Apache Kafka {kafka_version()}"

    async def start(self) -> None:
        await self._broker.start()

    def terminate(self) -> None:
        self._broker.terminate()

    def wait_stopped(self) -> None:
        self._broker.wait_stopped()


def staticfleet_coordinator_available() -> bool:
    """True once the `staticfleet coordinator` command exists (its CLI parser knows the subcommand)."""
    from staticfleet.cli import build_parser

    parser = build_parser()
    for action in parser._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and "coordinator" in choices:
            return True
    return False


def staticfleet_version() -> str:
    from staticfleet import __version__

    return f"staticfleet {__version__}"


class StaticfleetBackend(Backend):
    kind = STATICFLEET

    def __init__(self, settings: GroupSettings, workdir: Path) -> None:
        super().__init__(settings, workdir)
        self.port = free_port()
        self.http_port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def version(self) -> str:
        return staticfleet_version()

    def command(self) -> list[str]:
        s = self.settings
        command = [
            sys.executable,
            "-m",
            "staticfleet.cli",
            "coordinator",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--advertised-listener",
            f"127.0.0.1:{self.port}",
            "--data-dir",
            str(self.workdir / "data"),
            "--http",
            f"127.0.0.1:{self.http_port}",
            "--group-initial-rebalance-delay-ms",
            str(s.initial_rebalance_delay_ms),
            "--group-min-session-timeout-ms",
            str(s.min_session_timeout_ms),
            "--group-max-session-timeout-ms",
            str(s.max_session_timeout_ms),
        ]
        if s.max_size is not None:
            command += ["--group-max-size", str(s.max_size)]
        return command

    async def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = (self.workdir / "coordinator.log").open("ab")
        try:
            process = subprocess.Popen(
                [*parent_death_prefix(), *self.command()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=self.workdir,
            )
        finally:
            log.close()
        self._process = process
        _SPAWNED.add(process)
        ready = asyncio.create_task(
            wait_until_serving(self.host, self.port, timeout=STATICFLEET_START_TIMEOUT_S)
        )
        try:
            while not ready.done():
                if process.poll() is not None:
                    raise RuntimeError(
                        f"staticfleet coordinator exited with {process.returncode} during start-up; "
                        f"see {self.workdir / 'coordinator.log'}"
                    )
                await asyncio.wait({ready}, timeout=0.1)
            ready.result()
        except BaseException:
            ready.cancel()
            self.terminate()
            await asyncio.to_thread(self.wait_stopped)
            raise

    def terminate(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)

    def wait_stopped(self) -> None:
        process = self._process
        if process is None:
            return
        try:
            process.wait(timeout=STATICFLEET_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        _SPAWNED.discard(process)
        self._process = None


_SPAWNED: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_leftovers() -> None:
    for process in list(_SPAWNED):
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


def make_backend(kind: str, settings: GroupSettings, workdir: Path) -> Backend:
    if kind == KAFKA:
        return KafkaBackend(settings, workdir)
    if kind == STATICFLEET:
        return StaticfleetBackend(settings, workdir)
    raise ValueError(f"unknown backend {kind!r}")


class BackendPool:
    """Started backends keyed by (kind, settings): scenarios with identical settings share one.

    A backend that failed to start fails every scenario that asks for it (it is not retried). A scenario
    that restarts its backend asks for an exclusive one, which is stopped when released.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._shared: dict[tuple[str, GroupSettings], asyncio.Task[Backend]] = {}
        self._created: list[Backend] = []
        self._exclusive: set[Backend] = set()
        self._count = 0

    def _new(self, kind: str, settings: GroupSettings) -> Backend:
        self._count += 1
        workdir = self.root / f"{kind}-{self._count}"
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        backend = make_backend(kind, settings, workdir)
        self._created.append(backend)
        return backend

    async def shared(self, kind: str, settings: GroupSettings) -> Backend:
        key = (kind, settings)
        task = self._shared.get(key)
        if task is None:
            backend = self._new(kind, settings)
            task = asyncio.ensure_future(self._started(backend))
            self._shared[key] = task
        return await asyncio.shield(task)

    @staticmethod
    async def _started(backend: Backend) -> Backend:
        await backend.start()
        return backend

    async def exclusive(self, kind: str, settings: GroupSettings) -> Backend:
        backend = self._new(kind, settings)
        self._exclusive.add(backend)
        return await self._started(backend)

    async def release(self, backend: Backend) -> None:
        """Stops an exclusive backend (shared ones stay up until stop_all)."""
        if backend in self._exclusive:
            self._exclusive.discard(backend)
            await asyncio.to_thread(backend.stop)
            self._created.remove(backend)

    def stop_all(self) -> None:
        backends: Sequence[Backend] = list(self._created)
        for backend in backends:
            backend.terminate()
        for backend in backends:
            backend.wait_stopped()
        self._created.clear()
        self._exclusive.clear()
        self._shared.clear()
