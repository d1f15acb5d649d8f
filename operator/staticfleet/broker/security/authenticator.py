"""The SASL state machine of one connection, as Kafka's SaslServerAuthenticator runs it (pure: no I/O).

On a SASL listener a connection starts unauthenticated and may send only ApiVersions (once) and
SaslHandshake; after the handshake only SaslAuthenticate (or, after handshake v0, raw SASL tokens). The
server asks `request()` what to do with each incoming request, then calls `api_versions_answered`,
`handshake` or `authenticate`, and follows the answer's `close` instruction:

- `Close.NOW`: close without answering;
- `Close.AFTER_DELAY`: send the answer after `connection.failed.authentication.delay.ms` (100 ms), then close;
- `Close.NO`: send the answer and carry on.

On PLAINTEXT and SSL listeners the connection is authenticated from the start (its principal comes from the
TLS certificate, or is User:ANONYMOUS), and SaslHandshake/SaslAuthenticate get ILLEGAL_SASL_STATE answers.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from staticfleet.broker.registry import API_KEYS
from staticfleet.broker.security.errors import SaslAuthenticationError, SaslFailure, generic_failure_message
from staticfleet.broker.security.sasl import SaslServer, handshake_order
from staticfleet.broker.security.scram import ProofLengthError

API_VERSIONS = API_KEYS["api_versions"]
SASL_HANDSHAKE = API_KEYS["sasl_handshake"]
SASL_AUTHENTICATE = API_KEYS["sasl_authenticate"]
SASL_HANDSHAKE_VERSIONS = range(0, 2)
SASL_AUTHENTICATE_VERSIONS = range(0, 3)

# Kafka's error codes used here, as the integers the answers carry.
NONE = int(ErrorCode.none)
UNSUPPORTED_SASL_MECHANISM = int(ErrorCode.unsupported_sasl_mechanism)
ILLEGAL_SASL_STATE = int(ErrorCode.illegal_sasl_state)
SASL_AUTHENTICATION_FAILED = int(ErrorCode.sasl_authentication_failed)

FAILED_AUTHENTICATION_DELAY_MS = 100
AFTER_AUTHENTICATION_MESSAGE = "SaslAuthenticate request received after successful authentication"


class State(enum.Enum):
    INITIAL = "INITIAL_REQUEST"
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


class Step(enum.Enum):
    """What to do with an incoming request."""

    API_VERSIONS = "answer ApiVersions, then call api_versions_answered()"
    HANDSHAKE = "call handshake()"
    AUTHENTICATE = "call authenticate()"
    SERVE = "authenticated: authorize and handle as usual"
    ILLEGAL_STATE = "answer this API's error response with ILLEGAL_SASL_STATE after the delay, then close"
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

    def request(self, api_key: int, api_version: int) -> Step:
        if self.state == State.COMPLETE:
            if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                return Step.HANDSHAKE if api_key == SASL_HANDSHAKE else Step.AUTHENTICATE
            return Step.SERVE
        if self.state in (State.INITIAL, State.HANDSHAKE_OR_VERSIONS, State.HANDSHAKE):
            if api_key == API_VERSIONS:
                if self.state == State.HANDSHAKE:
                    return Step.CLOSE  # a second ApiVersions: IllegalStateException, no answer
                self.state = State.HANDSHAKE_OR_VERSIONS
                return Step.API_VERSIONS
            if api_key == SASL_HANDSHAKE and api_version in SASL_HANDSHAKE_VERSIONS:
                if self.state == State.INITIAL:
                    self.state = State.HANDSHAKE_OR_VERSIONS
                return Step.HANDSHAKE
            return Step.CLOSE
        if self.state == State.AUTHENTICATE and self.framed:
            if api_key == SASL_AUTHENTICATE:
                return Step.AUTHENTICATE if api_version in SASL_AUTHENTICATE_VERSIONS else Step.CLOSE
            self.state = State.FAILED
            return Step.ILLEGAL_STATE
        return Step.CLOSE

    def api_versions_answered(self, *, ok: bool) -> None:
        """An ApiVersions answer was sent; `ok` False for the UNSUPPORTED_VERSION/INVALID_REQUEST answers,
        after which ApiVersions may be sent again."""
        if ok:
            self.state = State.HANDSHAKE

    def handshake(self, api_version: int, mechanism: str) -> HandshakeAnswer:
        if self.state == State.COMPLETE:
            return HandshakeAnswer(ILLEGAL_SASL_STATE, ())
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
            return AuthenticateAnswer(ILLEGAL_SASL_STATE, AFTER_AUTHENTICATION_MESSAGE, b"")
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


def answer_sasl_on_authenticated_connection(api_key: int) -> HandshakeAnswer | AuthenticateAnswer:
    """SaslHandshake or SaslAuthenticate on a PLAINTEXT/SSL listener, or after authentication (no
    re-authentication configured): ILLEGAL_SASL_STATE, and the connection stays open."""
    if api_key == SASL_HANDSHAKE:
        return HandshakeAnswer(ILLEGAL_SASL_STATE, ())
    return AuthenticateAnswer(ILLEGAL_SASL_STATE, AFTER_AUTHENTICATION_MESSAGE, b"")
