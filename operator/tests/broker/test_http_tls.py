"""The coordinator's HTTP API over TLS (--http-tls-cert/--http-tls-key) with its bearer token, end to end:
a real HTTPS client that trusts the generated CA (and checks the server's name), a client that trusts
another CA refused, plain HTTP on the TLS port refused, the token required and rotated over TLS."""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.backends import StaticfleetBackend
from conformance.certs import CertificateAuthority
from conformance.scenario import SECURED

TOKEN = "https-t0ken"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StaticfleetBackend, Path, Path]]:
    root = tmp_path_factory.mktemp("http-tls")
    ca = CertificateAuthority.create(root / "http-ca")
    server = ca.server("http")
    token = root / "http-token"
    token.write_text(TOKEN + "\n")
    backend = StaticfleetBackend(SECURED, root / "coordinator")
    backend.extra_arguments = [
        "--http-tls-cert", str(server.cert), "--http-tls-key", str(server.key),
        "--http-token-file", str(token),
    ]  # fmt: skip
    asyncio.run(backend.start())
    yield backend, ca.cert_file, token
    backend.stop()


def https(
    backend: StaticfleetBackend, ca_file: Path, path: str, token: str | None = None
) -> tuple[int, bytes]:
    """A GET with the standard library's HTTPS client: the chain and the name 127.0.0.1 are verified."""
    context = ssl.create_default_context(cafile=str(ca_file))
    request = urllib.request.Request(f"https://127.0.0.1:{backend.http_port}{path}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return int(response.status), response.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read()


def test_a_client_that_trusts_the_ca_gets_the_probes_openly_and_the_api_with_the_token(
    served: tuple[StaticfleetBackend, Path, Path],
) -> None:
    backend, ca_file, _ = served
    assert https(backend, ca_file, "/healthz")[0] == 200
    status, body = https(backend, ca_file, "/readyz")
    assert status == 200 and json.loads(body)["status"] == "ready"
    assert https(backend, ca_file, "/api/groups")[0] == 401
    assert https(backend, ca_file, "/metrics", "wrong")[0] == 401
    status, body = https(backend, ca_file, "/api/groups", TOKEN)
    assert status == 200 and json.loads(body) == {"groups": [], "remaining": 0}
    status, metrics = https(backend, ca_file, "/metrics", TOKEN)
    assert status == 200 and b"staticfleet_log_writable" in metrics
    for secret in (TOKEN.encode(), b"admin-secret", b"alice-secret"):
        assert secret not in body + metrics, "the API never shows credentials"


def test_a_client_that_trusts_another_ca_is_refused(
    served: tuple[StaticfleetBackend, Path, Path], tmp_path: Path
) -> None:
    backend, _, _ = served
    other = CertificateAuthority.create(tmp_path / "other-ca", "another CA")
    with pytest.raises(urllib.error.URLError) as refused:
        https(backend, other.cert_file, "/healthz")
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError), refused.value


def test_plain_http_on_the_tls_port_gets_no_answer_and_the_port_keeps_serving(
    served: tuple[StaticfleetBackend, Path, Path],
) -> None:
    backend, ca_file, _ = served
    connection = http.client.HTTPConnection("127.0.0.1", backend.http_port, timeout=5)
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        connection.request("GET", "/healthz")
        connection.getresponse()
    connection.close()
    assert https(backend, ca_file, "/healthz")[0] == 200


def test_a_rotated_token_file_takes_effect_over_tls(served: tuple[StaticfleetBackend, Path, Path]) -> None:
    backend, ca_file, token_file = served
    rotated = "rotated-t0ken"
    token_file.write_text(rotated + "\n")
    try:
        deadline = time.monotonic() + 10
        while https(backend, ca_file, "/api/groups", rotated)[0] != 200:
            assert time.monotonic() < deadline, "the new token was not picked up"
            time.sleep(0.1)
        assert https(backend, ca_file, "/api/groups", TOKEN)[0] == 401, "the old token no longer works"
    finally:
        token_file.write_text(TOKEN + "\n")
