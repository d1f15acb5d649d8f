"""The fleet benchmark's Kafka Streams fleets (`bench/fleet_ops.py --app streams`), their pure parts: the
members a settled fleet has, the fleets' resources built from examples/streams.yaml, the options' defaults,
the records restored and follow-ups counted from the logs, and the published tables."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench import fleet_streams
from bench.fleet_kinds import EMBEDDED, KAFKA, KINDS, STATICFLEET_COOPERATIVE
from bench.fleet_ops import NAME, parse_args
from bench.fleet_report import (
    DETAIL_HEADERS,
    RESTORED,
    ROLLING_RESTART,
    SCALE_DOWN,
    Sample,
    comparison_rows,
    detail_headers,
    detail_rows,
    summarize,
)
from e2e.streams_logs import History, Rebalance, kafka_history
from e2e.tests.operator.harness import fleet_manifest
from examples.demo.fleet import PLAIN_DYNAMIC, PLAIN_STATIC, STATICFLEET, plain_workload

RUN = ("java", "-Xmx256m", "-jar", "/cache/streams-example.jar")
STICKY = "org.apache.kafka.streams.processor.assignment.assignors.StickyTaskAssignor"


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container["env"]}


def test_a_settled_streams_fleet_has_each_stream_threads_member_of_every_pod() -> None:
    assert KINDS[STATICFLEET].expected("fleet", 2, per_pod=2) == frozenset(
        {"fleet-0-1", "fleet-0-2", "fleet-1-1", "fleet-1-2"}
    )
    assert KINDS[PLAIN_STATIC].expected("fleet", 1, per_pod=2) == frozenset({"fleet-0-1", "fleet-0-2"})
    assert KINDS[PLAIN_DYNAMIC].expected("fleet", 3, per_pod=2) == 6  # dynamic members by number
    assert KINDS[STATICFLEET].expected("fleet", 2) == frozenset({"fleet-0", "fleet-1"})  # one a pod


def test_every_kind_runs_the_examples_pod_with_the_same_assignor_heartbeat_and_state_volume() -> None:
    topic = "ns-topic"
    built = {}
    for kind in fleet_streams.KINDS:
        fields = fleet_streams.fleet_fields(KINDS[kind], RUN, fleet_streams.output_topic(topic))
        resource = fleet_manifest(NAME, 6, "127.0.0.1:9092", topic, sessionTimeoutMs=45_000, **fields)
        assert resource["spec"]["membersPerPod"] == 2
        # The plain fleets' StatefulSet, as the benchmark applies it (the operator builds the same).
        (_, statefulset) = plain_workload(resource, "ns", "127.0.0.1:9092")
        built[kind] = statefulset["spec"]
    for kind, spec in built.items():
        container = spec["template"]["spec"]["containers"][0]
        env = env_of(container)
        assert container["command"] == list(RUN), kind
        assert env["KAFKA_HEARTBEAT_INTERVAL_MS"] == str(fleet_streams.HEARTBEAT_MS) == "250"
        assert env["KAFKA_SESSION_TIMEOUT_MS"] == "45000"
        assert env["STREAMS_TASK_ASSIGNOR_CLASS"] == STICKY
        assert env["STREAMS_NUM_STREAM_THREADS"] == "2"
        assert env["OUTPUT_TOPIC"] == "ns-topic-counts"
        assert env["KAFKA_MEMBERSHIP"] == ("dynamic" if kind == PLAIN_DYNAMIC else "static")
        assert list(env).count("OUTPUT_TOPIC") == 1
        # the store's directory on the pod's claim, kept across the pod's restarts
        assert env["STATE_DIR"] == "/state"
        assert {"name": "state", "mountPath": "/state"} in container["volumeMounts"]
        assert [t["metadata"]["name"] for t in spec["volumeClaimTemplates"]] == ["state"]
        assert spec["persistentVolumeClaimRetentionPolicy"]["whenScaled"] == "Retain"
        # pods of the pod runner share this machine's ports: each is probed by its own ready file instead
        assert container["readinessProbe"] == {
            "exec": {"command": ["test", "-f", "/scratch/ready"]},
            "periodSeconds": 1,
        }
        assert env["READY_FILE"] == "/scratch/ready" and "READY_PORT" not in env
        assert {"name": "scratch", "mountPath": "/scratch"} in container["volumeMounts"]
        assert {"name": "scratch", "emptyDir": {}} in spec["template"]["spec"]["volumes"]
        assert "ports" not in container
    # examples/streams.yaml itself is left as it is
    example = fleet_streams.example()["spec"]["template"]["spec"]["containers"][0]
    assert "command" not in example and example["readinessProbe"]["periodSeconds"] == 2
    assert "READY_PORT" in env_of(example) and "exec" not in example["readinessProbe"]


def test_the_example_is_probed_over_http_on_the_port_its_application_serves() -> None:
    """An httpGet probe (the kubelet's own request) on the named port, which READY_PORT opens."""
    (container,) = fleet_streams.example()["spec"]["template"]["spec"]["containers"]
    (port,) = container["ports"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": port["name"]}
    assert env_of(container)["READY_PORT"] == str(port["containerPort"])
    assert "READY_FILE" not in env_of(container)  # the image's own (/tmp/ready) serves no probe here


def test_a_pod_runs_the_jar_on_the_jvm_the_conformance_suite_gives_it() -> None:
    command = fleet_streams.java_command("/usr/bin/java", Path("/cache/app.jar"))
    assert command[0] == "/usr/bin/java" and command[-2:] == ["-jar", "/cache/app.jar"]
    assert "-Xmx256m" in command and "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn" in command


def test_the_options_take_the_streams_defaults_and_the_consumers_stay_as_they_were() -> None:
    streams = parse_args(["--app", "streams"])
    assert (streams.replicas, streams.partitions, streams.session_timeout_ms) == (6, 12, 45_000)
    assert streams.kinds == [STATICFLEET, PLAIN_STATIC, PLAIN_DYNAMIC] and streams.records == 24_000
    assert parse_args(["--app", "streams", "--replicas", "2"]).partitions == 4  # a task per stream thread
    consumer = parse_args([])
    assert consumer.app == "consumer"
    assert (consumer.replicas, consumer.partitions, consumer.session_timeout_ms) == (20, 40, 30_000)
    assert consumer.kinds == list(KINDS)


@pytest.mark.parametrize(
    "argv",
    [
        ["--app", "streams", "--kinds", STATICFLEET_COOPERATIVE],  # Kafka Streams has its own assignor
        ["--app", "streams", "--fleet-spec", 'staticfleet={"heartbeatIntervalMs": 1000}'],
        ["--kinds", "nothing"],
    ],
)
def test_options_a_streams_fleet_cannot_take_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)


def app_log(*lines: dict[str, Any]) -> str:
    return "\n".join(json.dumps(line) for line in lines)


def test_records_restored_sum_every_store_of_every_pod_the_fleet_had_from_the_operations_start(
    tmp_path: Path,
) -> None:
    def pod_log(namespace: str, pod: str, text: str) -> None:
        path = tmp_path / "pods" / namespace / pod / "streams.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    pod_log(
        "ns",
        "fleet-0",
        "--- 2026-11-29T08:00:00.000Z pod uid-a restartCount 0\n"
        + app_log(
            {"ts": 90.0, "event": "restore_ended", "store": "order-counts", "partition": 0, "restored": 500},
            {"ts": 101.0, "event": "restore_ended", "store": "order-counts", "partition": 1, "restored": 40},
        )
        + "\n[kafka-streams] WARN a line of Kafka's own, not JSON\n"
        + "--- 2026-11-29T08:01:00.000Z pod uid-b restartCount 0\n"
        + app_log(
            {"ts": 120.0, "event": "restore_suspended", "store": "other", "partition": 3, "restored": 2}
        ),
    )
    pod_log("ns", "fleet-1", app_log({"ts": 130.0, "event": "progress", "restored": {"order-counts": 9}}))
    pod_log(
        "another", "fleet-0", app_log({"ts": 130.0, "event": "restore_ended", "store": "s", "restored": 1000})
    )
    assert fleet_streams.restored_since(tmp_path, "ns", 100.0) == 42
    assert fleet_streams.restored_since(tmp_path, "ns", 0.0) == 542
    assert fleet_streams.restored_since(tmp_path, "ns", 200.0) == 0
    assert fleet_streams.restored_since(tmp_path, "absent", 0.0) == 0


