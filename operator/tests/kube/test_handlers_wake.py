"""When a fleet's daemon runs its next pass: at once for a change to the resource; for a change to a pod or
the StatefulSet a little after it during a scale-down, for a pod's readiness during a scale-up, at the
interval otherwise (handlers.Wake); the watch events of the operator's own status write and of kopf's
record of the spec start none."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import kopf

from staticfleet.kube.handlers import (
    DIFFBASE_ANNOTATION,
    OperatorMemo,
    Wake,
    pod_changed,
    resource_changed,
    settings,
)
from staticfleet.kube.own_writes import OwnStatusWrites
from staticfleet.kube.reconcile import Follow


class Running:
    """kopf's DaemonStopped for a daemon that is not being stopped."""

    def __bool__(self) -> bool:
        return False

    async def wait(self, timeout: float | None = None) -> None:
        await asyncio.sleep(timeout if timeout is not None else 3600)


async def _pending(
    wake: Wake, child_delay_s: float, follow: Follow = Follow.EVERY_CHANGE, interval_s: float = 3600
) -> asyncio.Task[None]:
    task = asyncio.ensure_future(wake.next_pass(Running(), interval_s, follow, child_delay_s))
    await asyncio.sleep(0.05)  # the task is waiting now
    return task


def test_a_change_to_the_resource_starts_the_next_pass_at_once() -> None:
    async def run() -> None:
        wake = Wake()
        wake.set()
        await asyncio.wait_for(wake.next_pass(Running(), 3600, Follow.NOTHING), 5)

    asyncio.run(run())


def test_a_change_to_a_child_waits_for_the_delay_given_unless_the_resource_changes_meanwhile() -> None:
    async def run() -> None:
        wake = Wake()
        wake.set(urgent=False)
        task = await _pending(wake, 3600)
        assert not task.done()
        wake.set()  # the resource changed: no more waiting
        await asyncio.wait_for(task, 5)

    asyncio.run(run())


def test_a_change_to_a_child_starts_the_next_pass_at_once_when_no_delay_is_given() -> None:
    async def run() -> None:
        wake = Wake()
        task = await _pending(wake, 0.0)  # a scale-down is in flight
        assert not task.done()  # nothing changed yet
        wake.set(urgent=False)
        await asyncio.wait_for(task, 5)

    asyncio.run(run())


def test_outside_a_scale_step_a_change_to_a_child_brings_no_pass_forward() -> None:
    async def run() -> None:
        wake = Wake()
        wake.set(urgent=False)
        task = asyncio.ensure_future(wake.next_pass(Running(), 3600, Follow.NOTHING))
        await asyncio.sleep(0.1)
        assert not task.done()  # a pod changed: the interval's pass will see it
        wake.set()  # the resource changed
        await asyncio.wait_for(task, 5)
        await asyncio.wait_for(Wake().next_pass(Running(), 0.05, Follow.NOTHING), 5)  # the interval

    asyncio.run(run())


def test_without_a_change_the_next_pass_comes_after_the_interval() -> None:
    async def run() -> None:
        await asyncio.wait_for(Wake().next_pass(Running(), 0.05, Follow.EVERY_CHANGE, 3600), 5)

    asyncio.run(run())


def test_pods_and_the_statefulset_poke_their_fleet_as_a_child_change() -> None:
    async def run() -> None:
        memo = OperatorMemo(ctx=None)  # type: ignore[arg-type]
        wake = memo.triggers[("shop", "orders")] = Wake()
        memo.poke("shop", "orders", urgent=False)
        assert wake.changed.is_set() and not wake.settled.is_set() and not wake.urgent.is_set()
        memo.poke("shop", "orders", urgent=False, settled=True)
        assert wake.settled.is_set() and not wake.urgent.is_set()
        memo.poke("shop", "orders")
        assert wake.urgent.is_set()
        wake.clear()
        memo.poke_namespace("shop")  # a tenancy change concerns the fleet itself
        assert wake.urgent.is_set()
        memo.poke("shop", "other")  # no such fleet: nothing to wake

    asyncio.run(run())


def own_writes(version: str | None = None, status: dict[str, Any] | None = None) -> OwnStatusWrites:
    writes = OwnStatusWrites()
    if status is not None:
        writes.writing(("shop", "orders"), status)
    if version is not None:
        writes.wrote(("shop", "orders"), version, status or {})
    return writes


def test_the_watch_event_of_the_operators_own_status_write_starts_no_pass() -> None:
    async def run() -> None:
        written = {"phase": "Ready"}
        memo = OperatorMemo(ctx=SimpleNamespace(own_writes=own_writes("7", written)))  # type: ignore[arg-type]
        wake = memo.triggers[("shop", "orders")] = Wake()
        handler: Any = resource_changed  # kopf's decorator types it as a watch handler

        async def event(version: str, replicas: int) -> None:
            body = {
                "metadata": {"resourceVersion": version},
                "spec": {"replicas": replicas},
                "status": written,
            }
            await handler(namespace="shop", name="orders", body=body, memo=memo)

        await event("7", 2)
        assert not wake.changed.is_set()
        await event("8", 3)
        assert wake.urgent.is_set()  # a version it did not write: the spec, a label, another writer

    asyncio.run(run())


