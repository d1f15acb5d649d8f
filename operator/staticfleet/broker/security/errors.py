"""Exceptions a SASL mechanism raises, sorted by what the client is allowed to learn (as Kafka sorts them)."""

from __future__ import annotations


class SaslAuthenticationError(Exception):
    """A failure whose message is sent to the client with SASL_AUTHENTICATION_FAILED (Kafka's
    SaslAuthenticationException): every PLAIN failure, a SCRAM authorization id mismatch."""


class SaslFailure(Exception):
    """A failure whose reason is withheld (Kafka's plain SaslException): the client gets only
    "Authentication failed during authentication due to invalid credentials with SASL mechanism <M>"."""


def generic_failure_message(mechanism: str, *, reauthentication: bool = False) -> str:
    stage = "re-authentication" if reauthentication else "authentication"
    return f"Authentication failed during {stage} due to invalid credentials with SASL mechanism {mechanism}"
