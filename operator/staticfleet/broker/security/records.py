"""Durable records of the security state: ACL bindings and SCRAM credentials.

The coordinator's log carries them beside its group and offset records (one kind byte each there); this
module encodes their bodies and replays them. A snapshot of the state is the list of records that
rebuilds it. No password is ever written: a SCRAM credential is its salt, StoredKey, ServerKey and
iteration count, as Kafka's UserScramCredentialRecord.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from staticfleet.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from staticfleet.broker.security.authorizer import Authorizer
from staticfleet.broker.security.scram import ScramCredential, ScramMechanism
from staticfleet.broker.security.users import CredentialStore


@dataclass(frozen=True, slots=True)
class AclRecord:
    binding: AclBinding


@dataclass(frozen=True, slots=True)
class AclTombstone:
    binding: AclBinding


@dataclass(frozen=True, slots=True)
class ScramCredentialRecord:
    user: str
    mechanism: ScramMechanism
    credential: ScramCredential


@dataclass(frozen=True, slots=True)
class ScramCredentialTombstone:
    user: str
    mechanism: ScramMechanism


SecurityRecord = AclRecord | AclTombstone | ScramCredentialRecord | ScramCredentialTombstone


class SecurityRecordError(ValueError):
    """A security record body that does not decode (the log's checksum passed, so this is a bug or a
    record written by a newer version)."""


_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_ACL_CODES = struct.Struct(">BBBB")  # resource type, pattern type, operation, permission


def _text(value: str) -> bytes:
    data = value.encode("utf-8")
    return _U16.pack(len(data)) + data


def _blob(value: bytes) -> bytes:
    return _U16.pack(len(value)) + value


def _binding(binding: AclBinding) -> bytes:
    pattern, entry = binding.pattern, binding.entry
    return b"".join(
        (
            _ACL_CODES.pack(
                int(pattern.resource_type),
                int(pattern.pattern_type),
                int(entry.operation),
                int(entry.permission),
            ),
            _text(pattern.name),
            _text(entry.principal),
            _text(entry.host),
        )
    )


_TAGS = {AclRecord: 1, AclTombstone: 2, ScramCredentialRecord: 3, ScramCredentialTombstone: 4}


def encode(record: SecurityRecord) -> bytes:
    """The record's body: a tag byte, then its fields."""
    tag = _U8.pack(_TAGS[type(record)])
    if isinstance(record, AclRecord | AclTombstone):
        return tag + _binding(record.binding)
    if isinstance(record, ScramCredentialRecord):
        credential = record.credential
        return b"".join(
            (
                tag,
                _text(record.user),
                _U8.pack(record.mechanism.type_code),
                _I32.pack(credential.iterations),
                _blob(credential.salt),
                _blob(credential.stored_key),
                _blob(credential.server_key),
            )
        )
    return tag + _text(record.user) + _U8.pack(record.mechanism.type_code)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def take(self, n: int) -> bytes:
        if self._pos + n > len(self._data):
            raise SecurityRecordError("truncated security record")
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        return layout.unpack(self.take(layout.size))

    def blob(self) -> bytes:
        (size,) = self.unpack(_U16)
        return self.take(size)

    def text(self) -> str:
        try:
            return self.blob().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SecurityRecordError(f"bad text in a security record: {exc}") from exc

    def mechanism(self) -> ScramMechanism:
        (code,) = self.unpack(_U8)
        mechanism = ScramMechanism.by_type(code)
        if mechanism is None:
            raise SecurityRecordError(f"unknown SCRAM mechanism type {code}")
        return mechanism

    def done(self) -> None:
        if self._pos != len(self._data):
            raise SecurityRecordError("trailing bytes after a security record")


def decode(data: bytes) -> SecurityRecord:
    reader = _Reader(bytes(data))
    (tag,) = reader.unpack(_U8)
    record: SecurityRecord
    if tag in (1, 2):
        try:
            resource, pattern, operation, permission = reader.unpack(_ACL_CODES)
            name, principal, host = reader.text(), reader.text(), reader.text()
            binding = AclBinding(
                ResourcePattern(ResourceType(resource), name, PatternType(pattern)),
                AccessControlEntry(principal, host, AclOperation(operation), PermissionType(permission)),
            )
        except ValueError as exc:
            raise SecurityRecordError(f"bad ACL record: {exc}") from exc
        record = AclRecord(binding) if tag == 1 else AclTombstone(binding)
    elif tag == 3:
        user, mechanism = reader.text(), reader.mechanism()
        (iterations,) = reader.unpack(_I32)
        salt, stored_key, server_key = reader.blob(), reader.blob(), reader.blob()
        record = ScramCredentialRecord(
            user, mechanism, ScramCredential(salt, stored_key, server_key, iterations)
        )
    elif tag == 4:
        record = ScramCredentialTombstone(reader.text(), reader.mechanism())
    else:
        raise SecurityRecordError(f"unknown security record tag {tag}")
    reader.done()
    return record


def apply(record: SecurityRecord, authorizer: Authorizer, store: CredentialStore) -> None:
    """Replays one record onto the in-memory state (idempotent: a log may be replayed over a snapshot)."""
    if isinstance(record, AclRecord):
        authorizer.add(record.binding)
    elif isinstance(record, AclTombstone):
        authorizer.remove(record.binding)
    elif isinstance(record, ScramCredentialRecord):
        store.upsert(record.user, record.mechanism, record.credential)
    else:
        store.delete(record.user, record.mechanism)


def replay(records: Iterable[SecurityRecord], authorizer: Authorizer, store: CredentialStore) -> None:
    for record in records:
        apply(record, authorizer, store)


def snapshot(authorizer: Authorizer, store: CredentialStore) -> Iterator[SecurityRecord]:
    """Records that rebuild the current state from nothing."""
    for binding in authorizer.bindings():
        yield AclRecord(binding)
    for user, mechanism, credential in store.scram_credentials():
        yield ScramCredentialRecord(user, mechanism, credential)
