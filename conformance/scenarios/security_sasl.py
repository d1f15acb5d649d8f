"""SASL on the secured pair: the handshake, PLAIN and SCRAM exchanges and their failures, what may be sent
before authentication, and TLS (shared/reference/kafka-security.md §1-§3)."""

from __future__ import annotations

import base64
import re
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from conformance import driver as d
from conformance import security as sec
from conformance.certs import CertificateAuthority
from conformance.scenario import SECURED, Outcome, ScenarioContext, expect_all, scenario
from staticfleet.broker.security.plain import plain_token
from staticfleet.broker.security.scram import ScramClient, ScramMechanism

CLOSED = "connection closed without an answer"
CLOSE_WAIT_S = 3.0


async def answer(ctx: ScenarioContext, conn: d.Connection, request: RequestPayload) -> d.Json:
    """The normalised answer, or the fact that the connection was closed instead."""
    try:
        return ctx.norm.value(await conn.request(request, timeout=10.0))
    except d.ConnectionClosed:
        return CLOSED


async def record_then_close(
    ctx: ScenarioContext, label: str, conn: d.Connection, request: RequestPayload
) -> None:
    """Records the answer and whether the broker then closed the connection."""
    ctx.fact(label, await answer(ctx, conn, request))
    ctx.fact(f"{label}.closed_after", await conn.closed_within(CLOSE_WAIT_S))


async def handshaken(
    ctx: ScenarioContext, mechanism: str, name: str, listener: str = sec.SASL_PLAINTEXT
) -> d.Connection:
    conn = await ctx.connect(name, listener=listener)
    response = await conn.request(d.sasl_handshake(1, mechanism))
    assert response.error_code == ErrorCode.none, response
    return conn


def _handshake_sane(outcome: Outcome) -> None:
    mechanisms: d.Json = ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]
    expect_all(
        ("handshake.v1.PLAIN", {"error_code": "NONE", "mechanisms": mechanisms}),
        ("handshake.v1.plain", {"error_code": "UNSUPPORTED_SASL_MECHANISM", "mechanisms": mechanisms}),
    )(outcome)


@scenario(
    "SaslHandshake v0 and v1 on SASL_PLAINTEXT and SASL_SSL: an enabled mechanism answers NONE with the "
    "enabled list in Java HashSet order (PLAIN, SCRAM-SHA-512, SCRAM-SHA-256); an unknown mechanism, or a "
    "known one in the wrong case, answers UNSUPPORTED_SASL_MECHANISM with the same list and the connection "
    "is closed.",
    rule="security §1.3, §1.4; checklist 1, 2",
    settings=SECURED,
    sanity=_handshake_sane,
)
async def sasl_handshake_mechanisms(ctx: ScenarioContext) -> Outcome:
    for listener in (sec.SASL_PLAINTEXT, sec.SASL_SSL):
        suffix = "" if listener == sec.SASL_PLAINTEXT else ".ssl"
        for version in (0, 1):
            for mechanism in ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"):
                conn = await ctx.connect(f"h{version}{mechanism}{suffix}", listener=listener)
                ctx.fact(
                    f"handshake.v{version}.{mechanism}{suffix}",
                    await answer(ctx, conn, d.sasl_handshake(version, mechanism)),
                )
        for mechanism in ("plain", "GSSAPI", "OAUTHBEARER"):
            conn = await ctx.connect(f"bad-{mechanism}{suffix}", listener=listener)
            await record_then_close(
                ctx, f"handshake.v1.{mechanism}{suffix}", conn, d.sasl_handshake(1, mechanism)
            )
    return ctx.outcome


