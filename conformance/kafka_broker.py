"""A real Apache Kafka broker (single-node KRaft, broker and controller in one JVM) for conformance tests.

The jars come from Maven Central through conformance/kafka/pom.xml, whose `kafka.version` property is the
one place the oracle's version is pinned. They are resolved once into
`$STATICFLEET_CACHE/kafka-<version>/lib` (default cache: ~/.cache/staticfleet; conformance/kafka_jars.py).

    python -m conformance.kafka_broker provision     # resolve the jars (idempotent)
    python -m conformance.kafka_broker measure       # time a cold resolve and a warm broker start
    python -m conformance.kafka_broker run           # start a broker and keep it up until Ctrl-C
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance.certs import CertificateAuthority
from conformance.driver import wait_until_serving
from conformance.kafka_jars import ensure_kafka_jars as ensure_kafka_jars  # re-exported: imported from here
from conformance.kafka_jars import kafka_version as kafka_version
from conformance.security import SASL_PLAINTEXT, SASL_SSL, SSL, SecurityProfile
from e2e.localcluster.ports import free_port

HERE = Path(__file__).resolve().parent
LOG4J2_CONFIG = HERE / "kafka" / "log4j2.xml"

START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
JVM_OPTIONS = (
    "-Xms64m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise RuntimeError("java not found: the conformance oracle needs a JDK 17+ on PATH or in JAVA_HOME")
    return found


@functools.cache
def _cluster_id(lib: Path) -> str:
    """A cluster id from `StorageTool random-uuid`; brokers are independent, so one per process suffices."""
    result = subprocess.run(
        [java_executable(), *JVM_OPTIONS, "-cp", f"{lib}/*", "kafka.tools.StorageTool", "random-uuid"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip().splitlines()[-1].strip()


@dataclass(frozen=True)
class GroupSettings:
    """The group coordinator settings a scenario runs under (identical on every backend)."""

    initial_rebalance_delay_ms: int = 300
    min_session_timeout_ms: int = 100
    max_session_timeout_ms: int = 30_000
    max_size: int | None = None
    # Listeners with SASL and TLS, users, ACLs (None: one PLAINTEXT listener, no authorizer).
    security: SecurityProfile | None = None
    # Consumer-protocol groups' heartbeat interval, which the broker sets (None: Kafka's 5 s, also its floor).
    consumer_heartbeat_interval_ms: int | None = None
    # More consumer-protocol (KIP-848) group settings, by Kafka's names; None leaves Kafka's default (session
    # timeout 45 s, assignment interval 1 s, no size limit, assignors uniform then range).
    consumer_session_timeout_ms: int | None = None
    consumer_assignment_interval_ms: int | None = None
    consumer_max_size: int | None = None
    # The first is the default; a member may name another as its server assignor.
    consumer_assignors: tuple[str, ...] | None = None
    # How often expired offsets are looked for (None: Kafka's 10 minutes); offsets committed with a
    # retention time (OffsetCommit v2-v4) then expire within a scenario.
    offsets_retention_check_interval_ms: int | None = None

    def kafka_properties(self) -> dict[str, str]:
        props = {
            "group.initial.rebalance.delay.ms": str(self.initial_rebalance_delay_ms),
            "group.min.session.timeout.ms": str(self.min_session_timeout_ms),
            "group.max.session.timeout.ms": str(self.max_session_timeout_ms),
        }
        if self.max_size is not None:
            props["group.max.size"] = str(self.max_size)
        if self.consumer_heartbeat_interval_ms is not None:
            interval = str(self.consumer_heartbeat_interval_ms)
            props["group.consumer.heartbeat.interval.ms"] = interval
            props["group.consumer.min.heartbeat.interval.ms"] = interval
        if self.consumer_session_timeout_ms is not None:
            # Kafka refuses to start with a session timeout outside its bounds (45 s..60 s by default), or
            # not above the heartbeat interval (5 s by default).
            session = self.consumer_session_timeout_ms
            props["group.consumer.session.timeout.ms"] = str(session)
            props["group.consumer.min.session.timeout.ms"] = str(session)
            if session > 60_000:
                props["group.consumer.max.session.timeout.ms"] = str(session)
        if self.consumer_assignment_interval_ms is not None:
            interval_ms = self.consumer_assignment_interval_ms
            props["group.consumer.assignment.interval.ms"] = str(interval_ms)
            if interval_ms > 15_000:
                props["group.consumer.max.assignment.interval.ms"] = str(interval_ms)
        if self.consumer_max_size is not None:
            props["group.consumer.max.size"] = str(self.consumer_max_size)
        if self.consumer_assignors is not None:
            props["group.consumer.assignors"] = ",".join(self.consumer_assignors)
        if self.offsets_retention_check_interval_ms is not None:
            props["offsets.retention.check.interval.ms"] = str(self.offsets_retention_check_interval_ms)
        return props

    def consumer_arguments(self) -> list[str]:
        """The consumer-protocol settings as `staticfleet coordinator` flags (only those set)."""
        flags = (
            ("--group-consumer-session-timeout-ms", self.consumer_session_timeout_ms),
            ("--group-consumer-heartbeat-interval-ms", self.consumer_heartbeat_interval_ms),
            ("--group-consumer-assignment-interval-ms", self.consumer_assignment_interval_ms),
            ("--group-consumer-max-size", self.consumer_max_size),
        )
        arguments = [arg for flag, value in flags if value is not None for arg in (flag, str(value))]
        if self.consumer_assignors is not None:
            arguments += ["--group-consumer-assignors", ",".join(self.consumer_assignors)]
        if self.offsets_retention_check_interval_ms is not None:
            arguments += [
                "--offsets-retention-check-interval-ms",
                str(self.offsets_retention_check_interval_ms),
            ]
        return arguments

    def describe(self) -> str:
        text = (
            f"initial delay {self.initial_rebalance_delay_ms} ms, session timeout "
            f"{self.min_session_timeout_ms}..{self.max_session_timeout_ms} ms"
        )
        text += f", max size {self.max_size}" if self.max_size is not None else ""
        consumer = [
            f"{name} {value} ms"
            for name, value in (
                ("session timeout", self.consumer_session_timeout_ms),
                ("heartbeat interval", self.consumer_heartbeat_interval_ms),
                ("assignment interval", self.consumer_assignment_interval_ms),
            )
            if value is not None
        ]
        if self.consumer_max_size is not None:
            consumer.append(f"max size {self.consumer_max_size}")
        if self.consumer_assignors is not None:
            consumer.append("assignors " + ",".join(self.consumer_assignors))
        if self.offsets_retention_check_interval_ms is not None:
            consumer.append(f"offsets checked for expiry every {self.offsets_retention_check_interval_ms} ms")
        text += f", consumer groups: {', '.join(consumer)}" if consumer else ""
        return text + (", secured (SASL_PLAINTEXT and SASL_SSL listeners, ACLs)" if self.security else "")


def parent_death_prefix() -> list[str]:
    """A prefix that kills the child when this process dies (Linux `setpriv --pdeathsig`)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


