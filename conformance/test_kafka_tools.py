"""Kafka's kafka-configs and kafka-acls (from the pinned jars) manage SCRAM users and ACLs over SASL_SSL on
each secured backend, and what they set takes effect: the new user logs in, its ACL lets it join a group,
and after removal both are gone."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from conformance import driver as d
from conformance import security as sec
from conformance.backends import KAFKA, STATICFLEET, Backend, make_backend, staticfleet_supports
from conformance.kafka_tools import client_properties, kafka_acls, kafka_configs
from conformance.scenario import SECURED

SETTLE_S = 10.0


@pytest.fixture(scope="module", params=[KAFKA, STATICFLEET])
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    if request.param == STATICFLEET and not staticfleet_supports(SECURED):
        pytest.skip("not run: `staticfleet coordinator` has no listener, SASL and ACL settings yet")
    backend = make_backend(request.param, SECURED, tmp_path_factory.mktemp(f"tools-{request.param}"))
    asyncio.run(backend.start())
    yield backend
    backend.stop()


async def _login(backend: Backend, user: str, password: str) -> tuple[d.Connection | None, str]:
    conn = await d.Connection.open("127.0.0.1", backend.listener_ports[sec.SASL_PLAINTEXT], name=user)
    try:
        await sec.sasl_login(conn, sec.SCRAM_SHA_512, user, password)
    except sec.SaslLoginFailed as failed:
        await conn.close()
        return None, str(failed.answers[-1].error_message)
    return conn, "ok"


async def login_result(backend: Backend, user: str, password: str, *, want_ok: bool) -> str:
    """Logs in until the outcome is the one wanted (a change reaches Kafka's credential cache shortly after
    the tool returns), bounded; returns the last outcome."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while True:
        conn, outcome = await _login(backend, user, password)
        if conn is not None:
            await conn.close()
        if (outcome == "ok") == want_ok or loop.time() > deadline:
            return outcome
        await asyncio.sleep(0.1)


async def join_as(backend: Backend, user: str, password: str, group: str) -> ErrorCode:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while True:
        conn, outcome = await _login(backend, user, password)
        assert conn is not None, outcome
        try:
            join = d.join_group(9, group, instance_id="tool-0", protocols=(("range", d.subscription("t")),))
            answer = await conn.request(join)
        finally:
            await conn.close()
        if answer.error_code == ErrorCode.none or loop.time() > deadline:
            return ErrorCode(answer.error_code)
        await asyncio.sleep(0.1)


def test_kafka_configs_and_kafka_acls_manage_users_and_acls(secured: Backend, tmp_path: Path) -> None:
    assert secured.ca_file is not None
    bootstrap = f"127.0.0.1:{secured.listener_ports[sec.SASL_SSL]}"
    admin = client_properties(
        tmp_path / "admin.properties", user="admin", password="admin-secret", ca_file=secured.ca_file
    )
    user, group = f"tool-{uuid.uuid4().hex[:8]}", f"tool-group-{uuid.uuid4().hex[:8]}"
    password = "tool-user-secret"
    mine = client_properties(
        tmp_path / "user.properties", user=user, password=password, ca_file=secured.ca_file
    )

    added = kafka_configs(
        bootstrap, admin, "--alter", "--add-config", f"SCRAM-SHA-512=[iterations=8192,password={password}]",
        "--entity-type", "users", "--entity-name", user,
    ).check()  # fmt: skip
    assert f"Completed updating config for user {user}." in added.stdout
    described = kafka_configs(
        bootstrap, admin, "--describe", "--entity-type", "users", "--entity-name", user
    ).check()
    assert (
        f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-512=iterations=8192"
        in described.stdout
    )
    assert asyncio.run(login_result(secured, user, password, want_ok=True)) == "ok"

    denied = kafka_acls(bootstrap, mine, "--list", "--group", group)
    assert denied.returncode != 0 and "ClusterAuthorizationException" in denied.stdout + denied.stderr
    assert asyncio.run(join_as(secured, user, password, group)) == ErrorCode.group_authorization_failed

    created = kafka_acls(
        bootstrap,
        admin,
        "--add",
        "--allow-principal",
        f"User:{user}",
        "--operation",
        "Read",
        "--group",
        group,
    ).check()
    pattern = f"ResourcePattern(resourceType=GROUP, name={group}, patternType=LITERAL)"
    assert f"Adding ACLs for resource `{pattern}`" in created.stdout
    listed = kafka_acls(bootstrap, admin, "--list", "--group", group).check()
    assert f"(principal=User:{user}, host=*, operation=READ, permissionType=ALLOW)" in listed.stdout
    assert asyncio.run(join_as(secured, user, password, group)) == ErrorCode.none

    kafka_acls(
        bootstrap, admin, "--remove", "--force", "--allow-principal", f"User:{user}", "--operation", "Read",
        "--group", group,
    ).check()  # fmt: skip
    assert f"User:{user}" not in kafka_acls(bootstrap, admin, "--list", "--group", group).check().stdout

    kafka_configs(
        bootstrap,
        admin,
        "--alter",
        "--delete-config",
        "SCRAM-SHA-512",
        "--entity-type",
        "users",
        "--entity-name",
        user,
    ).check()
    after = kafka_configs(
        bootstrap, admin, "--describe", "--entity-type", "users", "--entity-name", user
    ).check()
    assert "SCRAM-SHA-512" not in after.stdout
    refused = asyncio.run(login_result(secured, user, password, want_ok=False))
    assert refused == (
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        "SCRAM-SHA-512"
    )
