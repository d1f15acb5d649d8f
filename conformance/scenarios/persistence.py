"""Coordinator restart: what survives (generation, member ids, assignments), what is re-armed (sessions)."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from conformance.scenario import Outcome, ScenarioContext, expect_all, scenario, setup_s2


@scenario(
    "Coordinator restart after a static replacement: the replaced member's new id heartbeats NONE (not "
    "fenced), the group reloads Stable with its generation and assignments, and a member that stays silent "
    "after the reload is expired after its session timeout.",
    rule="§7.29; §1.15 persistence and reload",
    exclusive=True,
    sanity=expect_all(("heartbeat.B_new.after_restart", {"error_code": "NONE"})),
)
async def restart_preserves_static_group(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx, session_ms=4000)
    ctx.record("restart.B", await b.join(9, member_id="").result())
    ctx.record("sync.B", await b.sync().result())
    await ctx.backend.restart()
    await a.conn.close()
    await b.conn.close()
    a.conn = await ctx.connect("A-after-restart", client_id="A")
    b.conn = await ctx.connect("B-after-restart", client_id="B")
    ctx._observer = None
    ctx.record("heartbeat.B_new.after_restart", await b.heartbeat().result())
    ctx.record("heartbeat.A.after_restart", await a.heartbeat().result())
    await ctx.snapshot("describe.after_restart")
    ctx.record("sync.B.after_restart", await b.sync().result())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10.0
    while True:
        answer = await a.heartbeat().result()
        if answer.error_code != ErrorCode.none or loop.time() > deadline:
            break
        await asyncio.sleep(0.2)
    ctx.record("heartbeat.A.after_B_silent", answer)
    await ctx.snapshot("describe.after_B_expired")
    return ctx.outcome
