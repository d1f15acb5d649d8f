"""Kafka wire framing on top of kio's generated entities.

kio parses and writes every message; this module adds what a server needs around it:
  * reading the request header for any API version (header v1 or v2) and the body behind it;
  * tolerating unknown tagged fields, which the protocol says a receiver must skip (kio rejects them,
    so a frame that trips over one is rewritten without the unknown tags and parsed again);
  * building responses from plain keyword values for whatever version was asked, so handlers are
    written once for all versions (fields a version lacks are dropped, ints become timedeltas and
    error-code enums, nested dicts become nested entities);
  * writing responses with the right header (v0, or v1 for flexible versions, but always v0 for
    ApiVersions).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.static.primitive import i32
from kio.static.protocol import Entity

API_VERSIONS_KEY = 18

_HEAD = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


class FrameError(ValueError):
    """The frame cannot be parsed; the connection that sent it is closed."""


class UnsupportedVersion(Exception):
    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"api {api_key} version {api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """api key, api version and correlation id: the fixed start of every request header."""
    if len(frame) < _HEAD.size:
        raise FrameError(f"frame of {len(frame)} bytes is too short for a request header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


# --- unknown tagged fields -----------------------------------------------------------------------------


def _read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise FrameError("varint runs past the end of the frame")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 35:
            raise FrameError("varint is too long")


def _write_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_FIXED_SIZES = {
    "int8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "float64": 8,
    "uuid": 16,
}


def _skip_flexible_primitive(kafka_type: str, buf: bytes, pos: int) -> int:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return pos + size
    if kafka_type in ("string", "bytes", "records"):
        length, pos = _read_uvarint(buf, pos)
        return pos + max(length - 1, 0)
    raise FrameError(f"cannot skip a field of type {kafka_type}")


_LAYOUTS: dict[type[Any], tuple[list[tuple[str, Any]], dict[int, Any]]] = {}


def _layout(entity: type[Any]) -> tuple[list[tuple[str, Any]], dict[int, Any]]:
    """(untagged fields in wire order, tagged fields by tag) of a flexible entity."""
    if entity in _LAYOUTS:
        return _LAYOUTS[entity]
    untagged: list[tuple[str, Any]] = []
    tagged: dict[int, Any] = {}
    for field in dataclasses.fields(entity):
        tag = get_field_tag(field)
        entry = (field.metadata.get("kafka_type", ""), classify_field(field))
        if tag is None:
            untagged.append(entry)
        else:
            tagged[int(tag)] = entry
    _LAYOUTS[entity] = (untagged, tagged)
    return untagged, tagged


def strip_unknown_tags(entity: type[Entity], buf: bytes, pos: int) -> tuple[bytes, int]:
    """Re-encode the flexible entity at `pos` without tagged fields it does not know.

    Returns the rewritten bytes of the entity and the position just after it in `buf`.
    """
    untagged, tagged = _layout(entity)
    out = bytearray()
    for kafka_type, klass in untagged:
        start = pos
        if isinstance(klass, EntityField):
            # (nullable structs, which carry a marker byte, do not occur in the requests served here)
            inner, pos = strip_unknown_tags(klass.type_, buf, pos)
            out += inner
            continue
        if isinstance(klass, EntityTupleField):
            length, pos = _read_uvarint(buf, pos)
            out += buf[start:pos]
            for _ in range(max(length - 1, 0)):
                inner, pos = strip_unknown_tags(klass.type_, buf, pos)
                out += inner
            continue
        if isinstance(klass, PrimitiveTupleField):
            length, pos = _read_uvarint(buf, pos)
            for _ in range(max(length - 1, 0)):
                pos = _skip_flexible_primitive(kafka_type, buf, pos)
        else:
            pos = _skip_flexible_primitive(kafka_type, buf, pos)
        if pos > len(buf):
            raise FrameError("field runs past the end of the frame")
        out += buf[start:pos]
    count, pos = _read_uvarint(buf, pos)
    kept = bytearray()
    kept_count = 0
    for _ in range(count):
        tag_start = pos
        tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        if pos + size > len(buf):
            raise FrameError("tagged field runs past the end of the frame")
        if tag in tagged:
            kept += buf[tag_start : pos + size]
            kept_count += 1
        pos += size
    out += _write_uvarint(kept_count) + kept
    return bytes(out), pos


def _read_entity(entity: type[Entity], frame: bytes, offset: int) -> tuple[Any, int]:
    try:
        return entity_reader(entity)(frame, offset)
    except KeyError as exc:
        if "tagged field" not in str(exc) or not getattr(entity, "__flexible__", False):
            raise
    cleaned, end = strip_unknown_tags(entity, frame, offset)
    value, _ = entity_reader(entity)(cleaned, 0)
    return value, end - offset


# --- length checks -----------------------------------------------------------------------------------
#
# kio's native reader sizes an array from the count a frame declares, before checking that the bytes
# are there: a garbled count makes it ask for gigabytes and abort the whole process. Every frame of a
# message with arrays is therefore walked once in Python first, and each declared length or count must
# fit in what is left of the frame. (Strings and bytes kio bounds-checks itself.)


_FIXED, _LEGACY_STR, _LEGACY_BYTES, _COMPACT, _ENTITY, _ENTITIES, _ARRAY = range(7)
_Plan = tuple[tuple[int, Any], ...]
_CHECK_PLANS: dict[type[Any], tuple[_Plan, bool]] = {}


def _primitive_op(kafka_type: str, flexible: bool) -> tuple[int, Any]:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return (_FIXED, size)
    if kafka_type == "string":
        return (_COMPACT, None) if flexible else (_LEGACY_STR, None)
    if kafka_type in ("bytes", "records"):
        return (_COMPACT, None) if flexible else (_LEGACY_BYTES, None)
    raise FrameError(f"cannot check a field of type {kafka_type}")


def _check_plan(entity: type[Any]) -> tuple[_Plan, bool]:
    """The entity's fields as a flat list of length-check operations (consecutive fixed sizes merged)."""
    cached = _CHECK_PLANS.get(entity)
    if cached is not None:
        return cached
    flexible = bool(getattr(entity, "__flexible__", False))
    untagged, _ = _layout(entity)
    ops: list[tuple[int, Any]] = []
    for kafka_type, klass in untagged:
        if isinstance(klass, EntityField):
            op: tuple[int, Any] = (_ENTITY, klass.type_)
        elif isinstance(klass, EntityTupleField):
            op = (_ENTITIES, klass.type_)
        elif isinstance(klass, PrimitiveTupleField):
            op = (_ARRAY, _primitive_op(kafka_type, flexible))
        else:
            op = _primitive_op(kafka_type, flexible)
        if op[0] == _FIXED and ops and ops[-1][0] == _FIXED:
            ops[-1] = (_FIXED, ops[-1][1] + op[1])
        else:
            ops.append(op)
    _CHECK_PLANS[entity] = result = (tuple(ops), flexible)
    return result


