"""The embedded broker: a single Kafka node that serves the group coordinator and a small topic log.

One asyncio task per connection reads a request, answers it, then reads the next, as Kafka does
(a connection's requests are answered in order; connections are served concurrently). Every frame goes
through the one dispatch path (dispatch.py), which parses it, checks the connection's SASL login and the
ACLs the API declares, and calls the API's handler. A frame that cannot be parsed, an unknown API or an
unsupported version of an API other than ApiVersions closes that connection and nothing else.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import functools
import logging
import math
import signal
import ssl
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from staticfleet.broker import apis  # noqa: F401  (registers every handler)
from staticfleet.broker.apis.consumer_groups import TopicLogCatalog
from staticfleet.broker.connections import STREAM_BUFFER_BYTES, ConnectionLimits, ConnectionRegistry, Refused
from staticfleet.broker.dispatch import Dispatcher, Outcome
from staticfleet.broker.fetch_wire import SplicedFrame
from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.http import HttpApi, start_http
from staticfleet.broker.metrics import BrokerMetrics
from staticfleet.broker.registry import BrokerContext, Peer
from staticfleet.broker.security.acl import ANONYMOUS
from staticfleet.broker.security.authenticator import SaslAuthenticator
from staticfleet.broker.security.http_auth import TokenSource
from staticfleet.broker.security.listeners import Endpoint, Listener, SecurityProtocol
from staticfleet.broker.security.sasl import SaslServer, new_server
from staticfleet.broker.security.settings import SecuritySettings
from staticfleet.broker.security.state import SecurityState
from staticfleet.broker.security.tls import ClientAuth, ReloadingContext, principal_from_certificate
from staticfleet.broker.security.users import CredentialStore
from staticfleet.broker.sendfile import SplicedSender, can_splice
from staticfleet.broker.topic_configs import BOUNDED_TOPIC_DEFAULTS
from staticfleet.broker.topiclog import TopicLog
from staticfleet.coordinator import CoordinatorConfig
from staticfleet.coordinator.clock import Clock
from staticfleet.coordinator.log import MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS
from staticfleet.fsutil import write_atomically

log = logging.getLogger(__name__)


@dataclass
class BrokerSettings:
    data_dir: Path
    listen_host: str = "127.0.0.1"
    listen_port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    http_host: str | None = None
    http_port: int | None = None
    node_id: int = 1
    coordinator: CoordinatorConfig = field(default_factory=CoordinatorConfig)
    fsync: bool = True
    max_record_bytes_between_snapshots: int = MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS
    auto_create_topics: bool = True
    default_partitions: int = 1
    rebalance_on_partition_growth: bool = True
    connection_limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    topic_defaults: dict[str, str] = field(default_factory=lambda: dict(BOUNDED_TOPIC_DEFAULTS))
    topic_flush_interval_s: float = 1.0
    retention_check_interval_s: float = 60.0
    shutdown_grace_s: float = 10.0
    # Listeners, SASL, TLS and ACLs (None: one PLAINTEXT listener on listen_host:listen_port, no ACLs).
    security: SecuritySettings | None = None
    failed_authentication_delay_s: float = 0.1  # Kafka's connection.failed.authentication.delay.ms


KAFKA_IDLE_POLL_S = 0.3
"""How long a Kafka network thread waits in one poll when nothing happens (SocketServer's Processor.poll).
Kafka's Selector sends a held failed-login answer only when a poll ends, once the delay has passed, and
does not shorten the poll for it: on a quiet broker the answer goes out at the first poll end after the
delay, 300 ms after the failure for the default 100 ms (sooner, down to the delay, when other traffic on
the same network thread ends its polls early)."""


def failed_login_wait_s(delay_s: float) -> float:
    """How long a failed login's answer is held: the delay, rounded up to Kafka's idle polls (0: none)."""
    if delay_s <= 0:
        return 0.0
    return math.ceil(delay_s / KAFKA_IDLE_POLL_S - 1e-9) * KAFKA_IDLE_POLL_S


def load_cluster_id(data_dir: Path) -> str:
    """A stable cluster id for this data directory, in Kafka's base64 UUID form."""
    path = data_dir / "cluster.id"
    if path.exists():
        return path.read_text().strip()
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    write_atomically(path, (cluster_id + "\n").encode())
    return cluster_id


class BrokerServer:
    def __init__(self, settings: BrokerSettings, *, clock: Clock | None = None) -> None:
        self.settings = settings
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        self.metrics = BrokerMetrics()
        self.host = CoordinatorHost(
            settings.data_dir,
            settings.coordinator,
            clock=clock,
            fsync=settings.fsync,
            rebalance_on_partition_growth=settings.rebalance_on_partition_growth,
            extra_sinks=[self.metrics],
            max_record_bytes_between_snapshots=settings.max_record_bytes_between_snapshots,
        )
        self.host.observe_append(self.metrics.log_append_latency.observe)
        self.host.observe_fsync = self.metrics.log_fsync_latency.observe
        self.metrics.watch(self.host.coordinator)
        self.host.register_metrics(self.metrics.registry)
        self.topics: TopicLog | None = None
        self.context: BrokerContext | None = None
        self._server: asyncio.base_events.Server | None = None
        self._http: HttpApi | None = None
        self._dispatcher: Dispatcher | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self.connections = ConnectionRegistry(settings.connection_limits)
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._background: list[asyncio.Task[None]] = []
        self._stopping = False
        self.port = settings.listen_port
        self.http_port = settings.http_port
        self.security: SecurityState | None = None
        self.listener_ports: dict[str, int] = {}
        self._servers: list[asyncio.base_events.Server] = []
        self._tls: dict[str, ReloadingContext] = {}

    # --- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        if s.http_host is not None and s.http_port is not None:
            security = s.security
            token = (
                TokenSource(security.http_token_file)
                if security is not None and security.http_token_file is not None
                else None
            )
            http_tls = (
                ReloadingContext(security.http_tls).context()
                if security is not None and security.http_tls is not None
                else None
            )
            self._http = await start_http(
                self.host,
                self.metrics,
                lambda: self.ready,
                s.http_host,
                s.http_port,
                token=token,
                tls=http_tls,
            )
            self.http_port = self._http.port
        self.topics = await asyncio.to_thread(
            TopicLog,
            s.data_dir / "topics",
            default_partitions=s.default_partitions,
            default_configs=s.topic_defaults,
        )
        self.topics.subscribe_partitions_changed(self._on_partitions_changed)
        self.host.coordinator.state.topics = TopicLogCatalog(self.topics)
        security = s.security
        self.security = self.host.security = SecurityState(
            security.authorizer if security is not None else None,
            security.credentials() if security is not None else CredentialStore(),
        )
        try:
            await self.host.start()
        except BaseException:
            await self._abandon_start()  # recovery refused: release the data directory, close the ports
            raise
        await self.security.migrate_legacy_log(s.data_dir, self.host)
        cluster_id = load_cluster_id(s.data_dir)
        for warning in security.warnings if security is not None else ():
            log.warning("%s", warning)
        addresses: dict[str, tuple[str, int]] = {}
        for listener in self._listeners():
            server = await asyncio.start_server(
                functools.partial(self._connection, listener),
                listener.bind.host or None,
                listener.bind.port,
                limit=STREAM_BUFFER_BYTES,
                ssl=self._tls_context(listener),
            )
            self._servers.append(server)
            port = server.sockets[0].getsockname()[1]
            self.listener_ports[listener.name] = port
            advertised = listener.advertised
            addresses[listener.name] = (
                advertised.host
                if advertised is not listener.bind
                else (s.advertised_host or listener.bind.host),
                advertised.port if advertised is not listener.bind else (s.advertised_port or port),
            )
        self._server = self._servers[0]
        self.port = next(iter(self.listener_ports.values()))
        first = next(iter(addresses.values()))
        self.context = BrokerContext(
            host=self.host,
            topics=self.topics,
            node_id=s.node_id,
            advertised_host=first[0],
            advertised_port=first[1],
            cluster_id=cluster_id,
            auto_create_topics=s.auto_create_topics,
            security=self.security,
            listener_addresses=addresses,
        )
        self._background = [
            asyncio.create_task(self._periodic(s.topic_flush_interval_s, self._flush_topics)),
            asyncio.create_task(self._periodic(s.retention_check_interval_s, self._enforce_retention)),
        ]
        for name, (host, port) in addresses.items():
            log.info(
                "serving Kafka on listener %s port %d (advertised %s:%d)",
                name,
                self.listener_ports[name],
                host,
                port,
            )
        log.info("data in %s", s.data_dir)

    def _listeners(self) -> list[Listener]:
        s = self.settings
        if s.security is not None:
            return list(s.security.listeners)
        bind = Endpoint("PLAINTEXT", s.listen_host, s.listen_port)
        return [Listener("PLAINTEXT", SecurityProtocol.PLAINTEXT, bind, bind)]

    def _tls_context(self, listener: Listener) -> ssl.SSLContext | None:
        """TLS listeners share the certificate; SSL listeners ask for client certificates as configured,
        SASL_SSL ones never (their clients log in with SASL)."""
        security = self.settings.security
        if not listener.protocol.uses_tls or security is None or security.tls is None:
            return None
        tls = security.tls
        if listener.protocol == SecurityProtocol.SASL_SSL:
            tls = dataclasses.replace(tls, client_auth=ClientAuth.NONE)
        reloading = self._tls.get(tls.client_auth.value)
        if reloading is None:
            reloading = self._tls[tls.client_auth.value] = ReloadingContext(
                tls, on_error=lambda exc: log.error("TLS files changed but do not load: %s", exc)
            )
        context = reloading.context()
        context.sni_callback = reloading.sni_callback
        return context

    async def _abandon_start(self) -> None:
        if self._http is not None:
            await self._http.cleanup()
            self._http = None
        if self.topics is not None:
            await asyncio.to_thread(self.topics.close)
            self.topics = None
        self.host.release()

    @property
    def ready(self) -> bool:
        return self._server is not None and self.host.ready and not self._stopping

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (bounded), flush everything."""
        if self._stopping:
            return
        self._stopping = True
        for server in self._servers:
            server.close()
        self.host.unload()  # parked joins and syncs are answered, so in-flight work drains
        if self._in_flight:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), self.settings.shutdown_grace_s)
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.host.close()
        if self.topics is not None:
            await asyncio.to_thread(self.topics.close)
        if self._http is not None:
            await self._http.cleanup()
        log.info("stopped")

    async def serve_until_signalled(self) -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("shutting down")
        await self.stop()

    # --- background work ---------------------------------------------------------------------------

    async def _periodic(self, interval: float, work: Any) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await work()
            except Exception:
                log.exception("periodic task failed")

    async def _flush_topics(self) -> None:
        if self.topics is not None:
            await self.topics.flush_async()

    async def _enforce_retention(self) -> None:
        if self.topics is not None:
            self.topics.enforce_retention()

    def _on_partitions_changed(self, topic: str, old: int, new: int) -> None:
        if 0 < old < new:
            started = self.host.call(lambda c: c.on_partitions_changed(topic))
            if started:
                log.info("topic %s grew from %d to %d partitions: rebalancing %s", topic, old, new, started)

    # --- connections -------------------------------------------------------------------------------

    def _login(self, listener: Listener) -> SaslAuthenticator | None:
        """What a new connection on `listener` logs in with (None: nothing, PLAINTEXT or SSL)."""
        security = self.settings.security
        if not listener.protocol.uses_sasl or security is None or self.security is None:
            return None
        credentials = self.security.credentials

        def server_for(mechanism: str) -> SaslServer:
            return new_server(mechanism, credentials.plain, credentials.scram)

        return SaslAuthenticator(security.sasl_mechanisms, server_for)

    async def _connection(
        self, listener: Listener, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        peer = writer.get_extra_info("peername")
        client_host = f"/{peer[0]}" if peer else "/unknown"
        admitted = self.connections.admit(client_host, writer)
        connection = None if isinstance(admitted, Refused) else admitted
        reason = admitted.reason if isinstance(admitted, Refused) else "client"
        principal = ANONYMOUS
        ssl_object = writer.get_extra_info("ssl_object")
        if ssl_object is not None and listener.protocol == SecurityProtocol.SSL:
            principal = principal_from_certificate(ssl_object.getpeercert(binary_form=True))
        client = Peer(client_host, listener.name, principal, self._login(listener), can_splice(writer))
        sender: SplicedSender | None = None
        try:
            if isinstance(admitted, Refused) and admitted.hold_s:
                # Kafka keeps a throttled socket open, unread, for its throttle time, then closes it.
                await asyncio.sleep(admitted.hold_s)
            while connection is not None and not self._stopping:
                login = client.login
                frame = await connection.read_request(reader, logged_in=login is None or login.authenticated)
                if frame is None:
                    reason = connection.close_reason
                    if reason == "bad-size":
                        log.warning(
                            "closing %s on %s: %s", client_host, listener.name, connection.close_detail
                        )
                    return
                self._in_flight += 1
                self._idle.clear()
                try:
                    outcome = await self._answer(client, frame)
                finally:
                    connection.done_with_request()
                    self._in_flight -= 1
                    if not self._in_flight:
                        self._idle.set()
                if outcome.delayed:
                    # As Kafka's Selector holds a failed login's answer: the wait comes before it, so a
                    # client learns nothing sooner (connection.failed.authentication.delay.ms).
                    await asyncio.sleep(failed_login_wait_s(self.settings.failed_authentication_delay_s))
                if isinstance(outcome.frame, bytes):
                    writer.write(outcome.frame)
                    await writer.drain()
                elif isinstance(outcome.frame, SplicedFrame):
                    sender = sender or SplicedSender(writer)
                    await sender.send(outcome.frame)
                if outcome.close is not None:
                    reason = outcome.close
                    log.info("closing %s on %s: %s", client_host, listener.name, outcome.why)
                    return
        except (ConnectionError, asyncio.CancelledError):
            reason = "reset"
        except Exception:
            reason = "error"
            log.exception("closing connection from %s after an unexpected error", client_host)
        finally:
            if sender is not None:
                sender.close()
            if connection is not None:
                connection.close()
            self.metrics.connections.labels(reason).inc()
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _answer(self, client: Peer, frame: bytes) -> Outcome:
        """The one dispatch path (dispatch.py) for one frame of `client`'s."""
        if self._dispatcher is None:
            assert self.context is not None
            self._dispatcher = Dispatcher(self.context, self.metrics)
        return await self._dispatcher.answer(client, frame)
