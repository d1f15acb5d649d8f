"""`staticfleet coordinator`: run the embedded Kafka-compatible group coordinator."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
from pathlib import Path

from staticfleet.broker.connections import ConnectionLimits, parse_overrides
from staticfleet.broker.security import settings as security_settings
from staticfleet.broker.security.http_auth import TokenFileError, TokenSource
from staticfleet.broker.topic_configs import BOUNDED_TOPIC_DEFAULTS
from staticfleet.commands import coordinator_log
from staticfleet.commands.arguments import (
    Parser,
    add_logging_arguments,
    assignor_names,
    listen_address,
    non_negative_int,
    positive_int,
)
from staticfleet.coordinator import CoordinatorConfig
from staticfleet.coordinator.config import MESSAGE_MAX_BYTES
from staticfleet.coordinator.log import MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS
from staticfleet.coordinator.server_assignors import BUILTIN_ASSIGNORS

# The collector's thresholds while serving (CPython's defaults are 700, 10, 10). Every full collection
# walks every member of every group and stalls the event loop for all that time (over 100 ms with
# 10,000 members on a busy 2-core machine), and a rebalance or a fleet joining promotes enough
# objects to set one off every few rebalances. Considering one after 100 young-generation passes
# instead of 10 makes them ten times rarer; the young generations keep their size, so their pauses
# stay short, and objects that become garbage by reference counting (nearly all) are freed at once.
GC_THRESHOLDS = (700, 10, 100)


def _overrides(value: str) -> dict[str, int]:
    try:
        return parse_overrides(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def tune_garbage_collector() -> None:
    """Before serving: what is loaded so far (modules, classes, the Kafka schema) lives as long as the
    process, so it is moved out of the collector's way (gc.freeze), and the thresholds are raised."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def host_port(value: str) -> tuple[str, int]:
    """HOST:PORT, with an IPv6 host in brackets as in a URL ([::]:9092)."""
    return listen_address(value)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "coordinator",
        help="run the embedded Kafka-compatible group coordinator",
        description="A single Kafka node serving the classic group protocol and Kafka 4's consumer group "
        "protocol (KIP-848), with static membership, offsets and a small topic log, so unmodified Kafka "
        "clients can consume through it.",
    )
    p.add_argument(
        "--listen",
        type=host_port,
        default=("0.0.0.0", 9092),
        metavar="HOST:PORT",
        help="Kafka listener (default 0.0.0.0:9092)",
    )
    p.add_argument(
        "--advertised-listener",
        action="append",
        default=[],
        metavar="[NAME://]HOST:PORT",
        help="address given to clients in Metadata and FindCoordinator, per listener name (repeatable; "
        "a bare HOST:PORT is the first listener's; default: the bind address)",
    )
    p.add_argument("--data-dir", type=Path, help="where the logs live (required)")
    p.add_argument(
        "--http",
        type=host_port,
        default=("0.0.0.0", 8080),
        metavar="HOST:PORT",
        help="HTTP API: /healthz /readyz /metrics /api/groups (default 0.0.0.0:8080)",
    )
    p.add_argument("--node-id", type=non_negative_int, default=1)
    p.add_argument("--group-initial-rebalance-delay-ms", type=non_negative_int, default=3_000)
    p.add_argument("--group-min-session-timeout-ms", type=non_negative_int, default=6_000)
    p.add_argument("--group-max-session-timeout-ms", type=non_negative_int, default=1_800_000)
    p.add_argument("--group-max-size", type=positive_int, default=2**31 - 1)
    # Groups of Kafka 4's consumer protocol (KIP-848), by Kafka's group.consumer.* names.
    p.add_argument("--group-consumer-session-timeout-ms", type=positive_int, default=45_000)
    p.add_argument("--group-consumer-heartbeat-interval-ms", type=positive_int, default=5_000)
    p.add_argument("--group-consumer-assignment-interval-ms", type=non_negative_int, default=1_000)
    p.add_argument("--group-consumer-max-size", type=positive_int, default=2**31 - 1)
    p.add_argument(
        "--group-consumer-assignors",
        type=assignor_names,
        default=BUILTIN_ASSIGNORS,
        metavar="NAME[,NAME]",
        help="group.consumer.assignors: server-side assignors, the first the default (default uniform,range)",
    )
    p.add_argument(
        "--offsets-retention-minutes",
        type=positive_int,
        default=7 * 24 * 60,
        help="offsets.retention.minutes: how long a group's unused offsets are kept (default 10080, 7 days)",
    )
    p.add_argument(
        "--offsets-retention-check-interval-ms",
        type=positive_int,
        default=600_000,
        help="offsets.retention.check.interval.ms: how often expired offsets are looked for (default 600000)",
    )
    p.add_argument(
        "--message-max-bytes",
        type=positive_int,
        default=MESSAGE_MAX_BYTES,
        help="message.max.bytes: the largest record batch a topic takes by default (its max.message.bytes) "
        "and the most one group operation may write (a larger group record or batch of offset commits is "
        f"answered UNKNOWN_SERVER_ERROR, as Kafka answers it; default {MESSAGE_MAX_BYTES})",
    )
    p.add_argument(
        "--default-partitions",
        type=positive_int,
        default=1,
        help="partitions of auto-created topics and of CreateTopics asking for the default",
    )
    p.add_argument("--no-auto-create-topics", action="store_true", help="do not create topics on Metadata")
    p.add_argument(
        "--no-rebalance-on-partition-growth",
        action="store_true",
        help="do not rebalance consumer groups when a subscribed topic gains partitions",
    )
    p.add_argument(
        "--no-fsync", action="store_true", help="skip fsync (tests only: loses data on power loss)"
    )
    limits = ConnectionLimits()
    p.add_argument(
        "--max-connections",
        type=int,
        default=limits.max_connections,
        help=f"max.connections: open Kafka connections at most (default {limits.max_connections})",
    )
    p.add_argument(
        "--max-connections-per-ip",
        type=int,
        default=limits.max_connections_per_ip,
        help="max.connections.per.ip (default unbounded, as Kafka)",
    )
    p.add_argument(
        "--max-connections-per-ip-overrides",
        type=_overrides,
        default={},
        metavar="ADDRESS:COUNT,...",
        help="max.connections.per.ip.overrides: the limit for particular IP addresses, "
        "e.g. 10.0.0.7:500,10.0.0.8:0",
    )
    p.add_argument(
        "--connection-creation-rate",
        type=positive_int,
        default=limits.connection_creation_rate,
        help="Kafka's connection_creation_rate quota for every IP address: new connections per second "
        "from one address, measured as Kafka measures it (11 one-second samples, at least ten seconds); "
        "a connection over it is held unread for up to a second and then closed, as Kafka throttles it "
        "(default unbounded, as Kafka)",
    )
    p.add_argument(
        "--sasl-server-max-receive-size",
        type=positive_int,
        default=limits.sasl_server_max_receive_size,
        help="sasl.server.max.receive.size: before a SASL login completes, a frame announcing more bytes "
        "closes the connection unread "
        f"(default {limits.sasl_server_max_receive_size}, Kafka's)",
    )
    p.add_argument(
        "--connections-max-idle-ms",
        type=int,
        default=limits.connections_max_idle_ms,
        help="connections.max.idle.ms: close a connection that answered no request for this long "
        f"(default {limits.connections_max_idle_ms})",
    )
    p.add_argument(
        "--socket-request-max-bytes",
        type=int,
        default=limits.socket_request_max_bytes,
        help=f"socket.request.max.bytes: the largest request (default {limits.socket_request_max_bytes})",
    )
    p.add_argument(
        "--queued-max-request-bytes",
        type=int,
        default=limits.queued_max_request_bytes,
        help="queued.max.request.bytes: large-request bytes buffered at once over all connections "
        f"(default {limits.queued_max_request_bytes})",
    )
    p.add_argument(
        "--log-retention-bytes",
        type=int,
        default=int(BOUNDED_TOPIC_DEFAULTS["retention.bytes"]),
        help="log.retention.bytes: default retention.bytes of topics, per partition; -1 for none "
        f"(default {BOUNDED_TOPIC_DEFAULTS['retention.bytes']})",
    )
    p.add_argument(
        "--log-segment-bytes",
        type=int,
        default=int(BOUNDED_TOPIC_DEFAULTS["segment.bytes"]),
        help="log.segment.bytes: default segment.bytes of topics "
        f"(default {BOUNDED_TOPIC_DEFAULTS['segment.bytes']})",
    )
    p.add_argument(
        "--max-record-bytes-between-snapshots",
        type=positive_int,
        default=MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS,
        help="Kafka's metadata.log.max.record.bytes.between.snapshots, for the coordinator log: write a "
        "snapshot once this many bytes were appended since the last one (or the last snapshot's size, if "
        "larger), which bounds what a restart replays "
        f"(default {MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS})",
    )
    add_logging_arguments(p)
    security_settings.add_arguments(p)
    p.set_defaults(run=run)
    coordinator_log.register(
        p.add_subparsers(
            dest="coordinator_action",
            metavar="ACTION",
            title="actions on a stopped coordinator's data directory (none: run the coordinator)",
            parser_class=Parser,
        )
    )


