"""The SASL state machine of one connection, as Kafka's SaslServerAuthenticator runs it (pure: no I/O).

On a SASL listener a connection starts unauthenticated and may send only ApiVersions (once) and
SaslHandshake; after the handshake only SaslAuthenticate (or, after handshake v0, raw SASL tokens). The
broker's one dispatch path asks `admit()` about every request before it parses it, passing the part
the request's API plays in a login (its registry entry says which, as a `LoginStep`); the SASL APIs'
handlers then call `api_versions_answered`, `handshake` or `authenticate`. A failed login ends the
connection: the answer (if any) goes out after `connection.failed.authentication.delay.ms` (100 ms),
then the connection closes; an answer whose `close` is `Close.NOW` is not sent at all.

On PLAINTEXT and SSL listeners there is nothing to log in to (the principal comes from the TLS
certificate, or is User:ANONYMOUS), and SaslHandshake/SaslAuthenticate get the ILLEGAL_SASL_STATE answers
they get after a login.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from staticfleet.broker.security.errors import SaslAuthenticationError, SaslFailure, generic_failure_message
from staticfleet.broker.security.sasl import SaslServer, handshake_order
from staticfleet.broker.security.scram import ProofLengthError

# Kafka's error codes used here, as the integers the answers carry.
NONE = int(ErrorCode.none)
UNSUPPORTED_SASL_MECHANISM = int(ErrorCode.unsupported_sasl_mechanism)
ILLEGAL_SASL_STATE = int(ErrorCode.illegal_sasl_state)
SASL_AUTHENTICATION_FAILED = int(ErrorCode.sasl_authentication_failed)

AFTER_AUTHENTICATION_MESSAGE = "SaslAuthenticate request received after successful authentication"


class State(enum.Enum):
    INITIAL = "INITIAL_REQUEST"
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class LoginStep(enum.Enum):
    """The part an API plays in a SASL login; every other API has none."""

    VERSIONS = "ApiVersions"
    HANDSHAKE = "SaslHandshake"
    AUTHENTICATE = "SaslAuthenticate"


class Admission(enum.Enum):
    """What the dispatch path does with a request, decided before it is parsed."""

    SERVE = "parse it and hand it to its handler"
    ILLEGAL_STATE = "answer this API's error answer with ILLEGAL_SASL_STATE after the delay, then close"
    CLOSE = "close without answering"


class Close(enum.Enum):
    NO = "no"
    NOW = "now"
    AFTER_DELAY = "after the failed-authentication delay"


@dataclass(frozen=True)
class HandshakeAnswer:
    error_code: int
    mechanisms: tuple[str, ...]
    close: Close = Close.NO


@dataclass(frozen=True)
class AuthenticateAnswer:
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int = 0
    close: Close = Close.NO


@dataclass(frozen=True)
class RawTokenAnswer:
    """After SaslHandshake v0 the client sends bare SASL tokens; replies are size-prefixed tokens."""

    reply: bytes | None
    close: Close = Close.NO


ServerFactory = Callable[[str], SaslServer]

# SaslHandshake and SaslAuthenticate on a connection with nothing (more) to log in to: a PLAINTEXT or SSL
# listener, or after the login (no re-authentication configured). The connection stays open.
HANDSHAKE_AFTER_LOGIN = HandshakeAnswer(ILLEGAL_SASL_STATE, ())
AUTHENTICATE_AFTER_LOGIN = AuthenticateAnswer(ILLEGAL_SASL_STATE, AFTER_AUTHENTICATION_MESSAGE, b"")


def illegal_state_message(api_name: str) -> str:
    """The message of the ILLEGAL_SASL_STATE answer to another request during authentication."""
    return f"Unexpected Kafka request of type {api_name} during SASL authentication."


class SaslAuthenticator:
    """One connection on a SASL_PLAINTEXT or SASL_SSL listener."""

    def __init__(self, enabled_mechanisms: Sequence[str], new_server: ServerFactory) -> None:
        self.mechanisms = tuple(handshake_order(enabled_mechanisms))
        self._enabled = frozenset(enabled_mechanisms)
        self._new_server = new_server
        self.state = State.INITIAL
        self.framed = True
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self.principal: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.state == State.COMPLETE

    @property
    def expects_raw_tokens(self) -> bool:
        """After a v0 handshake the next frames are bare SASL tokens, not Kafka requests."""
        return self.state == State.AUTHENTICATE and not self.framed

    @property
    def failed(self) -> bool:
        return self.state == State.FAILED

    def admit(self, step: LoginStep | None) -> Admission:
        """Whether a request of an API playing `step` in a login may be served now (Kafka checks this
        before it parses the request)."""
        if self.state == State.COMPLETE:
            return Admission.SERVE
        if self.state in (State.INITIAL, State.HANDSHAKE_OR_VERSIONS, State.HANDSHAKE):
            if step == LoginStep.VERSIONS:
                if self.state == State.HANDSHAKE:
                    return Admission.CLOSE  # a second ApiVersions: IllegalStateException, no answer
                self.state = State.HANDSHAKE_OR_VERSIONS
                return Admission.SERVE
            if step == LoginStep.HANDSHAKE:
                if self.state == State.INITIAL:
                    self.state = State.HANDSHAKE_OR_VERSIONS
                return Admission.SERVE
            return Admission.CLOSE
        if self.state == State.AUTHENTICATE and self.framed:
            if step == LoginStep.AUTHENTICATE:
                return Admission.SERVE
            self.state = State.FAILED
            return Admission.ILLEGAL_STATE
        return Admission.CLOSE

    def api_versions_answered(self, *, ok: bool) -> None:
        """An ApiVersions answer was sent; `ok` False for the UNSUPPORTED_VERSION/INVALID_REQUEST answers,
        after which ApiVersions may be sent again. (After the login ApiVersions changes nothing.)"""
        if ok and self.state == State.HANDSHAKE_OR_VERSIONS:
            self.state = State.HANDSHAKE

    def handshake(self, api_version: int, mechanism: str) -> HandshakeAnswer:
        if self.state == State.COMPLETE:
            return HANDSHAKE_AFTER_LOGIN
        if mechanism not in self._enabled:
            self.state = State.FAILED
            return HandshakeAnswer(UNSUPPORTED_SASL_MECHANISM, self.mechanisms, Close.AFTER_DELAY)
        self.framed = api_version >= 1
        self.mechanism = mechanism
        self._server = self._new_server(mechanism)
        self.state = State.AUTHENTICATE
        return HandshakeAnswer(NONE, self.mechanisms)

    def authenticate(self, api_version: int, auth_bytes: bytes) -> AuthenticateAnswer:
        if self.state == State.COMPLETE:
            return AUTHENTICATE_AFTER_LOGIN
        assert self._server is not None and self.mechanism is not None, "authenticate() before handshake()"
        try:
            challenge = self._server.evaluate(auth_bytes)
        except SaslAuthenticationError as exc:
            return self._failed(str(exc))
        except SaslFailure:
            return self._failed(generic_failure_message(self.mechanism))
        except ProofLengthError:
            self.state = State.FAILED
            return AuthenticateAnswer(SASL_AUTHENTICATION_FAILED, None, b"", close=Close.NOW)
        if self._server.complete:
            self._complete()
        # Kafka leaves the message at its default (an empty string) on success.
        return AuthenticateAnswer(NONE, "", challenge)

    def raw_token(self, token: bytes) -> RawTokenAnswer:
        """One bare SASL token after a v0 handshake."""
        assert self._server is not None
        try:
            challenge = self._server.evaluate(token)
        except SaslAuthenticationError:
            self.state = State.FAILED
            return RawTokenAnswer(None, Close.AFTER_DELAY)
        except (SaslFailure, ProofLengthError):
            self.state = State.FAILED
            return RawTokenAnswer(None, Close.NOW)
        if self._server.complete:
            self._complete()
        return RawTokenAnswer(challenge)

    def _failed(self, message: str) -> AuthenticateAnswer:
        self.state = State.FAILED
        return AuthenticateAnswer(SASL_AUTHENTICATION_FAILED, message, b"", close=Close.AFTER_DELAY)

    def _complete(self) -> None:
        assert self._server is not None
        self.principal = f"User:{self._server.authorization_id}"
        self.state = State.COMPLETE
        self._server = None
