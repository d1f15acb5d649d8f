"""The admin path against the embedded coordinator and against Apache Kafka: the same calls, the same
answers (except for staticfleet's pre-registration config, which only staticfleet accepts)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from kio.schema.errors import ErrorCode

from conformance.backends import Backend
from e2e.localcluster.ports import closed_port
from staticfleet.admin import (
    ConfigRejected,
    CoordinatorUnreachable,
    GroupAdmin,
    GroupDescription,
    GroupNotFound,
    KafkaConnection,
    KafkaErrorResponse,
    lag_summary,
)
from staticfleet.coordinator import EXPECTED_INSTANCE_IDS
from staticfleet.kube.join_hold import release_when_joined

from .conftest import PARTITIONS, StaticConsumer, create_topic, repo_root, unique, wait_for

STABLE_TIMEOUT_S = 60.0

INVALID_CONFIG, UNKNOWN_MEMBER_ID = ErrorCode.invalid_config, ErrorCode.unknown_member_id
INCONSISTENT_GROUP_PROTOCOL = ErrorCode.inconsistent_group_protocol


def stable_group(admin: GroupAdmin, group: str, size: int) -> GroupDescription:
    def probe() -> GroupDescription | None:
        found = described_or_none(admin, group)
        if found is None:
            return None
        complete = all(m.partitions is not None for m in found.members)
        return found if found.state == "Stable" and len(found.members) == size and complete else None

    described: GroupDescription = wait_for(
        probe, STABLE_TIMEOUT_S, f"group {group} Stable with {size} members"
    )
    return described


def described_or_none(admin: GroupAdmin, group: str) -> GroupDescription | None:
    try:
        return admin.describe_group(group)
    except GroupNotFound:
        return None


def assigned(described: GroupDescription, topic: str) -> list[int]:
    """Every partition of `topic` the group's members hold, in order."""
    return sorted(p for m in described.members for p in (m.partitions or {}).get(topic, []))


def fleet(cluster: Backend, consumers: list[StaticConsumer], size: int) -> tuple[str, str]:
    group, topic = unique("admin-group"), unique("admin-topic")
    create_topic(cluster.bootstrap, topic)
    for i in range(size):
        consumers.append(StaticConsumer(cluster.bootstrap, group, f"{group}-{i}", topic))
    return group, topic


def test_describe_shows_static_members_with_their_decoded_partitions(
    cluster: Backend, consumers: list[StaticConsumer]
) -> None:
    group, topic = fleet(cluster, consumers, 2)
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        described = stable_group(admin, group, 2)
        node = admin.find_coordinator(group)
    assert described.protocol_type == "consumer"
    assert described.protocol == "range"
    assert [m.instance_id for m in described.members] == [f"{group}-0", f"{group}-1"]
    assert assigned(described, topic) == list(range(PARTITIONS))
    assert described.coordinator.address == node.address == cluster.bootstrap


def test_members_are_removed_by_instance_id_and_unknown_ones_are_already_gone(
    cluster: Backend, consumers: list[StaticConsumer]
) -> None:
    group, _ = fleet(cluster, consumers, 2)
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        stable_group(admin, group, 2)
        consumers.pop().close()  # like a pod that is gone: no LeaveGroup, the member stays
        assert f"{group}-1" in admin.describe_group(group).instance_ids
        report = admin.remove_members(group, [f"{group}-1", f"{group}-ghost"], reason="test")
        assert [(r.instance_id, r.error_code) for r in report.results] == [
            (f"{group}-1", 0),
            (f"{group}-ghost", UNKNOWN_MEMBER_ID),
        ]
        assert report.ok and report.removed == (f"{group}-1",) and report.already_gone == (f"{group}-ghost",)
        remaining = stable_group(admin, group, 1)
        assert remaining.instance_ids == {f"{group}-0"}
        again = admin.remove_members(group, [f"{group}-1"])
        assert again.ok and again.already_gone == (f"{group}-1",)


def test_an_unknown_group_is_reported_as_not_found(cluster: Backend) -> None:
    with (
        GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin,
        pytest.raises(GroupNotFound, match="does not exist"),
    ):
        admin.describe_group(unique("nobody"))


