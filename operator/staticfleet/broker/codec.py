"""Kafka wire framing on top of kio's generated entities.

kio parses and writes every message; this module adds what a server needs around it:
  * reading the request header for any API version (header v1 or v2) and the body behind it;
  * four fixes kio's reader needs before it can face the network (see "kio patches" below);
  * answering the version a client asked for: a handler builds one typed response, `for_version`
    carries it over to the requested version's entity;
  * writing responses with the right header (v0, or v1 for flexible versions, but always v0 for
    ApiVersions).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import (
    f64,
    i8,
    i16,
    i32,
    i32Timedelta,
    i64,
    i64Timedelta,
    u16,
)
from kio.static.protocol import ResponsePayload

from staticfleet.coordinator.messages import MAX_STRING_BYTES

API_KEYS: Final[dict[str, int]] = {name: key for key, name in api_key_map.items()}
E = TypeVar("E")
_HEAD = struct.Struct(">hhi")
_I16 = struct.Struct(">h")
_SIZE = struct.Struct(">i")
_HEADER_V0 = struct.Struct(">i")
_HEADER_V1 = struct.Struct(">iB")  # correlation id, then an empty tagged-field section
_API_VERSIONS = API_KEYS["api_versions"]  # answered with header v0 at every version (KIP-511)


class FrameError(ValueError):
    """The frame cannot be parsed; the connection that sent it is closed."""


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class UnsupportedVersion(Exception):
    """A request for an API or version the registry does not serve (answered for ApiVersions only)."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int) -> None:
        super().__init__(f"api {api_key} version {api_version} is not supported")
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id

    def is_for(self, name: str) -> bool:
        return self.api_key == API_KEYS[name]


def key_of(response: ResponsePayload) -> int:
    return int(response.__api_key__)


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """API key, API version and correlation id: the fixed start of every request header."""
    if len(frame) < _HEAD.size:
        raise FrameError(f"frame of {len(frame)} bytes is too short for a request header")
    key, version, correlation_id = _HEAD.unpack_from(frame, 0)
    return key, version, correlation_id


# --- the shape of a kio entity, from its public dataclass fields ---------------------------------------

_PRIMITIVE, _ARRAY, _ENTITY, _ENTITIES = range(4)


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    kind: int
    kafka_type: str  # of a primitive, or of an array's items
    nested: Any  # the entity type of _ENTITY and _ENTITIES fields
    nullable: bool
    tag: int | None


_FIELDS: dict[type[Any], tuple[_Field, ...]] = {}