@scenario(
    "Before authentication a SASL listener answers ApiVersions (the full list, also at v0..v4), then only "
    "SaslHandshake: any other first request, a second ApiVersions, or a SaslAuthenticate before the "
    "handshake closes the connection without an answer; an unsupported ApiVersions version gets a v0 "
    "UNSUPPORTED_VERSION "
    "answer and may be retried.",
    rule="security §1.3; checklist 3, 4",
    settings=SECURED,
)
async def sasl_requests_before_authentication(ctx: ScenarioContext) -> Outcome:
    for version in range(5):
        conn = await ctx.connect(f"versions{version}", listener=sec.SASL_PLAINTEXT)
        raw = await conn.request(d.api_versions(version))
        keys: dict[int, d.Json] = {
            int(k.api_key): [int(k.min_version), int(k.max_version)] for k in raw.api_keys
        }
        ctx.fact(
            f"api_versions.v{version}",
            {
                "error_code": ctx.norm.value(raw.error_code),
                "sasl_handshake": keys.get(d.SASL_HANDSHAKE),
                "sasl_authenticate": keys.get(d.SASL_AUTHENTICATE),
                "join_group": keys.get(d.JOIN_GROUP),
                "acls": [keys.get(d.DESCRIBE_ACLS), keys.get(d.CREATE_ACLS), keys.get(d.DELETE_ACLS)],
                "scram": [
                    keys.get(d.DESCRIBE_USER_SCRAM_CREDENTIALS),
                    keys.get(d.ALTER_USER_SCRAM_CREDENTIALS),
                ],
            },
        )
    retry = await ctx.connect("retry", listener=sec.SASL_PLAINTEXT)
    ctx.record("api_versions.v127", await d.send_at_version(retry, d.api_versions(3), 127).result())
    ctx.fact(
        "api_versions.retry_after_v127", ctx.norm.value((await retry.request(d.api_versions(3))).error_code)
    )
    ctx.fact("handshake.after_retry", await answer(ctx, retry, d.sasl_handshake(1, "PLAIN")))
    twice = await ctx.connect("twice", listener=sec.SASL_PLAINTEXT)
    await twice.request(d.api_versions(3))
    ctx.fact("api_versions.second", await answer(ctx, twice, d.api_versions(3)))
    firsts: dict[str, RequestPayload] = {
        "metadata": d.metadata(12, []),
        "find_coordinator": d.find_coordinator(4, ctx.group),
        "join_group": d.join_group(9, ctx.group, protocols=(("range", b"m"),)),
        "sasl_authenticate": d.sasl_authenticate(2, plain_token("admin", "admin-secret")),
    }
    for label, request in firsts.items():
        conn = await ctx.connect(f"first-{label}", listener=sec.SASL_PLAINTEXT)
        ctx.fact(f"first.{label}", await answer(ctx, conn, request))
        after = await ctx.connect(f"after-versions-{label}", listener=sec.SASL_PLAINTEXT)
        await after.request(d.api_versions(3))
        ctx.fact(f"after_api_versions.{label}", await answer(ctx, after, request))
    return ctx.outcome


@scenario(
    "After SaslHandshake v1 only SaslAuthenticate is accepted: any other request (Heartbeat, DescribeGroups, "
    "Metadata, a second SaslHandshake, and the other group, offset, topic and config APIs) gets that API's "
    "own error answer with ILLEGAL_SASL_STATE, and the connection is closed.",
    rule="security §1.3; checklist 5",
    settings=SECURED,
)
async def sasl_other_request_during_authentication(ctx: ScenarioContext) -> Outcome:
    requests: dict[str, RequestPayload] = {
        "heartbeat": d.heartbeat(4, ctx.group, generation=1, member_id="m"),
        "describe_groups": d.describe_groups(5, ctx.group),
        "sasl_handshake": d.sasl_handshake(1, "PLAIN"),
        "offset_commit": d.offset_commit(9, ctx.group, offsets={"t1": {0: 1}}),
        "metadata": d.metadata(12, ["t1"]),
        "api_versions": d.api_versions(3),
        "find_coordinator_v3": d.find_coordinator(3, ctx.group),
        "find_coordinator_v4": d.find_coordinator(4, ctx.group),
        "join_group": d.join_group(9, ctx.group, protocols=(("range", b"m"),)),
        "offset_fetch": d.offset_fetch(8, ctx.group, partitions={"t1": [0]}),
        "list_groups": d.list_groups(5),
        "delete_groups": d.delete_groups(2, ctx.group),
        "create_topics": d.create_topics(7, {"t-during": 1}),
        "describe_configs": d.describe_configs(4, [(2, "t1")]),
    }
    for label, request in requests.items():
        conn = await handshaken(ctx, "PLAIN", f"during-{label}")
        await record_then_close(ctx, label, conn, request)
    return ctx.outcome


