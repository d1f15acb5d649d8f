"""Fixtures for the differential conformance suite.

One `ConformanceRun` per pytest session owns the event loop, the backends (started on demand, shared by
scenarios with identical group settings) and every outcome. At the end of a session that ran every
scenario on Kafka it writes docs/conformance.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance import report
from conformance.backends import (
    KAFKA,
    STATICFLEET,
    Backend,
    staticfleet_coordinator_available,
    staticfleet_version,
)
from conformance.java_build import ensure_jar
from conformance.java_consumers import DRIVER, JavaFleet
from conformance.kafka_broker import ensure_kafka_jars, kafka_version
from conformance.runner import ConformanceRun
from conformance.scenario import Scenario, all_scenarios

_RUN = pytest.StashKey[ConformanceRun]()
_SELECTED = pytest.StashKey[list[Scenario]]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    selected: dict[str, Scenario] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and isinstance(callspec.params.get("scenario"), Scenario):
            scenario = callspec.params["scenario"]
            selected[scenario.name] = scenario
            # The scenarios run as one concurrent batch per backend: under pytest-xdist they stay on one
            # worker, or every worker would run the whole batch.
            item.add_marker(pytest.mark.xdist_group("conformance"))
        elif "plain_backend" in getattr(item, "fixturenames", ()):
            # The real programs' tests share one pair of backends (and their JVMs) on one worker.
            item.add_marker(pytest.mark.xdist_group("programs"))
    config.stash[_SELECTED] = list(selected.values())


@pytest.fixture(scope="session")
def conformance_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConformanceRun]:
    # Never skip for want of the oracle: resolve its jars (once, cached) if they are missing.
    ensure_kafka_jars()
    run = ConformanceRun(tmp_path_factory.mktemp("conformance"))
    run.batch = request.config.stash.get(_SELECTED, [])
    request.config.stash[_RUN] = run
    try:
        yield run
    finally:
        run.close()


@pytest.fixture(params=[KAFKA, STATICFLEET])
def plain_backend(request: pytest.FixtureRequest, conformance_run: ConformanceRun) -> Backend:
    """Apache Kafka, then the embedded coordinator, with the scenarios' default group settings and no
    security, shared with them: the backend of the tests that run real programs (Java clients, Kafka's
    tools, Kafka Streams)."""
    return conformance_run.shared_backend(request.param)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    run = session.config.stash.get(_RUN, None)
    if run is None:
        return
    scenarios = all_scenarios()
    kafka = run.results[KAFKA]
    if any(s.name not in kafka for s in scenarios):
        return  # a partial run does not rewrite the report
    staticfleet = run.results[STATICFLEET]
    if staticfleet:
        note = f"{staticfleet_version()} (`staticfleet coordinator`)"
    elif staticfleet_coordinator_available():
        note = "not run in this session"
    else:
        note = "not run: the `staticfleet coordinator` command does not exist yet"
    report.write(scenarios, kafka, staticfleet, kafka_version=kafka_version(), staticfleet_note=note)


@pytest.fixture(scope="module")
def driver_jar() -> Path:
    """conformance/javaclient's consumer driver, built once (cached)."""
    return ensure_jar(DRIVER)


@pytest.fixture
def java_fleets() -> Iterator[list[JavaFleet]]:
    """Java fleets a test starts, stopped when it ends."""
    created: list[JavaFleet] = []
    yield created
    for fleet in created:
        fleet.stop()
