"""One consumer group's fleet of pods, the operations it goes through, and the operator's part in them.

A fleet runs a script: a generator that yields what it waits for (time to pass, or a condition such as
"the group is stable with exactly the running pods"). Each operation is announced one heartbeat interval
before it starts, so that the pods it will stop send every heartbeat from then on: a pod's last
heartbeat before it stops decides when the coordinator expires it, and with skipped heartbeats that
moment would differ from a real client's.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass

from staticfleet.analytics import operator_events as ops
from staticfleet.analytics.simulation.consumer import ClientState, VirtualConsumer
from staticfleet.analytics.simulation.engine import LANE_STRIDE, Simulation
from staticfleet.analytics.simulation.params import (
    CRASH,
    DYNAMIC,
    ROLLING_RESTART,
    SCALE_DOWN,
    SCALE_UP,
    STATICFLEET,
    SimulationParams,
)
from staticfleet.coordinator import EXPECTED_INSTANCE_IDS, GroupState
from staticfleet.coordinator.consumer_protocol import Subscription, encode_subscription
from staticfleet.coordinator.messages import LeaveGroupRequest, MemberIdentity, Protocol, RequestContext


@dataclass(frozen=True, slots=True)
class Sleep:
    ms: int


@dataclass(frozen=True, slots=True)
class Until:
    condition: Callable[[], bool]
    timeout_ms: int


Wait = Sleep | Until
Script = Generator[Wait, None, None]


class Fleet:
    def __init__(
        self, sim: Simulation, params: SimulationParams, mode: str, group_id: str, index: int
    ) -> None:
        self.sim = sim
        self.params = params
        self.mode = mode
        self.group_id = group_id
        self.static = mode != DYNAMIC
        self.lane = index * LANE_STRIDE
        self.rng = random.Random(f"{params.seed}/{group_id}")
        topics = params.topic_names()
        self.partitions_per_topic = dict.fromkeys(topics, params.partitions)
        self.protocols = (Protocol("range", encode_subscription(Subscription(0, topics))),)
        self.pods: dict[int, VirtualConsumer] = {}
        self.replicas = 0
        self.operations = 0
        self.unsettled = 0
        self.failed = 0
        self.finished = False
        self._script = self._run()
        self._token = 0
        self._condition: Callable[[], bool] | None = None
        self._coalesce = not params.all_heartbeats

    # --- driving the script ----------------------------------------------------------------------------

    def start(self) -> None:
        self.sim.add(self)
        self.sim.at(self.sim.now(), self.lane, self._resume, self._token)

    def _resume(self, token: int) -> None:
        if token != self._token:
            return
        self._token += 1
        self._condition = None
        try:
            wait = next(self._script)
        except StopIteration:
            self.finished = True
            self.sim.fleet_finished()
            return
        now = self.sim.now()
        if isinstance(wait, Sleep):
            self.sim.at(now + wait.ms, self.lane, self._resume, self._token)
        else:
            self._condition = wait.condition
            self.sim.at(now + wait.timeout_ms, self.lane, self._time_out, self._token)
            self.sim.changed(self)

    def _time_out(self, token: int) -> None:
        if token == self._token and self._condition is not None:
            self.unsettled += 1
            self._resume(token)

    def check_wait(self) -> None:
        if self._condition is not None and self._condition():
            self._condition = None
            self.sim.at(self.sim.now(), self.lane, self._resume, self._token)

    def on_group_event(self) -> None:
        if self._coalesce:
            for pod in self.pods.values():
                pod.wake()

    # --- pods --------------------------------------------------------------------------------------

    def _start_pod(self, ordinal: int) -> VirtualConsumer:
        host = f"/10.{self.rng.randrange(256)}.{self.rng.randrange(256)}.{self.rng.randrange(1, 255)}"
        pod = VirtualConsumer(self, ordinal, host)
        self.pods[ordinal] = pod
        pod.start()
        return pod

    def _start_pods_later(self, ordinals: Iterable[int], spread_ms: int) -> int:
        """Start pods at random moments within the spread; return when the last one starts."""
        latest = 0
        for ordinal in ordinals:
            delay = self.rng.randrange(spread_ms + 1)
            latest = max(latest, delay)
            self.sim.at(self.sim.now() + delay, self.lane, self._start_pod, ordinal)
        return latest

    def instance_id(self, ordinal: int) -> str:
        return f"{self.group_id}-{ordinal}"

    # --- conditions --------------------------------------------------------------------------------

    def settled(self) -> bool:
        """Stable, with exactly the running pods as members, each synced to the current generation."""
        group = self.sim.coordinator.groups.get(self.group_id)
        live = [pod for pod in self.pods.values() if pod.alive and pod.state is not ClientState.FAILED]
        if group is None:
            return not live
        if not live:
            return not group.members
        if group.state is not GroupState.STABLE or len(group.members) != len(live):
            return False
        generation = group.generation_id
        return all(
            pod.state is ClientState.STABLE
            and pod.generation == generation
            and not pod.blocked
            and pod.member_id in group.members
            for pod in live
        )

    def _settle_timeout(self) -> int:
        p = self.params
        return 4 * (p.session_timeout_ms + p.rebalance_timeout_ms) + p.blip_ms + p.restart_downtime_ms

    # --- operator events ---------------------------------------------------------------------------

    def _operation(self, kind: str, operation: str, from_replicas: int, to_replicas: int) -> None:
        event = ops.operation_event(
            kind,
            self.sim.now(),
            self.group_id,
            operation,
            f"{self.group_id}/{self.operations}",
            from_replicas,
            to_replicas,
            self.mode,
        )
        self.sim.operator_events.emit(event)

    # --- the script --------------------------------------------------------------------------------

    def _run(self) -> Script:
        p = self.params
        yield Sleep(self.rng.randrange(p.cooldown_ms))  # groups do not move in lockstep
        self.replicas = p.members
        yield Sleep(self._start_pods_later(range(p.members), p.pod_start_spread_ms))
        yield Until(self.settled, self._settle_timeout())
        for _ in range(p.rounds):
            for scenario in p.scenarios:
                # Operations do not start on a heartbeat tick of the group's members.
                jitter = self.rng.randrange(p.heartbeat_interval_ms)
                yield Sleep(p.cooldown_ms - p.heartbeat_interval_ms + jitter)
                yield from self._scenario(scenario)

    def _scenario(self, scenario: str) -> Script:
        self.operations += 1
        if scenario == ROLLING_RESTART:
            yield from self._rolling_restart()
        elif scenario == SCALE_DOWN:
            yield from self._scale_down(max(1, self.replicas - self.params.scale_by))
        elif scenario == SCALE_UP:
            yield from self._scale_up(self.replicas + self.params.scale_by)
        elif scenario == CRASH:
            yield from self._crash()
        else:
            yield from self._network_blip()

    def _begin(self, announced: Iterable[VirtualConsumer], operation: str, target: int) -> Script:
        """Announce what will stop, wait one heartbeat interval, and record the operation's start."""
        if self._coalesce:
            for pod in announced:
                pod.activate()
        yield Sleep(self.params.heartbeat_interval_ms)
        self._operation(ops.FLEET_OPERATION_STARTED, operation, self.replicas, target)

    def _finish(self, operation: str, before: int) -> Script:
        yield Until(self.settled, self._settle_timeout())
        self._operation(ops.FLEET_OPERATION_COMPLETED, operation, before, self.replicas)

    def _pod_ready(self, pod: VirtualConsumer) -> Until:
        return Until(lambda: pod.state is ClientState.STABLE, self._settle_timeout())

    def _rolling_restart(self) -> Script:
        """StatefulSet RollingUpdate: highest ordinal first, the next once the new pod is ready."""
        p = self.params
        before = self.replicas
        order = sorted(self.pods, reverse=True)
        one_by_one = p.restart_downtime_ms >= p.heartbeat_interval_ms
        first = [self.pods[order[0]]] if one_by_one else list(self.pods.values())
        yield from self._begin(first, ops.ROLLOUT, before)
        for position, ordinal in enumerate(order):
            self.pods[ordinal].stop(graceful=True)
            if one_by_one and position + 1 < len(order) and self._coalesce:
                # The next pod stops no sooner than this one's downtime from now.
                self.pods[order[position + 1]].activate()
            yield Sleep(p.restart_downtime_ms)
            yield self._pod_ready(self._start_pod(ordinal))
        yield from self._finish(ops.ROLLOUT, before)

    def _scale_down(self, target: int) -> Script:
        p = self.params
        before = self.replicas
        leaving = [ordinal for ordinal in sorted(self.pods) if ordinal >= target]
        yield from self._begin([self.pods[o] for o in leaving], ops.SCALE_DOWN, target)
        latest = 0
        for ordinal in leaving:
            delay = self.rng.randrange(p.termination_spread_ms + 1)
            latest = max(latest, delay)
            self.sim.at(self.sim.now() + delay, self.lane, self._stop_pod, ordinal)
        yield Sleep(latest)
        self.replicas = target
        if self.mode == STATICFLEET:
            # The operator waits until the pods are gone, then removes them by instance id, in one batch.
            yield Sleep(p.operator_delay_ms)
            request = LeaveGroupRequest(
                self.group_id,
                tuple(MemberIdentity("", self.instance_id(o), "staticfleet: scaled down") for o in leaving),
            )
            self.sim.coordinator.leave_group(RequestContext(5, "staticfleet-operator"), request)
        yield from self._finish(ops.SCALE_DOWN, before)

    def _stop_pod(self, ordinal: int) -> None:
        self.pods.pop(ordinal).stop(graceful=True)

    def _scale_up(self, target: int) -> Script:
        p = self.params
        before = self.replicas
        yield from self._begin([], ops.SCALE_UP, target)
        if self.mode == STATICFLEET:
            expected = ",".join(self.instance_id(o) for o in range(target))
            self.sim.coordinator.alter_group_config(self.group_id, {EXPECTED_INSTANCE_IDS: expected})
        yield Sleep(self._start_pods_later(range(before, target), p.pod_start_spread_ms))
        self.replicas = target
        if self.mode == STATICFLEET:
            yield Until(self.settled, self._settle_timeout())
            # Cleared once met, so that a later join phase never waits for pods that are gone.
            self.sim.coordinator.alter_group_config(self.group_id, {EXPECTED_INSTANCE_IDS: None})
        yield from self._finish(ops.SCALE_UP, before)

    def _crash(self) -> Script:
        """A pod's process dies without a word; the kubelet starts a new one after the downtime."""
        ordinal = self.rng.choice(sorted(self.pods))
        yield from self._begin([self.pods[ordinal]], ops.CRASH, self.replicas)
        self.pods[ordinal].stop(graceful=False)
        yield Sleep(self.params.restart_downtime_ms)
        self._start_pod(ordinal)
        yield from self._finish(ops.CRASH, self.replicas)

    def _network_blip(self) -> Script:
        ordinal = self.rng.choice(sorted(self.pods))
        pod = self.pods[ordinal]
        yield from self._begin([pod], ops.NETWORK_BLIP, self.replicas)
        pod.block()
        yield Sleep(self.params.blip_ms)
        pod.unblock()
        yield from self._finish(ops.NETWORK_BLIP, self.replicas)
