"""The runner against the embedded coordinator: a set-up whose join phase ends before its last member
joins is found out, and the scenario is run again on a new group, a bounded number of times."""

from __future__ import annotations

import asyncio
from pathlib import Path

from conformance.backends import STATICFLEET
from conformance.kafka_broker import GroupSettings
from conformance.runner import SET_UP_ATTEMPTS, ConformanceRun, Result
from conformance.scenario import Outcome, Scenario, ScenarioContext, ScenarioFn, join_all

# No initial rebalance delay: a brand-new group's first join phase ends with its first member.
NO_DELAY = GroupSettings(initial_rebalance_delay_ms=0)


async def _late_second_member(ctx: ScenarioContext) -> Outcome:
    """A and B joined in order where A's join phase has ended already: A is in generation 1 alone, and
    B's join waits for A to rejoin until the rebalance timeout removes it."""
    a = await ctx.member("A", rebalance_ms=300)
    b = await ctx.member("B", rebalance_ms=300)
    joined = await join_all(ctx, [a, b])
    ctx.fact("generations", [result.generation for result in joined])
    return ctx.outcome


def _run(tmp_path: Path, scenario: Scenario) -> Result:
    run = ConformanceRun(tmp_path)
    try:
        run.loop.run_until_complete(run._run_one(STATICFLEET, scenario, asyncio.Semaphore(1)))
        return run.results[STATICFLEET][scenario.name]
    finally:
        run.close()


def _scenario(name: str, fn: ScenarioFn) -> Scenario:
    return Scenario(name, "a set-up that races", "none", fn, NO_DELAY)


def test_a_set_up_that_always_races_fails_after_its_attempts(tmp_path: Path) -> None:
    result = _run(tmp_path, _scenario("always_races", _late_second_member))
    assert result.outcome is None
    assert result.error is not None and "SetUpRaced" in result.error
    assert "joined generations [1, 2]" in result.error
    assert result.set_up_races == SET_UP_ATTEMPTS


def test_a_set_up_that_raced_once_is_run_again_on_a_new_group(tmp_path: Path) -> None:
    groups: list[str] = []

    async def races_first(ctx: ScenarioContext) -> Outcome:
        groups.append(ctx.group)
        if len(groups) == 1:
            return await _late_second_member(ctx)
        a = await ctx.member("A")
        joined = await join_all(ctx, [a])
        ctx.fact("generations", [result.generation for result in joined])
        return ctx.outcome

    result = _run(tmp_path, _scenario("races_first", races_first))
    assert result.error is None, result.error
    assert result.outcome == {"generations": [1]}
    assert result.set_up_races == 1
    assert len(set(groups)) == 2
