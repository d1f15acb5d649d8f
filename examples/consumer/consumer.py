"""A stateful Kafka consumer for a StaticConsumerGroup (confluent-kafka).

It reads the operator's environment contract (KAFKA_BOOTSTRAP_SERVERS, KAFKA_GROUP_ID,
KAFKA_GROUP_INSTANCE_ID, KAFKA_TOPICS, KAFKA_SESSION_TIMEOUT_MS, ...), keeps a small state file per
partition in STATE_DIR (a volume that survives restarts), commits offsets after the state is on disk,
and logs every assignment and revocation as a JSON line.

Lifecycle, as Kubernetes and static membership want it:
- READY_FILE is created once the consumer is in the group (first assignment), for an exec readiness probe.
- SIGTERM: close without LeaveGroup (librdkafka skips it for static members), exit 0; the pod comes back
  with the same instance id and the group does not rebalance.
- KAFKA_MEMBERSHIP=dynamic runs the same consumer with dynamic membership (no group.instance.id, even
  when KAFKA_GROUP_INSTANCE_ID is set): it sends LeaveGroup when it closes, and every start or stop costs
  the group a rebalance. It is the baseline the benchmarks and the demo compare static membership with.
- A fatal error exits non-zero so that Kubernetes restarts the pod; FENCED_INSTANCE_ID (another process
  took this instance id) exits with 82, the Kafka error code, which the operator reports as InstanceFenced.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

FENCED_EXIT_CODE = 82
POLL_S = 0.1
STATIC, DYNAMIC = "static", "dynamic"


def log(event: str, **fields: Any) -> None:
    record = {"ts": round(time.time(), 3), "event": event, **fields}
    print(json.dumps(record, sort_keys=True), flush=True)


def required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        log("config_error", message=f"environment variable {name} is not set")
        sys.exit(2)
    return value


def membership() -> str:
    value = os.environ.get("KAFKA_MEMBERSHIP", STATIC).strip().lower() or STATIC
    if value not in (STATIC, DYNAMIC):
        log("config_error", message=f"KAFKA_MEMBERSHIP must be {STATIC} or {DYNAMIC}, not {value!r}")
        sys.exit(2)
    return value


def consumer_config() -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": required("KAFKA_BOOTSTRAP_SERVERS"),
        "group.id": required("KAFKA_GROUP_ID"),
        "session.timeout.ms": int(os.environ.get("KAFKA_SESSION_TIMEOUT_MS", "45000")),
        "enable.auto.commit": False,
        "auto.offset.reset": os.environ.get("AUTO_OFFSET_RESET", "earliest"),
        "security.protocol": os.environ.get("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT").lower(),
        "client.id": os.environ.get("KAFKA_GROUP_INSTANCE_ID") or os.environ.get("HOSTNAME") or "consumer",
    }
    if membership() == STATIC:
        config["group.instance.id"] = required("KAFKA_GROUP_INSTANCE_ID")
    optional = {
        "KAFKA_HEARTBEAT_INTERVAL_MS": "heartbeat.interval.ms",
        "KAFKA_REBALANCE_TIMEOUT_MS": "max.poll.interval.ms",
        "KAFKA_SASL_MECHANISM": "sasl.mechanism",
        "KAFKA_SASL_USERNAME": "sasl.username",
        "KAFKA_SASL_PASSWORD": "sasl.password",
        "KAFKA_SSL_CA_LOCATION": "ssl.ca.location",
        "KAFKA_SSL_CERTIFICATE_LOCATION": "ssl.certificate.location",
        "KAFKA_SSL_KEY_LOCATION": "ssl.key.location",
        "PARTITION_ASSIGNMENT_STRATEGY": "partition.assignment.strategy",
    }
    for env, key in optional.items():
        if os.environ.get(env):
            value = os.environ[env]
            config[key] = int(value) if key.endswith(".ms") else value
    return config


class PartitionState:
    """Per-partition state on the volume: messages seen and the next offset to read."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)

    def path(self, topic: str, partition: int) -> Path:
        return self.directory / f"{topic}-{partition}.json"

    def load(self, topic: str, partition: int) -> dict[str, int]:
        try:
            data: dict[str, int] = json.loads(self.path(topic, partition).read_text())
            return data
        except (OSError, ValueError):
            return {"messages": 0, "next_offset": -1}

    def save(self, topic: str, partition: int, state: dict[str, int]) -> None:
        target = self.path(topic, partition)
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, target)


def is_fenced(error: KafkaError) -> bool:
    text = error.str().lower()
    return error.code() == KafkaError.FENCED_INSTANCE_ID or "fenced" in text or "fenced_instance_id" in text


def main() -> int:
    config = consumer_config()
    topics = [t.strip() for t in required("KAFKA_TOPICS").split(",") if t.strip()]
    state = PartitionState(Path(os.environ.get("STATE_DIR", "./state")))
    ready_file = Path(os.environ.get("READY_FILE", "./ready"))
    ready_file.unlink(missing_ok=True)
    instance = config.get("group.instance.id") or config["client.id"]
    stopping = False
    fatal: list[KafkaError] = []

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def on_error(error: KafkaError) -> None:
        if error.fatal() or error.code() == KafkaError._FATAL:
            fatal.append(error)
        log("client_error", code=error.name(), message=error.str(), fatal=error.fatal())

    config["error_cb"] = on_error
    consumer = Consumer(config)

    def on_assign(c: Consumer, partitions: list[TopicPartition]) -> None:
        log("assigned", instance=instance, partitions=[f"{p.topic}-{p.partition}" for p in partitions])
        ready_file.parent.mkdir(parents=True, exist_ok=True)
        ready_file.touch()

    def on_revoke(c: Consumer, partitions: list[TopicPartition]) -> None:
        log("revoked", instance=instance, partitions=[f"{p.topic}-{p.partition}" for p in partitions])

    consumer.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)
    log("started", instance=instance, group=config["group.id"], topics=topics, membership=membership())
    exit_code = 0
    try:
        while not stopping and not fatal:
            # A short poll: the stop flag set by SIGTERM is seen within POLL_S, so a departing pod
            # closes (and, dynamic, leaves) at once instead of up to half a second later.
            message: Message | None = consumer.poll(POLL_S)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.fatal() or error.code() == KafkaError._FATAL:
                    fatal.append(error)
                elif error.code() != KafkaError._PARTITION_EOF:
                    log("consume_error", code=error.name(), message=error.str())
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert topic is not None and partition is not None and offset is not None
            current = state.load(topic, partition)
            current["messages"] += 1
            current["next_offset"] = offset + 1
            state.save(topic, partition, current)  # state first, then the offset: at-least-once
            consumer.commit(message=message, asynchronous=False)
        if fatal:
            error = fatal[0]
            exit_code = FENCED_EXIT_CODE if is_fenced(error) else 1
            log("fatal", code=error.name(), message=error.str(), exit_code=exit_code)
            termination_log = Path("/dev/termination-log")
            if termination_log.exists():  # Kubernetes shows it as the container's termination message
                with termination_log.open("a") as out:
                    out.write(
                        f"{'FENCED_INSTANCE_ID' if exit_code == FENCED_EXIT_CODE else error.name()}: "
                        f"{error.str()}\n"
                    )
    finally:
        ready_file.unlink(missing_ok=True)
        # A static member's close sends no LeaveGroup: the coordinator keeps its partitions for it.
        # A dynamic member's close sends one: the group rebalances without it right away.
        consumer.close()
        log("stopped", instance=instance, exit_code=exit_code)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
