"""The secured backend pair's settings and the client side of SASL for scenarios.

Both backends run with the same `SecurityProfile`: a PLAINTEXT listener (its principal, User:ANONYMOUS, is a
super user: Kafka's broker half needs that to reach its own controller, and staticfleet is configured the
same way), a SASL_PLAINTEXT and a SASL_SSL listener with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, the users
below, StandardAuthorizer semantics, `super.users=User:admin;User:ANONYMOUS` and
`allow.everyone.if.no.acl.found=false`. Certificates are made per backend by conformance.certs.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from conformance import driver as d
from conformance.certs import Issued
from staticfleet.broker.security.plain import plain_token
from staticfleet.broker.security.scram import ScramClient, ScramMechanism

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
PLAINTEXT = "PLAINTEXT"
SSL = "SSL"  # TLS with a client certificate required: the certificate's subject is the principal


@dataclass(frozen=True)
class ScramUser:
    name: str
    mechanism: str
    password: str
    iterations: int = 4096

    def add_scram(self) -> str:
        """The entry in `kafka-storage format --add-scram` syntax (also the users-file syntax)."""
        extra = f",iterations={self.iterations}" if self.iterations != 4096 else ""
        return f"{self.mechanism}=[name={self.name}{extra},password={self.password}]"


@dataclass(frozen=True)
class SecurityProfile:
    mechanisms: tuple[str, ...] = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
    super_users: tuple[str, ...] = ("User:admin", "User:ANONYMOUS")
    scram_users: tuple[ScramUser, ...] = (
        ScramUser("admin", SCRAM_SHA_512, "admin-secret"),
        ScramUser("admin", SCRAM_SHA_256, "admin-secret"),
        ScramUser("alice", SCRAM_SHA_512, "alice-secret"),
        ScramUser("alice", SCRAM_SHA_256, "alice-secret", 8192),
        ScramUser("bob", SCRAM_SHA_512, "bob-secret"),
        ScramUser("carol", SCRAM_SHA_256, "carol-secret"),
    )
    plain_users: tuple[tuple[str, str], ...] = (
        ("admin", "admin-secret"),
        ("alice", "alice-secret"),
        ("bob", "bob-secret"),
    )

    def users_file(self) -> str:
        """The bootstrap users file for staticfleet (the same credentials Kafka is formatted with)."""
        lines = [u.add_scram() for u in self.scram_users]
        lines += [f"PLAIN=[name={name},password={password}]" for name, password in self.plain_users]
        return "\n".join(lines) + "\n"

    def jaas_plain(self) -> str:
        users = " ".join(f'user_{name}="{password}"' for name, password in self.plain_users)
        return f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};"

    def password(self, user: str) -> str:
        for name, password in self.plain_users:
            if name == user:
                return password
        for scram in self.scram_users:
            if scram.name == user:
                return scram.password
        raise KeyError(user)


def client_tls(ca_file: Path, certificate: Issued | None = None) -> ssl.SSLContext:
    """A client context that trusts the test CA and checks the server certificate (by IP, no SNI),
    presenting `certificate` if given."""
    context = ssl.create_default_context(cafile=str(ca_file))
    context.check_hostname = False  # the driver dials 127.0.0.1; the chain is still verified
    if certificate is not None:
        context.load_cert_chain(certificate.cert, certificate.key)
    return context


class SaslLoginFailed(AssertionError):
    def __init__(self, answers: list[Any]) -> None:
        super().__init__(f"SASL login failed: {answers[-1]!r}")
        self.answers = answers


async def sasl_login(
    conn: d.Connection,
    mechanism: str,
    user: str,
    password: str,
    *,
    handshake_version: int = 1,
    authenticate_version: int = 2,
) -> list[Any]:
    """Authenticates `conn` as a Java client does (SaslHandshake, then SaslAuthenticate rounds).

    Returns every answer; raises SaslLoginFailed with them if the broker refuses.
    """
    answers: list[Any] = [await conn.request(d.sasl_handshake(handshake_version, mechanism))]
    if answers[0].error_code != ErrorCode.none:
        raise SaslLoginFailed(answers)
    if mechanism == PLAIN:
        answers.append(
            await conn.request(d.sasl_authenticate(authenticate_version, plain_token(user, password)))
        )
    else:
        scram_mechanism = ScramMechanism.by_name(mechanism)
        assert scram_mechanism is not None
        client = ScramClient(scram_mechanism, user, password)
        first = await conn.request(d.sasl_authenticate(authenticate_version, client.first()))
        answers.append(first)
        if first.error_code == ErrorCode.none:
            final = await conn.request(
                d.sasl_authenticate(authenticate_version, client.final(bytes(first.auth_bytes)))
            )
            answers.append(final)
            if final.error_code == ErrorCode.none and not client.verify(bytes(final.auth_bytes)):
                raise AssertionError("the server signature does not verify")
    if answers[-1].error_code != ErrorCode.none:
        raise SaslLoginFailed(answers)
    return answers
