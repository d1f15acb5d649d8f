"""How many reconcile passes work at once, and the waits that do not count.

The fleets' passes run on a pool with a thread for each fleet that may be waiting (--reconcile-threads),
and a slot bounds how many of them work at once (active_passes: asyncio's default pool size, the CPUs
+ 4), as the operator's Python runs one thread at a time: more passes at work at once only take turns
with one another and with the event loop that watches for changes. A step that only waits (a
scale-down's, for its departing consumers to leave) gives its slot up meanwhile (`waiting`), so that
fleets scaled down together do not wait for one another's waits.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")

_held = threading.local()


def active_passes() -> int:
    """asyncio's default pool size: the CPUs + 4, at most 32."""
    return min(32, (os.cpu_count() or 1) + 4)


def run_in_slot(slots: threading.Semaphore, function: Callable[..., T], *args: object) -> T:
    """`function(*args)` once a slot is free, holding it (but while `waiting`) until it returns."""
    with slots:
        _held.slots = slots
        try:
            return function(*args)
        finally:
            _held.slots = None


@contextmanager
def waiting() -> Iterator[None]:
    """Gives this pass's slot to another while the block only waits (a sleep, a poll of the group), and
    takes one again after it. Outside a pass, or already waiting, it changes nothing."""
    slots: threading.Semaphore | None = getattr(_held, "slots", None)
    if slots is None:
        yield
        return
    _held.slots = None
    slots.release()
    try:
        yield
    finally:
        slots.acquire()
        _held.slots = slots
