"""The SASL gate over real request frames (kio-encoded, as clients send them)."""

from __future__ import annotations

import struct
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader

from conformance import driver as d
from staticfleet.broker.security.authenticator import Close, SaslAuthenticator
from staticfleet.broker.security.gate import Drop, Forward, Reply, SaslGate
from staticfleet.broker.security.plain import PlainCredential, plain_token
from staticfleet.broker.security.sasl import new_server
from staticfleet.broker.security.scram import ScramClient, ScramMechanism, generate_credential

SHA512 = ScramMechanism.SCRAM_SHA_512
ALICE = generate_credential(SHA512, "alice-secret")
PLAIN_USERS = {"alice": PlainCredential.of("alice-secret")}


def gate() -> tuple[SaslGate, list[tuple[int, int, int, int, str]]]:
    errors: list[tuple[int, int, int, int, str]] = []

    def api_versions(version: int, correlation: int, frame: bytes) -> tuple[bytes, bool]:
        return struct.pack(">ii", 4, correlation), True

    def error_answer(frame: bytes, code: int, message: str) -> bytes:
        key, version, correlation = struct.unpack_from(">hhi", frame)
        errors.append((key, version, correlation, code, message))
        return struct.pack(">iih", 6, correlation, code)

    authenticator = SaslAuthenticator(
        ["PLAIN", "SCRAM-SHA-512"],
        lambda m: new_server(m, PLAIN_USERS.get, lambda u, mech: ALICE if u == "alice" else None),
    )
    return SaslGate(authenticator, api_versions, error_answer), errors


def frame(request: Any, correlation: int = 7) -> bytes:
    return d.request_frame(request, correlation)[4:]


def decode(reply: Reply, api_key: int, version: int) -> Any:
    response_type = load_response_schema(api_key, version)
    data = reply.data[4:]
    _, offset = entity_reader(response_type.__header_schema__)(data, 0)
    return entity_reader(response_type)(data, offset)[0]


def test_requests_before_the_handshake_are_dropped_and_api_versions_is_answered_by_the_registry() -> None:
    g, _ = gate()
    assert isinstance(g.on_frame(frame(d.metadata(12, []))), Drop)
    g, _ = gate()
    versions = g.on_frame(frame(d.api_versions(3), correlation=3))
    assert isinstance(versions, Reply) and versions.data == struct.pack(">ii", 4, 3)
    assert isinstance(g.on_frame(frame(d.api_versions(3))), Drop)


def test_plain_login_then_requests_are_forwarded_with_the_principal() -> None:
    g, _ = gate()
    handshake = g.on_frame(frame(d.sasl_handshake(1, "PLAIN")))
    assert isinstance(handshake, Reply)
    answer = decode(handshake, 17, 1)
    assert answer.error_code == ErrorCode.none and answer.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    auth = g.on_frame(frame(d.sasl_authenticate(2, plain_token("alice", "alice-secret"))))
    assert isinstance(auth, Reply) and decode(auth, 36, 2).error_code == ErrorCode.none
    assert g.on_frame(frame(d.heartbeat(4, "g", generation=1, member_id="m"))) == Forward("User:alice")


def test_scram_login_over_two_rounds() -> None:
    g, _ = gate()
    g.on_frame(frame(d.sasl_handshake(1, "SCRAM-SHA-512")))
    client = ScramClient(SHA512, "alice", "alice-secret")
    first = g.on_frame(frame(d.sasl_authenticate(1, client.first())))
    assert isinstance(first, Reply)
    final = g.on_frame(frame(d.sasl_authenticate(1, client.final(bytes(decode(first, 36, 1).auth_bytes)))))
    assert isinstance(final, Reply) and client.verify(bytes(decode(final, 36, 1).auth_bytes))
    assert isinstance(g.on_frame(frame(d.describe_groups(5, "g"))), Forward)


def test_failed_login_answers_58_with_the_message_and_closes_after_the_delay() -> None:
    g, _ = gate()
    g.on_frame(frame(d.sasl_handshake(1, "PLAIN")))
    failed = g.on_frame(frame(d.sasl_authenticate(2, plain_token("alice", "nope"))))
    assert isinstance(failed, Reply) and failed.close == Close.AFTER_DELAY
    answer = decode(failed, 36, 2)
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Authentication failed: Invalid username or password"


def test_unknown_mechanism_answers_33_and_closes_after_the_delay() -> None:
    g, _ = gate()
    refused = g.on_frame(frame(d.sasl_handshake(1, "GSSAPI")))
    assert isinstance(refused, Reply) and refused.close == Close.AFTER_DELAY
    assert decode(refused, 17, 1).error_code == ErrorCode.unsupported_sasl_mechanism


def test_another_api_during_authentication_gets_its_own_illegal_state_answer() -> None:
    g, errors = gate()
    g.on_frame(frame(d.sasl_handshake(1, "PLAIN")))
    reply = g.on_frame(frame(d.heartbeat(4, "g", generation=1, member_id="m"), correlation=11))
    assert isinstance(reply, Reply) and reply.close == Close.AFTER_DELAY
    assert errors == [
        (12, 4, 11, 34, "Unexpected Kafka request of type HEARTBEAT during SASL authentication.")
    ]


def test_raw_tokens_after_a_v0_handshake() -> None:
    g, _ = gate()
    g.on_frame(frame(d.sasl_handshake(0, "PLAIN")))
    reply = g.on_frame(plain_token("alice", "alice-secret"))
    assert isinstance(reply, Reply) and reply.data == struct.pack(">i", 0)
    assert isinstance(g.on_frame(frame(d.heartbeat(4, "g", generation=1, member_id="m"))), Forward)


def test_after_login_sasl_requests_answer_illegal_state_and_keep_the_connection() -> None:
    g, _ = gate()
    g.on_frame(frame(d.sasl_handshake(1, "PLAIN")))
    g.on_frame(frame(d.sasl_authenticate(2, plain_token("alice", "alice-secret"))))
    again = g.on_frame(frame(d.sasl_handshake(1, "PLAIN")))
    assert isinstance(again, Reply) and again.close == Close.NO
    assert decode(again, 17, 1).error_code == ErrorCode.illegal_sasl_state


def test_garbage_is_dropped() -> None:
    g, _ = gate()
    assert isinstance(g.on_frame(b"\x00"), Drop)
    g.on_frame(frame(d.sasl_handshake(1, "PLAIN")))
    assert isinstance(g.on_frame(b"\x00\x24\x00\x02\x00\x00\x00\x01\xff"), Drop)