def test_a_status_write_whose_event_comes_before_its_response_starts_no_pass() -> None:
    async def run() -> None:
        # The pass thread has sent the write but not read its response: the version is not known yet.
        writes = own_writes()
        memo = OperatorMemo(ctx=SimpleNamespace(own_writes=writes))  # type: ignore[arg-type]
        wake = memo.triggers[("shop", "orders")] = Wake()
        handler: Any = resource_changed

        async def event(version: str, replicas: int, status: dict[str, Any]) -> bool:
            wake.clear()
            body = {
                "metadata": {"resourceVersion": version},
                "spec": {"replicas": replicas},
                "status": status,
            }
            await handler(namespace="shop", name="orders", body=body, memo=memo)
            return wake.urgent.is_set()

        assert await event("7", 3, {"phase": "Scaling"})
        writes.writing(("shop", "orders"), {"phase": "Ready", "readyReplicas": 3})
        assert not await event("8", 3, {"readyReplicas": 3, "phase": "Ready"})
        # Another writer's status, or the spec changed with it: the pass has not seen those.
        assert await event("9", 3, {"phase": "Degraded"})
        assert await event("10", 4, {"phase": "Ready", "readyReplicas": 3})

    asyncio.run(run())


def test_kopfs_record_of_a_spec_change_starts_no_second_pass() -> None:
    async def run() -> None:
        memo = OperatorMemo(ctx=SimpleNamespace(own_writes=own_writes()))  # type: ignore[arg-type]
        wake = memo.triggers[("shop", "orders")] = Wake()
        handler: Any = resource_changed

        async def event(version: str, replicas: int, **annotations: str) -> bool:
            wake.clear()
            metadata = {"resourceVersion": version, "generation": replicas, "annotations": annotations}
            body = {"metadata": metadata, "spec": {"replicas": replicas}}
            await handler(namespace="shop", name="orders", body=body, memo=memo)
            return wake.urgent.is_set()

        assert await event("7", 2)
        assert await event("8", 4)  # the spec changed
        assert not await event("9", 4, **{DIFFBASE_ANNOTATION: '{"spec": {"replicas": 4}}'})
        assert await event("10", 4, **{DIFFBASE_ANNOTATION: '{"spec": {"replicas": 4}}', "team": "b"})

    asyncio.run(run())


def test_during_a_scale_up_only_a_pods_readiness_brings_the_next_pass_forward() -> None:
    async def run() -> None:
        wake = Wake()
        task = await _pending(wake, 0.0, Follow.READINESS)
        wake.set(urgent=False)  # a new pod was created, bound, started: not yet ready
        await asyncio.sleep(0.1)
        assert not task.done()
        wake.set(urgent=False, settled=True)
        await asyncio.wait_for(task, 5)

    asyncio.run(run())


def pod(name: str, phase: str, ready: bool) -> dict[str, Any]:
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    return {"metadata": {"name": name}, "status": {"phase": phase, "conditions": [condition]}}


def test_a_pod_settles_when_its_readiness_changes_or_it_goes_away() -> None:
    async def run() -> None:
        memo = OperatorMemo(ctx=None)  # type: ignore[arg-type]
        wake = memo.triggers[("shop", "orders")] = Wake()
        handler: Any = pod_changed
        labels = {"staticfleet.io/group": "orders"}

        async def event(kind: str | None, body: dict[str, Any]) -> bool:
            wake.clear()
            await handler(type=kind, namespace="shop", name="orders-3", labels=labels, body=body, memo=memo)
            assert wake.changed.is_set() and not wake.urgent.is_set()
            return wake.settled.is_set()

        assert not await event("ADDED", pod("orders-3", "Pending", False))  # created, not ready
        assert not await event("MODIFIED", pod("orders-3", "Running", False))  # started
        assert await event("MODIFIED", pod("orders-3", "Running", True))  # ready
        assert not await event("MODIFIED", pod("orders-3", "Running", True))  # ready still
        assert await event("MODIFIED", pod("orders-3", "Running", False))  # its consumer left the group
        assert await event("DELETED", pod("orders-3", "Running", False))
        assert memo.pods_ready == set()

    asyncio.run(run())


def test_kopf_keeps_no_record_of_the_spec_it_handled() -> None:
    storage = settings().persistence.diffbase_storage
    body = kopf.Body({"metadata": {"name": "orders", "namespace": "shop"}, "spec": {"replicas": 3}})
    patch = kopf.Patch()
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    assert not patch, "no write after a change of the spec"
    assert storage.fetch(body=body) is None
