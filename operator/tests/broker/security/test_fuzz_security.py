"""Arbitrary input to every security parser ends in the error it is designed to give, never another
exception: garbage from a client closes its connection and nothing else."""

from __future__ import annotations

import contextlib
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import driver as d
from staticfleet.admin.client_properties import parse_properties
from staticfleet.broker.security.authenticator import SaslAuthenticator
from staticfleet.broker.security.errors import SaslAuthenticationError, SaslFailure
from staticfleet.broker.security.gate import Drop, Forward, Reply, SaslGate
from staticfleet.broker.security.listeners import ListenerError, parse_endpoints
from staticfleet.broker.security.plain import PlainCredential, PlainServer, plain_token
from staticfleet.broker.security.records import SecurityRecordError, decode
from staticfleet.broker.security.sasl import new_server
from staticfleet.broker.security.scram import (
    ProofLengthError,
    ScramClient,
    ScramMechanism,
    ScramServer,
    generate_credential,
)
from staticfleet.broker.security.users import UsersFileError, parse_entry

SHA512 = ScramMechanism.SCRAM_SHA_512
ALICE = generate_credential(SHA512, "alice-secret")
PLAIN_USERS = {"alice": PlainCredential.of("alice-secret")}
EXAMPLES = settings(max_examples=300, deadline=None)


def gate() -> SaslGate:
    authenticator = SaslAuthenticator(
        ["PLAIN", "SCRAM-SHA-512"],
        lambda m: new_server(m, PLAIN_USERS.get, lambda u, mech: ALICE if u == "alice" else None),
    )
    return SaslGate(
        authenticator,
        lambda version, correlation, frame: (struct.pack(">ii", 4, correlation), True),
        lambda frame, code, message: struct.pack(">iih", 6, 1, code),
    )


def frame(request: object) -> bytes:
    return d.request_frame(request, 1)[4:]  # type: ignore[arg-type]


kafka_like = st.one_of(
    st.binary(max_size=64),
    st.tuples(st.sampled_from([17, 18, 36, 12, 3]), st.integers(-1, 5), st.binary(max_size=48)).map(
        lambda t: struct.pack(">hhi", t[0], t[1], 1) + t[2]
    ),
)


@EXAMPLES
@given(st.lists(kafka_like, min_size=1, max_size=4), st.sampled_from(["fresh", "handshake", "scram", "v0"]))
def test_garbage_at_any_sasl_state_only_replies_or_drops(frames: list[bytes], state: str) -> None:
    g = gate()
    if state == "handshake":
        g.on_frame(frame(d.sasl_handshake(1, "PLAIN")))
    elif state == "scram":
        g.on_frame(frame(d.sasl_handshake(1, "SCRAM-SHA-512")))
        g.on_frame(frame(d.sasl_authenticate(2, ScramClient(SHA512, "alice", "x").first())))
    elif state == "v0":
        g.on_frame(frame(d.sasl_handshake(0, "SCRAM-SHA-512")))
    for data in frames:
        result = g.on_frame(data)
        assert isinstance(result, Reply | Drop)
        if isinstance(result, Drop):
            break


@EXAMPLES
@given(st.binary(max_size=80))
def test_a_logged_in_connection_forwards_whatever_it_sends_next(data: bytes) -> None:
    g = gate()
    g.on_frame(frame(d.sasl_handshake(1, "PLAIN")))
    g.on_frame(frame(d.sasl_authenticate(2, plain_token("alice", "alice-secret"))))
    result = g.on_frame(data)
    if len(data) >= 8 and struct.unpack_from(">h", data)[0] not in (17, 36):
        assert result == Forward("User:alice")
    else:
        assert isinstance(result, Reply | Drop | Forward)


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
