"""Over real sockets: a request whose operation raises something unexpected is answered
UNKNOWN_SERVER_ERROR on a connection that stays open, and other groups keep working; a string longer
than Kafka's protocol allows closes only the connection that sent it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from conformance import driver as d
from staticfleet.broker.server import BrokerServer
from staticfleet.coordinator.records import GroupMetadataRecord, OffsetCommitRecord, Record

from .test_server_apis import serve

PROTOCOLS = (("range", d.subscription("t1")),)


def _poison(server: BrokerServer, group: str) -> None:
    """The coordinator log cannot encode the records of `group` (any other error than a StoreError)."""
    durable = server.host.durable
    append = durable.append

    def poisoned(records: Sequence[Record]) -> None:
        for record in records:
            kind = GroupMetadataRecord | OffsetCommitRecord
            if isinstance(record, kind) and record.group_id == group:
                raise ValueError(f"cannot encode a record of {group}")
        append(records)

    durable.append = poisoned  # type: ignore[method-assign]


def test_an_unexpected_failure_is_answered_on_an_open_connection_and_other_groups_keep_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="staticfleet.coordinator.runtime")

    async def test(server: BrokerServer) -> None:
        async with d.Driver("127.0.0.1", server.port) as driver:
            conn = await driver.connect("client")
            await d.ensure_topic(conn, "t1", 2)
            _poison(server, "poisoned")
            for _ in range(3):  # a client retrying: answered each time, logged once
                commit = await conn.request(d.offset_commit(9, "poisoned", offsets={"t1": {0: 5, 1: 6}}))
                assert d.partition_errors(commit) == [E.unknown_server_error] * 2
            join = d.JoinResult.of(
                await conn.request(d.join_group(9, "poisoned", instance_id="a", protocols=PROTOCOLS))
            )
            assert (join.error, join.member_id) == (E.unknown_server_error, "")
            assert not conn.closed
            healthy = await conn.request(d.offset_commit(9, "healthy", offsets={"t1": {0: 7}}))
            assert d.partition_errors(healthy) == [E.none]
            member = d.JoinResult.of(
                await conn.request(d.join_group(9, "members", instance_id="b", protocols=PROTOCOLS))
            )
            assert member.error == E.none and member.is_leader
            sync = await conn.request(
                d.sync_group(
                    5,
                    "members",
                    generation=member.generation,
                    member_id=member.member_id,
                    instance_id="b",
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=[(member.member_id, d.assignment({"t1": [0, 1]}))],
                )
            )
            assert sync.error_code == E.none
            fetched = await conn.request(d.offset_fetch(8, "poisoned", partitions=None))
            assert [t for g in fetched.groups for t in g.topics] == []
            described = d.GroupDescription.of(await conn.request(d.describe_groups(5, "poisoned")))
            assert described.state == "Dead", "the group the failed join created was taken back out"
        assert server.host.runtime.unexpected_errors == 4

    serve(tmp_path, test)
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert len(tracebacks) == 2, [r.getMessage() for r in tracebacks]  # OffsetCommit once, JoinGroup once


def test_a_string_over_32767_bytes_closes_only_its_connection(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        async with d.Driver("127.0.0.1", server.port) as driver:
            bystander = await driver.connect("bystander")
            await d.ensure_topic(bystander, "t1", 1)
            for request in (
                d.join_group(9, "g" * 32768, protocols=PROTOCOLS),
                d.heartbeat(4, "g" * 32768, generation=1, member_id="m"),
                d.join_group(9, "g", instance_id="i" * 32768, protocols=PROTOCOLS),
            ):
                sender = await driver.connect("sender")
                with pytest.raises(d.ConnectionClosed):
                    await sender.request(request)
            longest = "g" * 32767
            commit = await bystander.request(d.offset_commit(9, longest, offsets={"t1": {0: 3}}))
            assert d.partition_errors(commit) == [E.none]
            assert not bystander.closed

    serve(tmp_path, test)
