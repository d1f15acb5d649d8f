"""The per-connection SASL state machine (Kafka's SaslServerAuthenticator), rule by rule."""

from __future__ import annotations

import pytest

from staticfleet.broker.security.authenticator import (
    AUTHENTICATE_AFTER_LOGIN,
    HANDSHAKE_AFTER_LOGIN,
    ILLEGAL_SASL_STATE,
    NONE,
    SASL_AUTHENTICATION_FAILED,
    UNSUPPORTED_SASL_MECHANISM,
    Admission,
    Close,
    LoginStep,
    SaslAuthenticator,
    State,
)
from staticfleet.broker.security.plain import PlainCredential, plain_token
from staticfleet.broker.security.sasl import SaslServer, new_server
from staticfleet.broker.security.scram import ScramClient, ScramMechanism, generate_credential

OTHER = None  # any API that plays no part in a login (Metadata, Heartbeat, ...)
SHA512 = ScramMechanism.SCRAM_SHA_512
ALICE = generate_credential(SHA512, "alice-secret")
PLAIN_USERS = {"alice": PlainCredential.of("alice-secret")}


def factory(mechanism: str) -> SaslServer:
    return new_server(mechanism, PLAIN_USERS.get, lambda u, m: ALICE if (u, m) == ("alice", SHA512) else None)


def authenticator() -> SaslAuthenticator:
    return SaslAuthenticator(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], factory)


def handshaken(mechanism: str = "PLAIN", version: int = 1) -> SaslAuthenticator:
    auth = authenticator()
    assert auth.admit(LoginStep.HANDSHAKE) == Admission.SERVE
    assert auth.handshake(version, mechanism).error_code == NONE
    return auth


def test_api_versions_first_then_handshake() -> None:
    auth = authenticator()
    assert auth.admit(LoginStep.VERSIONS) == Admission.SERVE
    auth.api_versions_answered(ok=True)
    assert auth.admit(LoginStep.HANDSHAKE) == Admission.SERVE


def test_a_second_api_versions_closes_without_an_answer() -> None:
    auth = authenticator()
    auth.admit(LoginStep.VERSIONS)
    auth.api_versions_answered(ok=True)
    assert auth.admit(LoginStep.VERSIONS) == Admission.CLOSE


def test_api_versions_may_be_retried_after_an_unsupported_version_answer() -> None:
    auth = authenticator()
    auth.admit(LoginStep.VERSIONS)
    auth.api_versions_answered(ok=False)
    assert auth.admit(LoginStep.VERSIONS) == Admission.SERVE


@pytest.mark.parametrize("step", [OTHER, LoginStep.AUTHENTICATE])
def test_any_other_request_before_the_handshake_closes_without_an_answer(step: LoginStep | None) -> None:
    assert authenticator().admit(step) == Admission.CLOSE


def test_api_versions_after_authentication_changes_nothing() -> None:
    auth = handshaken()
    auth.authenticate(2, plain_token("alice", "alice-secret"))
    assert auth.admit(LoginStep.VERSIONS) == Admission.SERVE
    auth.api_versions_answered(ok=True)
    assert auth.authenticated


def test_handshake_lists_mechanisms_in_kafkas_order() -> None:
    answer = authenticator().handshake(1, "SCRAM-SHA-512")
    assert (answer.error_code, answer.mechanisms, answer.close) == (
        NONE,
        ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"),
        Close.NO,
    )


@pytest.mark.parametrize("mechanism", ["plain", "GSSAPI", "OAUTHBEARER"])
def test_unknown_or_wrong_case_mechanism_answers_33_with_the_list_then_closes_after_the_delay(
    mechanism: str,
) -> None:
    answer = authenticator().handshake(1, mechanism)
    assert answer.error_code == UNSUPPORTED_SASL_MECHANISM
    assert answer.mechanisms == ("PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256")
    assert answer.close == Close.AFTER_DELAY


def test_after_handshake_v1_other_requests_get_illegal_sasl_state_and_close() -> None:
    auth = handshaken()
    assert auth.admit(OTHER) == Admission.ILLEGAL_STATE
    assert auth.state == State.FAILED and auth.failed


