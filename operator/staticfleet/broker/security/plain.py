"""SASL/PLAIN as Kafka's PlainSaslServer implements it (RFC 4616, KIP-43).

Every failure is a SaslAuthenticationError: Kafka sends PLAIN's own messages to the client.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from staticfleet.broker.security.errors import SaslAuthenticationError

_PLAIN_HASH = "sha256"
_PLAIN_ITERATIONS = 4096


@dataclass(frozen=True)
class PlainCredential:
    """A PLAIN password kept salted and hashed (the file it came from holds it in clear, as JAAS does)."""

    salt: bytes
    digest: bytes

    @classmethod
    def of(cls, password: str) -> PlainCredential:
        salt = secrets.token_bytes(16)
        return cls(salt, _digest(password, salt))

    def matches(self, password: str) -> bool:
        return hmac.compare_digest(_digest(password, self.salt), self.digest)


def _digest(password: str, salt: bytes) -> bytes:
    return hashlib.pbkdf2_hmac(_PLAIN_HASH, password.encode("utf-8"), salt, _PLAIN_ITERATIONS)


PlainLookup = Callable[[str], PlainCredential | None]


def _tokens(response: str) -> list[str]:
    """Splits at NUL at most four times, as Kafka does: 3+ NULs count as 4 tokens."""
    tokens: list[str] = []
    start = 0
    for _ in range(4):
        end = response.find("\x00", start)
        if end == -1:
            tokens.append(response[start:])
            break
        tokens.append(response[start:end])
        start = end + 1
    if len(tokens) != 3:
        raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
    return tokens


class PlainServer:
    mechanism_name = "PLAIN"

    def __init__(self, lookup: PlainLookup) -> None:
        self._lookup = lookup
        self.authorization_id: str | None = None
        self.complete = False

    def evaluate(self, response: bytes) -> bytes:
        authzid, username, password = _tokens(response.decode("utf-8", errors="replace"))
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        credential = self._lookup(username)
        if credential is None or not credential.matches(password):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""


def plain_token(username: str, password: str, authzid: str = "") -> bytes:
    """The client's PLAIN message."""
    return f"{authzid}\x00{username}\x00{password}".encode()
