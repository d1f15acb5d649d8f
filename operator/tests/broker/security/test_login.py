"""The SASL login in the one dispatch path, over real request frames (kio-encoded, as clients send them):
what a connection may send before, during and after its login, and how each refusal is answered."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from conformance import driver as d
from staticfleet.broker.registry import Peer
from staticfleet.broker.security.plain import plain_token
from staticfleet.broker.security.scram import ScramClient, ScramMechanism

from .login import SecuredBroker, correlation_of, decode, secured

SHA512 = ScramMechanism.SCRAM_SHA_512
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, HEARTBEAT, METADATA = 18, 17, 36, 12, 3


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    yield from secured(tmp_path_factory.mktemp("login"))


def logged_in(broker: SecuredBroker, user: str = "alice") -> Peer:
    peer = broker.connect()
    assert decode(broker.request(peer, d.sasl_handshake(1, "PLAIN")), SASL_HANDSHAKE, 1).error_code == 0
    token = plain_token(user, f"{user}-secret")
    assert decode(broker.request(peer, d.sasl_authenticate(2, token)), SASL_AUTHENTICATE, 2).error_code == 0
    return peer


@pytest.mark.parametrize(
    "request_",
    [d.metadata(12, []), d.heartbeat(4, "g", generation=1, member_id="m"), d.sasl_authenticate(2, b"x")],
    ids=["metadata", "heartbeat", "sasl_authenticate"],
)
def test_any_other_first_request_closes_without_an_answer(
    broker: SecuredBroker, request_: RequestPayload
) -> None:
    outcome = broker.request(broker.connect(), request_)
    assert (outcome.frame, outcome.close, outcome.delayed) == (None, "authentication", False)


def test_api_versions_is_answered_once_before_the_handshake(broker: SecuredBroker) -> None:
    peer = broker.connect()
    versions = broker.request(peer, d.api_versions(3), correlation=3)
    answer = decode(versions, API_VERSIONS, 3)
    assert answer.error_code == ErrorCode.none and correlation_of(versions) == 3
    assert {int(k.api_key) for k in answer.api_keys} >= {
        API_VERSIONS,
        SASL_HANDSHAKE,
        SASL_AUTHENTICATE,
        HEARTBEAT,
    }
    again = broker.request(peer, d.api_versions(3))
    assert (again.frame, again.close) == (None, "authentication")


def test_an_unsupported_api_versions_is_answered_at_v0_and_may_be_retried(broker: SecuredBroker) -> None:
    peer = broker.connect()
    too_new = broker.send(peer, struct.pack(">hhih", API_VERSIONS, 127, 5, -1))
    assert (
        decode(too_new, API_VERSIONS, 0).error_code == ErrorCode.unsupported_version and too_new.close is None
    )
    assert decode(broker.request(peer, d.api_versions(3)), API_VERSIONS, 3).error_code == ErrorCode.none


def test_a_handshake_in_an_unsupported_version_closes(broker: SecuredBroker) -> None:
    outcome = broker.send(broker.connect(), struct.pack(">hhih", SASL_HANDSHAKE, 2, 5, -1) + b"\x00\x05PLAIN")
    assert (outcome.frame, outcome.close) == (None, "bad-request")


def test_plain_login_then_requests_are_served_as_the_user(broker: SecuredBroker) -> None:
    peer = broker.connect()
    handshake = decode(broker.request(peer, d.sasl_handshake(1, "PLAIN")), SASL_HANDSHAKE, 1)
    assert handshake.error_code == ErrorCode.none and handshake.mechanisms == ("PLAIN", "SCRAM-SHA-512")
    auth = broker.request(peer, d.sasl_authenticate(2, plain_token("alice", "alice-secret")))
    assert decode(auth, SASL_AUTHENTICATE, 2).error_code == ErrorCode.none and auth.close is None
    assert peer.principal == "User:alice"
    served = broker.request(peer, d.heartbeat(4, "g", generation=1, member_id="m"))
    assert decode(served, HEARTBEAT, 4).error_code == ErrorCode.unknown_member_id and served.close is None


def test_scram_login_over_two_rounds(broker: SecuredBroker) -> None:
    peer = broker.connect()
    broker.request(peer, d.sasl_handshake(1, "SCRAM-SHA-512"))
    client = ScramClient(SHA512, "alice", "alice-secret")
    first = decode(broker.request(peer, d.sasl_authenticate(1, client.first())), SASL_AUTHENTICATE, 1)
    final = broker.request(peer, d.sasl_authenticate(1, client.final(bytes(first.auth_bytes))))
    assert client.verify(bytes(decode(final, SASL_AUTHENTICATE, 1).auth_bytes))
    described = decode(broker.request(peer, d.describe_groups(5, "g")), 15, 5)
    assert described.groups[0].error_code == ErrorCode.none


def test_a_failed_login_answers_58_with_the_message_and_closes_after_the_delay(broker: SecuredBroker) -> None:
    peer = broker.connect()
    broker.request(peer, d.sasl_handshake(1, "PLAIN"))
    failed = broker.request(peer, d.sasl_authenticate(2, plain_token("alice", "nope")))
    assert (failed.close, failed.delayed) == ("authentication", True)
    answer = decode(failed, SASL_AUTHENTICATE, 2)
    assert answer.error_code == ErrorCode.sasl_authentication_failed
    assert answer.error_message == "Authentication failed: Invalid username or password"


def test_an_unknown_mechanism_answers_33_and_closes_after_the_delay(broker: SecuredBroker) -> None:
    refused = broker.request(broker.connect(), d.sasl_handshake(1, "GSSAPI"))
    assert (refused.close, refused.delayed) == ("authentication", True)
    assert decode(refused, SASL_HANDSHAKE, 1).error_code == ErrorCode.unsupported_sasl_mechanism


@pytest.mark.parametrize(
    ("request_", "api_key", "version"),
    [
        (d.heartbeat(4, "g", generation=1, member_id="m"), HEARTBEAT, 4),
        (d.sasl_handshake(1, "PLAIN"), SASL_HANDSHAKE, 1),
        (d.metadata(12, ["t"]), METADATA, 12),
    ],
    ids=["heartbeat", "sasl_handshake", "metadata"],
)
def test_another_api_during_authentication_gets_its_own_illegal_state_answer_then_the_connection_closes(
    broker: SecuredBroker, request_: RequestPayload, api_key: int, version: int
) -> None:
    peer = broker.connect()
    broker.request(peer, d.sasl_handshake(1, "PLAIN"))
    reply = broker.request(peer, request_, correlation=11)
    assert (reply.close, reply.delayed, correlation_of(reply)) == ("authentication", True, 11)
    answer = decode(reply, api_key, version)
    if api_key == METADATA:
        assert [(t.name, t.error_code) for t in answer.topics] == [("t", ErrorCode.illegal_sasl_state)]
    else:
        assert answer.error_code == ErrorCode.illegal_sasl_state


def test_raw_tokens_after_a_v0_handshake(broker: SecuredBroker) -> None:
    peer = broker.connect()
    broker.request(peer, d.sasl_handshake(0, "PLAIN"))
    reply = broker.send(peer, plain_token("alice", "alice-secret"))
    assert reply.frame == struct.pack(">i", 0) and reply.close is None
    served = broker.request(peer, d.heartbeat(4, "g", generation=1, member_id="m"))
    assert decode(served, HEARTBEAT, 4).error_code == ErrorCode.unknown_member_id


def test_a_failed_raw_plain_token_closes_after_the_delay_without_an_answer(broker: SecuredBroker) -> None:
    peer = broker.connect()
    broker.request(peer, d.sasl_handshake(0, "PLAIN"))
    reply = broker.send(peer, plain_token("alice", "nope"))
    assert (reply.frame, reply.close, reply.delayed) == (None, "authentication", True)


def test_after_login_sasl_requests_answer_illegal_state_and_keep_the_connection(
    broker: SecuredBroker,
) -> None:
    peer = logged_in(broker)
    again = broker.request(peer, d.sasl_handshake(1, "PLAIN"))
    assert again.close is None and decode(again, SASL_HANDSHAKE, 1).error_code == ErrorCode.illegal_sasl_state
    auth = broker.request(peer, d.sasl_authenticate(2, b""))
    answer = decode(auth, SASL_AUTHENTICATE, 2)
    assert auth.close is None and answer.error_code == ErrorCode.illegal_sasl_state
    assert answer.error_message == "SaslAuthenticate request received after successful authentication"


def test_garbage_closes_the_connection(broker: SecuredBroker) -> None:
    assert broker.send(broker.connect(), b"\x00").close == "bad-request"
    peer = broker.connect()
    broker.request(peer, d.sasl_handshake(1, "PLAIN"))
    assert broker.send(peer, b"\x00\x24\x00\x02\x00\x00\x00\x01\xff").close == "bad-request"


def test_a_request_refused_by_an_acl_as_a_whole_gets_its_apis_error_answer(broker: SecuredBroker) -> None:
    peer = logged_in(broker, "bob")
    refused = broker.request(peer, d.heartbeat(4, "g", generation=1, member_id="m"))
    assert refused.close is None
    assert decode(refused, HEARTBEAT, 4).error_code == ErrorCode.group_authorization_failed
    # Per item: each group bob may not describe is answered in its place.
    described = decode(broker.request(peer, d.describe_groups(5, "g", "h")), 15, 5)
    assert [(g.group_id, g.error_code) for g in described.groups] == [
        ("g", ErrorCode.group_authorization_failed),
        ("h", ErrorCode.group_authorization_failed),
    ]
