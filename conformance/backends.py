"""Backends for differential scenarios: something with a bootstrap address, started with given group settings.

`kafka` is a real Apache Kafka broker (the oracle). `staticfleet` is the embedded coordinator, started as

    staticfleet coordinator --listen 127.0.0.1:PORT --advertised-listener 127.0.0.1:PORT --data-dir DIR
        --http 127.0.0.1:PORT2 --group-initial-rebalance-delay-ms N --group-min-session-timeout-ms N
        --group-max-session-timeout-ms N [--group-max-size N]
        [--group-consumer-session-timeout-ms N] [--group-consumer-heartbeat-interval-ms N]
        [--group-consumer-assignment-interval-ms N] [--group-consumer-max-size N]
        [--group-consumer-assignors uniform,range]

and, for the secured pair (conformance.security), with Kafka-named security settings instead of --listen:

    --listener PLAINTEXT://127.0.0.1:P1 --listener SASL_PLAINTEXT://127.0.0.1:P2
        --listener SASL_SSL://127.0.0.1:P3 --listener SSL://127.0.0.1:P4
        --sasl-enabled-mechanisms PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
        --users-file FILE --authorizer standard --super-users 'User:admin;User:ANONYMOUS'
        --tls-cert FILE --tls-key FILE --tls-ca FILE --tls-client-auth required
"""

from __future__ import annotations

import abc
import asyncio
import atexit
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from conformance import driver as d
from conformance.certs import CertificateAuthority
from conformance.driver import GroupDescription, wait_until_serving
from conformance.kafka_broker import (
    GroupSettings,
    KafkaBroker,
    ensure_kafka_jars,
    kafka_version,
    parent_death_prefix,
)
from e2e.localcluster.ports import free_port

KAFKA = "kafka"
STATICFLEET = "staticfleet"
BACKEND_KINDS = (KAFKA, STATICFLEET)

STATICFLEET_START_TIMEOUT_S = 120.0
"""A bound, not a measure: on a loaded shared machine a cold start has taken 28 s."""
STATICFLEET_STOP_TIMEOUT_S = 10.0


class Backend(abc.ABC):
    """A coordinator the driver connects to."""

    kind: str

    def __init__(self, settings: GroupSettings, workdir: Path) -> None:
        self.settings = settings
        self.workdir = workdir
        self.host = "127.0.0.1"
        self.port = 0
        # Listener name -> port (secured backends have SASL_PLAINTEXT and SASL_SSL beside PLAINTEXT).
        self.listener_ports: dict[str, int] = {}
        # The CA that signed the backend's certificate, and issues client certificates (secured only).
        self.ca_file: Path | None = None
        self.ca: CertificateAuthority | None = None

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
        self.listener_ports = self._broker.listener_ports

    @property
    def version(self) -> str:
        return f"Apache Kafka {kafka_version()}"

    async def start(self) -> None:
        await self._broker.start()
        self.ca_file = self._broker.ca_file
        self.ca = self._broker.ca

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


@functools.cache
def staticfleet_supports(settings: GroupSettings) -> bool:
    """True if `staticfleet coordinator` accepts these settings (the secured pair needs security flags)."""
    if not staticfleet_coordinator_available():
        return False
    if settings.security is None:
        return True
    from staticfleet.cli import build_parser

    for action in build_parser()._actions:
        choices = getattr(action, "choices", None)
        if isinstance(choices, dict) and "coordinator" in choices:
            return any(
                "--sasl-enabled-mechanisms" in a.option_strings for a in choices["coordinator"]._actions
            )
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
        # More `staticfleet coordinator` arguments (tests of settings the scenarios do not use).
        self.extra_arguments: list[str] = []
        self.listener_ports = {"PLAINTEXT": self.port}
        if settings.security is not None:
            self.listener_ports["SASL_PLAINTEXT"] = free_port()
            self.listener_ports["SASL_SSL"] = free_port()
            self.listener_ports["SSL"] = free_port()

    @property
    def version(self) -> str:
        return staticfleet_version()

    def _listener_arguments(self) -> list[str]:
        security = self.settings.security
        if security is None:
            return ["--listen", f"127.0.0.1:{self.port}", "--advertised-listener", f"127.0.0.1:{self.port}"]
        ca = CertificateAuthority.create(self.workdir / "tls")
        server = ca.server()
        self.ca_file = ca.cert_file
        self.ca = ca
        users = self.workdir / "users"
        users.write_text(security.users_file())
        arguments: list[str] = []
        for name, port in self.listener_ports.items():
            arguments += ["--listener", f"{name}://127.0.0.1:{port}"]
        return [
            *arguments,
            "--sasl-enabled-mechanisms",
            ",".join(security.mechanisms),
            "--users-file",
            str(users),
            "--authorizer",
            "standard",
            "--super-users",
            ";".join(security.super_users),
            "--tls-cert",
            str(server.cert),
            "--tls-key",
            str(server.key),
            "--tls-ca",
            str(ca.cert_file),
            "--tls-client-auth",
            "required",
        ]

    def command(self) -> list[str]:
        s = self.settings
        command = [
            sys.executable,
            "-m",
            "staticfleet.cli",
            "coordinator",
            *self._listener_arguments(),
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
        return command + s.consumer_arguments() + self.extra_arguments

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
            wait_until_serving(
                self.host,
                self.port,
                timeout=STATICFLEET_START_TIMEOUT_S,
                other_ports=self.listener_ports.values(),
            )
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


def create_topic(backend: Backend, topic: str, partitions: int) -> None:
    """Creates the topic (unless it exists) and waits until every partition has a leader."""

    async def go() -> None:
        async with d.Driver(backend.host, backend.port) as driver:
            await d.ensure_topic(await driver.connect("create-topic"), topic, partitions)

    asyncio.run(go())


def describe_group(backend: Backend, group: str) -> GroupDescription:
    """DescribeGroups v5 for one group."""

    async def go() -> GroupDescription:
        async with d.Driver(backend.host, backend.port) as driver:
            connection = await driver.connect("describe-group")
            return d.GroupDescription.of(await connection.request(d.describe_groups(5, group)))

    return asyncio.run(go())
