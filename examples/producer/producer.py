"""A steady Kafka producer for the demo fleet (confluent-kafka).

It creates TOPIC with PARTITIONS partitions when the topic does not exist, then writes RATE keyed JSON
messages per second until SIGTERM, and logs its progress as JSON lines on stdout.

Environment: KAFKA_BOOTSTRAP_SERVERS (required), TOPIC (default `orders`), PARTITIONS (default 6),
RATE (messages per second, default 10), READY_FILE (when set, created once the topic exists and the
first message is delivered, for an exec readiness probe; unset: none, since the image's own directories
are read-only to its user), and the consumer's KAFKA_SECURITY_PROTOCOL /
KAFKA_SASL_* / KAFKA_SSL_* variables for a secured cluster.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

PROGRESS_EVERY_S = 10.0
CLIENT_SETTINGS = {
    "KAFKA_SECURITY_PROTOCOL": "security.protocol",
    "KAFKA_SASL_MECHANISM": "sasl.mechanism",
    "KAFKA_SASL_USERNAME": "sasl.username",
    "KAFKA_SASL_PASSWORD": "sasl.password",
    "KAFKA_SSL_CA_LOCATION": "ssl.ca.location",
    "KAFKA_SSL_CERTIFICATE_LOCATION": "ssl.certificate.location",
    "KAFKA_SSL_KEY_LOCATION": "ssl.key.location",
}


def log(event: str, **fields: Any) -> None:
    print(json.dumps({"ts": round(time.time(), 3), "event": event, **fields}, sort_keys=True), flush=True)


def client_config() -> dict[str, Any]:
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        log("config_error", message="environment variable KAFKA_BOOTSTRAP_SERVERS is not set")
        sys.exit(2)
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    for env, key in CLIENT_SETTINGS.items():
        if os.environ.get(env):
            config[key] = os.environ[env].lower() if key == "security.protocol" else os.environ[env]
    return config


def ensure_topic(config: dict[str, Any], topic: str, partitions: int) -> None:
    """Creates the topic; one that exists already is fine (whatever its partition count)."""
    admin = AdminClient(config)
    future = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic]
    try:
        future.result(timeout=30)
        log("topic_created", topic=topic, partitions=partitions)
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
        log("topic_exists", topic=topic)


def main() -> int:
    config = client_config()
    topic = os.environ.get("TOPIC", "orders")
    partitions = int(os.environ.get("PARTITIONS", "6"))
    rate = float(os.environ.get("RATE", "10"))
    ready_file = Path(os.environ["READY_FILE"]) if os.environ.get("READY_FILE") else None
    if ready_file is not None:
        ready_file.unlink(missing_ok=True)
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    ensure_topic(config, topic, partitions)
    producer = Producer({**config, "linger.ms": 20, "client.id": "staticfleet-demo-producer"})
    delivered, failed = 0, 0

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        nonlocal delivered, failed
        if error is not None:
            failed += 1
            log("delivery_failed", code=error.name(), message=error.str())
            return
        delivered += 1
        if delivered == 1 and ready_file is not None:
            ready_file.parent.mkdir(parents=True, exist_ok=True)
            ready_file.touch()

    log("started", topic=topic, rate=rate)
    sent, started = 0, time.monotonic()
    next_progress = started + PROGRESS_EVERY_S
    try:
        while not stopping:
            now = time.monotonic()
            due = int((now - started) * rate)
            while sent < due:
                value = json.dumps({"n": sent, "ts": round(time.time(), 3)})
                producer.produce(topic, key=f"order-{sent % 1000}", value=value, on_delivery=on_delivery)
                sent += 1
            producer.poll(0.05)
            if now >= next_progress:
                log("progress", sent=sent, delivered=delivered, failed=failed)
                next_progress += PROGRESS_EVERY_S
    finally:
        producer.flush(10)
        if ready_file is not None:
            ready_file.unlink(missing_ok=True)
        log("stopped", sent=sent, delivered=delivered, failed=failed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
