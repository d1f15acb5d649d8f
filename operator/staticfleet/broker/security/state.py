"""The coordinator's security state at run time: the authorizer's ACLs and the SCRAM/PLAIN credentials.

Durability. Changes made through CreateAcls, DeleteAcls and AlterUserScramCredentials are records of the
coordinator's own durable log (coordinator/records.py `SecurityRecord`, bodies from records.py), not of a
file of their own. That is where Kafka keeps them too (its metadata log), and it is the only place here
that already has everything an acknowledged change needs: a failed or short write is cut back to the last
good frame, a record over the frame limit is refused, fsyncs are grouped and a failed one holds the
answers until a snapshot is durable, and snapshots compact the log, so a user re-created a thousand times
costs one record, not a thousand. A change is appended, applied, and answered once it is durable.

At start the bootstrap users file is applied first, then the log (the host hands its security records
over while it recovers), so credentials changed or deleted through the Kafka APIs keep their change
across restarts. A `security.log` written by an earlier version (frames of length, CRC-32C and record
body) is moved into the log once: its records are appended and fsynced, then the file is removed.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import crc32c

from staticfleet.broker.security import records
from staticfleet.broker.security.authorizer import Authorizer, AuthorizerConfig
from staticfleet.broker.security.users import CredentialStore
from staticfleet.coordinator.records import Record, SecurityRecord
from staticfleet.fsutil import fsync_directory

log = logging.getLogger(__name__)

LEGACY_LOG = "security.log"
_LEGACY_FRAME = struct.Struct(">II")  # body length, CRC-32C of the body
_MIGRATION_BATCH_BYTES = 1024 * 1024


class SecurityLogError(RuntimeError):
    """A security record that does not decode, or a legacy security log damaged before its tail."""


class DurableStore(Protocol):
    """The coordinator host's side: append records now (StoreError if refused), wait until durable."""

    def append(self, records: Sequence[Record]) -> None: ...

    async def persisted(self) -> None: ...


class SecurityState:
    def __init__(self, authorizer: AuthorizerConfig | None, credentials: CredentialStore) -> None:
        # Without an authorizer ACLs are still stored (Kafka refuses them instead: see the handlers).
        self.authorizer: Authorizer | None = Authorizer(authorizer) if authorizer is not None else None
        self._acls = self.authorizer if self.authorizer is not None else Authorizer(AuthorizerConfig())
        self.credentials = credentials

    @property
    def acls(self) -> Authorizer:
        """Every stored ACL (the authorizer's, or a plain store when authorization is off)."""
        return self._acls

    # --- the durable log's side --------------------------------------------------------------------

    def replay(self, record: SecurityRecord) -> None:
        """Applies one record read back from the log (idempotent, as a log replays over a snapshot)."""
        try:
            records.apply(records.decode(record.body), self._acls, self.credentials)
        except records.SecurityRecordError as exc:
            message = f"a security record in the coordinator log does not decode: {exc}"
            raise SecurityLogError(message) from exc

    def snapshot_records(self) -> Iterator[SecurityRecord]:
        """The live state as records: what a snapshot of the log keeps of it."""
        for record in records.snapshot(self._acls, self.credentials):
            yield SecurityRecord(records.encode(record))

    async def change(self, store: DurableStore, changes: Iterable[records.SecurityRecord]) -> None:
        """Appends the changes, applies them and returns once they are durable.

        Raises StoreError, having changed nothing, if the log refuses the append."""
        batch = list(changes)
        if not batch:
            return
        store.append([SecurityRecord(records.encode(r)) for r in batch])
        for record in batch:
            records.apply(record, self._acls, self.credentials)
        await store.persisted()

    # --- the one-time move of an earlier version's security.log -----------------------------------

    async def migrate_legacy_log(self, data_dir: Path, store: DurableStore) -> int:
        """Moves `<data-dir>/security.log` into the coordinator log; returns how many records it held.

        The file is removed only once its records are durable in the log; a crash before that moves
        them again at the next start, which changes nothing (replaying the same history twice ends in
        the same state, and nothing else is served before this has run)."""
        path = data_dir / LEGACY_LOG
        if not path.exists():
            return 0
        bodies = read_legacy_log(path)
        batch: list[Record] = []
        size = 0
        for body in bodies:
            records.apply(records.decode(body), self._acls, self.credentials)
            batch.append(SecurityRecord(body))
            size += len(body)
            if size >= _MIGRATION_BATCH_BYTES:
                store.append(batch)
                batch, size = [], 0
        store.append(batch)
        await store.persisted()
        path.unlink()
        fsync_directory(data_dir)
        log.warning("moved %d records of %s into the coordinator log and removed it", len(bodies), path)
        return len(bodies)


def read_legacy_log(path: Path) -> list[bytes]:
    """The record bodies of an earlier version's security.log, oldest first; a torn last frame (a crash
    mid-write) is left out, damage anywhere else is a SecurityLogError."""
    data = path.read_bytes()
    bodies: list[bytes] = []
    offset = 0
    while offset + _LEGACY_FRAME.size <= len(data):
        size, checksum = _LEGACY_FRAME.unpack_from(data, offset)
        body = data[offset + _LEGACY_FRAME.size : offset + _LEGACY_FRAME.size + size]
        if len(body) < size:
            break
        if crc32c.crc32c(body) != checksum:
            if offset + _LEGACY_FRAME.size + size == len(data):
                break
            raise SecurityLogError(f"{path}: bad checksum at offset {offset}")
        try:
            records.decode(body)
        except records.SecurityRecordError as exc:
            raise SecurityLogError(f"{path}: {exc} at offset {offset}") from exc
        bodies.append(bytes(body))
        offset += _LEGACY_FRAME.size + size
    return bodies


def legacy_frame(record: records.SecurityRecord) -> bytes:
    """One frame of an earlier version's security.log (tests write such files to migrate them)."""
    body = records.encode(record)
    return _LEGACY_FRAME.pack(len(body), crc32c.crc32c(body)) + body
