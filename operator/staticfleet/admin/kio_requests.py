"""Requests kafka-python has no schema for (ConsumerGroupDescribe, KIP-848), written and read with kio and
sent over kafka-python's own connections, so that they travel with the admin client's TLS and SASL.

kafka-python's connection asks a request for its version, its header and its bytes, and the request's
header for the class that reads the answer; `KioRequest` answers those from a kio entity.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from kio.index import load_response_schema
from kio.schema.request_header.v2.header import RequestHeader as FlexibleRequestHeader
from kio.schema.response_header.v1.header import ResponseHeader as FlexibleResponseHeader
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32
from kio.static.protocol import RequestPayload

R = TypeVar("R")
_write_header = entity_writer(FlexibleRequestHeader)
_read_header = entity_reader(FlexibleResponseHeader)


@dataclass(slots=True)
class _Header:
    """What kafka-python keeps of a request in flight: its correlation id, and how to read the answer."""

    correlation_id: int
    api_key: int
    api_version: int
    response: type[_Response[Any]]

    def get_response_class(self) -> type[_Response[Any]]:
        return self.response


class _Response(Generic[R]):
    """Reads the answer from the buffer kafka-python hands over: the header, then the body after it."""

    entity: ClassVar[type[Any]]

    @classmethod
    def parse_header(cls, data: io.BytesIO) -> FlexibleResponseHeader:
        start = data.tell()
        header, end = _read_header(data.read(), 0)
        data.seek(start + end)
        return header

    @classmethod
    def decode(cls, data: io.BytesIO) -> R:
        value, _ = entity_reader(cls.entity)(data.read(), 0)
        return value  # type: ignore[no-any-return]


class KioRequest:
    """A kio request entity, as kafka-python's connection sends it (flexible versions only)."""

    def __init__(self, entity: RequestPayload) -> None:
        if not entity.__flexible__:
            raise ValueError(f"{type(entity).__name__} v{entity.__version__} is not a flexible version")
        self.entity = entity
        self.API_KEY = int(entity.__api_key__)
        self.API_VERSION = int(entity.__version__)
        response_entity = load_response_schema(self.API_KEY, self.API_VERSION)
        self._response: type[_Response[Any]] = type(
            f"{response_entity.__name__}Reader", (_Response,), {"entity": response_entity}
        )
        self.header: _Header | None = None
        self._client_id = ""

    def with_header(self, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
        self.header = _Header(correlation_id, self.API_KEY, self.API_VERSION, self._response)
        self._client_id = client_id

    def expect_response(self) -> bool:
        return True

    def encode(self, framed: bool = False, header: bool = False) -> bytes:
        assert self.header is not None, "with_header first"
        body = io.BytesIO()
        if header:
            _write_header(
                body,
                FlexibleRequestHeader(
                    request_api_key=i16(self.API_KEY),
                    request_api_version=i16(self.API_VERSION),
                    correlation_id=i32(self.header.correlation_id),
                    client_id=self._client_id,
                ),
            )
        entity_writer(type(self.entity))(body, self.entity)
        raw = body.getvalue()
        return len(raw).to_bytes(4, "big") + raw if framed else raw

    def __repr__(self) -> str:
        return f"{type(self.entity).__name__}(v{self.API_VERSION})"
