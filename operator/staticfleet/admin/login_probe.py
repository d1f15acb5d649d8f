"""A direct SASL login, to say why a cluster refused a client (kafka-python reports only a bootstrap timeout,
and over TLS it may see the broker's close before the broker's answer)."""

from __future__ import annotations

import io
import socket
import ssl
import struct
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from staticfleet.admin.connection import KafkaConnection
from staticfleet.broker.security.plain import plain_token
from staticfleet.broker.security.scram import ScramClient, ScramMechanism


class _Wire:
    def __init__(self, sock: socket.socket, client_id: str) -> None:
        self._sock = sock
        self._client_id = client_id
        self._correlation = 0

    def call(self, request: Any, response_type: type[Any], flexible: bool) -> Any:
        self._correlation += 1
        frame = io.BytesIO()
        header_type = RequestHeaderV2 if flexible else RequestHeaderV1
        entity_writer(header_type)(
            frame,
            header_type(
                request_api_key=i16(request.__api_key__),
                request_api_version=i16(request.__version__),
                correlation_id=i32(self._correlation),
                client_id=self._client_id,
            ),
        )
        entity_writer(type(request))(frame, request)
        payload = frame.getvalue()
        self._sock.sendall(struct.pack(">i", len(payload)) + payload)
        (size,) = struct.unpack(">i", self._read(4))
        body = self._read(size)
        _, offset = entity_reader(ResponseHeaderV1 if flexible else ResponseHeaderV0)(body, 0)
        response, _ = entity_reader(response_type)(body, offset)
        return response

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self._sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data


def login_refusal(connection: KafkaConnection, timeout_s: float) -> str | None:
    """The broker's reason for refusing this connection's SASL login, or None if it accepts it (or the
    broker cannot be reached at all, which the caller reports on its own)."""
    if not connection.sasl_mechanism:
        return None
    first = connection.bootstrap_servers.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s)
    except (OSError, ValueError):
        return None
    try:
        if connection.security_protocol == "SASL_SSL":
            context = ssl.create_default_context(cafile=connection.ssl_cafile)
            context.check_hostname = connection.ssl_check_hostname
            if connection.ssl_certfile:
                context.load_cert_chain(connection.ssl_certfile, connection.ssl_keyfile)
            sock = context.wrap_socket(sock, server_hostname=host.strip("[]"))
        wire = _Wire(sock, connection.client_id)
        mechanism = connection.sasl_mechanism
        handshake = wire.call(SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse, False)
        if handshake.error_code != ErrorCode.none:
            return (
                f"mechanism {mechanism} is not enabled (the broker offers {', '.join(handshake.mechanisms)})"
            )
        user, password = connection.sasl_username or "", connection.sasl_password or ""
        if mechanism == "PLAIN":
            tokens = [plain_token(user, password)]
            answer = wire.call(SaslAuthenticateRequest(auth_bytes=tokens[0]), SaslAuthenticateResponse, True)
        else:
            scram_mechanism = ScramMechanism.by_name(mechanism)
            if scram_mechanism is None:
                return f"unknown SASL mechanism {mechanism}"
            client = ScramClient(scram_mechanism, user, password)
            answer = wire.call(
                SaslAuthenticateRequest(auth_bytes=client.first()), SaslAuthenticateResponse, True
            )
            if answer.error_code == ErrorCode.none:
                final = client.final(bytes(answer.auth_bytes))
                answer = wire.call(SaslAuthenticateRequest(auth_bytes=final), SaslAuthenticateResponse, True)
        if answer.error_code != ErrorCode.none:
            return str(answer.error_message or answer.error_code.name)
        return None
    except (OSError, ConnectionError, ssl.SSLError, ValueError):
        return None
    finally:
        sock.close()