def rebalance(generation: int, stable_at: float, follow_up: bool) -> Rebalance:
    return Rebalance(generation, stable_at - 1, stable_at, "trigger", follow_up, 12)


def test_follow_ups_are_the_rejoins_that_completed_within_the_window() -> None:
    history = History(
        [
            rebalance(3, 99.0, True),  # before the operation
            rebalance(4, 101.0, False),
            rebalance(5, 102.0, True),
            rebalance(6, 130.0, True),  # after the settle period
        ],
        None,
    )
    assert fleet_streams.follow_ups(history, 100.0, 120.0) == 1
    assert fleet_streams.follow_ups(History([], None), 0.0, 1e12) == 0


def test_the_local_brokers_log_reads_as_the_kind_brokers_with_its_local_time() -> None:
    """conformance/kafka/log4j2.xml writes `[%d]`: local time with a comma before the milliseconds."""
    source = "(org.apache.kafka.coordinator.group.GroupMetadataManager)"
    prefix = "INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0]"
    log = "\n".join(
        [
            f"[2026-11-29 08:00:01,250] {prefix} Preparing to rebalance group g.fleet in state "
            "PreparingRebalance with old generation 3 (reason: Leader g.fleet-1-1-ab re-joining group "
            f"during Stable; client reason: need to revoke partitions and re-join). {source}",
            f"[2026-11-29 08:00:01,500] {prefix} Stabilized group g.fleet generation 4 with 12 members. "
            + source,
        ]
    )
    (found,) = kafka_history(log, "g.fleet").rebalances
    assert found.generation == 4 and found.follow_up and found.members == 12
    assert found.stable_at == pytest.approx(datetime(2026, 11, 29, 8, 0, 1, 500_000).timestamp())


