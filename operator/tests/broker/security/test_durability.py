"""ACLs and SCRAM credentials live in the coordinator's durable log: a write the disk refuses at any byte
changes nothing and later acknowledged changes recover, snapshots compact them, and an earlier
version's security.log is moved into the log once."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.security import records
from staticfleet.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from staticfleet.broker.security.authorizer import AuthorizerConfig
from staticfleet.broker.security.scram import ScramMechanism, generate_credential
from staticfleet.broker.security.state import LEGACY_LOG, SecurityLogError, SecurityState, legacy_frame
from staticfleet.broker.security.users import CredentialStore
from staticfleet.coordinator import CoordinatorConfig, ErrorCode, ManualClock, StoreError
from staticfleet.coordinator.logformat import FRAME_OVERHEAD, MAX_FRAME_BYTES
from staticfleet.coordinator.records import SecurityRecord, decode_records, encode_record

SHA512 = ScramMechanism.SCRAM_SHA_512


def acl(group: str, principal: str = "User:alice") -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.GROUP, group, PatternType.LITERAL),
        AccessControlEntry(principal, "*", AclOperation.READ, PermissionType.ALLOW),
    )


def credential(user: str, password: str) -> records.ScramCredentialRecord:
    return records.ScramCredentialRecord(user, SHA512, generate_credential(SHA512, password, 4096))


def new_host(
    directory: Path,
    *,
    max_frame_bytes: int = MAX_FRAME_BYTES,
    max_record_bytes_between_snapshots: int = 2**26,
) -> CoordinatorHost:
    host = CoordinatorHost(
        directory,
        CoordinatorConfig(),
        clock=ManualClock(),
        max_frame_bytes=max_frame_bytes,
        max_record_bytes_between_snapshots=max_record_bytes_between_snapshots,
    )
    host.security = SecurityState(AuthorizerConfig(), CredentialStore())
    return host


def reopened(directory: Path) -> tuple[set[AclBinding], dict[str, bytes], int]:
    """The ACLs and credentials (user -> salt) a fresh host recovers, and how many records it read."""
    host = new_host(directory)
    host.recover()
    assert host.security is not None
    acls = set(host.security.acls.bindings())
    creds = {user: c.salt for user, _, c in host.security.credentials.scram_credentials()}
    recovered = host.recovered_records
    host.durable.close()
    host.event_writer.close()
    host.release()
    return acls, creds, recovered


def test_a_security_record_round_trips_through_the_log_encoding() -> None:
    body = records.encode(records.AclRecord(acl("g")))
    [decoded] = decode_records(encode_record(SecurityRecord(body)), 1)
    assert decoded == SecurityRecord(body)
    assert records.decode(body) == records.AclRecord(acl("g"))


def _failing_after(cut: int, *, short: bool) -> Callable[[int, bytes], int]:
    def write(fd: int, data: bytes) -> int:
        written = os.write(fd, data[:cut]) if cut else 0
        if short:
            return written
        raise OSError(errno.ENOSPC, "No space left on device")

    return write


@pytest.mark.parametrize("short", [False, True], ids=["write-fails", "write-is-short"])
def test_a_change_the_disk_refuses_at_any_byte_changes_nothing_and_later_changes_recover(
    tmp_path: Path, short: bool
) -> None:
    refused: list[records.SecurityRecord] = [records.AclRecord(acl("refused")), credential("refused", "pw")]
    frame_size = FRAME_OVERHEAD + sum(len(encode_record(SecurityRecord(records.encode(r)))) for r in refused)

    async def run(directory: Path, cut: int) -> None:
        host = new_host(directory)
        await host.start()
        state = host.security
        assert state is not None
        await state.change(host, [records.AclRecord(acl("before")), credential("before", "pw")])
        host.durable._write = _failing_after(cut, short=short)
        with pytest.raises(StoreError) as failure:
            await state.change(host, refused)
        assert failure.value.code == ErrorCode.kafka_storage_error
        assert acl("refused") not in state.acls.bindings(), "a refused change is not applied"
        assert state.credentials.scram("refused", SHA512) is None
        host.durable._write = os.write  # space is back: the next change goes through, no restart
        await state.change(host, [records.AclRecord(acl("after")), records.AclTombstone(acl("before"))])
        await state.change(host, [credential("after", "pw")])
        await host.close()

    for cut in range(0, frame_size, 3):
        directory = tmp_path / f"cut-{cut}"
        asyncio.run(run(directory, cut))
        acls, creds, _ = reopened(directory)
        assert acls == {acl("after")}, f"cut at byte {cut}"
        assert set(creds) == {"before", "after"}, f"cut at byte {cut}"


def test_a_change_over_the_frame_limit_is_refused_with_message_too_large(tmp_path: Path) -> None:
    async def run() -> None:
        host = new_host(tmp_path, max_frame_bytes=4096)
        await host.start()
        assert host.security is not None
        with pytest.raises(StoreError) as failure:
            await host.security.change(host, [records.AclRecord(acl(f"g{i:03}")) for i in range(200)])
        assert failure.value.code == ErrorCode.message_too_large
        assert host.security.acls.bindings() == []
        await host.security.change(host, [records.AclRecord(acl("fits"))])
        await host.close()

    asyncio.run(run())
    assert reopened(tmp_path)[0] == {acl("fits")}


def test_snapshots_compact_security_records_and_keep_only_the_live_state(tmp_path: Path) -> None:
    async def run() -> None:
        host = new_host(tmp_path, max_record_bytes_between_snapshots=4096)
        await host.start()
        state = host.security
        assert state is not None
        for round_ in range(60):
            await state.change(host, [records.AclRecord(acl("churn")), credential("carol", f"pw-{round_}")])
            await state.change(host, [records.AclTombstone(acl("churn"))])
            await state.change(host, [records.AclRecord(acl(f"kept-{round_ % 3}"))])
            await asyncio.sleep(0)
        while host._snapshot_task is not None:
            await asyncio.sleep(0.01)
        assert host.snapshots >= 1
        await host.close()

    asyncio.run(run())
    acls, creds, recovered = reopened(tmp_path)
    assert acls == {acl(f"kept-{i}") for i in range(3)}
    assert set(creds) == {"carol"}
    assert recovered < 60, f"{recovered} records read: recovery reads the live state, not every change"
    assert not (tmp_path / LEGACY_LOG).exists()


def test_an_earlier_security_log_is_moved_into_the_coordinator_log_once(tmp_path: Path) -> None:
    history: list[records.SecurityRecord] = [
        records.AclRecord(acl("a")),
        records.AclRecord(acl("b")),
        credential("dave", "pw"),
        records.AclTombstone(acl("a")),
        credential("erin", "pw"),
        records.ScramCredentialTombstone("erin", SHA512),
    ]
    torn = legacy_frame(records.AclRecord(acl("torn")))[:-3]  # a crash mid-write
    (tmp_path / LEGACY_LOG).write_bytes(b"".join(legacy_frame(r) for r in history) + torn)

    async def run() -> int:
        host = new_host(tmp_path)
        await host.start()
        assert host.security is not None
        moved = await host.security.migrate_legacy_log(tmp_path, host)
        assert set(host.security.acls.bindings()) == {acl("b")}
        await host.close()
        return moved

    assert asyncio.run(run()) == len(history)
    assert not (tmp_path / LEGACY_LOG).exists(), "the old file is gone once its records are durable"
    acls, creds, _ = reopened(tmp_path)
    assert acls == {acl("b")} and set(creds) == {"dave"}
    # A crash after the append but before the file was removed moves it again: the same state.
    (tmp_path / LEGACY_LOG).write_bytes(b"".join(legacy_frame(r) for r in history))
    assert asyncio.run(run()) == len(history)
    assert reopened(tmp_path)[:2] == (acls, creds)


def test_a_legacy_security_log_damaged_before_its_tail_stops_the_start_with_its_offset(
    tmp_path: Path,
) -> None:
    frames = [legacy_frame(records.AclRecord(acl(g))) for g in ("a", "b")]
    damaged = bytearray(frames[0])
    damaged[-1] ^= 0xFF
    (tmp_path / LEGACY_LOG).write_bytes(bytes(damaged) + frames[1])

    async def run() -> None:
        host = new_host(tmp_path)
        await host.start()
        assert host.security is not None
        try:
            with pytest.raises(SecurityLogError, match="bad checksum at offset 0"):
                await host.security.migrate_legacy_log(tmp_path, host)
        finally:
            await host.close()

    asyncio.run(run())
    assert (tmp_path / LEGACY_LOG).exists(), "nothing is removed when the move fails"
