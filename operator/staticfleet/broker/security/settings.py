"""The coordinator's security settings from its command line, checked as a whole.

Names follow Kafka's broker properties (`listeners` -> --listener, `sasl.enabled.mechanisms` ->
--sasl-enabled-mechanisms, `super.users` -> --super-users, ...). With none of them given the coordinator
behaves as it always has (one PLAINTEXT listener, no authorization) and says loudly that every client may
do everything.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from staticfleet.broker.security.authorizer import AuthorizerConfig, parse_super_users
from staticfleet.broker.security.listeners import (
    Listener,
    ListenerError,
    SecurityProtocol,
    build_listeners,
    parse_protocol_map,
)
from staticfleet.broker.security.sasl import validate_mechanisms
from staticfleet.broker.security.tls import ClientAuth, TlsSettings
from staticfleet.broker.security.users import CredentialStore, UsersFileError, load_users_file

OPEN_WARNING = (
    "SECURITY IS OFF: every client that can reach this coordinator may join, leave, remove and delete any "
    "group, read every group's members and offsets, and create or delete topics; the HTTP API is open too. "
    "Use SASL_SSL listeners, --authorizer standard and --http-token-file (see docs/security.md)."
)


class SecuritySettingsError(ValueError):
    """Settings that cannot work together; the message says which and what to do."""


@dataclass(frozen=True)
class SecuritySettings:
    listeners: tuple[Listener, ...]
    sasl_mechanisms: tuple[str, ...] = ()
    users_file: Path | None = None
    # None: no authorizer (every request allowed; the ACL APIs answer SECURITY_DISABLED, as Kafka does).
    authorizer: AuthorizerConfig | None = None
    tls: TlsSettings | None = None
    http_tls: TlsSettings | None = None
    http_token_file: Path | None = None
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def open(self) -> bool:
        """Nothing is protected: today's behaviour."""
        plain_only = all(listener.protocol == SecurityProtocol.PLAINTEXT for listener in self.listeners)
        return plain_only and self.authorizer is None and self.http_token_file is None

    def credentials(self) -> CredentialStore:
        """The bootstrap users (SCRAM and PLAIN) from --users-file."""
        if self.users_file is None:
            return CredentialStore()
        try:
            return CredentialStore(load_users_file(self.users_file))
        except OSError as exc:
            raise SecuritySettingsError(f"--users-file {self.users_file}: {exc.strerror}") from exc
        except UsersFileError as exc:
            raise SecuritySettingsError(f"--users-file: {exc}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("security (Kafka's broker settings, see docs/security.md)")
    group.add_argument(
        "--listener",
        action="append",
        default=[],
        metavar="NAME://HOST:PORT",
        help="a Kafka listener: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (repeatable, or comma-separated)",
    )
    group.add_argument(
        "--listener-security-protocol-map",
        default="",
        metavar="NAME:PROTOCOL,...",
        help="security protocols of listeners not named after one",
    )
    group.add_argument(
        "--sasl-enabled-mechanisms",
        default="",
        metavar="M,...",
        help="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (needed by SASL listeners)",
    )
    group.add_argument(
        "--users-file",
        type=Path,
        metavar="FILE",
        help="bootstrap users, one per line: SCRAM-SHA-512=[name=U,password=P] (kafka-storage --add-scram "
        "syntax) or PLAIN=[name=U,password=P]",
    )
    group.add_argument(
        "--authorizer",
        choices=["none", "standard"],
        default="none",
        help="standard: Kafka's ACLs (StandardAuthorizer semantics); none: every request is allowed",
    )
    group.add_argument(
        "--super-users", default="", metavar="User:A;User:B", help="principals allowed everything"
    )
    group.add_argument(
        "--allow-everyone-if-no-acl-found",
        action="store_true",
        help="allow a request on a resource that has no ACL at all (Kafka's default is to deny)",
    )
    group.add_argument("--tls-cert", type=Path, metavar="PEM", help="certificate chain of the TLS listeners")
    group.add_argument("--tls-key", type=Path, metavar="PEM", help="private key of the TLS listeners")
    group.add_argument("--tls-ca", type=Path, metavar="PEM", help="CAs trusted for client certificates")
    group.add_argument(
        "--tls-client-auth",
        choices=[c.value for c in ClientAuth],
        default=ClientAuth.NONE.value,
        help="client certificates on SSL listeners (Kafka's ssl.client.auth); the subject is the principal. "
        "SASL_SSL listeners do not ask for one (clients log in with SASL), as Kafka without a listener "
        "prefix",
    )
    group.add_argument("--http-tls-cert", type=Path, metavar="PEM", help="serve the HTTP API over TLS")
    group.add_argument("--http-tls-key", type=Path, metavar="PEM")
    group.add_argument(
        "--http-token-file",
        type=Path,
        metavar="FILE",
        help="bearer token required by /api/* and /metrics (re-read when the file changes)",
    )


def from_arguments(
    args: argparse.Namespace, *, default_listener: str, advertised: Sequence[str] = ()
) -> SecuritySettings:
    """The settings; `default_listener` (e.g. PLAINTEXT://0.0.0.0:9092) applies without --listener."""
    try:
        protocol_map = parse_protocol_map(args.listener_security_protocol_map)
        listeners = tuple(build_listeners(args.listener or [default_listener], advertised, protocol_map))
    except ListenerError as exc:
        raise SecuritySettingsError(str(exc)) from exc
    warnings: list[str] = []
    sasl = [listener for listener in listeners if listener.protocol.uses_sasl]
    mechanisms: tuple[str, ...] = ()
    if args.sasl_enabled_mechanisms:
        try:
            mechanisms = validate_mechanisms(
                m.strip() for m in args.sasl_enabled_mechanisms.split(",") if m.strip()
            )
        except ValueError as exc:
            raise SecuritySettingsError(f"--sasl-enabled-mechanisms: {exc}") from exc
    if sasl and not mechanisms:
        raise SecuritySettingsError(
            f"listener {sasl[0].name} uses SASL: give --sasl-enabled-mechanisms (e.g. SCRAM-SHA-512)"
        )
    if mechanisms and not sasl:
        warnings.append("--sasl-enabled-mechanisms has no effect: no SASL_PLAINTEXT or SASL_SSL listener")
    if sasl and args.users_file is None:
        warnings.append(
            "no --users-file: nobody can log in over SASL until a super user adds SCRAM users "
            "(kafka-configs --alter --add-config 'SCRAM-SHA-512=[password=...]' --entity-type users)"
        )
    tls_listeners = [listener for listener in listeners if listener.protocol.uses_tls]
    tls: TlsSettings | None = None
    if tls_listeners or args.tls_cert or args.tls_key:
        if not (args.tls_cert and args.tls_key):
            which = tls_listeners[0].name if tls_listeners else "TLS"
            raise SecuritySettingsError(f"listener {which} needs --tls-cert and --tls-key (PEM files)")
        client_auth = ClientAuth(args.tls_client_auth)
        if client_auth != ClientAuth.NONE and args.tls_ca is None:
            raise SecuritySettingsError(
                f"--tls-client-auth {client_auth.value} needs --tls-ca to verify client certificates"
            )
        tls = TlsSettings(args.tls_cert, args.tls_key, args.tls_ca, client_auth)
    authorizer: AuthorizerConfig | None = None
    try:
        super_users = parse_super_users(args.super_users)
    except ValueError as exc:
        raise SecuritySettingsError(f"--super-users: {exc}") from exc
    if args.authorizer == "standard":
        authorizer = AuthorizerConfig(super_users, args.allow_everyone_if_no_acl_found)
        if not super_users:
            warnings.append("--authorizer standard without --super-users: nobody can create the first ACLs")
    elif super_users or args.allow_everyone_if_no_acl_found:
        raise SecuritySettingsError(
            "--super-users and --allow-everyone-if-no-acl-found need --authorizer standard"
        )
    if authorizer is None and (sasl or tls_listeners):
        warnings.append(
            "clients authenticate but --authorizer is none: every authenticated client may do everything"
        )
    http_tls: TlsSettings | None = None
    if args.http_tls_cert or args.http_tls_key:
        if not (args.http_tls_cert and args.http_tls_key):
            raise SecuritySettingsError("the HTTP API's TLS needs both --http-tls-cert and --http-tls-key")
        http_tls = TlsSettings(args.http_tls_cert, args.http_tls_key)
    settings = SecuritySettings(
        listeners,
        mechanisms,
        args.users_file,
        authorizer,
        tls,
        http_tls,
        args.http_token_file,
    )
    if settings.open:
        warnings.insert(0, OPEN_WARNING)
    return SecuritySettings(
        listeners,
        mechanisms,
        args.users_file,
        authorizer,
        tls,
        http_tls,
        args.http_token_file,
        tuple(warnings),
    )