def test_missing_topics_are_named_and_asking_creates_none(cluster: Backend) -> None:
    present, absent = unique("present"), unique("absent")
    create_topic(cluster.bootstrap, present)
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        assert admin.missing_topics([absent, present]) == [absent]
        assert admin.missing_topics([absent]) == [absent]  # still missing: the first look created nothing
        assert admin.missing_topics([present]) == []


def test_removing_from_an_unknown_group_finds_every_member_already_gone(cluster: Backend) -> None:
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        report = admin.remove_members(unique("nobody"), ["a", "b"])
    assert report.ok and report.already_gone == ("a", "b")


def test_pre_registration_is_accepted_by_staticfleet(staticfleet_cluster: Backend) -> None:
    group = unique("prereg")
    with GroupAdmin(KafkaConnection(staticfleet_cluster.bootstrap)) as admin:
        admin.set_group_config(group, EXPECTED_INSTANCE_IDS, "x-0,x-1,x-2")
        assert admin.describe_group_configs(group) == {EXPECTED_INSTANCE_IDS: "x-0,x-1,x-2"}
        admin.set_group_config(group, EXPECTED_INSTANCE_IDS, None)
        assert admin.describe_group_configs(group) == {}
        with pytest.raises(ConfigRejected) as rejected:
            admin.set_group_config(group, "staticfleet.no.such.key", "1")
        # A value refused is not the key refused: the next value is asked for.
        with pytest.raises(ConfigRejected, match="empty instance id"):
            admin.set_group_config(group, EXPECTED_INSTANCE_IDS, "x-0,,x-1")
        admin.set_group_config(group, EXPECTED_INSTANCE_IDS, "x-0")
        assert admin.describe_group_configs(group) == {EXPECTED_INSTANCE_IDS: "x-0"}
    assert rejected.value.code == INVALID_CONFIG


def test_pre_registration_is_rejected_by_apache_kafka_and_not_asked_again_on_the_connection(
    kafka_cluster: Backend,
) -> None:
    group = unique("prereg")
    with GroupAdmin(KafkaConnection(kafka_cluster.bootstrap)) as admin:
        with pytest.raises(ConfigRejected) as rejected:
            admin.set_group_config(group, EXPECTED_INSTANCE_IDS, "x-0,x-1")
        assert rejected.value.code == INVALID_CONFIG
        assert rejected.value.name == "INVALID_CONFIG"
        assert EXPECTED_INSTANCE_IDS in str(rejected.value) and "refused before" not in str(rejected.value)
        # The next scale-up's pre-registration, another group's: refused as Kafka refused the key.
        with pytest.raises(ConfigRejected) as again:
            admin.set_group_config(unique("prereg"), EXPECTED_INSTANCE_IDS, "y-0")
        assert again.value.code == INVALID_CONFIG and "refused before" in str(again.value)
        # A withdrawal (after a held join phase) deletes a config Kafka never had: it answers NONE.
        admin.set_group_config(group, EXPECTED_INSTANCE_IDS, None)


def test_a_pending_member_holds_the_join_phase_until_every_instance_has_joined(
    cluster: Backend, consumers: list[StaticConsumer]
) -> None:
    group, topic = fleet(cluster, consumers, 2)
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        described = stable_group(admin, group, 2)
        held_by = admin.hold_join_phase(
            group,
            protocol_type=described.protocol_type,
            protocol=described.protocol,
            session_timeout_ms=60_000,
        )
        consumers.append(StaticConsumer(cluster.bootstrap, group, f"{group}-2", topic))
        expected = (f"{group}-0", f"{group}-1", f"{group}-2")
        wait_for(
            lambda: set(expected) <= admin.describe_group(group).instance_ids, STABLE_TIMEOUT_S, "the join"
        )
        # The members heartbeat every 500 ms: unheld, the join phase would be over well within this window.
        window_end = time.monotonic() + 2.5
        while time.monotonic() < window_end:
            assert admin.describe_group(group).state == "PreparingRebalance"
            time.sleep(0.25)
        assert release_when_joined(admin, group, held_by, expected, bound_s=10.0)
        complete = stable_group(admin, group, 3)
        assert assigned(complete, topic) == list(range(PARTITIONS))
        assert not admin.release_join_phase(group, held_by)  # gone already: nothing to release


