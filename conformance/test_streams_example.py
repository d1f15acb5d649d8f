"""The example Kafka Streams application (examples/streams, kafka-streams 4.3.1) run as a process against
Apache Kafka and against the embedded coordinator: it creates its store's changelog, counts what the
producer wrote per key, and comes back from SIGTERM with its state, at the same tasks and restoring nothing.

Each stream thread is a static member `<KAFKA_GROUP_INSTANCE_ID>-<thread index>`; SIGTERM sends no
LeaveGroup, so both members stay in the group while the process is down. A second test gives it the
SASL_SSL settings the operator injects (SCRAM user, CA file) on the secured backends. Every run serves its
readiness on READY_PORT too, as an httpGet readiness probe asks it.
"""

from __future__ import annotations

import http.client
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance import security as sec
from conformance.backends import KAFKA, STATICFLEET, Backend, create_topic, describe_group
from conformance.java_build import ensure_jar
from conformance.java_process import JavaProcess, wait_until
from conformance.runner import ConformanceRun
from conformance.scenario import SECURED
from e2e.localcluster.ports import free_port

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "streams"
PARTITIONS = 4
KEYS = 10
WAIT_S = 120.0
STORE = "order-counts"


class AppExited(AssertionError):
    """The application stopped before it was RUNNING."""


pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files\\(\\) instead:DeprecationWarning")


@pytest.fixture(scope="module")
def app_jar() -> Path:
    return ensure_jar(EXAMPLE)


def produce(backend: Backend, topic: str, count: int, start: int = 0) -> Counter[str]:
    """`count` records keyed `order-<n % KEYS>`, as the example producer keys them; the keys written."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=backend.bootstrap)
    written: Counter[str] = Counter()
    try:
        for n in range(start, start + count):
            key = f"order-{n % KEYS}"
            producer.send(topic, key=key.encode(), value=json.dumps({"n": n}).encode())
            written[key] += 1
        producer.flush(30)
    finally:
        producer.close()
    return written


def latest_counts(backend: Backend, topic: str) -> dict[str, int]:
    """The last count written for each key of the output topic (read from the beginning, no group)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=backend.bootstrap, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        if not partitions:
            return {}
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(partitions)
        counts: dict[str, int] = {}
        deadline = time.monotonic() + 30
        while any(consumer.position(p) < ends[p] for p in partitions) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    counts[record.key.decode()] = int(record.value.decode())
        return counts
    finally:
        consumer.close()


