"""What the handlers of every area share: error codes, the persist-first gate, field conversions."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Final, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.primitive import TZAware, i8, i32

from staticfleet.broker.registry import BrokerContext

E = ErrorCode
T = TypeVar("T")
INT32_MIN: Final = i32(-(2**31))
NULL_TOPIC_ID: Final = uuid.UUID(int=0)
SOURCE_DYNAMIC_TOPIC, SOURCE_DEFAULT = i8(1), i8(5)


def ms(value: datetime.timedelta | int) -> int:
    """Milliseconds of a kio timedelta field (or a plain int)."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def timestamp(ms: int) -> TZAware | None:
    """A log-append time as kio writes it: null for -1 (the batch keeps its own times)."""
    if ms < 0:
        return None
    return TZAware.parse(datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))


async def gated(ctx: BrokerContext, response: T) -> T:
    """Hold a synchronously computed response until the records it depends on are durable."""
    if not ctx.host.unsynced:
        return response
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()

    def release() -> None:
        if not future.done():  # the connection may be gone (cancelled) by the time the records are durable
            future.set_result(response)

    ctx.host.deliver(release)
    return await future
