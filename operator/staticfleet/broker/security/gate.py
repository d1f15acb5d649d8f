"""The SASL gate of one connection: it reads each frame before the API registry does, answers the SASL
exchange itself, and lets a request through only once the connection is authenticated.

It speaks just enough of the wire to do that (the request header; SaslHandshake, SaslAuthenticate and
their answers, through kio); ApiVersions answers and other APIs' error answers come from the registry
through the two callbacks, so the gate never lists APIs of its own.
"""

from __future__ import annotations

import datetime
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32, i64Timedelta

from staticfleet.broker.security.authenticator import (
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    AuthenticateAnswer,
    Close,
    HandshakeAnswer,
    SaslAuthenticator,
    Step,
    illegal_state_message,
)

_HEAD = struct.Struct(">hhi")

# (api version, correlation id, whole frame) -> (the framed answer, whether it was a success)
ApiVersionsAnswer = Callable[[int, int, bytes], tuple[bytes, bool]]
# (whole request frame, error code, message) -> the framed error answer of that API (None: not known)
ErrorAnswer = Callable[[bytes, int, str], bytes | None]


@dataclass(frozen=True, slots=True)
class Forward:
    """Authenticated: the registry handles this frame as `principal`."""

    principal: str


@dataclass(frozen=True, slots=True)
class Reply:
    """Send `data` (a whole response frame, size included), then close as `close` says."""

    data: bytes
    close: Close = Close.NO


@dataclass(frozen=True, slots=True)
class Drop:
    """Close at once without answering."""

    reason: str


GateResult = Forward | Reply | Drop


def frame_response(correlation_id: int, response: Any, header: type[Any]) -> bytes:
    out = io.BytesIO()
    if header is ResponseHeaderV1:
        entity_writer(ResponseHeaderV1)(out, ResponseHeaderV1(correlation_id=i32(correlation_id)))
    else:
        entity_writer(ResponseHeaderV0)(out, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(out, response)
    payload = out.getvalue()
    return struct.pack(">i", len(payload)) + payload


def _parse(frame: bytes, api_key: int, version: int) -> Any:
    request_type = load_request_schema(api_key, version)
    header_type = request_type.__header_schema__
    _, offset = entity_reader(header_type)(frame, 0)
    body, _ = entity_reader(request_type)(frame, offset)
    return body


def _answer(api_key: int, version: int, correlation: int, values: dict[str, Any]) -> bytes:
    response_type = load_response_schema(api_key, version)
    names = {f for f in response_type.__dataclass_fields__}
    response = response_type(**{k: v for k, v in values.items() if k in names})
    return frame_response(correlation, response, response_type.__header_schema__)


class SaslGate:
    def __init__(
        self, authenticator: SaslAuthenticator, api_versions: ApiVersionsAnswer, error_answer: ErrorAnswer
    ) -> None:
        self.authenticator = authenticator
        self._api_versions = api_versions
        self._error_answer = error_answer

    def on_frame(self, frame: bytes) -> GateResult:
        auth = self.authenticator
        if auth.expects_raw_tokens:
            token = auth.raw_token(frame)
            if token.close == Close.NOW:
                return Drop("SASL authentication failed")
            if token.reply is None:
                return Reply(b"", token.close)
            return Reply(struct.pack(">i", len(token.reply)) + token.reply)
        if len(frame) < _HEAD.size:
            return Drop("frame shorter than a request header")
        api_key, version, correlation = _HEAD.unpack_from(frame)
        step = auth.request(api_key, version)
        if step == Step.SERVE:
            assert auth.principal is not None
            return Forward(auth.principal)
        if step == Step.CLOSE:
            return Drop(f"request {api_key} v{version} is not allowed before authentication")
        if step == Step.API_VERSIONS:
            data, ok = self._api_versions(version, correlation, frame)
            auth.api_versions_answered(ok=ok)
            return Reply(data)
        if step == Step.ILLEGAL_STATE:
            name = _api_name(api_key)
            error = self._error_answer(frame, int(ErrorCode.illegal_sasl_state), illegal_state_message(name))
            return Reply(error, Close.AFTER_DELAY) if error is not None else Drop("illegal SASL state")
        try:
            body = _parse(frame, api_key, version)
        except Exception:
            return Drop("malformed SASL request")
        if step == Step.HANDSHAKE:
            answer = auth.handshake(version, body.mechanism)
            return self._handshake_reply(version, correlation, answer)
        return self._authenticate_reply(
            version, correlation, auth.authenticate(version, bytes(body.auth_bytes))
        )

    def _handshake_reply(self, version: int, correlation: int, answer: HandshakeAnswer) -> GateResult:
        data = _answer(
            SASL_HANDSHAKE,
            version,
            correlation,
            {"error_code": ErrorCode(answer.error_code), "mechanisms": answer.mechanisms},
        )
        return Reply(data, answer.close)

    def _authenticate_reply(self, version: int, correlation: int, answer: AuthenticateAnswer) -> GateResult:
        if answer.close == Close.NOW:
            return Drop("SASL token could not be evaluated")
        data = _answer(
            SASL_AUTHENTICATE,
            version,
            correlation,
            {
                "error_code": ErrorCode(answer.error_code),
                "error_message": answer.error_message,
                "auth_bytes": answer.auth_bytes,
                "session_lifetime": i64Timedelta.parse(
                    datetime.timedelta(milliseconds=answer.session_lifetime_ms)
                ),
            },
        )
        return Reply(data, answer.close)


def _api_name(api_key: int) -> str:
    """Kafka's enum name of an API (e.g. HEARTBEAT), as its ILLEGAL_SASL_STATE message spells it."""
    from kio.schema.index import api_key_map

    name = api_key_map.get(api_key)
    return str(name).upper() if name else str(api_key)
