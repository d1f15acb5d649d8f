"""Arbitrary input to every security parser ends in the error it is designed to give, never another
exception: garbage from a client closes its connection and nothing else."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import driver as d
from staticfleet.admin.client_properties import parse_properties
from staticfleet.broker.security.errors import SaslAuthenticationError, SaslFailure
from staticfleet.broker.security.listeners import ListenerError, parse_endpoints
from staticfleet.broker.security.plain import PlainCredential, PlainServer, plain_token
from staticfleet.broker.security.records import SecurityRecordError, decode
from staticfleet.broker.security.scram import (
    ProofLengthError,
    ScramClient,
    ScramMechanism,
    ScramServer,
    generate_credential,
)
from staticfleet.broker.security.users import UsersFileError, parse_entry

from .login import SecuredBroker, secured

SHA512 = ScramMechanism.SCRAM_SHA_512
ALICE = generate_credential(SHA512, "alice-secret")
PLAIN_USERS = {"alice": PlainCredential.of("alice-secret")}
EXAMPLES = settings(max_examples=300, deadline=None)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    yield from secured(tmp_path_factory.mktemp("fuzz-login"))


kafka_like = st.one_of(
    st.binary(max_size=64),
    st.tuples(st.sampled_from([17, 18, 36, 12, 3]), st.integers(-1, 5), st.binary(max_size=48)).map(
        lambda t: struct.pack(">hhi", t[0], t[1], 1) + t[2]
    ),
)


@EXAMPLES
@given(st.lists(kafka_like, min_size=1, max_size=4), st.sampled_from(["fresh", "handshake", "scram", "v0"]))
def test_garbage_at_any_sasl_state_is_answered_or_closes_the_connection(
    broker: SecuredBroker, frames: list[bytes], state: str
) -> None:
    peer = broker.connect()
    if state == "handshake":
        broker.request(peer, d.sasl_handshake(1, "PLAIN"))
    elif state == "scram":
        broker.request(peer, d.sasl_handshake(1, "SCRAM-SHA-512"))
        broker.request(peer, d.sasl_authenticate(2, ScramClient(SHA512, "alice", "x").first()))
    elif state == "v0":
        broker.request(peer, d.sasl_handshake(0, "SCRAM-SHA-512"))
    for data in frames:
        outcome = broker.send(peer, data)  # raises on anything but an answer or a close
        if outcome.close is not None:
            break
        assert outcome.frame is not None  # every frame is answered, or ends the connection
    assert peer.principal == "User:ANONYMOUS"


@EXAMPLES
@given(st.binary(max_size=80))
def test_whatever_a_logged_in_connection_sends_next_is_no_longer_the_logins_business(
    broker: SecuredBroker, data: bytes
) -> None:
    peer = broker.connect()
    broker.request(peer, d.sasl_handshake(1, "PLAIN"))
    broker.request(peer, d.sasl_authenticate(2, plain_token("alice", "alice-secret")))
    outcome = broker.send(peer, data)
    assert outcome.close != "authentication" and peer.principal == "User:alice"


@EXAMPLES
@given(st.binary(max_size=120), st.binary(max_size=160))
def test_scram_server_fails_only_in_its_designed_ways(first: bytes, final: bytes) -> None:
    server = ScramServer(SHA512, lambda u, m: ALICE)
    try:
        server.evaluate(first)
        server.evaluate(final)
    except (SaslFailure, SaslAuthenticationError, ProofLengthError):
        pass


@EXAMPLES
@given(st.binary(max_size=80))
def test_plain_server_fails_only_with_authentication_errors(token: bytes) -> None:
    with contextlib.suppress(SaslAuthenticationError):
        PlainServer(PLAIN_USERS.get).evaluate(token)


@EXAMPLES
@given(st.binary(max_size=80))
def test_security_records_fail_only_with_their_decode_error(body: bytes) -> None:
    with contextlib.suppress(SecurityRecordError):
        decode(body)


@EXAMPLES
@given(st.text(max_size=80))
def test_users_file_entries_fail_only_with_users_file_errors(text: str) -> None:
    with contextlib.suppress(UsersFileError):
        parse_entry(text)


@EXAMPLES
@given(st.text(max_size=60))
def test_listener_values_fail_only_with_listener_errors(text: str) -> None:
    with contextlib.suppress(ListenerError):
        parse_endpoints([text])


@EXAMPLES
@given(st.lists(st.text(max_size=40), max_size=6))
def test_client_properties_always_parse(lines: list[str]) -> None:
    assert isinstance(parse_properties(lines), dict)