_LIVE: set[KafkaBroker] = set()


class KafkaBroker:
    """One single-node KRaft broker on 127.0.0.1 with random free ports and its own data directory."""

    def __init__(self, settings: GroupSettings, workdir: Path, lib: Path | None = None) -> None:
        self.settings = settings
        self.workdir = workdir
        self.lib = lib or ensure_kafka_jars()
        self.host = "127.0.0.1"
        self.port = free_port()
        self.controller_port = free_port()
        self.version = kafka_version()
        self.log_file = workdir / "broker.log"
        # Listener name -> port; PLAINTEXT is the one above (its ANONYMOUS principal is a super user).
        self.listener_ports: dict[str, int] = {"PLAINTEXT": self.port}
        self.ca_file: Path | None = None
        self.ca: CertificateAuthority | None = None
        if settings.security is not None:
            self.listener_ports[SASL_PLAINTEXT] = free_port()
            self.listener_ports[SASL_SSL] = free_port()
            self.listener_ports[SSL] = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._formatted = False

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id (its JVM's), while it runs."""
        return None if self._process is None else self._process.pid

    def _properties(self) -> dict[str, str]:
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "offsets.topic.num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "share.coordinator.state.topic.num.partitions": "1",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "group.coordinator.threads": "1",
            "log.flush.interval.messages": "1000000",
        }
        props.update(self.settings.kafka_properties())
        if self.settings.security is not None:
            props.update(self._security_properties(self.settings.security))
        return props

    def _security_properties(self, security: SecurityProfile) -> dict[str, str]:
        """SASL_PLAINTEXT and SASL_SSL listeners beside PLAINTEXT, JAAS per listener and mechanism,
        PEM key and trust stores, StandardAuthorizer (shared/reference/kafka-security.md §7)."""
        ca = CertificateAuthority.create(self.workdir / "tls")
        server = ca.server()
        self.ca_file = ca.cert_file
        self.ca = ca
        ports = self.listener_ports
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
        props = {
            "listeners": f"{listeners},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": listeners,
            "listener.security.protocol.map": (
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL"
            ),
            # Client certificates on the SSL listener only (SASL_SSL clients log in with SASL).
            "listener.name.ssl.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": ",".join(security.mechanisms),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": ";".join(security.super_users),
            "allow.everyone.if.no.acl.found": "false",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(server.pem),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(ca.cert_file),
        }
        for listener in ("sasl_plaintext", "sasl_ssl"):
            for mechanism in security.mechanisms:
                key = f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"
                props[key] = (
                    security.jaas_plain()
                    if mechanism == "PLAIN"
                    else "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                )
        return props

    def _write_config(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        path = self.workdir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in self._properties().items()))
        return path

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            java_executable(),
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={LOG4J2_CONFIG}",
            f"-Dstaticfleet.kafka.log={self.log_file}",
            "-cp",
            f"{self.lib}/*",
            main,
            *args,
        ]

    def format(self) -> None:
        config = self._write_config()
        subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                _cluster_id(self.lib),
                "-c",
                str(config),
                "--ignore-formatted",
                *self._add_scram_arguments(),
            ),
            capture_output=True,
            timeout=60,
            check=True,
        )
        self._formatted = True

    def _add_scram_arguments(self) -> list[str]:
        security = self.settings.security
        if security is None:
            return []
        return [arg for user in security.scram_users for arg in ("--add-scram", user.add_scram())]

    def launch(self) -> None:
        """Spawns the broker process (does not wait). Call from the thread that outlives the broker."""
        if self._process is not None and self._process.poll() is None:
            raise RuntimeError("broker already running")
        if not self._formatted:
            raise RuntimeError("format the storage first")
        config = self.workdir / "server.properties"
        stdout = (self.workdir / "stdout.log").open("ab")
        try:
            self._process = subprocess.Popen(
                [*parent_death_prefix(), *self._java("kafka.Kafka", str(config))],
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            stdout.close()
        _LIVE.add(self)

    async def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        process = self._process
        if process is None:
            raise RuntimeError("broker not launched")
        ready = asyncio.create_task(
            wait_until_serving(
                self.host, self.port, timeout=timeout, other_ports=self.listener_ports.values()
            )
        )
        try:
            while not ready.done():
                if process.poll() is not None:
                    ready.cancel()
                    raise RuntimeError(
                        f"Kafka exited with {process.returncode} during start-up; see "
                        f"{self.workdir}/stdout.log "
                        f"and {self.log_file}"
                    )
                await asyncio.wait({ready}, timeout=0.2)
            ready.result()
        finally:
            if not ready.done():
                ready.cancel()

    async def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Formats the storage (first time only), spawns the broker and waits until it serves groups."""
        if not self._formatted:
            await asyncio.to_thread(self.format)
        self.launch()
        try:
            await self.wait_ready(timeout)
        except BaseException:
            self.terminate()
            await asyncio.to_thread(self.wait_stopped)
            raise

    def terminate(self) -> None:
        """Asks the broker to stop (SIGTERM to its process group)."""
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)

    def wait_stopped(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Waits for the broker to exit, killing its process group after `timeout` seconds."""
        process = self._process
        if process is None:
            return
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        self._process = None
        _LIVE.discard(self)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        self.terminate()
        self.wait_stopped(timeout)

    async def restart(self) -> None:
        """Stops the broker cleanly and starts it again on the same ports and data."""
        await asyncio.to_thread(self.stop)
        await self.start()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None


def stop_all(brokers: Sequence[KafkaBroker] | None = None) -> None:
    """Stops brokers concurrently: SIGTERM to all first, then wait for each."""
    targets = list(_LIVE if brokers is None else brokers)
    for broker in targets:
        broker.terminate()
    for broker in targets:
        broker.wait_stopped()


def _kill_leftovers() -> None:
    for broker in list(_LIVE):
        process = broker._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)


