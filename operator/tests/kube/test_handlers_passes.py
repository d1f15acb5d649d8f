"""Where the fleets' reconcile passes run (handlers.OperatorMemo.run_pass, passes.py): on one pool that
every fleet shares, at most `active_passes` at work at once, any number waiting (passes.waiting) up to
--reconcile-threads, each with the context of the fleet that started it."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import threading
import time
from collections.abc import Callable

import pytest

from staticfleet.kube import passes
from staticfleet.kube.handlers import OperatorMemo
from staticfleet.kube.limits import RECONCILE_THREADS

fleet: contextvars.ContextVar[str] = contextvars.ContextVar("fleet", default="none")


def run_passes(memo: OperatorMemo, count: int, one_pass: Callable[[], str]) -> list[str]:
    """`count` fleets' passes at once, each fleet's name in its context."""

    async def run() -> list[str]:
        async def fleet_pass(name: str) -> str:
            fleet.set(name)
            result: str = await memo.run_pass(one_pass)
            return result

        return await asyncio.gather(*(fleet_pass(f"fleet-{i}") for i in range(count)))

    return asyncio.run(run())


def test_as_many_fleets_as_there_are_threads_wait_in_their_passes_at_once() -> None:
    memo = OperatorMemo(ctx=None, active_passes=2)  # type: ignore[arg-type]
    assert memo.pass_threads == RECONCILE_THREADS >= 64
    everyone = threading.Barrier(RECONCILE_THREADS, timeout=30)

    def scale_down_pass() -> str:
        with passes.waiting():  # as a scale-down's pass waits for its departing consumers
            everyone.wait()  # ends only if every pass waits at once
        return fleet.get()

    names = run_passes(memo, RECONCILE_THREADS, scale_down_pass)
    # Each pass ran with the context of the fleet that started it (its log lines name that fleet).
    assert names == [f"fleet-{i}" for i in range(RECONCILE_THREADS)]


def test_no_more_passes_than_the_slots_work_at_once() -> None:
    memo = OperatorMemo(ctx=None, active_passes=3)  # type: ignore[arg-type]
    guard = threading.Lock()
    working = [0, 0]  # now, most

    def busy_pass() -> str:
        with guard:
            working[0] += 1
            working[1] = max(working)
        time.sleep(0.05)
        with guard:
            working[0] -= 1
        return fleet.get()

    run_passes(memo, 12, busy_pass)
    assert working[1] == 3


def test_a_pass_that_waits_takes_a_slot_again_before_it_goes_on() -> None:
    memo = OperatorMemo(ctx=None, active_passes=1)  # type: ignore[arg-type]
    order: list[str] = []
    first_waits, second_ran = threading.Event(), threading.Event()

    def first() -> str:
        with passes.waiting(), passes.waiting():  # waiting again while waiting changes nothing
            first_waits.set()
            assert second_ran.wait(10)  # the slot it gave up let the second pass work
        order.append("first")
        return "first"

    def second() -> str:
        assert first_waits.wait(10)
        order.append("second")
        second_ran.set()
        return "second"

    async def run() -> None:
        await asyncio.gather(memo.run_pass(first), memo.run_pass(second))

    asyncio.run(run())
    assert order == ["second", "first"]
    assert memo.slots.acquire(blocking=False)  # the one slot is free again, and only one
    assert not memo.slots.acquire(blocking=False)


def test_waiting_outside_a_pass_changes_nothing() -> None:
    with passes.waiting():
        pass
    slots = threading.Semaphore(1)
    with pytest.raises(ValueError):
        passes.run_in_slot(slots, int, "not a number")
    assert slots.acquire(blocking=False)  # a pass that failed gave its slot back


def test_every_fleets_copy_of_the_memo_shares_one_pool_and_its_slots() -> None:
    memo = OperatorMemo(ctx=None, pass_threads=8)  # type: ignore[arg-type]
    copied = copy.copy(memo)  # kopf gives each resource a shallow copy of the memo
    assert copied.pool is memo.pool and copied.slots is memo.slots
    assert memo.pool._max_workers == 8
    assert memo.active_passes == passes.active_passes()