def _plain_sane(outcome: Outcome) -> None:
    expect_all(
        ("plain.v2", {"error_code": "NONE", "error_message": ""}),
        ("plain.wrong_password", {"error_code": "SASL_AUTHENTICATION_FAILED"}),
    )(outcome)


@scenario(
    "SASL/PLAIN: success in one round (empty token, no message) with SaslAuthenticate v0, v1 and v2, after "
    "which the connection serves requests; each failure (wrong password, unknown user, 1, 2 and 4 tokens, "
    "empty user, empty password, authorization id of another user) answers SASL_AUTHENTICATION_FAILED with "
    "PlainSaslServer's message and the connection is closed; an authorization id equal to the user passes.",
    rule="security §2; checklist 6, 7",
    settings=SECURED,
    sanity=_plain_sane,
)
async def sasl_plain_success_and_failures(ctx: ScenarioContext) -> Outcome:
    for version in (0, 1, 2):
        conn = await handshaken(ctx, "PLAIN", f"ok{version}")
        ctx.fact(
            f"plain.v{version}",
            await answer(ctx, conn, d.sasl_authenticate(version, plain_token("alice", "alice-secret"))),
        )
        described = await conn.request(d.describe_groups(5, ctx.group))
        ctx.fact(f"plain.v{version}.then_describe", ctx.norm.value(described.groups[0].error_code))
    tokens = {
        "wrong_password": plain_token("alice", "bob-secret"),
        "unknown_user": plain_token("mallory", "alice-secret"),
        "scram_only_user": plain_token("carol", "carol-secret"),
        "one_token": b"alice",
        "two_tokens": b"alice\x00alice-secret",
        "four_tokens": b"\x00alice\x00alice-secret\x00extra",
        "empty_user": plain_token("", "alice-secret"),
        "empty_password": plain_token("alice", ""),
        "other_authzid": plain_token("alice", "alice-secret", authzid="admin"),
        "same_authzid": plain_token("alice", "alice-secret", authzid="alice"),
    }
    for label, token in tokens.items():
        conn = await handshaken(ctx, "PLAIN", label)
        await record_then_close(ctx, f"plain.{label}", conn, d.sasl_authenticate(2, token))
    return ctx.outcome


_SERVER_FIRST = re.compile(r"r=(?P<nonce>[^,]+),s=(?P<salt>[^,]+),i=(?P<iterations>\d+)")


def scram_first_shape(client_nonce: str, raw: Any) -> d.Json:
    """A SCRAM server-first message as facts (its nonce and salt are random)."""
    text = bytes(raw.auth_bytes).decode()
    match = _SERVER_FIRST.fullmatch(text)
    if match is None:
        return {
            "error_code": raw.error_code.name.upper(),
            "auth_bytes": text,
            "error_message": raw.error_message,
        }
    server_nonce = match.group("nonce")[len(client_nonce) :]
    salt = base64.b64decode(match.group("salt"))
    return {
        "error_code": raw.error_code.name.upper(),
        "error_message": raw.error_message,
        "nonce_extends_client_nonce": match.group("nonce").startswith(client_nonce),
        "server_nonce_is_base36_up_to_26": bool(re.fullmatch(r"[0-9a-z]{1,26}", server_nonce)),
        "salt_is_base36_text": bool(re.fullmatch(rb"[0-9a-z]{1,26}", salt)),
        "iterations": int(match.group("iterations")),
        "session_lifetime": ctx_ms(raw),
    }


