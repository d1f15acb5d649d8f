"""Runs scenarios on a backend kind, concurrently, and keeps their outcomes for the tests and the report."""

from __future__ import annotations

import asyncio
import json
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from conformance import recorded
from conformance.backends import BACKEND_KINDS, STATICFLEET, Backend, BackendPool, staticfleet_supports
from conformance.scenario import DEFAULT, Outcome, Scenario, ScenarioContext, SetUpRaced

SCENARIO_TIMEOUT_S = 120.0
DEFAULT_CONCURRENCY = 6
SET_UP_ATTEMPTS = 3
"""Runs of a scenario whose set-up raced (`SetUpRaced`) before it counts as failed."""


@dataclass
class Result:
    scenario: str
    kind: str
    outcome: Outcome | None = None
    error: str | None = None
    seconds: float = 0.0
    backend_version: str = ""
    set_up_races: int = 0
    """Runs started again because their set-up raced."""


def runs_on(kind: str, scenario: Scenario) -> bool:
    """False for scenarios whose settings staticfleet cannot be started with yet (they show as not run)."""
    return kind != STATICFLEET or staticfleet_supports(scenario.settings)


class ConformanceRun:
    """Outcomes per backend kind and scenario, computed in batches on one event loop.

    The first request for a kind runs every scenario of the batch that has not run on that kind yet, as
    concurrent tasks on shared backends (distinct group ids keep them apart).
    """

    def __init__(self, root: Path, *, concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self.loop = asyncio.new_event_loop()
        self.pool = BackendPool(root)
        self.concurrency = concurrency
        self.results: dict[str, dict[str, Result]] = {kind: {} for kind in BACKEND_KINDS}
        self.batch: list[Scenario] = []

    def shared_backend(self, kind: str) -> Backend:
        """The session's backend of this kind with the scenarios' default settings (started once), for
        tests that run real programs beside the scenarios."""
        return self.loop.run_until_complete(self.pool.shared(kind, DEFAULT))

    def result(self, kind: str, scenario: Scenario) -> Result:
        done = self.results[kind]
        if scenario.name not in done:
            todo = [s for s in self.batch if s.name not in done and runs_on(kind, s)]
            if scenario not in todo:
                todo.append(scenario)
            self.loop.run_until_complete(self._run_batch(kind, todo))
        return done[scenario.name]

    async def _run_batch(self, kind: str, scenarios: Iterable[Scenario]) -> None:
        gate = asyncio.Semaphore(self.concurrency)
        # Scenarios with a backend of their own start first, so that its start-up overlaps the others.
        ordered = sorted(scenarios, key=lambda s: (not s.exclusive, s.name))
        await asyncio.gather(*(self._run_one(kind, s, gate) for s in ordered))

    async def _run_one(self, kind: str, scenario: Scenario, gate: asyncio.Semaphore) -> None:
        result = Result(scenario.name, kind)
        async with gate:
            started = time.monotonic()
            try:
                if scenario.exclusive:
                    backend = await self.pool.exclusive(kind, scenario.settings)
                else:
                    backend = await self.pool.shared(kind, scenario.settings)
                started = time.monotonic()
                result.backend_version = backend.version
                try:
                    result.outcome = await self._outcome(scenario, backend, result)
                finally:
                    await self.pool.release(backend)
            except Exception:
                result.error = traceback.format_exc()
            result.seconds = time.monotonic() - started
        self.results[kind][scenario.name] = result

    @staticmethod
    async def _outcome(scenario: Scenario, backend: Backend, result: Result) -> Outcome:
        """The scenario's outcome, each run on a new context (a new group), again while its set-up races."""
        while True:
            context = ScenarioContext(backend, scenario)
            try:
                return await asyncio.wait_for(scenario.run(context), SCENARIO_TIMEOUT_S)
            except SetUpRaced:
                result.set_up_races += 1
                if result.set_up_races >= SET_UP_ATTEMPTS:
                    raise
            finally:
                await context.close()

    def close(self) -> None:
        self.pool.stop_all()
        self.loop.close()


def outcome_diff(expected: Outcome, actual: Outcome) -> str:
    """The labels whose values differ, each with both values (for assertion messages)."""
    lines: list[str] = []
    for label in [*expected, *(k for k in actual if k not in expected)]:
        if expected.get(label, "<missing>") != actual.get(label, "<missing>"):
            lines.append(f"- {label}")
            lines.append(f"    kafka:       {json.dumps(expected.get(label, '<missing>'), sort_keys=True)}")
            lines.append(f"    staticfleet: {json.dumps(actual.get(label, '<missing>'), sort_keys=True)}")
    if list(expected) != list(actual) and not lines:
        lines.append(f"- step order differs: kafka {list(expected)} vs staticfleet {list(actual)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """`python -m conformance.runner [--backend kafka|staticfleet] [NAME ...]`: print scenario outcomes."""
    import argparse
    import tempfile

    from conformance.backends import KAFKA
    from conformance.scenario import all_scenarios

    parser = argparse.ArgumentParser(prog="python -m conformance.runner")
    parser.add_argument("--backend", choices=BACKEND_KINDS, default=KAFKA)
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"store Kafka's outcomes in {recorded.RECORDED_PATH.name} (with --backend kafka)",
    )
    parser.add_argument("--secured", action="store_true", help="every scenario of the secured pair")
    parser.add_argument("names", nargs="*", help="scenario names (default: all)")
    args = parser.parse_args(argv)
    if args.record and args.backend != KAFKA:
        parser.error("only Kafka's answers are recorded")
    scenarios = [
        s
        for s in all_scenarios()
        if (not args.names or s.name in args.names) and (not args.secured or s.settings.security is not None)
    ]
    unknown = set(args.names) - {s.name for s in scenarios}
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="staticfleet-conformance-") as tmp:
        run = ConformanceRun(Path(tmp))
        run.batch = scenarios
        try:
            for scenario in scenarios:
                result = run.result(args.backend, scenario)
                print(f"=== {scenario.name} ({result.seconds:.1f}s)")
                if result.error is not None:
                    failed += 1
                    print(result.error)
                for label, value in (result.outcome or {}).items():
                    print(f"  {label}: {json.dumps(value)}")
                if args.record and result.outcome is not None and result.error is None:
                    recorded.store(scenario.name, result.outcome)
        finally:
            run.close()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