_I16 = struct.Struct(">h")


def _check_one(op: int, arg: Any, buf: bytes, pos: int, end: int) -> int:
    if op == _FIXED:
        pos += arg
    elif op == _COMPACT:
        length, pos = _read_uvarint(buf, pos)
        if length:
            pos += length - 1
    elif op == _LEGACY_STR:
        if pos + 2 > end:
            raise FrameError("string length runs past the end of the frame")
        (length,) = _I16.unpack_from(buf, pos)
        pos += 2 + (length if length > 0 else 0)
    else:  # _LEGACY_BYTES
        if pos + 4 > end:
            raise FrameError("bytes length runs past the end of the frame")
        (length,) = _SIZE.unpack_from(buf, pos)
        pos += 4 + (length if length > 0 else 0)
    if pos > end:
        raise FrameError("a field runs past the end of the frame")
    return pos


def _check_count(buf: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        raw, pos = _read_uvarint(buf, pos)
        count = raw - 1
    else:
        if pos + 4 > len(buf):
            raise FrameError("array length runs past the end of the frame")
        (count,) = _SIZE.unpack_from(buf, pos)
        pos += 4
    if count > len(buf) - pos:
        raise FrameError(f"an array of {count} elements cannot fit in the rest of the frame")
    return max(count, 0), pos


_HAS_ARRAYS: dict[type[Any], bool] = {}


def _has_arrays(entity: type[Any]) -> bool:
    """kio checks string and bytes lengths against the buffer itself; only arrays need the walk."""
    cached = _HAS_ARRAYS.get(entity)
    if cached is None:
        ops, _ = _check_plan(entity)
        cached = any(op in (_ENTITIES, _ARRAY) or (op == _ENTITY and _has_arrays(arg)) for op, arg in ops)
        _HAS_ARRAYS[entity] = cached
    return cached


def check_lengths(entity: type[Any], buf: bytes, pos: int) -> int:
    """Walk the entity at `pos`; raise FrameError unless every declared length fits. Returns its end."""
    ops, flexible = _check_plan(entity)
    end = len(buf)
    for op, arg in ops:
        if op == _ENTITY:
            pos = check_lengths(arg, buf, pos)
        elif op == _ENTITIES:
            count, pos = _check_count(buf, pos, flexible)
            for _ in range(count):
                pos = check_lengths(arg, buf, pos)
        elif op == _ARRAY:
            count, pos = _check_count(buf, pos, flexible)
            inner, inner_arg = arg
            if inner == _FIXED:
                pos += count * inner_arg
                if pos > end:
                    raise FrameError("an array runs past the end of the frame")
            else:
                for _ in range(count):
                    pos = _check_one(inner, inner_arg, buf, pos, end)
        else:
            pos = _check_one(op, arg, buf, pos, end)
    if flexible:
        count, pos = _read_uvarint(buf, pos)
        if count > end - pos:
            raise FrameError("more tagged fields than bytes")
        for _ in range(count):
            _, pos = _read_uvarint(buf, pos)
            size, pos = _read_uvarint(buf, pos)
            pos += size
            if pos > end:
                raise FrameError("tagged field runs past the end of the frame")
    return pos


# --- requests ----------------------------------------------------------------------------------------


@cache
def request_schema(api_key: int, api_version: int) -> type[Any]:
    schema: type[Any] = load_request_schema(api_key, api_version)
    return schema


@cache
def response_schema(api_key: int, api_version: int) -> type[Any]:
    schema: type[Any] = load_response_schema(api_key, api_version)
    return schema


def _read_header(frame: bytes, flexible: bool) -> tuple[str | None, int]:
    """client_id and the header's length. Both header versions keep client_id as a legacy (int16-length)
    string; v2 then has a tagged-field section, none of whose tags a broker needs, so all are skipped."""
    if len(frame) < 10:
        raise FrameError("request header is truncated")
    (length,) = _I16.unpack_from(frame, 8)
    pos = 10 + max(length, 0)
    if pos > len(frame):
        raise FrameError("client id runs past the end of the frame")
    try:
        client_id = None if length < 0 else frame[10:pos].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError("client id is not UTF-8") from exc
    if flexible:
        count, pos = _read_uvarint(frame, pos)
        for _ in range(count):
            _, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise FrameError("request header runs past the end of the frame")
    return client_id, pos


def parse_request(frame: bytes, supported: Callable[[int, int], bool]) -> tuple[RequestHeader, Any]:
    """Parse a request frame. Raises UnsupportedVersion (answerable) or FrameError (close the connection)."""
    api_key, api_version, correlation_id = peek_header(frame)
    if not supported(api_key, api_version):
        raise UnsupportedVersion(api_key, api_version, correlation_id)
    schema = request_schema(api_key, api_version)
    client_id, header_size = _read_header(frame, schema.__header_schema__ is not RequestHeaderV1)
    try:
        if _has_arrays(schema):
            check_lengths(schema, frame, header_size)
        body, _ = _read_entity(schema, frame, header_size)
    except (FrameError, NameError, AttributeError):
        raise  # garbage, or a bug here: never hide the latter behind "bad frame"
    except Exception as exc:  # kio raises many kinds of errors on garbage
        raise FrameError(f"cannot parse api {api_key} v{api_version}: {type(exc).__name__}: {exc}") from exc
    return RequestHeader(api_key, api_version, correlation_id, client_id), body


# --- responses ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str
    klass: Any
    optional: bool
    has_default: bool


_PLANS: dict[type[Any], tuple[_FieldPlan, ...]] = {}


def _plan(entity: type[Any]) -> tuple[_FieldPlan, ...]:
    cached = _PLANS.get(entity)
    if cached is not None:
        return cached
    plans = []
    for field in dataclasses.fields(entity):
        has_default = (
            field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        )
        plans.append(
            _FieldPlan(
                field.name,
                field.metadata.get("kafka_type", ""),
                classify_field(field),
                is_optional(field),
                has_default,
            )
        )
    _PLANS[entity] = result = tuple(plans)
    return result


def _convert(plan: _FieldPlan, value: Any) -> Any:
    klass = plan.klass
    if value is None and isinstance(klass, (EntityTupleField, PrimitiveTupleField)):
        return None if plan.optional else ()
    if isinstance(klass, EntityTupleField):
        return tuple(build(klass.type_, item) if isinstance(item, Mapping) else item for item in value)
    if isinstance(klass, EntityField):
        if value is None:
            return None
        return build(klass.type_, value) if isinstance(value, Mapping) else value
    if isinstance(klass, PrimitiveTupleField):
        return tuple(value)
    if value is None:
        if plan.optional:
            return None
        if plan.kafka_type == "string":
            return ""  # versions without a nullable string send "" for null
        if plan.kafka_type == "bytes":
            return b""
        return None
    kind = plan.kafka_type
    if kind == "error_code":
        return KioErrorCode(int(value))
    if kind in ("timedelta_i32", "timedelta_i64") and not isinstance(value, datetime.timedelta):
        return datetime.timedelta(milliseconds=int(value))
    if kind == "datetime_i64" and isinstance(value, int):
        if value < 0:
            return None if plan.optional else datetime.datetime.fromtimestamp(0, datetime.UTC)
        return datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
    return value


def build(entity: type[Any], values: Mapping[str, Any]) -> Any:
    """An entity of exactly this version from keyword values; fields the version lacks are ignored."""
    kwargs: dict[str, Any] = {}
    for plan in _plan(entity):
        if plan.name in values:
            kwargs[plan.name] = _convert(plan, values[plan.name])
        elif not plan.has_default:
            if plan.kafka_type in ("timedelta_i32", "timedelta_i64"):
                kwargs[plan.name] = datetime.timedelta(0)
            elif plan.kafka_type == "error_code":
                kwargs[plan.name] = KioErrorCode(0)
            elif isinstance(plan.klass, (EntityTupleField, PrimitiveTupleField)):
                kwargs[plan.name] = ()
            else:
                raise TypeError(f"{entity.__name__} v{entity.__version__} needs field {plan.name}")
    return entity(**kwargs)


def build_response(api_key: int, api_version: int, values: Mapping[str, Any]) -> Any:
    return build(response_schema(api_key, api_version), values)


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A response body already in wire form (hot paths cache these); the server adds the frame."""

    flexible_header: bool
    body: bytes


def encode_body(response: Any) -> EncodedBody:
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    flexible = response.__header_schema__ is not ResponseHeaderV0 and response.__api_key__ != API_VERSIONS_KEY
    return EncodedBody(flexible, buffer.getvalue())


def frame_body(correlation_id: int, encoded: EncodedBody) -> bytes:
    header = (
        _HEADER_V1.pack(correlation_id, 0) if encoded.flexible_header else _HEADER_V0.pack(correlation_id)
    )
    return _SIZE.pack(len(header) + len(encoded.body)) + header + encoded.body


_HEADER_V0 = struct.Struct(">i")
_HEADER_V1 = struct.Struct(">iB")  # correlation id, then an empty tagged-field section


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The full frame (size prefix included) of a response entity."""
    buffer = io.BytesIO()
    buffer.write(b"\x00\x00\x00\x00")
    header_schema = response.__header_schema__
    if response.__api_key__ == API_VERSIONS_KEY or header_schema is ResponseHeaderV0:
        entity_writer(ResponseHeaderV0)(buffer, ResponseHeaderV0(correlation_id=i32(correlation_id)))
    else:
        entity_writer(ResponseHeaderV1)(buffer, ResponseHeaderV1(correlation_id=i32(correlation_id)))
    entity_writer(type(response))(buffer, response)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    return bytes(frame)
