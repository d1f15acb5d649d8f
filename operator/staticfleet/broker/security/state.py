"""The coordinator's security state at run time: the authorizer's ACLs and the SCRAM/PLAIN credentials,
kept durable in `<data-dir>/security.log`.

The log is a sequence of frames (length, CRC-32C, record body from records.py), appended and fsynced
before the request that changed the state is answered. At start the bootstrap users file is applied first,
then the log, so credentials changed or deleted through the Kafka APIs keep their change across restarts.
A torn last frame (a crash mid-write) is cut off; any other damage stops the start with the offset.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c

from staticfleet.broker.security import records
from staticfleet.broker.security.authorizer import Authorizer, AuthorizerConfig
from staticfleet.broker.security.users import CredentialStore

_FRAME = struct.Struct(">II")  # body length, CRC-32C of the body


class SecurityLogError(RuntimeError):
    """The security log is damaged somewhere other than its torn tail."""


class SecurityState:
    def __init__(
        self,
        data_dir: Path,
        authorizer: AuthorizerConfig | None,
        credentials: CredentialStore,
        *,
        fsync: bool = True,
    ) -> None:
        self.path = data_dir / "security.log"
        # Without an authorizer ACLs are still stored (Kafka refuses them instead: see the handlers).
        self.authorizer: Authorizer | None = Authorizer(authorizer) if authorizer is not None else None
        self._acls = self.authorizer if self.authorizer is not None else Authorizer(AuthorizerConfig())
        self.credentials = credentials
        self._fsync = fsync
        self._replay()
        self._file = self.path.open("ab")

    def _replay(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        offset = 0
        while offset < len(data):
            if offset + _FRAME.size > len(data):
                break
            size, checksum = _FRAME.unpack_from(data, offset)
            body = data[offset + _FRAME.size : offset + _FRAME.size + size]
            if len(body) < size:
                break
            if crc32c.crc32c(body) != checksum:
                if offset + _FRAME.size + size == len(data):
                    break  # the last frame was torn by a crash
                raise SecurityLogError(f"{self.path}: bad checksum at offset {offset}")
            try:
                records.apply(records.decode(body), self._acls, self.credentials)
            except records.SecurityRecordError as exc:
                raise SecurityLogError(f"{self.path}: {exc} at offset {offset}") from exc
            offset += _FRAME.size + size
        if offset < len(data):
            with self.path.open("r+b") as handle:
                handle.truncate(offset)

    def append(self, changes: Iterable[records.SecurityRecord]) -> None:
        """Makes the changes durable, then applies them."""
        batch = list(changes)
        if not batch:
            return
        frames = b"".join(
            _FRAME.pack(len(body), crc32c.crc32c(body)) + body for body in (records.encode(r) for r in batch)
        )
        self._file.write(frames)
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())
        for record in batch:
            records.apply(record, self._acls, self.credentials)

    @property
    def acls(self) -> Authorizer:
        """Every stored ACL (the authorizer's, or a plain store when authorization is off)."""
        return self._acls

    def close(self) -> None:
        self._file.close()
