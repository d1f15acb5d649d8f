"""The coordinator log on disk: file names, headers, frames, and reading them back without trusting them.

A directory holds
  log-<seq>.sfl        frames appended since snapshot <seq> (the newest file is the active one)
  snapshot-<seq>.sfs   the live state at the moment log <seq> was started

Each file is an 8-byte header (its magic) followed by frames. A frame is
u32 payload length | u32 CRC-32C of the payload | payload, and a payload is
u8 format version | u32 record count | records.

`scan_file` walks a file's frames. Where a frame is damaged it looks for the next intact one by trying
every later byte, so that damage with intact frames after it is told apart from a torn tail, the only
damage a crash leaves: the end of the last write, cut short.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import crc32c

from staticfleet.coordinator.errors import ErrorCode, StoreError
from staticfleet.coordinator.records import Record, encode_record

FILE_MAGIC = b"SFLOG\x00\x01\n"
SNAPSHOT_MAGIC = b"SFSNP\x00\x01\n"
FRAME_HEAD = struct.Struct(">II")
PAYLOAD_HEAD = struct.Struct(">BI")
FORMAT_VERSION = 1
FRAME_OVERHEAD = FRAME_HEAD.size + PAYLOAD_HEAD.size
MAX_FRAME_BYTES = 256 * 1024 * 1024
"""The largest frame recovery reads; appends and snapshots never write a larger one."""
SNAPSHOT_FRAME_BYTES = 64 * 1024
"""Snapshot frames are cut at about this size (a single record may make one larger, up to the limit).
A frame is what a checksum covers, so this is also about what a damaged byte in a snapshot costs."""
MIN_RECORD_BYTES = 5
"""The smallest encoded record (a group tombstone with an empty id)."""
_VERSION_BYTE = bytes([FORMAT_VERSION])

LOG_NAME = re.compile(r"^log-(\d{20})\.sfl$")
SNAPSHOT_NAME = re.compile(r"^snapshot-(\d{20})\.sfs$")


def log_name(seq: int) -> str:
    return f"log-{seq:020d}.sfl"


def snapshot_name(seq: int) -> str:
    return f"snapshot-{seq:020d}.sfs"


def encode_frame(records: Sequence[Record]) -> bytes:
    return frame_of(len(records), b"".join(encode_record(r) for r in records))


def frame_of(count: int, encoded_records: bytes) -> bytes:
    payload = PAYLOAD_HEAD.pack(FORMAT_VERSION, count) + encoded_records
    return FRAME_HEAD.pack(len(payload), crc32c.crc32c(payload)) + payload


def snapshot_frames(records: Iterable[Record], target_bytes: int, max_bytes: int) -> Iterator[bytes]:
    """Frames of about `target_bytes`, none over `max_bytes`; StoreError for a record that cannot fit."""
    parts: list[bytes] = []
    size = FRAME_OVERHEAD
    for record in records:
        encoded = encode_record(record)
        if FRAME_OVERHEAD + len(encoded) > max_bytes:
            raise StoreError(
                f"a {type(record).__name__} of {len(encoded)} bytes exceeds the frame limit "
                f"of {max_bytes} bytes",
                ErrorCode.message_too_large,
            )
        if parts and size + len(encoded) > target_bytes:
            yield frame_of(len(parts), b"".join(parts))
            parts, size = [], FRAME_OVERHEAD
        parts.append(encoded)
        size += len(encoded)
    if parts:
        yield frame_of(len(parts), b"".join(parts))


# --- reading back ------------------------------------------------------------------------------------


class Frame(NamedTuple):
    """An intact frame: its length and checksum hold. (A tuple: a log has millions of them.)"""

    offset: int
    size: int
    """Header and payload."""
    record_count: int

    @property
    def end(self) -> int:
        return self.offset + self.size

    @property
    def records_at(self) -> int:
        return self.offset + FRAME_OVERHEAD


@dataclass(frozen=True, slots=True)
class Damage:
    """Bytes that are no intact frame: from `start` to the next intact frame, or to the end of the file."""

    start: int
    end: int
    reason: str
    torn: bool
    """What a write cut short leaves: the damage reaches the end of the file, no intact frame follows it,
    and it is an incomplete frame (or zeros, as a file system's unwritten blocks read after a power
    loss). A frame that is all there but fails its checksum was written in full and damaged later."""

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class FileScan:
    size: int
    frames: tuple[Frame, ...]
    damages: tuple[Damage, ...]

    def frames_after(self, offset: int) -> tuple[Frame, ...]:
        return tuple(f for f in self.frames if f.offset >= offset)


def read_frame(data: bytes, pos: int) -> tuple[Frame | None, str]:
    """The intact frame at `pos`, or None and what is wrong with it."""
    end = len(data)
    if end - pos < FRAME_HEAD.size:
        return None, f"the file ends {end - pos} bytes into the frame header at byte {pos}"
    length, checksum = FRAME_HEAD.unpack_from(data, pos)
    start = pos + FRAME_HEAD.size
    if length < PAYLOAD_HEAD.size or length > MAX_FRAME_BYTES:
        return None, f"the frame at byte {pos} declares an impossible length of {length} bytes"
    if start + length > end:
        return None, f"the frame at byte {pos} declares {length} bytes but only {end - start} follow"
    if crc32c.crc32c(memoryview(data)[start : start + length]) != checksum:
        return None, f"checksum mismatch in the frame at byte {pos}"
    version, count = PAYLOAD_HEAD.unpack_from(data, start)
    if version != FORMAT_VERSION:
        return None, f"unknown frame format {version} in the frame at byte {pos}"
    return Frame(pos, FRAME_HEAD.size + length, count), ""


def scan_file(data: bytes, magic: bytes) -> FileScan:
    """Every intact frame of a file and every damaged stretch between them."""
    end = len(data)
    frames: list[Frame] = []
    damages: list[Damage] = []
    if end == 0:
        return FileScan(0, (), ())  # created, header not yet written: it holds nothing
    pos = len(magic)
    if data[: len(magic)] != magic:
        resume = find_intact_frame(data, min(pos, end))
        if end < len(magic):
            reason = f"the file ends {end} bytes into its {len(magic)}-byte header"
            cut_short = magic.startswith(data) or _zeros(data, 0)
        else:
            reason = "damaged file header"
            cut_short = _zeros(data, 0)
        damages.append(Damage(0, end if resume is None else resume, reason, resume is None and cut_short))
        if resume is None:
            return FileScan(end, (), tuple(damages))
        pos = resume
    view = memoryview(data)
    unpack_head, unpack_payload, crc = FRAME_HEAD.unpack_from, PAYLOAD_HEAD.unpack_from, crc32c.crc32c
    while pos < end:
        if end - pos >= FRAME_OVERHEAD:  # the common case, inline: an intact frame
            length, checksum = unpack_head(data, pos)
            start = pos + FRAME_HEAD.size
            stop = start + length
            if (
                PAYLOAD_HEAD.size <= length <= MAX_FRAME_BYTES
                and stop <= end
                and crc(view[start:stop]) == checksum
            ):
                version, count = unpack_payload(data, start)
                if version == FORMAT_VERSION:
                    frames.append(Frame(pos, stop - pos, count))
                    pos = stop
                    continue
        frame, reason = read_frame(data, pos)  # says what is wrong
        if frame is not None:
            frames.append(frame)
            pos = frame.end
            continue
        resume = find_intact_frame(data, pos + 1)
        torn = resume is None and _cut_short(data, pos)
        damages.append(Damage(pos, end if resume is None else resume, reason, torn))
        if resume is None:
            break
        pos = resume
    return FileScan(end, tuple(frames), tuple(damages))


def find_intact_frame(data: bytes, start: int) -> int | None:
    """The first offset at or after `start` where an intact frame begins, or None.

    A candidate needs the format version in place, a length that fits the file, a plausible record
    count, something a frame may be followed by (the end of the file, another frame, or what a crash
    leaves) and, last because it is the costly test, a matching checksum. Only the version byte is
    searched for byte by byte (in C, with bytes.find)."""
    end = len(data)
    view = memoryview(data)
    i = data.find(_VERSION_BYTE, start + FRAME_HEAD.size)
    while i != -1 and end - i >= PAYLOAD_HEAD.size:
        pos = i - FRAME_HEAD.size
        length, checksum = FRAME_HEAD.unpack_from(data, pos)
        count = PAYLOAD_HEAD.unpack_from(data, i)[1]
        frame_end = i + length
        if (
            PAYLOAD_HEAD.size + MIN_RECORD_BYTES <= length <= MAX_FRAME_BYTES
            and frame_end <= end
            and 1 <= count <= (length - PAYLOAD_HEAD.size) // MIN_RECORD_BYTES
            and _may_follow_a_frame(data, frame_end)
            and crc32c.crc32c(view[i:frame_end]) == checksum
        ):
            return pos
        i = data.find(_VERSION_BYTE, i + 1)
    return None


def _may_follow_a_frame(data: bytes, pos: int) -> bool:
    rest = len(data) - pos
    if rest <= FRAME_HEAD.size:
        return True  # the end of the file, or a frame header cut short
    return data[pos + FRAME_HEAD.size] == FORMAT_VERSION or _zeros(data, pos, pos + FRAME_OVERHEAD)


def _zeros(data: bytes, start: int, end: int | None = None) -> bool:
    stop = len(data) if end is None else min(end, len(data))
    return data.count(0, start, stop) == stop - start


def _cut_short(data: bytes, pos: int) -> bool:
    """Whether damage at `pos` that runs to the end of the file is what a write cut short leaves."""
    end = len(data)
    if _zeros(data, pos):
        return True
    if end - pos < FRAME_HEAD.size:
        return True
    length, checksum = FRAME_HEAD.unpack_from(data, pos)
    start = pos + FRAME_HEAD.size
    if not PAYLOAD_HEAD.size <= length <= MAX_FRAME_BYTES or start + length <= end:
        return False  # a length no write makes, or a frame that is all there: damaged, not cut short
    present = memoryview(data)[start:]
    if len(present) >= 1 and present[0] != FORMAT_VERSION:
        return False
    if len(present) >= PAYLOAD_HEAD.size and PAYLOAD_HEAD.unpack_from(present, 0)[1] == 0:
        return False
    # A frame whose length field alone was damaged is all there: its checksum holds over what follows.
    whole: bool = crc32c.crc32c(present) == checksum
    return not whole
