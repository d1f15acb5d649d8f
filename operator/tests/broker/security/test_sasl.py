"""SASL/PLAIN and SCRAM exchanges as Kafka's servers answer them (PlainSaslServer, ScramSaslServer)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from staticfleet.broker.security.errors import SaslAuthenticationError, SaslFailure, generic_failure_message
from staticfleet.broker.security.plain import PlainCredential, PlainServer, plain_token
from staticfleet.broker.security.sasl import (
    handshake_order,
    java_string_hash,
    new_server,
    validate_mechanisms,
)
from staticfleet.broker.security.scram import (
    ProofLengthError,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    base36,
    generate_credential,
    salted_password,
    secure_random_string,
    username_of,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
ALICE_256 = generate_credential(SHA256, "alice-secret", 8192)
ALICE_512 = generate_credential(SHA512, "alice-secret")


def lookup(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
    credentials = {("alice", SHA256): ALICE_256, ("alice", SHA512): ALICE_512}
    return credentials.get((user, mechanism))


def plain_server() -> PlainServer:
    users = {"alice": PlainCredential.of("alice-secret")}
    return PlainServer(users.get)


# --- PLAIN


def test_plain_success_returns_an_empty_token_and_the_username_as_authorization_id() -> None:
    server = plain_server()
    assert server.evaluate(plain_token("alice", "alice-secret")) == b""
    assert server.complete and server.authorization_id == "alice"


def test_plain_wrong_password_and_unknown_user_get_the_same_message() -> None:
    for token in (plain_token("alice", "nope"), plain_token("mallory", "alice-secret")):
        with pytest.raises(
            SaslAuthenticationError, match=r"^Authentication failed: Invalid username or password$"
        ):
            plain_server().evaluate(token)


@pytest.mark.parametrize(
    ("token", "count"),
    [(b"alice", 1), (b"\x00alice", 2), (b"a\x00b\x00c\x00d", 4), (b"a\x00b\x00c\x00d\x00e", 4)],
)
def test_plain_message_must_have_exactly_three_tokens_and_counts_at_most_four(
    token: bytes, count: int
) -> None:
    with pytest.raises(
        SaslAuthenticationError, match=rf"^Invalid SASL/PLAIN response: expected 3 tokens, got {count}$"
    ):
        plain_server().evaluate(token)


def test_plain_empty_username_then_empty_password_are_reported_first() -> None:
    with pytest.raises(SaslAuthenticationError, match="username not specified"):
        plain_server().evaluate(b"\x00\x00")
    with pytest.raises(SaslAuthenticationError, match="password not specified"):
        plain_server().evaluate(b"\x00alice\x00")


def test_plain_authzid_must_equal_the_username_and_is_checked_after_the_password() -> None:
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different from username"):
        plain_server().evaluate(plain_token("alice", "alice-secret", authzid="bob"))
    with pytest.raises(SaslAuthenticationError, match="Invalid username or password"):
        plain_server().evaluate(plain_token("alice", "nope", authzid="bob"))
    server = plain_server()
    server.evaluate(plain_token("alice", "alice-secret", authzid="alice"))
    assert server.complete


# --- SCRAM


def exchange(mechanism: ScramMechanism, user: str, password: str) -> tuple[ScramServer, ScramClient, bytes]:
    server = ScramServer(mechanism, lookup)
    client = ScramClient(mechanism, user, password)
    server_first = server.evaluate(client.first())
    return server, client, server_first


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_scram_success_takes_two_rounds_and_ends_with_a_verifiable_server_signature(
    mechanism: ScramMechanism,
) -> None:
    server, client, server_first = exchange(mechanism, "alice", "alice-secret")
    assert not server.complete
    final = server.evaluate(client.final(server_first))
    assert server.complete and server.authorization_id == "alice"
    assert final.startswith(b"v=") and client.verify(final)


def test_scram_server_first_carries_client_nonce_plus_base36_nonce_salt_and_stored_iterations() -> None:
    server = ScramServer(SHA256, lookup, nonce_factory=lambda: "abc123")
    text = server.evaluate(b"n,,n=alice,r=clientnonce").decode()
    salt = base64.b64encode(ALICE_256.salt).decode()
    assert text == f"r=clientnonceabc123,s={salt},i=8192"


def test_scram_server_nonce_is_130_bits_in_base36() -> None:
    assert base36(36**2) == "100"
    for _ in range(50):
        nonce = secure_random_string()
        assert len(nonce) <= 26 and set(nonce) <= set("0123456789abcdefghijklmnopqrstuvwxyz")


def test_scram_unknown_user_fails_on_the_first_message_with_a_withheld_reason() -> None:
    with pytest.raises(SaslFailure):
        ScramServer(SHA512, lookup).evaluate(b"n,,n=mallory,r=abc")


def test_scram_user_with_only_a_sha256_credential_is_unknown_to_sha512() -> None:
    def only_256(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return ALICE_256 if mechanism == SHA256 else None

    with pytest.raises(SaslFailure):
        ScramServer(SHA512, only_256).evaluate(b"n,,n=alice,r=abc")


@pytest.mark.parametrize(
    "first", [b"y,,n=alice,r=abc", b"p=tls-unique,,n=alice,r=abc", b"n,,n=alice", b"n,,n=alice,r="]
)
def test_scram_malformed_client_first_including_gs2_flags_other_than_n_fails_generically(
    first: bytes,
) -> None:
    with pytest.raises(SaslFailure, match="Invalid SCRAM client first message format"):
        ScramServer(SHA512, lookup).evaluate(first)


def test_scram_authzid_different_from_username_is_reported_to_the_client() -> None:
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different from username"):
        ScramServer(SHA512, lookup).evaluate(b"n,a=bob,n=alice,r=abc")


def test_scram_authzid_of_an_unknown_user_is_withheld_because_the_user_check_comes_first() -> None:
    with pytest.raises(SaslFailure):
        ScramServer(SHA512, lookup).evaluate(b"n,a=bob,n=mallory,r=abc")


def test_scram_credential_below_minimum_iterations_fails_generically() -> None:
    weak = generate_credential(SHA512, "pw", 1000)
    with pytest.raises(SaslFailure, match="less than the minimum 4096"):
        ScramServer(SHA512, lambda u, m: weak).evaluate(b"n,,n=alice,r=abc")


def test_scram_wrong_password_fails_on_the_second_message() -> None:
    server, client, server_first = exchange(SHA512, "alice", "wrong")
    with pytest.raises(SaslFailure, match="Invalid client credentials"):
        server.evaluate(client.final(server_first))


def test_scram_wrong_nonce_in_the_final_message_fails() -> None:
    server, client, server_first = exchange(SHA512, "alice", "alice-secret")
    final = client.final(server_first).replace(b",r=", b",r=x", 1)
    with pytest.raises(SaslFailure, match="Invalid client nonce"):
        server.evaluate(final)


def test_scram_channel_binding_value_is_not_checked_only_covered_by_the_proof() -> None:
    server, client, server_first = exchange(SHA512, "alice", "alice-secret")
    final = server.evaluate(client.final(server_first, channel_binding="eSws"))
    assert client.verify(final)


def test_scram_proof_of_the_wrong_length_is_not_an_authentication_failure_but_closes() -> None:
    server, client, server_first = exchange(SHA512, "alice", "alice-secret")
    final = client.final(server_first)
    short = final[: final.index(b",p=")] + b",p=" + base64.b64encode(b"short")
    with pytest.raises(ProofLengthError):
        server.evaluate(short)


def test_scram_saslname_escapes_are_decoded_and_a_bare_equals_is_rejected() -> None:
    assert username_of("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        username_of("a=2")


def test_scram_credential_derivation_matches_rfc5802_definitions() -> None:
    salt = b"salt"
    salted = salted_password(SHA256, "pencil", salt, 4096)
    credential = generate_credential(SHA256, "pencil", 4096, salt)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    assert credential.stored_key == hashlib.sha256(client_key).digest()
    assert credential.server_key == hmac.new(salted, b"Server Key", "sha256").digest()


def test_scram_rfc7677_test_vector() -> None:
    # RFC 7677 section 3: user "user", password "pencil".
    client = ScramClient(SHA256, "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert client.final(server_first) == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert client.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_failed_exchange_cannot_be_continued() -> None:
    server = ScramServer(SHA512, lookup)
    with pytest.raises(SaslFailure):
        server.evaluate(b"n,,n=mallory,r=abc")
    with pytest.raises(SaslFailure):
        server.evaluate(b"c=biws,r=abc,p=AAAA")


# --- mechanisms


def test_generic_failure_message_names_the_mechanism() -> None:
    assert generic_failure_message("SCRAM-SHA-512") == (
        "Authentication failed during authentication due to invalid credentials "
        "with SASL mechanism SCRAM-SHA-512"
    )


def test_handshake_lists_mechanisms_in_java_hash_set_order() -> None:
    assert handshake_order(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]) == [
        "PLAIN",
        "SCRAM-SHA-512",
        "SCRAM-SHA-256",
    ]
    assert handshake_order(["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]) == [
        "SCRAM-SHA-512",
        "PLAIN",
        "SCRAM-SHA-256",
    ]
    assert handshake_order(["SCRAM-SHA-256", "SCRAM-SHA-512"]) == ["SCRAM-SHA-512", "SCRAM-SHA-256"]
    assert handshake_order(["PLAIN", "SCRAM-SHA-512", "PLAIN"]) == ["PLAIN", "SCRAM-SHA-512"]


def test_java_string_hash_matches_java() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("PLAIN") == 76210602
    assert java_string_hash("hello world") == 1794106052
    assert java_string_hash("polygenelubricants") == -(2**31)  # overflows to Integer.MIN_VALUE


def test_configured_mechanisms_are_case_sensitive_and_oauthbearer_is_refused() -> None:
    assert validate_mechanisms(["PLAIN"]) == ("PLAIN",)
    with pytest.raises(ValueError, match="unknown SASL mechanism 'plain'"):
        validate_mechanisms(["plain"])
    with pytest.raises(ValueError, match="OAUTHBEARER is not supported"):
        validate_mechanisms(["OAUTHBEARER"])


def test_new_server_by_mechanism_name() -> None:
    assert isinstance(new_server("PLAIN", lambda u: None, lookup), PlainServer)
    assert isinstance(new_server("SCRAM-SHA-256", lambda u: None, lookup), ScramServer)
