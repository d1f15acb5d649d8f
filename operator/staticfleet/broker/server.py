"""The embedded broker: a single Kafka node that serves the group coordinator and a small topic log.

One asyncio task per connection reads a request, answers it, then reads the next, as Kafka does
(a connection's requests are answered in order; connections are served concurrently). A frame that
cannot be parsed, an unknown API or an unsupported version of an API other than ApiVersions closes
that connection and nothing else.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kio.static.protocol import ResponsePayload

from staticfleet.broker import apis, registry
from staticfleet.broker.codec import (
    EncodedBody,
    FrameError,
    encode_body,
    for_version,
    frame_body,
    parse_request,
)
from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.http import HttpApi, start_http
from staticfleet.broker.metrics import BrokerMetrics
from staticfleet.broker.registry import BrokerContext, Request, UnsupportedVersion
from staticfleet.broker.topiclog import TopicLog
from staticfleet.coordinator import CoordinatorConfig
from staticfleet.coordinator.clock import Clock

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


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
    auto_create_topics: bool = True
    default_partitions: int = 1
    rebalance_on_partition_growth: bool = True
    max_request_bytes: int = MAX_REQUEST_BYTES
    topic_flush_interval_s: float = 1.0
    retention_check_interval_s: float = 60.0
    shutdown_grace_s: float = 10.0


def load_cluster_id(data_dir: Path) -> str:
    """A stable cluster id for this data directory, in Kafka's base64 UUID form."""
    path = data_dir / "cluster.id"
    if path.exists():
        return path.read_text().strip()
    cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(cluster_id + "\n")
    os.replace(tmp, path)
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
        )
        self.host.observe_append(self.metrics.log_append_latency.observe)
        self.host.observe_fsync = self.metrics.log_fsync_latency.observe
        self.metrics.watch(self.host.coordinator)
        self.topics: TopicLog | None = None
        self.context: BrokerContext | None = None
        self._server: asyncio.base_events.Server | None = None
        self._http: HttpApi | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._background: list[asyncio.Task[None]] = []
        self._stopping = False
        self.port = settings.listen_port
        self.http_port = settings.http_port

    # --- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        s = self.settings
        if s.http_host is not None and s.http_port is not None:
            self._http = await start_http(
                self.host, self.metrics, lambda: self.ready, s.http_host, s.http_port
            )
            self.http_port = self._http.port
        self.topics = await asyncio.to_thread(
            TopicLog, s.data_dir / "topics", default_partitions=s.default_partitions
        )
        self.topics.subscribe_partitions_changed(self._on_partitions_changed)
        await self.host.start()
        cluster_id = load_cluster_id(s.data_dir)
        self._server = await asyncio.start_server(self._connection, s.listen_host, s.listen_port, limit=2**20)
        self.port = self._server.sockets[0].getsockname()[1]
        self.context = BrokerContext(
            host=self.host,
            topics=self.topics,
            node_id=s.node_id,
            advertised_host=s.advertised_host or s.listen_host,
            advertised_port=s.advertised_port or self.port,
            cluster_id=cluster_id,
            auto_create_topics=s.auto_create_topics,
        )
        self._background = [
            asyncio.create_task(self._periodic(s.topic_flush_interval_s, self._flush_topics)),
            asyncio.create_task(self._periodic(s.retention_check_interval_s, self._enforce_retention)),
        ]
        log.info(
            "serving Kafka on %s:%d (advertised %s:%d), data in %s",
            s.listen_host,
            self.port,
            self.context.advertised_host,
            self.context.advertised_port,
            s.data_dir,
        )

    @property
    def ready(self) -> bool:
        return self._server is not None and self.host.ready and not self._stopping

    async def stop(self) -> None:
        """Stop accepting, let in-flight requests finish (bounded), flush everything."""
        if self._stopping:
            return
        self._stopping = True
        if self._server is not None:
            self._server.close()
        self.host.coordinator.unload()  # parked joins and syncs are answered, so in-flight work drains
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

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        peer = writer.get_extra_info("peername")
        client_host = f"/{peer[0]}" if peer else "/unknown"
        reason = "client"
        try:
            while not self._stopping:
                try:
                    head = await reader.readexactly(4)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                size = int.from_bytes(head, "big", signed=True)
                if size <= 0 or size > self.settings.max_request_bytes:
                    reason = "bad-size"
                    log.warning("closing %s: request size %d out of bounds", client_host, size)
                    return
                try:
                    frame = await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                self._in_flight += 1
                self._idle.clear()
                try:
                    response = await self._handle(frame, client_host)
                finally:
                    self._in_flight -= 1
                    if not self._in_flight:
                        self._idle.set()
                if response is _CLOSE:
                    reason = "bad-request"
                    return
                if isinstance(response, bytes):
                    writer.write(response)
                    await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            reason = "reset"
        except Exception:
            reason = "error"
            log.exception("closing connection from %s after an unexpected error", client_host)
        finally:
            self.metrics.connections.labels(reason).inc()
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _handle(self, frame: bytes, client_host: str) -> bytes | object | None:
        assert self.context is not None
        started = time.perf_counter()
        try:
            header, body = parse_request(frame, registry.is_supported)
        except UnsupportedVersion as exc:
            answer = apis.unsupported_version_reply(exc)
            if answer is None:
                log.info("closing connection from %s: %s", client_host, exc)
                return _CLOSE
            self.metrics.observe_request(registry.api_for(exc), exc.api_version, _error_of(answer), 0.0)
            return frame_body(exc.correlation_id, encode_body(answer))
        except FrameError as exc:
            log.info("closing connection from %s: %s", client_host, exc)
            return _CLOSE
        api = registry.api_for(header)
        assert api is not None  # parse_request let only served APIs through
        reply = await api.handler(self.context, Request(header, client_host, body))
        framed: bytes | None = None
        error = 0
        if reply is not None:
            encoded = (
                reply
                if isinstance(reply, EncodedBody)
                else encode_body(for_version(reply, header.api_version))
            )
            error = _error_of(encoded.response)
            framed = frame_body(header.correlation_id, encoded)
        self.metrics.observe_request(api, header.api_version, error, time.perf_counter() - started)
        return framed


def _error_of(response: ResponsePayload) -> int:
    """The response's top-level error code (0 for APIs that only carry errors per item)."""
    return int(getattr(response, "error_code", 0))


_CLOSE = object()
