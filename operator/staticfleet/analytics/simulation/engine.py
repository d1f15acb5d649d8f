"""Virtual time for one coordinator and the fleets it serves.

Actions wait in one queue ordered by (time, lane, sequence). Every fleet and every pod has its own lane,
so actions due at the same millisecond run in an order that does not depend on how they were
scheduled; the coordinator's own timers run first when they are due. Coordinator callbacks never call
back into the coordinator: they schedule an action instead.
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from staticfleet.coordinator import CoordinatorConfig, GroupCoordinator, InProcessCoordinator, ManualClock
from staticfleet.coordinator.events import EventSink
from staticfleet.coordinator.records import Record

if TYPE_CHECKING:
    from staticfleet.analytics.simulation.fleet import Fleet

LANE_STRIDE: Final = 1 << 20
"""Lanes per fleet: the fleet's own lane, then one per pod ordinal."""

Action = Callable[[Any], object]


class DiscardingStore:
    """The coordinator's durable log is not part of a simulation."""

    def append(self, records: Sequence[Record]) -> None:
        return None


class _NotingSink:
    """Passes events on and notes which groups they concern, in the order they came."""

    def __init__(self, out: EventSink) -> None:
        self.out = out
        self.touched: dict[str, None] = {}

    def emit(self, event: Mapping[str, Any]) -> None:
        self.out.emit(event)
        self.touched[event["group"]] = None


class SimulationStalled(RuntimeError):
    pass


class Simulation:
    def __init__(
        self,
        start_ms: int,
        config: CoordinatorConfig,
        events: EventSink,
        operator_events: EventSink,
        uuid_seed: str,
    ) -> None:
        self.clock = ManualClock(start_ms)
        self._sink = _NotingSink(events)
        uuids = random.Random(uuid_seed)
        self.coordinator = InProcessCoordinator(
            GroupCoordinator(
                self.clock,
                config,
                self._sink,
                new_uuid=lambda: str(uuid.UUID(int=uuids.getrandbits(128), version=4)),
            ),
            DiscardingStore(),
        )
        self.operator_events = operator_events
        self.lane = -1
        """The lane of the latest action at the current millisecond (-1: none yet)."""
        self.steps = 0
        self.heartbeats = 0
        self.fleets: dict[str, Fleet] = {}
        self._queue: list[tuple[int, int, int, Action, Any]] = []
        self._seq = itertools.count()
        self._changed: dict[Fleet, None] = {}
        self._running = 0

    def now(self) -> int:
        return self.clock.now_ms()

    def at(self, time_ms: int, lane: int, action: Action, arg: Any = None) -> None:
        heapq.heappush(self._queue, (time_ms, lane, next(self._seq), action, arg))

    def add(self, fleet: Fleet) -> None:
        self.fleets[fleet.group_id] = fleet
        self._running += 1

    def changed(self, fleet: Fleet) -> None:
        """Something a fleet may be waiting for happened; look after the current step."""
        self._changed[fleet] = None

    def fleet_finished(self) -> None:
        self._running -= 1

    def run(self, max_steps: int) -> None:
        """Run until every fleet has finished its script."""
        queue = self._queue
        coordinator = self.coordinator
        clock = self.clock
        while self._running > 0:
            if self.steps >= max_steps:
                raise SimulationStalled(f"no end after {max_steps} steps at {clock.now_ms()}")
            self.steps += 1
            deadline = coordinator.next_deadline()
            if deadline is not None and (not queue or deadline <= queue[0][0]):
                if deadline > clock.now_ms():
                    clock.set(deadline)
                    self.lane = -1
                coordinator.fire_due_timers()
            elif queue:
                time_ms, lane, _, action, arg = heapq.heappop(queue)
                if time_ms > clock.now_ms():
                    clock.set(time_ms)
                self.lane = lane
                action(arg)
            else:
                raise SimulationStalled(f"nothing left to do at {clock.now_ms()} with fleets still running")
            if self._sink.touched:
                self._after_events()
            if self._changed:
                changed = list(self._changed)
                self._changed.clear()
                for fleet in changed:
                    fleet.check_wait()

    def _after_events(self) -> None:
        touched = list(self._sink.touched)
        self._sink.touched.clear()
        for group_id in touched:
            fleet = self.fleets.get(group_id)
            if fleet is not None:
                fleet.on_group_event()
                self._changed[fleet] = None
