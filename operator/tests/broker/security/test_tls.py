"""TLS server contexts over real handshakes on loopback: client-auth policy, principal, certificate reload."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID, ObjectIdentifier

from conformance.certs import CertificateAuthority, Issued
from staticfleet.broker.security.tls import (
    ClientAuth,
    ReloadingContext,
    TlsConfigError,
    TlsSettings,
    build_server_context,
    principal_from_certificate,
    rfc2253_name,
)


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path / "tls")


def run(server_context: ssl.SSLContext | ReloadingContext, client: ssl.SSLContext) -> tuple[str, bytes]:
    return asyncio.run(handshake(server_context, client))


def settings(server: Issued, ca: CertificateAuthority, auth: ClientAuth = ClientAuth.NONE) -> TlsSettings:
    return TlsSettings(server.cert, server.key, ca.cert_file, auth)


def client_context(ca: CertificateAuthority, client: Issued | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca.cert_file))
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    return context


async def handshake(
    server_context: ssl.SSLContext | ReloadingContext, client: ssl.SSLContext
) -> tuple[str, bytes]:
    """Connects once; returns the principal the server derived and the server certificate it presented."""
    seen: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        seen.set_result(principal_from_certificate(ssl_object.getpeercert(binary_form=True)))
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    if isinstance(server_context, ReloadingContext):
        base = server_context.context()
        base.sni_callback = server_context.sni_callback
        context = base
    else:
        context = server_context
    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="localhost"
        )
        peer = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        assert await reader.read(2) == b"ok"
        writer.close()
        return await asyncio.wait_for(seen, 5), peer
    finally:
        server.close()
        await server.wait_closed()


def test_without_client_auth_the_principal_is_anonymous(ca: CertificateAuthority) -> None:
    principal, _ = run(build_server_context(settings(ca.server(), ca)), client_context(ca))
    assert principal == "User:ANONYMOUS"


def test_client_certificate_subject_becomes_the_principal_in_rfc2253_form(ca: CertificateAuthority) -> None:
    context = build_server_context(settings(ca.server(), ca, ClientAuth.REQUIRED))
    principal, _ = run(context, client_context(ca, ca.client("alice", "alice")))
    assert principal == "User:CN=alice,O=staticfleet,C=US"


def test_requested_client_auth_accepts_clients_without_a_certificate(ca: CertificateAuthority) -> None:
    context = build_server_context(settings(ca.server(), ca, ClientAuth.REQUESTED))
    assert run(context, client_context(ca))[0] == "User:ANONYMOUS"
    assert run(context, client_context(ca, ca.client("bob", "bob")))[0] == "User:CN=bob,O=staticfleet,C=US"


def test_required_client_auth_fails_the_handshake_without_a_certificate(ca: CertificateAuthority) -> None:
    context = build_server_context(settings(ca.server(), ca, ClientAuth.REQUIRED))
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError, AssertionError)):
        run(context, client_context(ca))


def test_client_certificate_from_another_ca_is_refused(ca: CertificateAuthority, tmp_path: Path) -> None:
    other = CertificateAuthority.create(tmp_path / "other", "another CA")
    context = build_server_context(settings(ca.server(), ca, ClientAuth.REQUIRED))
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError, AssertionError)):
        run(context, client_context(ca, other.client("eve", "eve")))


def test_rotated_certificate_is_served_to_new_connections(ca: CertificateAuthority) -> None:
    server = ca.server()
    now = [0.0]
    reloading = ReloadingContext(settings(server, ca), interval=1.0, clock=lambda: now[0])
    _, first = run(reloading, client_context(ca))
    ca.server()  # same file names, new certificate
    _, cached = run(reloading, client_context(ca))
    assert cached == first  # not checked again within the interval
    now[0] = 2.0
    _, rotated = run(reloading, client_context(ca))
    assert rotated != first and reloading.reloads == 1


def test_broken_rotation_keeps_the_previous_context_and_reports(ca: CertificateAuthority) -> None:
    server = ca.server()
    errors: list[TlsConfigError] = []
    now = [0.0]
    reloading = ReloadingContext(settings(server, ca), clock=lambda: now[0], on_error=errors.append)
    before = reloading.context()
    server.key.write_text("not a key")
    now[0] = 5.0
    assert reloading.context() is before
    assert errors and "cannot load the certificate" in str(errors[0])


def test_client_auth_without_a_ca_is_a_configuration_error(ca: CertificateAuthority) -> None:
    server = ca.server()
    with pytest.raises(TlsConfigError, match="no CA file"):
        build_server_context(TlsSettings(server.cert, server.key, None, ClientAuth.REQUIRED))


def test_rfc2253_escapes_special_characters_and_writes_unknown_attributes_as_hex() -> None:
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc."),
            x509.NameAttribute(NameOID.COMMON_NAME, "#alice "),
        ]
    )
    assert rfc2253_name(name) == r"CN=\#alice\ ,O=Acme\, Inc."
    email = x509.Name([x509.NameAttribute(ObjectIdentifier("1.2.840.113549.1.9.1"), "a@b")])
    assert rfc2253_name(email) == "1.2.840.113549.1.9.1=#1603614062"