atexit.register(_kill_leftovers)


# --------------------------------------------------------------------------------------------------
# Command line


def _measure() -> int:
    with tempfile.TemporaryDirectory(prefix="staticfleet-kafka-") as tmp:
        previous = os.environ.get("STATICFLEET_CACHE")
        os.environ["STATICFLEET_CACHE"] = str(Path(tmp) / "cache")
        try:
            t0 = time.monotonic()
            cold_lib = ensure_kafka_jars()
            cold = time.monotonic() - t0
            jars = len(list(cold_lib.glob("*.jar")))
        finally:
            if previous is None:
                os.environ.pop("STATICFLEET_CACHE")
            else:
                os.environ["STATICFLEET_CACHE"] = previous
        print(f"cold resolve of Kafka {kafka_version()} ({jars} jars, empty Maven repository): {cold:.1f}s")
        lib = ensure_kafka_jars()
        t0 = time.monotonic()
        ensure_kafka_jars()
        print(f"warm resolve (stamp hit): {time.monotonic() - t0:.3f}s")
        _cluster_id(lib)
        for attempt in range(1, 4):
            broker = KafkaBroker(GroupSettings(), Path(tmp) / f"broker{attempt}", lib)
            t0 = time.monotonic()
            broker.format()
            formatted = time.monotonic() - t0
            t1 = time.monotonic()
            asyncio.run(broker.start())
            started = time.monotonic() - t1
            t2 = time.monotonic()
            broker.stop()
            stopped = time.monotonic() - t2
            print(
                f"warm start #{attempt}: format {formatted:.1f}s, start until serving groups {started:.1f}s, "
                f"stop {stopped:.1f}s"
            )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.kafka_broker")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("provision", help="resolve the Kafka jars into the cache")
    sub.add_parser("version", help="print the pinned Kafka version")
    sub.add_parser("lib", help="print the lib directory (resolving it if needed)")
    sub.add_parser("measure", help="time a cold resolve and warm broker starts")
    run = sub.add_parser("run", help="start a broker and keep it running until interrupted")
    run.add_argument(
        "--initial-rebalance-delay-ms", type=int, default=GroupSettings.initial_rebalance_delay_ms
    )
    run.add_argument("--min-session-timeout-ms", type=int, default=GroupSettings.min_session_timeout_ms)
    run.add_argument("--max-session-timeout-ms", type=int, default=GroupSettings.max_session_timeout_ms)
    run.add_argument("--max-size", type=int, default=None)
    args = parser.parse_args(argv)
    if args.command == "version":
        print(kafka_version())
    elif args.command == "provision":
        t0 = time.monotonic()
        lib = ensure_kafka_jars(quiet=False)
        print(f"Kafka {kafka_version()} jars in {lib} ({time.monotonic() - t0:.1f}s)")
    elif args.command == "lib":
        print(ensure_kafka_jars())
    elif args.command == "measure":
        return _measure()
    elif args.command == "run":
        settings = GroupSettings(
            args.initial_rebalance_delay_ms,
            args.min_session_timeout_ms,
            args.max_session_timeout_ms,
            args.max_size,
        )
        workdir = Path(tempfile.mkdtemp(prefix="staticfleet-kafka-"))
        broker = KafkaBroker(settings, workdir)
        asyncio.run(broker.start())
        print(
            f"Kafka {broker.version} serving on {broker.bootstrap} ({settings.describe()}); logs in {workdir}"
        )
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
        finally:
            broker.stop()
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