def ready_status(port: int, path: str = "/ready") -> int | None:
    """The HTTP status of GET `path` on the application's READY_PORT; None: nothing listens there."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    except ConnectionRefusedError:
        return None
    finally:
        connection.close()


class App:
    """The example application with one instance id, state directory and readiness file across restarts."""

    def __init__(self, backend: Backend, jar: Path, workdir: Path, topic: str, output: str) -> None:
        self.jar = jar
        self.group = f"streams-{uuid.uuid4().hex[:8]}"
        self.ready_file = workdir / "ready"
        self.ready_port = free_port()
        self.env = {
            "KAFKA_BOOTSTRAP_SERVERS": backend.bootstrap,
            "KAFKA_GROUP_ID": self.group,
            "KAFKA_GROUP_INSTANCE_ID": "orders-0",
            "KAFKA_TOPICS": topic,
            # The largest the backends allow: the restarted JVM must rejoin before its members expire.
            "KAFKA_SESSION_TIMEOUT_MS": "30000",
            "KAFKA_HEARTBEAT_INTERVAL_MS": "500",
            "OUTPUT_TOPIC": output,
            "STATE_DIR": str(workdir / "state"),
            "READY_FILE": str(self.ready_file),
            "READY_PORT": str(self.ready_port),
            "PROGRESS_INTERVAL_MS": "1000",
            "STREAMS_COMMIT_INTERVAL_MS": "500",
        }
        self.runs: list[JavaProcess] = []

    def start(self) -> JavaProcess:
        run = JavaProcess(self.jar, env=self.env, name=f"streams run {len(self.runs) + 1}")
        self.runs.append(run)
        return run

    def running(self, run: JavaProcess) -> dict[str, Any]:
        """Waits for the RUNNING state and its task report; returns the report."""

        def check() -> dict[str, Any] | None:
            if not run.running:
                run.drain()
                raise AppExited(f"the application exited with {run.process.returncode}\n{run.describe()}")
            state, tasks = run.last("state"), run.last("tasks")
            if state is None or state["to"] != "RUNNING" or tasks is None:
                return None
            return tasks if self.ready_file.exists() else None

        result: dict[str, Any] = wait_until(check, WAIT_S, f"RUNNING\n{run.describe()}")
        return result

    def stop(self) -> None:
        for run in self.runs:
            run.stop()


@pytest.fixture
def apps() -> Iterator[list[App]]:
    created: list[App] = []
    yield created
    for app in created:
        app.stop()


def test_the_streams_example_counts_per_key_and_restarts_with_its_state(
    plain_backend: Backend, app_jar: Path, apps: list[App], tmp_path: Path
) -> None:
    backend = plain_backend
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    output = f"{topic}-counts"
    create_topic(backend, topic, PARTITIONS)
    written = produce(backend, topic, 200)
    app = App(backend, app_jar, tmp_path, topic, output)
    apps.append(app)

    first = app.start()
    tasks = app.running(first)
    assert [t["member"] for t in tasks["threads"]] == ["orders-0-1", "orders-0-2"], first.describe()
    owned = sorted(p for t in tasks["threads"] for p in t["partitions"])
    assert owned == sorted(f"{topic}-{p}" for p in range(PARTITIONS))
    wait_until(lambda: latest_counts(backend, output) == dict(written), WAIT_S, f"counts\n{first.describe()}")
    members = describe_group(backend, app.group).members
    assert sorted(m.instance_id or "" for m in members) == ["orders-0-1", "orders-0-2"]
    processed = wait_until(
        lambda: (p := first.last("progress")) and p["processed_total"] == 200 and p, 30, "progress"
    )
    assert processed["restored"] in ({}, {STORE: 0}), "a new store restores nothing"

    held = first.last("tasks")  # after any follow-up rebalance of the first start
    assert held is not None
    assert first.stop() == 143, "SIGTERM: the JVM's exit code once its shutdown hook has closed the instance"
    stopped = first.last("stopped")
    assert stopped is not None and stopped["exit_code"] == 0 and stopped["closed"], first.describe()
    assert not app.ready_file.exists()
    members = describe_group(backend, app.group).members
    assert sorted(m.instance_id or "" for m in members) == ["orders-0-1", "orders-0-2"], "no LeaveGroup"

    written += produce(backend, topic, 100, start=200)
    second = app.start()
    again = app.running(second)
    assert again["threads"] == held["threads"], f"the same tasks\n{first.describe()}\n{second.describe()}"
    # RUNNING from here on (one rebalance, asserted below): what an httpGet readiness probe finds.
    assert ready_status(app.ready_port) == 200, second.describe()
    wait_until(
        lambda: latest_counts(backend, output) == dict(written), WAIT_S, f"counts\n{second.describe()}"
    )
    progress = wait_until(
        lambda: (p := second.last("progress")) and p["processed_total"] == 100 and p, 30, "progress"
    )
    assert sum(progress["restored"].values()) == 0, "the checkpointed store restores nothing"
    assert progress["rebalances"] == 1, f"only the start's own REBALANCING state\n{second.describe()}"
    assert second.last("tasks") == again
    assert not second.of("restore_started") or all(
        e["start_offset"] == e["end_offset"] for e in second.of("restore_started")
    )


@pytest.mark.parametrize("kind", [KAFKA, STATICFLEET])
def test_the_streams_example_logs_in_with_scram_over_tls(
    kind: str,
    conformance_run: ConformanceRun,
    app_jar: Path,
    apps: list[App],
    tmp_path: Path,
) -> None:
    """KAFKA_SECURITY_PROTOCOL=SASL_SSL, the SCRAM user from KAFKA_SASL_* and the CA from
    KAFKA_SSL_CA_LOCATION, as the operator injects them: the application reaches RUNNING and counts."""
    backend = conformance_run.loop.run_until_complete(conformance_run.pool.shared(kind, SECURED))
    assert backend.ca_file is not None
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    create_topic(backend, topic, PARTITIONS)  # on the PLAINTEXT listener, whose ANONYMOUS is a super user
    written = produce(backend, topic, 50)
    app = App(backend, app_jar, tmp_path, topic, f"{topic}-counts")
    apps.append(app)
    app.env.update(
        {
            "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{backend.listener_ports[sec.SASL_SSL]}",
            "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "KAFKA_SASL_USERNAME": "admin",
            "KAFKA_SASL_PASSWORD": "admin-secret",
            "KAFKA_SSL_CA_LOCATION": str(backend.ca_file),
        }
    )
    run = app.start()
    app.running(run)
    wait_until(lambda: latest_counts(backend, f"{topic}-counts") == dict(written), WAIT_S, run.describe())


@pytest.mark.parametrize("kind", [KAFKA, STATICFLEET])
def test_the_streams_example_runs_on_exactly_the_acls_the_operator_grants_a_streams_fleet(
    kind: str,
    conformance_run: ConformanceRun,
    app_jar: Path,
    apps: list[App],
    tmp_path: Path,
) -> None:
    """A user of its own with only what fleet_acls grants a fleet with `kafka.access` (READ on the group
    and the input, WRITE on the output, the internal-topic operations on `<group id>-`), as the operator
    provisions it: the application creates its changelog, reaches RUNNING and counts; and without
    `internalTopics` it cannot create the changelog."""
    from staticfleet.admin import GroupAdmin, KafkaConnection
    from staticfleet.kube.access import fleet_acls
    from staticfleet.kube.spec import parse_group

    backend = conformance_run.loop.run_until_complete(conformance_run.pool.shared(kind, SECURED))
    assert backend.ca_file is not None
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    output = f"{topic}-counts"
    create_topic(backend, topic, PARTITIONS)  # on the PLAINTEXT listener, whose ANONYMOUS is a super user
    create_topic(backend, output, PARTITIONS)  # output topics exist before their writers, as on a cluster
    written = produce(backend, topic, 50)
    bootstrap = f"127.0.0.1:{backend.listener_ports[sec.SASL_SSL]}"

    def provisioned(app: App, access: dict[str, Any]) -> None:
        """The fleet's user, password and ACLs, made by the super user; the app logs in as it."""
        body = {
            "metadata": {"name": "counts", "namespace": "shop", "uid": "u"},
            "spec": {"groupId": app.group, "topics": [topic], "kafka": {"access": access}, "template": {}},
        }
        user, password = f"staticfleet.shop.{app.group}", uuid.uuid4().hex
        connection = KafkaConnection(
            bootstrap, security_protocol="SASL_SSL", sasl_mechanism=sec.SCRAM_SHA_512,
            sasl_username="admin", sasl_password="admin-secret", ssl_cafile=str(backend.ca_file),
        )  # fmt: skip
        with GroupAdmin(connection) as admin:
            admin.upsert_scram(user, sec.SCRAM_SHA_512, password)
            admin.create_acls(fleet_acls(parse_group(body), f"User:{user}"))
        app.env.update(
            {
                "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
                "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
                "KAFKA_SASL_MECHANISM": sec.SCRAM_SHA_512,
                "KAFKA_SASL_USERNAME": user,
                "KAFKA_SASL_PASSWORD": password,
                "KAFKA_SSL_CA_LOCATION": str(backend.ca_file),
            }
        )

    streams = App(backend, app_jar, tmp_path / "streams", topic, output)
    apps.append(streams)
    provisioned(streams, {"outputTopics": [output], "internalTopics": True})
    run = streams.start()
    streams.running(run)
    wait_until(lambda: latest_counts(backend, output) == dict(written), WAIT_S, run.describe())

    consumer_only = App(backend, app_jar, tmp_path / "consumer-only", topic, output)
    apps.append(consumer_only)
    provisioned(consumer_only, {"outputTopics": [output]})
    refused = consumer_only.start()
    wait_until(lambda: not refused.running, WAIT_S, f"the application to stop\n{refused.describe()}")
    refused.drain()
    fatal = refused.last("fatal")
    assert fatal is not None and "TopicAuthorizationException" in json.dumps(fatal), refused.describe()