def ctx_ms(raw: Any) -> d.Json:
    lifetime = getattr(raw, "session_lifetime", None)
    return None if lifetime is None else round(lifetime.total_seconds() * 1000)


@scenario(
    "SASL/SCRAM success with SCRAM-SHA-512 and SCRAM-SHA-256 (SaslAuthenticate v0..v2): the server-first "
    "message extends the client nonce with a base-36 nonce and carries the stored salt and iterations (8192 "
    "for alice's SHA-256 credential); the final answer is a server signature the client verifies, with no "
    "message and session lifetime 0; on SASL_SSL too.",
    rule="security §3.2, §3.3; checklist 9, 13, 14",
    settings=SECURED,
)
async def sasl_scram_success(ctx: ScenarioContext) -> Outcome:
    cases = [
        ("sha512", "SCRAM-SHA-512", "alice", sec.SASL_PLAINTEXT, 2),
        ("sha256", "SCRAM-SHA-256", "alice", sec.SASL_PLAINTEXT, 2),
        ("sha512.v0", "SCRAM-SHA-512", "bob", sec.SASL_PLAINTEXT, 0),
        ("sha512.v1", "SCRAM-SHA-512", "bob", sec.SASL_PLAINTEXT, 1),
        ("sha512.ssl", "SCRAM-SHA-512", "alice", sec.SASL_SSL, 2),
        ("sha256.ssl", "SCRAM-SHA-256", "carol", sec.SASL_SSL, 2),
    ]
    for label, mechanism, user, listener, version in cases:
        conn = await handshaken(ctx, mechanism, label, listener)
        scram_mechanism = ScramMechanism.by_name(mechanism)
        assert scram_mechanism is not None
        security = ctx.settings.security
        assert security is not None
        client = ScramClient(scram_mechanism, user, security.password(user))
        first = await conn.request(d.sasl_authenticate(version, client.first()))
        ctx.fact(f"{label}.first", scram_first_shape(client.nonce, first))
        final = await conn.request(d.sasl_authenticate(version, client.final(bytes(first.auth_bytes))))
        ctx.fact(
            f"{label}.final",
            {
                "error_code": ctx.norm.value(final.error_code),
                "error_message": final.error_message,
                "signature_verifies": client.verify(bytes(final.auth_bytes)),
                "session_lifetime": ctx_ms(final),
            },
        )
        described = await conn.request(d.describe_groups(5, ctx.group))
        ctx.fact(f"{label}.then_describe", ctx.norm.value(described.groups[0].error_code))
    plain_ssl = await handshaken(ctx, "PLAIN", "plain.ssl", sec.SASL_SSL)
    ctx.fact(
        "plain.ssl", await answer(ctx, plain_ssl, d.sasl_authenticate(2, plain_token("bob", "bob-secret")))
    )
    return ctx.outcome