def _fields(entity: type[Any]) -> tuple[_Field, ...]:
    known = _FIELDS.get(entity)
    if known is not None:
        return known
    out = []
    for f in dataclasses.fields(entity):
        annotation: Any = f.type
        nullable = False
        if isinstance(annotation, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            nullable, annotation = True, args[0]
        is_tuple = typing.get_origin(annotation) is tuple
        inner = typing.get_args(annotation)[0] if is_tuple else annotation
        is_entity = dataclasses.is_dataclass(inner)
        kind = (_ENTITIES if is_entity else _ARRAY) if is_tuple else (_ENTITY if is_entity else _PRIMITIVE)
        out.append(
            _Field(f.name, kind, f.metadata.get("kafka_type", ""), inner, nullable, f.metadata.get("tag"))
        )
    _FIELDS[entity] = result = tuple(out)
    return result


# --- kio patches ---------------------------------------------------------------------------------------
#
# Four things kio 0.6's reader does that a server cannot accept, fixed by one walk over the frame:
#  * it sizes an array from the count a frame declares before checking the bytes are there, so a
#    garbled count makes it allocate gigabytes and abort the whole process: every declared length and
#    count must fit in what is left of the frame (strings and bytes kio bounds-checks itself);
#  * it reads a null array as None where the schema says the array is never null, which Kafka's
#    reader refuses: the connection closes rather than a handler meeting None;
#  * it reads a compact string of any length, where Kafka refuses one over 32767 bytes (group ids and
#    instance ids go to the coordinator log with 2-byte lengths);
#  * it rejects tagged fields it does not know, which the protocol says a receiver must skip: such a
#    frame is rewritten without them and parsed again.

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


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
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


def _to_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fits(pos: int, buf: bytes) -> int:
    if pos > len(buf):
        raise FrameError("a field runs past the end of the frame")
    return pos


def _skip_variable(kafka_type: str, flexible: bool, buf: bytes, pos: int) -> int:
    """Past one string or bytes field. A string longer than Kafka's protocol allows is refused, as
    Kafka's generated readers refuse it ("string field had invalid length"): the connection closes."""
    if flexible:
        length, pos = _uvarint(buf, pos)
        if length - 1 > MAX_STRING_BYTES and kafka_type == "string":
            raise FrameError(f"a string of {length - 1} bytes is longer than {MAX_STRING_BYTES}")
        return _fits(pos + max(length - 1, 0), buf)
    width = _I16 if kafka_type == "string" else _SIZE
    (length,) = width.unpack_from(buf, _fits(pos + width.size, buf) - width.size)
    return _fits(pos + width.size + max(length, 0), buf)


def _count(buf: bytes, pos: int, flexible: bool, nullable: bool) -> tuple[int, int]:
    if flexible:
        raw, pos = _uvarint(buf, pos)
        count = raw - 1
    else:
        (count,) = _SIZE.unpack_from(buf, _fits(pos + 4, buf) - 4)
        pos += 4
    if count > len(buf) - pos:
        raise FrameError(f"an array of {count} elements cannot fit in the rest of the frame")
    if count < 0 and not nullable:
        # kio would read it as None; Kafka's reader refuses it ("non-nullable field ... serialized as null")
        raise FrameError("an array the schema says is never null is null")
    return max(count, 0), pos


# A walk plan: the untagged fields in wire order as (operation, argument, nullable), runs of fixed-size
# fields merged into one step; then whether the entity is flexible and the tags it knows.
_FIXED, _VARIABLE, _ONE, _MANY, _FIXED_ARRAY, _VARIABLE_ARRAY = range(6)
_Plan = tuple[tuple[tuple[int, Any, bool], ...], bool, frozenset[int]]
_PLANS: dict[type[Any], _Plan] = {}


def _plan(entity: type[Any]) -> _Plan:
    known = _PLANS.get(entity)
    if known is not None:
        return known
    steps: list[tuple[int, Any, bool]] = []
    for f in _fields(entity):
        if f.tag is not None:
            continue
        size = _FIXED_SIZES.get(f.kafka_type)
        if f.kind == _ENTITY:
            step: tuple[int, Any, bool] = (_ONE, f.nested, f.nullable)
        elif f.kind == _ENTITIES:
            step = (_MANY, f.nested, f.nullable)
        elif f.kind == _ARRAY:
            step = (
                (_FIXED_ARRAY, size, f.nullable)
                if size is not None
                else (_VARIABLE_ARRAY, f.kafka_type, f.nullable)
            )
        elif size is not None:
            step = (_FIXED, size, False)
        elif f.kafka_type in ("string", "bytes", "records"):
            step = (_VARIABLE, f.kafka_type, f.nullable)
        else:
            raise FrameError(f"cannot walk a field of type {f.kafka_type}")
        if step[0] == _FIXED and steps and steps[-1][0] == _FIXED:
            steps[-1] = (_FIXED, steps[-1][1] + step[1], False)
        else:
            steps.append(step)
    tags = frozenset(f.tag for f in _fields(entity) if f.tag is not None)
    _PLANS[entity] = known = (tuple(steps), bool(getattr(entity, "__flexible__", False)), tags)
    return known


def walk(entity: type[Any], buf: bytes, pos: int, out: bytearray | None = None) -> int:
    """Walk the entity at `pos` and return its end; raise FrameError unless every length fits.

    With `out`, also append the entity's bytes to it without the tagged fields it does not know.
    """
    steps, flexible, known = _PLANS.get(entity) or _plan(entity)
    end = len(buf)
    for op, arg, nullable in steps:
        start = pos
        if op == _FIXED:
            pos += arg
            if pos > end:
                raise FrameError("a field runs past the end of the frame")
        elif op == _VARIABLE:
            pos = _skip_variable(arg, flexible, buf, pos)
        elif op == _ONE:
            # (nullable structs, which carry a marker byte, do not occur in the requests served here)
            pos = walk(arg, buf, pos, out)
            continue
        else:
            count, pos = _count(buf, pos, flexible, nullable)
            if op == _MANY:
                if out is not None:
                    out += buf[start:pos]
                for _ in range(count):
                    pos = walk(arg, buf, pos, out)
                continue
            if op == _FIXED_ARRAY:
                pos = _fits(pos + count * arg, buf)
            else:
                for _ in range(count):
                    pos = _skip_variable(arg, flexible, buf, pos)
        if out is not None:
            out += buf[start:pos]
    if flexible:
        if pos < end and not buf[pos]:  # no tagged fields, by far the most common case
            if out is not None:
                out.append(0)
            return pos + 1
        count, pos = _uvarint(buf, pos)
        if count > len(buf) - pos:
            raise FrameError("more tagged fields than bytes")
        kept = bytearray()
        kept_count = 0
        for _ in range(count):
            tag_start = pos
            tag, pos = _uvarint(buf, pos)
            size, pos = _uvarint(buf, pos)
            pos = _fits(pos + size, buf)
            if out is not None and tag in known:
                kept += buf[tag_start:pos]
                kept_count += 1
        if out is not None:
            out += _to_uvarint(kept_count) + kept
    return pos


_HAS_ARRAYS: dict[type[Any], bool] = {}


def _has_arrays(entity: type[Any]) -> bool:
    """Only entities with arrays need the walk before kio reads them."""
    known = _HAS_ARRAYS.get(entity)
    if known is None:
        known = _HAS_ARRAYS[entity] = any(
            op in (_MANY, _FIXED_ARRAY, _VARIABLE_ARRAY) or (op == _ONE and _has_arrays(arg))
            for op, arg, _ in _plan(entity)[0]
        )
    return known


def _read_entity(entity: type[Any], frame: bytes, offset: int) -> Any:
    # A frame too short to hold an overlong string needs the walk only for its arrays.
    if _has_arrays(entity) or len(frame) - offset > MAX_STRING_BYTES:
        walk(entity, frame, offset)
    try:
        value, _ = entity_reader(entity)(frame, offset)
        return value
    except KeyError as exc:
        if "tagged field" not in str(exc) or not getattr(entity, "__flexible__", False):
            raise
    cleaned = bytearray()
    walk(entity, frame, offset, cleaned)
    value, _ = entity_reader(entity)(bytes(cleaned), 0)
    return value


# --- requests ------------------------------------------------------------------------------------------


@cache
def request_schema(key: int, version: int) -> type[Any]:
    schema: type[Any] = load_request_schema(key, version)
    return schema


@cache
def response_schema(key: int, version: int) -> type[Any]:
    schema: type[Any] = load_response_schema(key, version)
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
        count, pos = _uvarint(frame, pos)
        for _ in range(count):
            _, pos = _uvarint(frame, pos)
            size, pos = _uvarint(frame, pos)
            pos = _fits(pos + size, frame)
    return client_id, pos


def parse_request(frame: bytes, supported: Callable[[int, int], bool]) -> tuple[RequestHeader, Any]:
    """Parse a request frame. Raises UnsupportedVersion (answerable) or FrameError (close the connection)."""
    key, version, correlation_id = peek_header(frame)
    if not supported(key, version):
        raise UnsupportedVersion(key, version, correlation_id)
    schema = request_schema(key, version)
    client_id, header_size = _read_header(frame, schema.__header_schema__ is not RequestHeaderV1)
    try:
        body = _read_entity(schema, frame, header_size)
    except (FrameError, NameError, AttributeError):
        raise  # garbage, or a bug here: never hide the latter behind "bad frame"
    except Exception as exc:  # kio raises many kinds of errors on garbage
        raise FrameError(f"cannot parse api {key} v{version}: {type(exc).__name__}: {exc}") from exc
    return RequestHeader(key, version, correlation_id, client_id), body


# --- carrying an entity over to another version of it ---------------------------------------------------


def carry(value: Any, target: type[E]) -> E:
    """`value` (an entity of one version) as the entity `target` (another version of the same message):
    fields `target` lacks are dropped, fields only it has take the protocol's default (the schema's, or
    the type's empty value, or null where the field is nullable), and a null where `target` cannot carry
    one becomes the empty value. A request is read as its newest version this way, as Kafka's generated
    classes read every version into one."""
    carried: E = _carry(value, target)
    return carried


def for_version(response: ResponsePayload, version: int) -> ResponsePayload:
    """The response as the entity of `version` (see `carry`)."""
    carried: ResponsePayload = _carry(response, response_schema(key_of(response), version))
    return carried


_KEEP, _CARRY_ONE, _CARRY_MANY, _DEFAULT = range(4)
# Per (source entity, target entity): each field `target` needs, how to carry it, and what a null
# becomes (for _DEFAULT: the value itself).
_CarryPlan = tuple[tuple[str, int, Any, Any], ...]
_CARRY_PLANS: dict[tuple[type[Any], type[Any]], _CarryPlan] = {}
_TYPE_DEFAULTS: Final[dict[str, Any]] = {
    "int8": i8(0),
    "int16": i16(0),
    "uint16": u16(0),
    "int32": i32(0),
    "int64": i64(0),
    "float64": f64(0.0),
    "bool": False,
    "string": "",
    "bytes": b"",
    "error_code": ErrorCode.none,
    "timedelta_i32": i32Timedelta.parse(datetime.timedelta(0)),
    "timedelta_i64": i64Timedelta.parse(datetime.timedelta(0)),
}


def _default(f: _Field) -> Any:
    """The protocol default of a field with no default in its schema."""
    if f.nullable:
        return None
    if f.kind in (_ARRAY, _ENTITIES):
        return ()
    if f.kind == _ENTITY:
        return _empty_entity(f.nested)
    if f.kafka_type not in _TYPE_DEFAULTS:
        raise TypeError(f"no default for a field of type {f.kafka_type}")
    return _TYPE_DEFAULTS[f.kafka_type]


def _empty_entity(entity: type[Any]) -> Any:
    return entity(**{name: value for name, _, _, value in _carry_plan(type(None), entity)})


def _carry_plan(source: type[Any], target: type[Any]) -> _CarryPlan:
    present = {f.name for f in dataclasses.fields(source)} if dataclasses.is_dataclass(source) else set()
    has_default = {
        f.name
        for f in dataclasses.fields(target)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }
    plan = []
    for f in _fields(target):
        if f.name not in present:
            if f.name not in has_default:
                plan.append((f.name, _DEFAULT, None, _default(f)))
            continue  # else the target's default stands
        how = {_ENTITY: _CARRY_ONE, _ENTITIES: _CARRY_MANY}.get(f.kind, _KEEP)
        empty = None
        if not f.nullable:
            empty = {"string": "", "bytes": b""}.get(
                f.kafka_type, () if f.kind in (_ARRAY, _ENTITIES) else None
            )
        plan.append((f.name, how, f.nested, empty))
    _CARRY_PLANS[(source, target)] = result = tuple(plan)
    return result


def _carry(value: Any, target: type[Any]) -> Any:
    source = type(value)
    if source is target:
        return value
    kwargs: dict[str, Any] = {}
    for name, how, nested, empty in _CARRY_PLANS.get((source, target)) or _carry_plan(source, target):
        if how == _DEFAULT:
            kwargs[name] = empty
            continue
        item = getattr(value, name)
        if item is None:
            item = empty
        elif how == _CARRY_ONE:
            item = _carry(item, nested)
        elif how == _CARRY_MANY:
            item = tuple([_carry(x, nested) for x in item])
        kwargs[name] = item
    return target(**kwargs)


# --- responses -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EncodedBody:
    """A response body already in wire form (hot paths cache these); the server adds the frame."""

    response: ResponsePayload
    flexible_header: bool
    body: bytes


def encode_body(response: ResponsePayload) -> EncodedBody:
    buffer = io.BytesIO()
    entity_writer(type(response))(buffer, response)
    flexible = response.__header_schema__ is not ResponseHeaderV0 and key_of(response) != _API_VERSIONS
    return EncodedBody(response, flexible, buffer.getvalue())


def frame_body(correlation_id: int, encoded: EncodedBody) -> bytes:
    header = (
        _HEADER_V1.pack(correlation_id, 0) if encoded.flexible_header else _HEADER_V0.pack(correlation_id)
    )
    return _SIZE.pack(len(header) + len(encoded.body)) + header + encoded.body


def frame_payload(payload: bytes) -> bytes:
    """A frame of bytes that are not a Kafka message (SASL tokens after a v0 handshake)."""
    return _SIZE.pack(len(payload)) + payload


def encode_response(correlation_id: int, response: ResponsePayload) -> bytes:
    """The full frame (size prefix included) of a response entity."""
    return frame_body(correlation_id, encode_body(response))


# --- responses that differ only in their last variable field -------------------------------------------
#
# When a rebalance completes, every follower gets a JoinGroup response that differs from the others only
# in its member id, and every member a SyncGroup response that differs only in its assignment. The
# bytes before that field are written by kio once and reused; the field itself is a length-prefixed
# string or bytes, written here.


def _wire_length(size: int, flexible: bool, width: struct.Struct) -> bytes:
    return _to_uvarint(size + 1) if flexible else width.pack(size)


@dataclass(frozen=True, slots=True)
class TrailingFieldBody:
    """A response body written once with `field` empty; `with_field` fills in each recipient's value.

    Only for a `field` that is the response's last untagged field but for empty arrays (the check in
    `of` refuses anything else), and a response with no tagged fields."""

    template: EncodedBody
    prefix: bytes
    suffix: bytes
    flexible: bool
    width: struct.Struct

    @classmethod
    def of(cls, response: ResponsePayload, field: str, empty_arrays: int = 0) -> TrailingFieldBody:
        """`response` with `field` empty (the empty string or bytes), followed by `empty_arrays`
        empty arrays."""
        template = encode_body(response)
        entity = type(response)
        flexible = bool(getattr(entity, "__flexible__", False))
        kafka_type = next(f.kafka_type for f in _fields(entity) if f.name == field)
        width = _I16 if kafka_type == "string" else _SIZE
        empty = _wire_length(0, flexible, width)
        suffix = (b"\x01" if flexible else _SIZE.pack(0)) * empty_arrays + (b"\x00" if flexible else b"")
        body = template.body
        if not body.endswith(empty + suffix):
            raise ValueError(f"{field} is not the last field of {entity.__name__} before its empty arrays")
        return cls(template, body[: len(body) - len(empty) - len(suffix)], suffix, flexible, width)

    def with_field(self, value: bytes) -> EncodedBody:
        """The body with `field` set to `value` (a string's UTF-8 bytes, or the bytes themselves)."""
        body = b"".join(
            (self.prefix, _wire_length(len(value), self.flexible, self.width), value, self.suffix)
        )
        return EncodedBody(self.template.response, self.template.flexible_header, body)