def test_a_hold_is_refused_with_a_protocol_the_members_do_not_speak(
    cluster: Backend, consumers: list[StaticConsumer]
) -> None:
    group, _ = fleet(cluster, consumers, 1)
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        stable_group(admin, group, 1)
        with pytest.raises(KafkaErrorResponse) as refused:
            admin.hold_join_phase(
                group, protocol_type="consumer", protocol="no-such-assignor", session_timeout_ms=60_000
            )
    assert refused.value.code == INCONSISTENT_GROUP_PROTOCOL


def test_a_hold_on_a_group_that_does_not_exist_yet_creates_it_and_is_released(cluster: Backend) -> None:
    group = unique("held")
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        held_by = admin.hold_join_phase(
            group, protocol_type="consumer", protocol="range", session_timeout_ms=60_000
        )
        assert described_once_committed(admin, group).members == ()
        assert admin.release_join_phase(group, held_by)


def described_once_committed(admin: GroupAdmin, group: str) -> GroupDescription:
    """Apache Kafka answers the pending member's JoinGroup before the new group's metadata record is
    committed, and DescribeGroups reads committed state: for a moment the group is not found."""

    described: GroupDescription = wait_for(
        lambda: described_or_none(admin, group), STABLE_TIMEOUT_S, f"group {group} described"
    )
    return described


def test_an_unreachable_cluster_says_so() -> None:
    with closed_port() as port:
        unreachable = f"coordinator at 127.0.0.1:{port} unreachable"
        with (
            GroupAdmin(KafkaConnection(f"127.0.0.1:{port}"), timeout_s=1.0) as admin,
            pytest.raises(CoordinatorUnreachable, match=unreachable),
        ):
            admin.describe_group("any")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "staticfleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=repo_root(),
        check=False,
    )


def test_members_remove_command_reports_each_member_and_exits_zero_when_all_are_gone(
    cluster: Backend, consumers: list[StaticConsumer]
) -> None:
    group, topic = fleet(cluster, consumers, 2)
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        stable_group(admin, group, 2)
        consumers.pop().close()
        done = cli(
            "members", "remove", "--bootstrap-server", cluster.bootstrap, "--group", group,
            "--instance-id", f"{group}-1", "--instance-id", f"{group}-9",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].split() == ["INSTANCE-ID", "RESULT"]
        assert lines[1].split() == [f"{group}-1", "removed"]
        assert lines[2].split(None, 1) == [f"{group}-9", "already gone"]
        stable_group(admin, group, 1)
    described = cli(
        "group", "describe", "--bootstrap-server", cluster.bootstrap, "--group", group, "-o", "json"
    )
    assert described.returncode == 0, described.stderr
    data = json.loads(described.stdout)
    assert data["state"] == "Stable"
    assert [m["instanceId"] for m in data["members"]] == [f"{group}-0"]
    assert sorted(data["members"][0]["partitions"][topic]) == list(range(PARTITIONS))
    table = cli("group", "describe", "--bootstrap-server", cluster.bootstrap, "--group", group)
    assert table.returncode == 0 and "STATE        Stable" in table.stdout and f"{group}-0" in table.stdout


def test_commands_exit_non_zero_with_a_clear_message_when_the_group_is_unknown(
    staticfleet_cluster: Backend,
) -> None:
    done = cli(
        "group", "describe", "--bootstrap-server", staticfleet_cluster.bootstrap, "--group", "nobody-here"
    )
    assert done.returncode == 1
    assert "group nobody-here does not exist" in done.stderr