@scenario(
    "SASL/SCRAM failures: unknown user, a user with only a SHA-256 credential on SHA-512, a malformed first "
    "message and gs2 flags y and p= fail on the first round with the generic message; an authorization id of "
    "another user fails with its own message; a wrong password or a wrong nonce fails on the second round; "
    "each failure closes the connection. A proof over any channel-binding value passes; a proof of the wrong "
    "length closes the connection without an answer.",
    rule="security §3.4; checklist 8, 10, 11, 12",
    settings=SECURED,
)
async def sasl_scram_failures(ctx: ScenarioContext) -> Outcome:
    firsts = {
        "unknown_user": b"n,,n=mallory,r=abcdef",
        "sha256_only_user_on_sha512": b"n,,n=carol,r=abcdef",
        "malformed": b"n,,n=alice",
        "gs2_y": b"y,,n=alice,r=abcdef",
        "gs2_p": b"p=tls-unique,,n=alice,r=abcdef",
        "other_authzid": b"n,a=admin,n=alice,r=abcdef",
        "escaped_unknown_user": b"n,,n=al=2Cice,r=abcdef",
    }
    for label, token in firsts.items():
        conn = await handshaken(ctx, "SCRAM-SHA-512", label)
        await record_then_close(ctx, f"first.{label}", conn, d.sasl_authenticate(2, token))

    async def second(label: str, password: str, mutate: Any) -> None:
        conn = await handshaken(ctx, "SCRAM-SHA-512", label)
        client = ScramClient(ScramMechanism.SCRAM_SHA_512, "alice", password)
        first = await conn.request(d.sasl_authenticate(2, client.first()))
        final = mutate(client, bytes(first.auth_bytes))
        try:
            raw = await conn.request(d.sasl_authenticate(2, final), timeout=10.0)
        except d.ConnectionClosed:
            ctx.fact(f"final.{label}", CLOSED)
        else:
            fact = ctx.norm.value(raw)
            assert isinstance(fact, dict)
            if raw.error_code == ErrorCode.none:  # the signature is random: record that it verifies
                fact["auth_bytes"] = {"signature_verifies": client.verify(bytes(raw.auth_bytes))}
            ctx.fact(f"final.{label}", fact)
        ctx.fact(f"final.{label}.closed_after", await conn.closed_within(CLOSE_WAIT_S))

    await second("wrong_password", "bob-secret", lambda c, f: c.final(f))
    await second("wrong_nonce", "alice-secret", lambda c, f: c.final(f).replace(b",r=", b",r=x", 1))
    await second("other_channel_binding", "alice-secret", lambda c, f: c.final(f, channel_binding="eSws"))
    await second(
        "short_proof",
        "alice-secret",
        lambda c, f: c.final(f).rsplit(b",p=", 1)[0] + b",p=" + base64.b64encode(b"short"),
    )
    await second("malformed_final", "alice-secret", lambda c, f: b"c=biws,p=AAAA")
    return ctx.outcome