EXIT_LOCKED = 3
EXIT_LOG_DAMAGED = 4


def run(args: argparse.Namespace) -> int:
    from staticfleet import logs
    from staticfleet.broker.server import BrokerServer, BrokerSettings
    from staticfleet.coordinator.integrity import LogCorruptError
    from staticfleet.coordinator.log import DataDirLockedError

    logs.configure(args.log_level, args.log_format)
    if args.data_dir is None:
        sys.stderr.write("staticfleet coordinator: error: the following arguments are required: --data-dir\n")
        return 2
    try:
        config = CoordinatorConfig(
            min_session_timeout_ms=args.group_min_session_timeout_ms,
            max_session_timeout_ms=args.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=args.group_initial_rebalance_delay_ms,
            max_size=args.group_max_size,
            message_max_bytes=args.message_max_bytes,
            consumer_session_timeout_ms=args.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=args.group_consumer_heartbeat_interval_ms,
            consumer_assignment_interval_ms=args.group_consumer_assignment_interval_ms,
            consumer_max_size=args.group_consumer_max_size,
            consumer_assignors=args.group_consumer_assignors,
            offsets_retention_ms=args.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms=args.offsets_retention_check_interval_ms,
        )
        connection_limits = ConnectionLimits(
            max_connections=args.max_connections,
            max_connections_per_ip=args.max_connections_per_ip,
            max_connections_per_ip_overrides=args.max_connections_per_ip_overrides,
            connection_creation_rate=args.connection_creation_rate,
            sasl_server_max_receive_size=args.sasl_server_max_receive_size,
            connections_max_idle_ms=args.connections_max_idle_ms,
            socket_request_max_bytes=args.socket_request_max_bytes,
            queued_max_request_bytes=args.queued_max_request_bytes,
        )
    except ValueError as exc:
        logging.error("%s", exc)
        return 2
    listen_host, listen_port = args.listen
    default_listener = f"PLAINTEXT://{listen_host}:{listen_port}"
    first_name = (args.listener[0].split("://", 1)[0] if args.listener else "PLAINTEXT").upper()
    advertised = [a if "://" in a else f"{first_name}://{a}" for a in args.advertised_listener]
    try:
        security = security_settings.from_arguments(
            args, default_listener=default_listener, advertised=advertised
        )
        security.credentials()  # a bad users file stops the start with its line
        if security.http_token_file is not None:
            TokenSource(security.http_token_file)
    except (security_settings.SecuritySettingsError, TokenFileError) as exc:
        logging.error("%s", exc)
        return 2
    advertised_host: str | None = None
    advertised_port: int | None = None
    for listener in security.listeners:
        if listener.advertised is listener.bind and listener.bind.host in ("", "0.0.0.0", "::"):
            logging.error(
                "--advertised-listener is required for %s, which listens on all interfaces", listener.name
            )
            return 2
    settings = BrokerSettings(
        data_dir=args.data_dir,
        listen_host=listen_host,
        listen_port=listen_port,
        advertised_host=advertised_host,
        advertised_port=advertised_port,
        http_host=args.http[0],
        http_port=args.http[1],
        node_id=args.node_id,
        coordinator=config,
        fsync=not args.no_fsync,
        max_record_bytes_between_snapshots=args.max_record_bytes_between_snapshots,
        auto_create_topics=not args.no_auto_create_topics,
        default_partitions=args.default_partitions,
        rebalance_on_partition_growth=not args.no_rebalance_on_partition_growth,
        security=security,
        connection_limits=connection_limits,
        topic_defaults={
            "retention.bytes": str(args.log_retention_bytes),
            "segment.bytes": str(args.log_segment_bytes),
            "max.message.bytes": str(args.message_max_bytes),
        },
    )

    async def main() -> None:
        server = BrokerServer(settings)
        await server.start()
        await server.serve_until_signalled()

    use_uvloop = os.environ.get("STATICFLEET_EVENT_LOOP", "uvloop") == "uvloop"
    if use_uvloop:
        import uvloop
    tune_garbage_collector()
    try:
        if use_uvloop:
            uvloop.run(main())  # about 1.5x the requests per CPU-second of the default loop (bench/)
        else:
            asyncio.run(main())
    except DataDirLockedError as exc:
        logging.error("%s", exc)
        return EXIT_LOCKED
    except LogCorruptError as exc:
        logging.error("%s", exc)
        return EXIT_LOG_DAMAGED
    return 0