CONTRACT = {"KAFKA_BOOTSTRAP_SERVERS": "127.0.0.1:1", "KAFKA_GROUP_ID": "g", "KAFKA_TOPICS": "t"}


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "environment variable KAFKA_BOOTSTRAP_SERVERS is not set"),
        (CONTRACT, "environment variable KAFKA_GROUP_INSTANCE_ID is not set"),
        (
            {**CONTRACT, "KAFKA_GROUP_INSTANCE_ID": "p-0", "KAFKA_SECURITY_PROTOCOL": "SASL_SSL"},
            "KAFKA_SECURITY_PROTOCOL is SASL_SSL but KAFKA_SASL_MECHANISM is not set",
        ),
        (
            {**CONTRACT, "KAFKA_GROUP_INSTANCE_ID": "p-0", "READY_PORT": "8080x"},
            "READY_PORT must be a port number from 1 to 65535, not '8080x'",
        ),
        (
            {**CONTRACT, "KAFKA_GROUP_INSTANCE_ID": "p-0", "READY_PORT": "65536"},
            "READY_PORT must be a port number from 1 to 65535, not '65536'",
        ),
    ],
)
def test_the_streams_example_names_a_setting_it_cannot_use_and_exits_2(
    app_jar: Path, env: dict[str, str], message: str
) -> None:
    cleared = {name: "" for name in (*CONTRACT, "KAFKA_GROUP_INSTANCE_ID", "READY_PORT")}  # the tests' env
    run = JavaProcess(app_jar, env={**cleared, **env}, name="streams")
    run.drain(timeout=60)
    assert run.process.returncode == 2, run.describe()
    assert [e["message"] for e in run.of("config_error")] == [message], run.describe()


