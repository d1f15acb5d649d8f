"""TLS for listeners: server contexts from PEM files, client-certificate policy, and the principal.

Certificates are re-read when their files change (a Kubernetes Secret mount is updated by an atomic symlink
swap), so a rotated certificate is served to every new connection without a restart.
"""

from __future__ import annotations

import enum
import os
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from staticfleet.broker.security.acl import ANONYMOUS


class ClientAuth(enum.Enum):
    """Kafka's `ssl.client.auth`."""

    NONE = "none"
    REQUESTED = "requested"
    REQUIRED = "required"


class TlsConfigError(ValueError):
    """TLS files that cannot be used; the message names the file and the reason."""


@dataclass(frozen=True)
class TlsSettings:
    cert_file: Path
    key_file: Path
    ca_file: Path | None = None
    client_auth: ClientAuth = ClientAuth.NONE
    key_password: str | None = None

    def files(self) -> tuple[Path, ...]:
        return (self.cert_file, self.key_file) + ((self.ca_file,) if self.ca_file is not None else ())


def build_server_context(settings: TlsSettings) -> ssl.SSLContext:
    """A server context: TLS 1.2 and 1.3 (Kafka's ssl.enabled.protocols), the chain from `cert_file`."""
    if settings.client_auth != ClientAuth.NONE and settings.ca_file is None:
        raise TlsConfigError(
            f"client certificates are {settings.client_auth.value} but no CA file is given to verify them"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(settings.cert_file, settings.key_file, password=settings.key_password)
    except (OSError, ssl.SSLError) as exc:
        raise TlsConfigError(
            f"cannot load the certificate {settings.cert_file} with key {settings.key_file}: {exc}"
        ) from exc
    if settings.ca_file is not None:
        try:
            context.load_verify_locations(cafile=settings.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise TlsConfigError(f"cannot load the CA file {settings.ca_file}: {exc}") from exc
    context.verify_mode = {
        ClientAuth.NONE: ssl.CERT_NONE,
        ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
        ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
    }[settings.client_auth]
    return context


def _fingerprint(paths: tuple[Path, ...]) -> tuple[tuple[int, int, int], ...]:
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append((-1, -1, -1))
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class ReloadingContext:
    """The current server context, rebuilt when a file changes (checked at most every `interval` s).

    A change that does not load (a half-written file, a key that does not match) keeps the previous
    context and reports the error through `on_error`; it is tried again at the next check.
    """

    def __init__(
        self,
        settings: TlsSettings,
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        on_error: Callable[[TlsConfigError], None] | None = None,
    ) -> None:
        self.settings = settings
        self._interval = interval
        self._clock = clock
        self._on_error = on_error
        self._lock = threading.Lock()
        self._stamp = _fingerprint(settings.files())
        self._context = build_server_context(settings)
        self._checked = clock()
        self.reloads = 0

    def context(self) -> ssl.SSLContext:
        now = self._clock()
        if now - self._checked < self._interval:
            return self._context
        with self._lock:
            self._checked = now
            stamp = _fingerprint(self.settings.files())
            if stamp != self._stamp:
                try:
                    self._context = build_server_context(self.settings)
                except TlsConfigError as exc:
                    if self._on_error is not None:
                        self._on_error(exc)
                else:
                    self._stamp = stamp
                    self.reloads += 1
            return self._context

    def sni_callback(
        self, ssl_object: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: object
    ) -> None:
        """For a server started with one context: moves each handshake to the current context."""
        current = self.context()
        if ssl_object.context is not current:
            ssl_object.context = current


# RFC 2253 keywords (what java.security X500Principal.getName() writes); other attributes become
# <dotted OID>=#<hex of the DER value>.
_RFC2253_KEYWORDS = {
    NameOID.COMMON_NAME: "CN",
    NameOID.COUNTRY_NAME: "C",
    NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST",
    NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
    NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC",
    NameOID.USER_ID: "UID",
}


def _escape(value: str) -> str:
    out = []
    for i, char in enumerate(value):
        if char in ',+"\\<>;' or (i == 0 and char in "# ") or (i == len(value) - 1 and char == " "):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def _der_value(attribute: x509.NameAttribute[str | bytes]) -> str:
    # A DER string: tag (UTF8String 0x0c, PrintableString 0x13, IA5String 0x16 ...) + length + bytes.
    raw = attribute.value if isinstance(attribute.value, bytes) else attribute.value.encode("utf-8")
    asn1_type = getattr(attribute, "_type", None)
    tag = int(asn1_type.value) if asn1_type is not None else 0x0C
    length = len(raw)
    if length < 0x80:
        header = bytes([tag, length])
    else:
        size = length.to_bytes((length.bit_length() + 7) // 8, "big")
        header = bytes([tag, 0x80 | len(size)]) + size
    return "#" + (header + raw).hex()


def rfc2253_name(name: x509.Name) -> str:
    """A distinguished name as Java's X500Principal.getName() writes it: last RDN first, no spaces."""
    rdns = []
    for rdn in reversed(list(name.rdns)):
        parts = []
        for attribute in rdn:
            keyword = _RFC2253_KEYWORDS.get(attribute.oid)
            if keyword is None:
                parts.append(f"{attribute.oid.dotted_string}={_der_value(attribute)}")
            else:
                value = attribute.value if isinstance(attribute.value, str) else attribute.value.decode()
                parts.append(f"{keyword}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def principal_from_certificate(der: bytes | None) -> str:
    """`User:<RFC 2253 subject>` for a client certificate, `User:ANONYMOUS` without one (Kafka's
    DefaultKafkaPrincipalBuilder with the DEFAULT ssl.principal.mapping.rules)."""
    if not der:
        return ANONYMOUS
    certificate = x509.load_der_x509_certificate(der)
    return "User:" + rfc2253_name(certificate.subject)