def test_a_second_handshake_during_authentication_is_illegal_state() -> None:
    assert handshaken().admit(LoginStep.HANDSHAKE) == Admission.ILLEGAL_STATE


def test_plain_success_completes_with_the_user_principal_and_an_empty_message() -> None:
    auth = handshaken()
    assert auth.admit(LoginStep.AUTHENTICATE) == Admission.SERVE
    answer = auth.authenticate(2, plain_token("alice", "alice-secret"))
    assert (answer.error_code, answer.error_message, answer.auth_bytes, answer.close) == (
        NONE,
        "",
        b"",
        Close.NO,
    )
    assert auth.authenticated and auth.principal == "User:alice"
    assert auth.admit(OTHER) == Admission.SERVE


def test_plain_failure_sends_plains_message_then_closes_after_the_delay() -> None:
    answer = handshaken().authenticate(2, plain_token("alice", "wrong"))
    assert answer.error_code == SASL_AUTHENTICATION_FAILED
    assert answer.error_message == "Authentication failed: Invalid username or password"
    assert answer.close == Close.AFTER_DELAY


def test_scram_success_takes_two_rounds() -> None:
    auth = handshaken("SCRAM-SHA-512")
    client = ScramClient(SHA512, "alice", "alice-secret")
    first = auth.authenticate(2, client.first())
    assert first.error_code == NONE and not auth.authenticated
    final = auth.authenticate(2, client.final(first.auth_bytes))
    assert client.verify(final.auth_bytes) and auth.principal == "User:alice"


def test_scram_failure_hides_its_reason_behind_the_generic_message() -> None:
    answer = handshaken("SCRAM-SHA-512").authenticate(2, b"n,,n=mallory,r=abc")
    assert answer.error_message == (
        "Authentication failed during authentication due to invalid credentials "
        "with SASL mechanism SCRAM-SHA-512"
    )
    assert answer.close == Close.AFTER_DELAY


def test_scram_proof_of_the_wrong_length_closes_at_once() -> None:
    auth = handshaken("SCRAM-SHA-512")
    client = ScramClient(SHA512, "alice", "alice-secret")
    first = auth.authenticate(2, client.first())
    final = client.final(first.auth_bytes).rsplit(b",p=", 1)[0] + b",p=c2hvcnQ="
    assert auth.authenticate(2, final).close == Close.NOW


def test_after_authentication_handshake_and_authenticate_are_illegal_state_and_keep_the_connection() -> None:
    auth = handshaken()
    auth.authenticate(2, plain_token("alice", "alice-secret"))
    assert auth.admit(LoginStep.HANDSHAKE) == Admission.SERVE
    handshake = auth.handshake(1, "PLAIN")
    assert (handshake.error_code, handshake.mechanisms, handshake.close) == (ILLEGAL_SASL_STATE, (), Close.NO)
    again = auth.authenticate(2, b"")
    assert again.error_code == ILLEGAL_SASL_STATE and again.close == Close.NO
    assert again.error_message == "SaslAuthenticate request received after successful authentication"


def test_sasl_requests_on_a_listener_without_sasl_are_illegal_state_and_keep_the_connection() -> None:
    assert (HANDSHAKE_AFTER_LOGIN.error_code, HANDSHAKE_AFTER_LOGIN.close) == (ILLEGAL_SASL_STATE, Close.NO)
    assert (AUTHENTICATE_AFTER_LOGIN.error_code, AUTHENTICATE_AFTER_LOGIN.close) == (
        ILLEGAL_SASL_STATE,
        Close.NO,
    )


def test_handshake_v0_switches_to_raw_tokens() -> None:
    auth = handshaken(version=0)
    assert auth.expects_raw_tokens
    assert auth.raw_token(plain_token("alice", "alice-secret")).reply == b""
    assert auth.authenticated


def test_raw_plain_failure_closes_after_the_delay_and_raw_scram_failure_at_once() -> None:
    assert handshaken(version=0).raw_token(plain_token("alice", "x")).close == Close.AFTER_DELAY
    assert handshaken("SCRAM-SHA-512", version=0).raw_token(b"n,,n=mallory,r=a").close == Close.NOW