def test_the_streams_example_answers_503_on_ready_port_until_it_is_running(
    app_jar: Path, tmp_path: Path
) -> None:
    """No broker answers (CONTRACT's bootstrap), so the instance cannot be RUNNING: GET /ready says 503
    from the start, and any other path 404. (200 once RUNNING: the restart test above.)"""
    port = free_port()
    env = {
        **CONTRACT,
        "KAFKA_GROUP_INSTANCE_ID": "p-0",
        "STATE_DIR": str(tmp_path / "state"),
        "READY_FILE": str(tmp_path / "ready"),
        "READY_PORT": str(port),
    }
    run = JavaProcess(app_jar, env=env, name="streams")
    try:

        def answered() -> int | None:
            if not run.running:
                run.drain()
                raise AppExited(f"the application exited with {run.process.returncode}\n{run.describe()}")
            return ready_status(port)

        assert wait_until(answered, 60, f"an answer on READY_PORT\n{run.describe()}") == 503
        assert ready_status(port, "/") == ready_status(port, "/ready/x") == 404
        assert ready_status(port) == 503 and not (tmp_path / "ready").exists(), run.describe()
    finally:
        run.stop()


def test_exactly_once_v2_stops_at_start_on_the_embedded_coordinator_with_the_reason(
    conformance_run: ConformanceRun, app_jar: Path, apps: list[App], tmp_path: Path
) -> None:
    """The coordinator serves no transactions: FindCoordinator for the producers' transactional ids is
    INVALID_REQUEST, which the producer does not retry, so the application stops at its first rebalance
    with the reason rather than waiting for a transaction coordinator forever."""
    backend = conformance_run.shared_backend(STATICFLEET)
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    create_topic(backend, topic, PARTITIONS)
    app = App(backend, app_jar, tmp_path, topic, f"{topic}-counts")
    apps.append(app)
    app.env["STREAMS_PROCESSING_GUARANTEE"] = "exactly_once_v2"
    run = app.start()
    wait_until(lambda: not run.running, WAIT_S, f"the application to stop\n{run.describe()}")
    run.drain()
    assert run.process.returncode == 1, run.describe()
    fatal = run.last("fatal")
    assert fatal is not None, run.describe()
    assert fatal["message"].startswith("Error encountered trying to initialize transactions"), fatal
    assert "Could not find a coordinator with type TRANSACTION" in fatal["cause"], fatal
    assert "transactions (exactly-once) are not supported" in fatal["cause"], fatal
    assert run.last("tasks") is None, "it never ran a task"
