"""A real Kafka consumer in its own process, for tests: confluent-kafka, kafka-python or aiokafka.

    python -m tests.broker.consumer_process --client confluent --bootstrap HOST:PORT --group G
        --instance ID --topic T [--session-ms 10000]
        [--sasl-ssl --sasl-mechanism M --sasl-username U --ssl-cafile CA]   (password in KAFKA_SASL_PASSWORD)

It prints one JSON object per line: {"event": "assigned", "partitions": [...]}, {"event": "records",
"records": [[partition, offset, value], ...]}, {"event": "committed", "offsets": {partition: offset}},
{"event": "fatal", "error": "..."} (authorization errors too, with the library's error name). It commits
after every batch. SIGTERM closes it the way the client
closes a static member (no LeaveGroup; on the consumer protocol, `--group-protocol consumer` with
confluent-kafka, a leave with epoch -2 that keeps its partitions for its return); SIGKILL is a crash.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


AUTHORIZATION_CODES = frozenset({29, 30, 31})  # TOPIC_, GROUP_, CLUSTER_AUTHORIZATION_FAILED


def security(args: argparse.Namespace, client: str) -> dict[str, Any]:
    """SASL_SSL settings in each library's own names (reference: kafka-security.md section 8)."""
    if not args.sasl_ssl:
        return {}
    password = os.environ["KAFKA_SASL_PASSWORD"]
    if client == "confluent":
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": args.sasl_mechanism,
            "sasl.username": args.sasl_username,
            "sasl.password": password,
            "ssl.ca.location": args.ssl_cafile,
        }
    common = {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": args.sasl_mechanism,
        "sasl_plain_username": args.sasl_username,
        "sasl_plain_password": password,
    }
    if client == "kafka-python":
        return {**common, "ssl_cafile": args.ssl_cafile}
    from aiokafka.helpers import create_ssl_context

    return {**common, "ssl_context": create_ssl_context(cafile=args.ssl_cafile)}


def run_confluent(args: argparse.Namespace, stop: threading.Event) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    # The consumer protocol's session and heartbeat are the coordinator's to set (KIP-848).
    timing = (
        {"session.timeout.ms": args.session_ms, "heartbeat.interval.ms": args.heartbeat_ms}
        if args.group_protocol == "classic"
        else {}
    )
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "group.instance.id": args.instance,
            "group.protocol": args.group_protocol,
            **timing,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 600_000,
            **security(args, "confluent"),
        }
    )
    # On the consumer protocol the callbacks carry what is added or revoked, not the whole assignment.
    held: set[int] = set()
    incremental = args.group_protocol == "consumer"

    def on_assign(c: Any, partitions: Any) -> None:
        added = {p.partition for p in partitions}
        if not incremental:
            held.clear()
        held.update(added)
        emit("assigned", partitions=sorted(held), added=sorted(added))

    def on_revoke(c: Any, partitions: Any) -> None:
        revoked = {p.partition for p in partitions}
        held.difference_update(revoked)
        emit("revoked", partitions=sorted(revoked))

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    try:
        while not stop.is_set():
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() in AUTHORIZATION_CODES:
                    emit("fatal", error=str(error), name=error.name(), code=error.code())
                    return 3
                # A consumer's fatal error (being fenced on a Heartbeat, JoinGroup or SyncGroup) comes out of
                # poll() as _FATAL with fatal() False and the cause in its text; no error callback runs.
                if error.fatal() or error.code() == KafkaError._FATAL:
                    emit("fatal", error=str(error), name=error.name(), code=error.code())
                    return 3
                continue
            offset = msg.offset() or 0
            emit("records", records=[[msg.partition(), offset, (msg.value() or b"").decode()]])
            consumer.commit(message=msg, asynchronous=False)
            emit("committed", offsets={str(msg.partition()): offset + 1})
    except KafkaException as exc:  # e.g. a commit answered FENCED_INSTANCE_ID
        error = exc.args[0]
        emit("fatal", error=str(error), name=error.name(), code=error.code())
        return 3
    finally:
        consumer.close()
    return 0


def run_kafka_python(args: argparse.Namespace, stop: threading.Event) -> int:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.errors import AuthorizationError, FencedInstanceIdError, KafkaConnectionError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            return None

        def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assigned", partitions=sorted(p.partition for p in assigned))

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **security(args, "kafka-python"),
    )
    consumer.subscribe([args.topic], listener=Listener())
    # Load the topic's metadata before the first join. Otherwise a leader assigns with no partitions
    # known and rejoins once the metadata arrives; if poll() times out during that rejoin, kafka-python
    # 3.0.x never applies the SyncGroup answer it receives: heartbeats stay off and the session expires.
    consumer.topics()
    try:
        while not stop.is_set():
            try:
                batches = consumer.poll(200)
            except KafkaConnectionError as exc:  # kafka-python 3.0.x raises while the coordinator restarts
                emit("client_error", error=str(exc))
                time.sleep(0.2)
                continue
            for tp, records in batches.items():
                emit("records", records=[[tp.partition, r.offset, r.value.decode()] for r in records])
            if batches:
                consumer.commit()
                emit(
                    "committed", offsets={str(tp.partition): rs[-1].offset + 1 for tp, rs in batches.items()}
                )
    except (FencedInstanceIdError, AuthorizationError) as exc:
        emit("fatal", error=f"{type(exc).__name__}: {exc}", name=type(exc).__name__)
        return 3
    finally:
        consumer.close()
    return 0


def run_aiokafka(args: argparse.Namespace, stop: threading.Event) -> int:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            return None

        async def on_partitions_assigned(self, assigned: Any) -> None:
            emit("assigned", partitions=sorted(p.partition for p in assigned))

    async def main() -> int:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            group_instance_id=args.instance,
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=args.heartbeat_ms,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **security(args, "aiokafka"),
        )
        consumer.subscribe([args.topic], listener=Listener())
        try:
            await consumer.start()
            while not stop.is_set():
                batches = await consumer.getmany(timeout_ms=200)
                for tp, records in batches.items():
                    emit("records", records=[[tp.partition, r.offset, r.value.decode()] for r in records])
                if batches:
                    await consumer.commit()
                    emit(
                        "committed",
                        offsets={str(tp.partition): rs[-1].offset + 1 for tp, rs in batches.items()},
                    )
        except (GroupAuthorizationFailedError, TopicAuthorizationFailedError) as exc:
            emit("fatal", error=f"{type(exc).__name__}: {exc}", name=type(exc).__name__)
            return 3
        finally:
            await consumer.stop()
        return 0

    return asyncio.run(main())


GROUP_LOGGERS = ("kafka.coordinator", "aiokafka.consumer.group_coordinator")
RUNNERS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=sorted(RUNNERS), required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--instance", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--session-ms", type=int, default=10_000)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic")
    parser.add_argument("--sasl-ssl", action="store_true", help="SASL_SSL (password in KAFKA_SASL_PASSWORD)")
    parser.add_argument("--sasl-mechanism", default="SCRAM-SHA-512")
    parser.add_argument("--sasl-username")
    parser.add_argument("--ssl-cafile")
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # The client's group protocol steps go to stderr, which a failing test shows; CONSUMER_DEBUG adds
    # everything else the client logs.
    logging.basicConfig(
        level=logging.DEBUG if os.environ.get("CONSUMER_DEBUG") else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s",
    )
    for name in GROUP_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG)
    emit("started", client=args.client, instance=args.instance)
    return RUNNERS[args.client](args, stop)


if __name__ == "__main__":
    sys.exit(main())