@scenario(
    "Once authenticated (no re-authentication configured), SaslHandshake answers ILLEGAL_SASL_STATE with no "
    "mechanisms and SaslAuthenticate answers ILLEGAL_SASL_STATE with its message; the connection stays open "
    "and keeps serving.",
    rule="security §1.6; checklist 16",
    settings=SECURED,
)
async def sasl_after_authentication(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.login("alice")
    ctx.fact("handshake", await answer(ctx, conn, d.sasl_handshake(1, "PLAIN")))
    ctx.fact(
        "authenticate", await answer(ctx, conn, d.sasl_authenticate(2, plain_token("alice", "alice-secret")))
    )
    described = await conn.request(d.describe_groups(5, ctx.group))
    ctx.fact("still_serving", ctx.norm.value(described.groups[0].error_code))
    plain = await ctx.connect("plaintext")
    ctx.fact("plaintext.handshake", await answer(ctx, plain, d.sasl_handshake(1, "PLAIN")))
    ctx.fact("plaintext.authenticate", await answer(ctx, plain, d.sasl_authenticate(2, b"x")))
    return ctx.outcome


@scenario(
    "The SSL listener requires a client certificate and takes its subject (RFC 2253, "
    "User:CN=...,O=...,C=...) as the principal: ACLs for that principal apply; SASL requests there "
    "answer ILLEGAL_SASL_STATE; a client without a certificate, or with one from another CA, fails the "
    "TLS handshake.",
    rule="security §4; checklist 17",
    settings=SECURED,
)
async def tls_client_certificate_principal(ctx: ScenarioContext) -> Outcome:
    ca = ctx.backend.ca
    assert ca is not None
    label = f"cert-{ctx.group[-8:]}"
    certificate = ca.client(label, "cert-user", organization="staticfleet")
    principal = "User:CN=cert-user,O=staticfleet,C=US"
    conn = await ctx.connect("mtls", listener=sec.SSL, certificate=certificate)
    protocols = (("range", d.subscription("t1")),)
    join = d.join_group(9, ctx.group, instance_id="A", protocols=protocols)
    ctx.fact("join.before_acl", await answer(ctx, conn, join))
    await ctx.grant(
        d.Acl(d.RESOURCE_GROUP, ctx.group, d.PATTERN_LITERAL, principal, "*", d.OP_READ, d.PERMISSION_ALLOW)
    )
    ctx.fact("join.with_acl", await answer(ctx, conn, join))
    described = await conn.request(d.describe_groups(5, ctx.group, include_authorized_operations=True))
    ctx.fact("describe.operations", described.groups[0].authorized_operations)
    ctx.fact("sasl_handshake", await answer(ctx, conn, d.sasl_handshake(1, "PLAIN")))
    refusals: dict[str, Any] = {"no_certificate": None}
    other_ca_dir = ca.directory.parent / f"other-ca-{label}"
    refusals["other_ca"] = CertificateAuthority.create(other_ca_dir, "another CA").client(label, "cert-user")
    for name, presented in refusals.items():
        try:
            refused = await ctx.connect(f"refused-{name}", listener=sec.SSL, certificate=presented)
            # TLS 1.3 reports a refused client certificate on the first read, not in the handshake.
            ctx.fact(f"refused.{name}", await answer(ctx, refused, d.api_versions(3)) == CLOSED)
        except (OSError, ConnectionError) as exc:
            ctx.fact(f"refused.{name}", isinstance(exc, OSError | ConnectionError))
    return ctx.outcome


SASL_SERVER_MAX_RECEIVE_SIZE = 524_288


async def _closed_after_size(ctx: ScenarioContext, conn: d.Connection, size: int, sent: int) -> bool:
    """Announce a frame of `size` bytes, send `sent` of them, stall: does the broker close?"""
    conn.send_bytes(size.to_bytes(4, "big") + b"\x00" * sent)
    return await conn.closed_within(CLOSE_WAIT_S)


def _receive_size_sane(outcome: Outcome) -> None:
    expected = {
        "first_frame.over.closed": True,
        "first_frame.at_limit.closed": False,
        "after_handshake.over.closed": True,
        "logged_in.over.closed": False,
    }
    assert {label: outcome.get(label) for label in expected} == expected, outcome


@scenario(
    "sasl.server.max.receive.size (524288) before authentication: a frame announcing one byte more closes "
    "the connection without an answer, before the handshake and during the SCRAM exchange; a frame of "
    "exactly that size that stalls keeps it open; after a login the same larger frame stalls without a "
    "close.",
    rule="security §1.3 (frame > sasl.server.max.receive.size)",
    settings=SECURED,
    sanity=_receive_size_sane,
)
async def sasl_max_receive_size_before_authentication(ctx: ScenarioContext) -> Outcome:
    over, limit = SASL_SERVER_MAX_RECEIVE_SIZE + 1, SASL_SERVER_MAX_RECEIVE_SIZE
    first = await ctx.connect("over-first", listener=sec.SASL_PLAINTEXT)
    ctx.fact("first_frame.over.closed", await _closed_after_size(ctx, first, over, 100))
    at_limit = await ctx.connect("at-limit", listener=sec.SASL_PLAINTEXT)
    ctx.fact("first_frame.at_limit.closed", await _closed_after_size(ctx, at_limit, limit, 100))
    during = await handshaken(ctx, "SCRAM-SHA-512", "over-during")
    ctx.fact("after_handshake.over.closed", await _closed_after_size(ctx, during, over, 100))
    logged_in = await ctx.connect("over-logged-in", listener=sec.SASL_PLAINTEXT)
    await sec.sasl_login(logged_in, sec.SCRAM_SHA_512, "admin", "admin-secret")
    ctx.fact("logged_in.over.closed", await _closed_after_size(ctx, logged_in, over, 100))
    return ctx.outcome
