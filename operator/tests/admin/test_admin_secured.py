"""The admin path and its commands against each secured backend (Apache Kafka, and the embedded coordinator
once it has the same settings): SASL_SSL with SCRAM-SHA-512 from a Kafka client properties file, and what a
principal without READ on the group gets when it removes members (Kafka checks READ for LeaveGroup, not
DELETE)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

from conformance.backends import KAFKA, STATICFLEET, Backend, make_backend, staticfleet_supports
from conformance.kafka_broker import GroupSettings
from conformance.security import SASL_SSL, SecurityProfile
from staticfleet.admin import GroupAdmin, GroupDescription, GroupNotFound, KafkaConnection
from staticfleet.admin.client_properties import load_client_properties, with_options

from .conftest import StaticConsumer, create_topic, repo_root, unique, wait_for

SECURED = GroupSettings(
    initial_rebalance_delay_ms=0,
    min_session_timeout_ms=1_000,
    max_session_timeout_ms=300_000,
    security=SecurityProfile(),
)


@pytest.fixture(scope="module", params=[KAFKA, STATICFLEET])
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    if request.param == STATICFLEET and not staticfleet_supports(SECURED):
        pytest.skip("not run: `staticfleet coordinator` has no listener, SASL and ACL settings yet")
    backend = make_backend(request.param, SECURED, tmp_path_factory.mktemp(f"secured-{request.param}"))
    asyncio.run(backend.start())
    yield backend
    backend.stop()


def sasl_ssl(backend: Backend) -> str:
    return f"127.0.0.1:{backend.listener_ports[SASL_SSL]}"


def properties_file(backend: Backend, directory: Path, user: str, password: str) -> Path:
    path = directory / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        f'    username="{user}" password="{password}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={backend.ca_file}\n"
    )
    return path


def librdkafka_security(backend: Backend, user: str, password: str) -> dict[str, Any]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
        "ssl.ca.location": str(backend.ca_file),
    }


def grant(backend: Backend, principal: str, operation: int, group: str) -> None:
    """As User:ANONYMOUS on the PLAINTEXT listener, a super user in this layout."""
    admin = KafkaAdminClient(bootstrap_servers=backend.bootstrap)
    try:
        acl = ACL(
            principal=principal,
            host="*",
            operation=ACLOperation(operation),
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(ResourceType.GROUP, group),
        )
        result = admin.create_acls([acl])
        assert not result["failed"], result
    finally:
        admin.close()


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "staticfleet.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=repo_root(),
        check=False,
        env={**os.environ, **(env or {})},
    )


def stable(admin: GroupAdmin, group: str, size: int) -> GroupDescription:
    def probe() -> GroupDescription | None:
        try:
            found = admin.describe_group(group)
        except GroupNotFound:
            return None
        return found if found.state == "Stable" and len(found.members) == size else None

    described: GroupDescription = wait_for(probe, 60, f"group {group} Stable with {size} members")
    return described


@pytest.fixture
def secured_fleet(secured: Backend, consumers: list[StaticConsumer], tmp_path: Path) -> tuple[str, Path]:
    """Two static confluent-kafka consumers of a new group, logged in as admin over SASL_SSL."""
    group, topic = unique("secured-group"), unique("secured-topic")
    create_topic(secured.bootstrap, topic)
    security = librdkafka_security(secured, "admin", "admin-secret")
    for i in range(2):
        consumers.append(StaticConsumer(sasl_ssl(secured), group, f"{group}-{i}", topic, security))
    return group, properties_file(secured, tmp_path, "admin", "admin-secret")


def test_describe_and_remove_over_sasl_ssl_with_scram_from_a_kafka_properties_file(
    secured: Backend, secured_fleet: tuple[str, Path]
) -> None:
    group, admin_properties = secured_fleet
    with GroupAdmin(
        with_options(KafkaConnection(sasl_ssl(secured)), load_client_properties(admin_properties))
    ) as admin:
        stable(admin, group, 2)
    described = cli(
        "group", "describe", "--bootstrap-server", sasl_ssl(secured),
        "--command-config", str(admin_properties), "--group", group, "-o", "json",
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert sorted(m["instanceId"] for m in json.loads(described.stdout)["members"]) == [
        f"{group}-0",
        f"{group}-1",
    ]
    removed = cli(
        "members", "remove", "--bootstrap-server", sasl_ssl(secured),
        "--command-config", str(admin_properties), "--group", group, "--instance-id", f"{group}-1",
    )  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.splitlines()[1].split() == [f"{group}-1", "removed"]


def test_removal_by_a_principal_without_read_on_the_group_is_refused_and_removes_nothing(
    secured: Backend, secured_fleet: tuple[str, Path], tmp_path: Path
) -> None:
    group, admin_properties = secured_fleet
    grant(secured, "User:bob", ACLOperation.DELETE, group)
    bob = properties_file(secured, tmp_path, "bob", "bob-secret")
    with GroupAdmin(
        with_options(KafkaConnection(sasl_ssl(secured)), load_client_properties(admin_properties))
    ) as admin:
        stable(admin, group, 2)
        refused = cli(
            "members", "remove", "--bootstrap-server", sasl_ssl(secured),
            "--command-config", str(bob), "--group", group, "--instance-id", f"{group}-0",
        )  # fmt: skip
        assert refused.returncode == 1
        assert "GROUP_AUTHORIZATION_FAILED" in refused.stderr
        assert len(admin.describe_group(group).members) == 2


def test_separate_flags_with_the_password_from_the_environment(
    secured: Backend, secured_fleet: tuple[str, Path]
) -> None:
    group, admin_properties = secured_fleet
    grant(secured, "User:alice", ACLOperation.DESCRIBE, group)
    with GroupAdmin(
        with_options(KafkaConnection(sasl_ssl(secured)), load_client_properties(admin_properties))
    ) as admin:
        stable(admin, group, 2)
    described = cli(
        "group", "describe", "--bootstrap-server", sasl_ssl(secured), "--security-protocol", "SASL_SSL",
        "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-username", "alice",
        "--ssl-cafile", str(secured.ca_file), "--group", group,
        env={"KAFKA_SASL_PASSWORD": "alice-secret"},
    )  # fmt: skip
    assert described.returncode == 0, described.stderr
    assert "Stable" in described.stdout


def test_a_wrong_password_is_reported_as_an_authentication_failure(secured: Backend, tmp_path: Path) -> None:
    wrong = properties_file(secured, tmp_path, "alice", "not-her-password")
    done = cli(
        "group", "describe", "--bootstrap-server", sasl_ssl(secured), "--command-config", str(wrong),
        "--group", "any", "--timeout", "10",
    )  # fmt: skip
    assert done.returncode == 1
    assert "refused the SASL login of 'alice' with SCRAM-SHA-512" in done.stderr, done.stderr
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in done.stderr, done.stderr