def test_partition_offsets_report_committed_and_log_end_offsets_and_the_lag(cluster: Backend) -> None:
    from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    group, topic = unique("lag-group"), unique("lag-topic")
    create_topic(cluster.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap)
    try:
        for partition, count in ((0, 5), (1, 3), (2, 8)):
            for i in range(count):
                producer.send(topic, value=f"m{i}".encode(), partition=partition)
        producer.flush()
    finally:
        producer.close()
    committer = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        committer.alter_group_offsets(
            group,
            {
                TopicPartition(topic, 0): OffsetAndMetadata(5, "", -1),
                TopicPartition(topic, 2): OffsetAndMetadata(2, "", -1),
            },
        )
    finally:
        committer.close()
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        rows = admin.partition_offsets(group, [topic])
    assert [(r.partition, r.committed, r.log_end, r.lag) for r in rows] == [
        (0, 5, 5, 0),
        (1, None, 3, None),
        (2, 2, 8, 6),
        (3, None, 0, None),
    ]
    summary = lag_summary(rows)
    assert (summary.total, summary.uncommitted) == (6, 2)
    assert summary.worst is not None and summary.worst.partition == 2


def test_members_remove_with_members_per_pod_removes_every_thread_member_of_each_process_in_one_batch(
    cluster: Backend, consumers: list[StaticConsumer]
) -> None:
    group, topic = unique("streams-group"), unique("streams-topic")
    create_topic(cluster.bootstrap, topic)
    for instance in ("pod-0-1", "pod-0-2", "pod-1-1", "pod-1-2"):  # two processes of two threads each
        consumers.append(StaticConsumer(cluster.bootstrap, group, instance, topic))
    with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:
        stable_group(admin, group, 4)
        for consumer in consumers[2:]:
            consumer.close()
        done = cli(
            "members", "remove", "--bootstrap-server", cluster.bootstrap, "--group", group,
            "--instance-id", "pod-1", "--members-per-pod", "2",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert [line.split() for line in done.stdout.splitlines()[1:]] == [
            ["pod-1-1", "removed"],
            ["pod-1-2", "removed"],
        ]
        assert [m.instance_id for m in stable_group(admin, group, 2).members] == ["pod-0-1", "pod-0-2"]
    refused = cli(
        "members", "remove", "--bootstrap-server", cluster.bootstrap, "--group", group,
        "--instance-id", "pod-1", "--members-per-pod", "0",
    )  # fmt: skip
    assert refused.returncode == 2 and "must be a number from 1 to 64" in refused.stderr


def test_a_consumer_protocol_group_is_described_through_consumer_group_describe(cluster: Backend) -> None:
    from confluent_kafka import Consumer

    group, topic = unique("admin-modern"), unique("admin-topic")
    create_topic(cluster.bootstrap, topic)
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": group,
            "group.instance.id": f"{group}-0",
            "group.protocol": "consumer",
        }
    )
    consumer.subscribe([topic])
    try:
        with GroupAdmin(KafkaConnection(cluster.bootstrap)) as admin:

            def probe() -> GroupDescription | None:
                consumer.poll(0.1)
                try:
                    found = admin.describe_consumer_group(group)
                except GroupNotFound:
                    return None
                # A topic created a moment ago may reach Kafka's group coordinator after the member's
                # first heartbeat: the group is Stable with nothing assigned until its next target.
                whole = found.state == "Stable" and assigned(found, topic) == list(range(PARTITIONS))
                return found if whole else None

            described: GroupDescription = wait_for(probe, STABLE_TIMEOUT_S, f"{group} Stable, all assigned")
            with pytest.raises(GroupNotFound, match="does not exist"):
                admin.describe_consumer_group(unique("nobody"))
        assert (described.protocol_type, described.protocol) == ("consumer", "uniform")
        assert [m.instance_id for m in described.members] == [f"{group}-0"]
        assert [m.member_epoch for m in described.members] == [described.group_epoch]
    finally:
        consumer.close()


def test_importing_the_admin_path_loads_kafka_python_before_any_thread_uses_it() -> None:
    """Two threads that import kafka-python's modules for the first time at once (two fleets' first
    passes) can deadlock in its circular imports, and Python then fails one of the imports for good: the
    admin path loads them as it is imported, in a fresh process as the operator starts."""
    modules = ("kafka.admin", "kafka.errors", "kafka.protocol.admin", "kafka.protocol.consumer")
    code = f"import sys, staticfleet.admin; print([m for m in {modules!r} if m not in sys.modules])"
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=repo_root(), check=True
    )
    assert found.stdout.strip() == "[]", found.stderr
