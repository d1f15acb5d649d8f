"""A Fetch response whose records stay in the segment files until they go out on the socket.

The copying path reads each partition's batches into a bytes object, which the response encoder then
copies again into the frame. Here the frame is a list of pieces instead: encoded bytes for everything
but the records, and file regions for the records, which the server sends with sendfile(2) straight
from the page cache to the socket, as Kafka does (`FileRecords.writeTo`). The bytes on the wire are
the same either way (tests compare them for every version).

The encoder covers what the Fetch handler answers: versions 4 to 12, no aborted transactions, and the
partition's tagged fields (diverging epoch, current leader, snapshot id) at their defaults.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fetch_res
from kio.static.primitive import Records, i32, i64

from staticfleet.broker.codec import _to_uvarint
from staticfleet.broker.partitionlog import FileRegion

__all__ = ["FileRegion", "Piece", "RegionFetchResponse", "SplicedFrame", "encode", "supports"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihq")  # partition_index, error_code, high_watermark
_I64 = struct.Struct(">q")
_SIZE_AND_V0_HEADER = struct.Struct(">ii")
_SIZE_AND_V1_HEADER = struct.Struct(">iib")  # the flexible header's empty tagged fields

FLEXIBLE_FROM = 12
VERSIONS = range(4, 13)
_DEFAULT_PARTITION = fetch_res.PartitionData(
    partition_index=i32(0),
    error_code=ErrorCode.none,
    high_watermark=i64(0),
    aborted_transactions=None,
    records=None,
)


Piece = bytes | FileRegion


@dataclass(frozen=True, slots=True)
class SplicedFrame:
    """A whole response frame (size prefix included) in pieces; `length` is its total size."""

    pieces: tuple[Piece, ...]
    length: int

    def regions(self) -> list[FileRegion]:
        return [piece for piece in self.pieces if isinstance(piece, FileRegion)]

    def close(self) -> None:
        for region in self.regions():
            region.close()

    def materialize(self) -> bytes:
        """The frame as one bytes object (reading the regions): the copying path's frame."""
        return b"".join(piece.read() if isinstance(piece, FileRegion) else piece for piece in self.pieces)


@dataclass(frozen=True, slots=True)
class RegionFetchResponse:
    """A Fetch response whose records are file regions: `regions[t][p]` for the p-th partition of
    the t-th topic (those partitions' `records` are None). Whoever holds it sends or closes it."""

    response: fetch_res.FetchResponse
    regions: tuple[tuple[tuple[FileRegion, ...], ...], ...]

    @property
    def has_regions(self) -> bool:
        return any(found for topic in self.regions for found in topic)

    def close(self) -> None:
        for topic in self.regions:
            for found in topic:
                for region in found:
                    region.close()

    def copied(self) -> fetch_res.FetchResponse:
        """The same response with the records read into it (and the regions closed)."""
        try:
            topics = []
            for t, topic in enumerate(self.response.responses):
                partitions = []
                for p, partition in enumerate(topic.partitions):
                    found = self.regions[t][p] if t < len(self.regions) and p < len(self.regions[t]) else ()
                    if found:
                        data = b"".join(region.read() for region in found)
                        partition = dataclasses.replace(partition, records=Records(data))
                    partitions.append(partition)
                topics.append(dataclasses.replace(topic, partitions=tuple(partitions)))
            return dataclasses.replace(self.response, responses=tuple(topics))
        finally:
            self.close()


def supports(response: fetch_res.FetchResponse) -> bool:
    """Whether `encode` writes this response exactly as the general encoder would."""
    return all(
        p.aborted_transactions is None
        and p.diverging_epoch == _DEFAULT_PARTITION.diverging_epoch
        and p.current_leader == _DEFAULT_PARTITION.current_leader
        and p.snapshot_id == _DEFAULT_PARTITION.snapshot_id
        for t in response.responses
        for p in t.partitions
    )


def encode(
    response: fetch_res.FetchResponse,
    version: int,
    correlation_id: int,
    regions: Sequence[Sequence[Sequence[FileRegion]]],
) -> SplicedFrame:
    """The frame of `response` at `version`. `regions[t][p]`, when not empty, are the records of the
    p-th partition of the t-th topic (whose `records` field is then ignored)."""
    if version not in VERSIONS:
        raise ValueError(f"Fetch v{version} is not encoded here")
    flexible = version >= FLEXIBLE_FROM
    pieces: list[Piece] = []
    out = bytearray()

    def array_length(n: int) -> None:
        out.extend(_to_uvarint(n + 1) if flexible else _I32.pack(n))

    def null() -> None:
        out.extend(b"\x00" if flexible else b"\xff\xff\xff\xff")

    throttle_ms = int(response.throttle_time.total_seconds() * 1000)
    out.extend(_I32.pack(throttle_ms))
    if version >= 7:
        out.extend(_I16.pack(int(response.error_code)))
        out.extend(_I32.pack(int(response.session_id)))
    array_length(len(response.responses))
    for t, topic in enumerate(response.responses):
        name = str(topic.topic).encode("utf-8")
        out.extend(_to_uvarint(len(name) + 1) if flexible else _I16.pack(len(name)))
        out.extend(name)
        array_length(len(topic.partitions))
        for p, partition in enumerate(topic.partitions):
            out.extend(
                _PARTITION_HEAD.pack(
                    int(partition.partition_index), int(partition.error_code), int(partition.high_watermark)
                )
            )
            out.extend(_I64.pack(int(partition.last_stable_offset)))
            if version >= 5:
                out.extend(_I64.pack(int(partition.log_start_offset)))
            null()  # aborted_transactions
            if version >= 11:
                out.extend(_I32.pack(int(partition.preferred_read_replica)))
            spans = regions[t][p] if t < len(regions) and p < len(regions[t]) else ()
            if spans:
                size = sum(region.length for region in spans)
                out.extend(_to_uvarint(size + 1) if flexible else _I32.pack(size))
                pieces.append(bytes(out))
                pieces.extend(spans)
                out = bytearray()
            elif partition.records is None:
                null()
            else:
                records = bytes(partition.records)
                out.extend(_to_uvarint(len(records) + 1) if flexible else _I32.pack(len(records)))
                out.extend(records)
            if flexible:
                out.append(0)  # the partition's tagged fields
        if flexible:
            out.append(0)  # the topic's tagged fields
    if flexible:
        out.append(0)  # the response's tagged fields
    pieces.append(bytes(out))
    body = sum(len(piece) if isinstance(piece, bytes) else piece.length for piece in pieces)
    if flexible:
        head = _SIZE_AND_V1_HEADER.pack(body + 5, correlation_id, 0)
    else:
        head = _SIZE_AND_V0_HEADER.pack(body + 4, correlation_id)
    first = pieces[0]
    assert isinstance(first, bytes)  # every frame starts with encoded fields
    pieces[0] = head + first
    return SplicedFrame(tuple(pieces), len(head) + body)
