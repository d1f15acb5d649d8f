"""When a pass reads its fleet's lag: at most every LAG_REFRESH_S per fleet.

The lag feeds only the status and the metrics, and reading it (ListOffsets and OffsetFetch over every
partition) was half of a pass on a loaded coordinator. A fleet's passes follow its pods, about one a second
during a rollout, and one pass waits for the one before it: a change to the resource that lands during a
pass's lag read waited for that read before the StatefulSet heard of it. Between reads the status keeps the
lag it shows, as it does while the cluster does not answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable

LAG_REFRESH_S = 5.0


def lag_due(last_read: float | None, now: float) -> bool:
    """Whether a fleet's lag is read again this pass. Pure."""
    return last_read is None or now - last_read >= LAG_REFRESH_S


class LagReads:
    """When each fleet's lag was last read (namespace, name). A fleet's passes never overlap."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last: dict[tuple[str, str], float] = {}

    def due(self, fleet: tuple[str, str]) -> bool:
        """True, and the read counted as made now, when this pass is to read the lag. A read that fails
        counts too: the next is tried LAG_REFRESH_S later, not at every pass while the cluster is away."""
        now = self._clock()
        if not lag_due(self._last.get(fleet), now):
            return False
        self._last[fleet] = now
        return True

    def forget(self, fleet: tuple[str, str]) -> None:
        self._last.pop(fleet, None)