def sample(kind: str, seconds: float, rebalances: int, restored: int, **kw: Any) -> Sample:
    fields: dict[str, Any] = {"backend": EMBEDDED, "replicas": 6, "operation": SCALE_DOWN, "run": 1,
                              "follow_ups": 0, **kw}  # fmt: skip
    return Sample(
        kind=kind,
        seconds=seconds,
        rebalances=rebalances,
        unstable_seconds=0.5,
        records_restored=restored,
        **fields,
    )


SAMPLES = [
    sample(STATICFLEET, 12.0, 1, 6000),
    sample(PLAIN_STATIC, 60.0, 1, 6000),
    sample(PLAIN_DYNAMIC, 58.0, 2, 4000, follow_ups=1),  # restored fewer: named
    sample(STATICFLEET, 40.0, 0, 0, operation=ROLLING_RESTART),
    sample(PLAIN_STATIC, 41.0, 0, 0, operation=ROLLING_RESTART),
    sample(PLAIN_DYNAMIC, 90.0, 12, 30000, operation=ROLLING_RESTART),
    sample(STATICFLEET, 10.0, 1, 10, backend=KAFKA),
]


def test_the_comparison_shows_records_restored_and_names_a_baseline_that_restored_fewer() -> None:
    summaries = summarize(SAMPLES)
    assert comparison_rows(summaries, EMBEDDED, RESTORED) == [
        ["rolling restart of 6", "0 / 40.0 s / 0", "0 / 41.0 s / 0", "12 / 90.0 s / 30000", "none"],
        [
            "scale 6 → 3",
            "1 / 12.0 s / 6000",
            "1 / 60.0 s / 6000",
            "2 / 58.0 s / 4000",
            "plain dynamic: 2000 fewer records restored",
        ],
    ]
    # Beyond half of one task's store only (here 1000 records of 24000 over 12 partitions): below that, the
    # partitions' sizes decide, not the membership.
    margin = fleet_streams.restored_cost(24_000, 12)
    assert margin.margin == 1000
    assert comparison_rows(summaries, EMBEDDED, margin)[1][-1] == "plain dynamic: 2000 fewer records restored"
    close = summarize([*SAMPLES[:2], sample(PLAIN_DYNAMIC, 58.0, 1, 5100)])
    assert comparison_rows(close, EMBEDDED, margin)[0][-1] == "none"
    assert comparison_rows(close, EMBEDDED, RESTORED)[0][-1] == "plain dynamic: 900 fewer records restored"
    assert detail_headers(RESTORED)[-2] == "records restored"
    rows = detail_rows(summaries, RESTORED)
    assert rows[2] == [
        "embedded", "scale 6 → 3", PLAIN_DYNAMIC, "2 (1 follow-up)", "58.0 (58.0-58.0)", "0.5 (0.5-0.5)",
        "4000", "",
    ]  # fmt: skip
    assert rows[0][3] == "1"  # no follow-up: the count alone


def test_the_consumer_fleets_detailed_table_is_as_it_was() -> None:
    consumer = Sample(EMBEDDED, 20, 1, SCALE_DOWN, STATICFLEET, 1.0, 1, 0.5, stopped_partition_seconds=12.0)
    assert DETAIL_HEADERS[-2] == "partition-s stopped"
    assert detail_rows(summarize([consumer])) == [
        [
            "embedded",
            "scale 20 → 10",
            STATICFLEET,
            "1",
            "1.0 (1.0-1.0)",
            "0.5 (0.5-0.5)",
            "12.0 (12.0-12.0)",
            "",
        ]
    ]


def test_the_published_section_and_readme_block_are_the_streams_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summaries = summarize(SAMPLES)
    body = fleet_streams.doc_body(
        summaries, [EMBEDDED], replicas=6, runs=1, partitions=12, records=24_000, session_timeout_ms=45_000
    )
    assert "N=6 pods" in body and "24000 records" in body and "sessionTimeoutMs 45000" in body
    assert "On the embedded coordinator, one run (rebalances / s to Stable / records restored):" in body
    readme = tmp_path / "README.md"
    consumer_block = "<!-- bench:fleet_ops -->\nconsumer table\n<!-- /bench:fleet_ops -->"
    readme.write_text(
        f"{consumer_block}\n<!-- bench:fleet_ops_streams -->\nold\n<!-- /bench:fleet_ops_streams -->\n"
    )
    monkeypatch.setattr(fleet_streams, "README", readme)
    fleet_streams.publish_readme(
        fleet_streams.readme_body(summaries, EMBEDDED, replicas=6, runs=1, records=24_000, partitions=12)
    )
    text = readme.read_text()
    assert text.startswith(consumer_block) and "old" not in text
    assert "| scale 6 → 3 | 1 / 12.0 s / 6000 |" in text
    assert "one run on the embedded coordinator" in text
