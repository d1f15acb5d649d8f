"""The embedded coordinator with its security settings, as a process: the HTTP API's token, ACLs and SCRAM
credentials that survive a restart, and garbage on the SASL and TLS listeners that closes only the
connection that sent it."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from conformance import driver as d
from conformance import security as sec
from conformance.backends import StaticfleetBackend
from conformance.scenario import SECURED
from staticfleet.broker.security.scram import ScramMechanism, salted_password

TOKEN = "t0ken-for-tests"


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[StaticfleetBackend]:
    token = tmp_path / "http-token"
    token.write_text(TOKEN + "\n")
    backend = StaticfleetBackend(SECURED, tmp_path / "coordinator")
    backend.extra_arguments = ["--http-token-file", str(token)]
    asyncio.run(backend.start())
    yield backend
    backend.stop()


def http_status(backend: StaticfleetBackend, path: str, token: str | None = None) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{backend.http_port}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_http_api_needs_the_token_and_the_probes_do_not(coordinator: StaticfleetBackend) -> None:
    assert http_status(coordinator, "/healthz") == 200
    assert http_status(coordinator, "/readyz") == 200
    assert http_status(coordinator, "/api/groups") == 401
    assert http_status(coordinator, "/metrics", "wrong") == 401
    assert http_status(coordinator, "/api/groups", TOKEN) == 200
    assert http_status(coordinator, "/metrics", TOKEN) == 200


async def _login(backend: StaticfleetBackend, user: str, password: str, mechanism: str) -> d.Connection:
    conn = await d.Connection.open("127.0.0.1", backend.listener_ports[sec.SASL_PLAINTEXT], name=user)
    await sec.sasl_login(conn, mechanism, user, password)
    return conn


def test_acls_and_scram_credentials_survive_a_restart(coordinator: StaticfleetBackend) -> None:
    acl = d.Acl(
        d.RESOURCE_GROUP, "kept-group", d.PATTERN_PREFIXED, "User:kept", "*", d.OP_READ, d.PERMISSION_ALLOW
    )
    salt = os.urandom(16)
    upsert = d.ScramUpsertion(
        "kept", 2, 8192, salt, salted_password(ScramMechanism.SCRAM_SHA_512, "kept-secret", salt, 8192)
    )

    async def change() -> None:
        admin = await _login(coordinator, "admin", "admin-secret", sec.SCRAM_SHA_512)
        created = await admin.request(d.create_acls(3, acl))
        assert created.results[0].error_code == ErrorCode.none
        altered = await admin.request(d.alter_user_scram_credentials(upsertions=[upsert]))
        assert altered.results[0].error_code == ErrorCode.none
        await admin.close()

    async def check() -> tuple[int, ErrorCode]:
        admin = await _login(coordinator, "admin", "admin-secret", sec.SCRAM_SHA_512)
        described = await admin.request(d.describe_acls(3, acl))
        await admin.close()
        kept = await _login(coordinator, "kept", "kept-secret", sec.SCRAM_SHA_512)
        join = d.join_group(9, "kept-group-1", instance_id="k", protocols=(("range", d.subscription("t")),))
        joined = await kept.request(join)
        await kept.close()
        return len(described.resources), joined.error_code

    asyncio.run(change())
    asyncio.run(coordinator.restart())
    assert asyncio.run(check()) == (1, ErrorCode.none)


def _kill(backend: StaticfleetBackend) -> None:
    """SIGKILL: no shutdown, no flush; what was acknowledged must already be on disk."""
    process = backend._process
    assert process is not None
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    backend.wait_stopped()


def test_every_acknowledged_acl_and_credential_survives_kill_9(coordinator: StaticfleetBackend) -> None:
    rounds, per_round = 3, 8

    def group_acl(name: str) -> d.Acl:
        return d.Acl(
            d.RESOURCE_GROUP, name, d.PATTERN_LITERAL, "User:killed", "*", d.OP_READ, d.PERMISSION_ALLOW
        )

    def upsert(user: str) -> d.ScramUpsertion:
        salt = os.urandom(16)
        password = salted_password(ScramMechanism.SCRAM_SHA_512, f"{user}-secret", salt, 4096)
        return d.ScramUpsertion(user, 2, 4096, salt, password)

    async def change(round_: int) -> None:
        admin = await _login(coordinator, "admin", "admin-secret", sec.SCRAM_SHA_512)
        for i in range(per_round):
            created = await admin.request(d.create_acls(3, group_acl(f"killed-{round_}-{i}")))
            assert created.results[0].error_code == ErrorCode.none
            altered = await admin.request(
                d.alter_user_scram_credentials(upsertions=[upsert(f"user-{round_}-{i}")])
            )
            assert altered.results[0].error_code == ErrorCode.none
        if round_:  # a deletion acknowledged before the kill stays deleted
            deleted = await admin.request(d.delete_acls(3, group_acl(f"killed-{round_ - 1}-0")))
            assert deleted.filter_results[0].error_code == ErrorCode.none
        _kill(coordinator)  # at once after the last answer, the connection still open

    async def check(round_: int) -> tuple[set[str], list[str]]:
        admin = await _login(coordinator, "admin", "admin-secret", sec.SCRAM_SHA_512)
        described = await admin.request(
            d.describe_acls(
                3,
                d.Acl(d.RESOURCE_GROUP, None, d.PATTERN_ANY, "User:killed", None, d.OP_ANY, d.PERMISSION_ANY),
            )
        )
        await admin.close()
        refused = []
        for r in range(round_ + 1):
            for i in range(per_round):
                try:
                    conn = await _login(
                        coordinator, f"user-{r}-{i}", f"user-{r}-{i}-secret", sec.SCRAM_SHA_512
                    )
                    await conn.close()
                except sec.SaslLoginFailed:
                    refused.append(f"user-{r}-{i}")
        return {resource.resource_name for resource in described.resources}, refused

    for round_ in range(rounds):
        asyncio.run(change(round_))
        asyncio.run(coordinator.start())
        names, refused = asyncio.run(check(round_))
        expected = {f"killed-{r}-{i}" for r in range(round_ + 1) for i in range(per_round)}
        expected -= {f"killed-{r}-0" for r in range(round_)}
        assert names == expected
        assert refused == [], "every acknowledged credential logs in after kill -9"
    assert not (coordinator.workdir / "data" / "security.log").exists()


def _send_and_close(port: int, data: bytes, *, tls: ssl.SSLContext | None = None) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        sock: socket.socket = tls.wrap_socket(raw) if tls is not None else raw
        try:
            sock.sendall(data)
            sock.settimeout(2)
            while sock.recv(4096):
                pass
        except (OSError, ssl.SSLError):
            pass


def test_garbage_on_the_sasl_and_tls_listeners_closes_only_that_connection(
    coordinator: StaticfleetBackend,
) -> None:
    assert coordinator.ca_file is not None
    client_tls = sec.client_tls(coordinator.ca_file)

    async def good_session() -> d.Connection:
        conn = await _login(coordinator, "alice", "alice-secret", sec.SCRAM_SHA_256)
        await conn.request(d.describe_groups(5, "g"))
        return conn

    async def run() -> None:
        good = await good_session()
        garbage = [b"\x00\x00\x00\x05hello", b"GET / HTTP/1.1\r\n\r\n", os.urandom(64), b"\x7f\xff\xff\xff"]
        for data in garbage:
            await asyncio.to_thread(_send_and_close, coordinator.listener_ports[sec.SASL_PLAINTEXT], data)
            await asyncio.to_thread(_send_and_close, coordinator.listener_ports[sec.SASL_SSL], data)
            await asyncio.to_thread(
                _send_and_close, coordinator.listener_ports[sec.SASL_SSL], data, tls=client_tls
            )
        after = await _login(coordinator, "bob", "bob-secret", sec.SCRAM_SHA_512)
        await after.request(d.sasl_handshake(1, "PLAIN"))  # after login: ILLEGAL_SASL_STATE, stays open
        await after.close()
        described = await good.request(d.describe_groups(5, "g"))
        assert described.groups[0].error_code == ErrorCode.group_authorization_failed
        await good.close()

    asyncio.run(run())
