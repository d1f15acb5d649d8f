"""Sending a spliced Fetch frame on a plaintext connection: its encoded pieces written to the socket,
its record regions sent with sendfile(2) from the segment files, so the records never enter Python.

It works with any event loop (asyncio's own and uvloop, which has no `loop.sendfile`): it writes on a
duplicate of the connection's socket descriptor while the transport has nothing buffered, and waits for
the socket to take more with the loop's `add_writer` on that duplicate (a loop refuses watchers on the
descriptor a transport owns). TLS connections never come here: their bytes must pass through the TLS
layer, so they keep the copying path.
"""

from __future__ import annotations

import asyncio
import errno
import os

from staticfleet.broker.fetch_wire import FileRegion, SplicedFrame

# sendfile refusing this pair of descriptors, for good: the bytes are read and written instead.
_UNSUPPORTED = {errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP}


def can_splice(writer: asyncio.StreamWriter) -> bool:
    """A connection whose socket the records may be written to directly: plaintext, a real socket."""
    if not hasattr(os, "sendfile") or writer.get_extra_info("sslcontext") is not None:
        return False
    if writer.get_extra_info("ssl_object") is not None:
        return False
    sock = writer.get_extra_info("socket")
    return sock is not None and sock.fileno() >= 0


class SplicedSender:
    """One connection's sender; `close` it with the connection."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._fd = os.dup(writer.get_extra_info("socket").fileno())
        self._loop = asyncio.get_running_loop()
        self._sendfile = True

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    async def send(self, frame: SplicedFrame) -> None:
        """Write the whole frame after whatever the transport still holds; closes its regions."""
        try:
            await self._transport_flushed()
            for piece in frame.pieces:
                if isinstance(piece, FileRegion):
                    await self._send_region(piece)
                else:
                    await self._send_bytes(piece)
        finally:
            frame.close()

    async def _transport_flushed(self) -> None:
        transport = self._writer.transport
        if not transport.get_write_buffer_size():
            return
        low, high = transport.get_write_buffer_limits()
        transport.set_write_buffer_limits(high=0, low=0)  # drain() now waits for an empty buffer
        try:
            while transport.get_write_buffer_size():
                if transport.is_closing():
                    raise ConnectionResetError("connection closed while flushing")
                await self._writer.drain()
                if transport.get_write_buffer_size():
                    await self._writable()  # a loop that did not pause for the new limits
        finally:
            transport.set_write_buffer_limits(high=high, low=low)

    async def _writable(self) -> None:
        ready: asyncio.Future[None] = self._loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        self._loop.add_writer(self._fd, wake)
        try:
            await ready
        finally:
            self._loop.remove_writer(self._fd)

    async def _send_bytes(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = os.write(self._fd, view)
            except BlockingIOError:
                await self._writable()
                continue
            view = view[sent:]

    async def _send_region(self, region: FileRegion) -> None:
        offset, remaining = region.position, region.length
        while remaining:
            if not self._sendfile:
                await self._send_bytes(os.pread(region.fd, remaining, offset))
                return
            try:
                sent = os.sendfile(self._fd, region.fd, offset, remaining)
            except BlockingIOError:
                await self._writable()
                continue
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED:
                    raise
                self._sendfile = False
                continue
            if sent == 0:  # the file is shorter than the region: never true of a segment's batches
                raise ConnectionAbortedError(f"segment ended {remaining} bytes early")
            offset += sent
            remaining -= sent
