"""Kafka's recorded answers for the secured scenarios (conformance/recorded-kafka.json).

They let the embedded coordinator's security work be checked scenario by scenario against what Kafka
answered, and the Kafka half of the suite checks that the oracle still answers the same: a recorded
outcome that Kafka no longer gives fails `test_scenario[kafka-...]`.

    python -m conformance.runner --record --secured     # run the secured scenarios on Kafka and store them
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from conformance.driver import Json
from conformance.kafka_broker import kafka_version

RECORDED_PATH = Path(__file__).resolve().parent / "recorded-kafka.json"


def _load() -> dict[str, Json]:
    if not RECORDED_PATH.exists():
        return {"kafka_version": kafka_version(), "scenarios": {}}
    data = json.loads(RECORDED_PATH.read_text())
    assert isinstance(data, dict)
    return data


@functools.cache
def outcomes() -> dict[str, dict[str, Json]]:
    """The recorded outcome of each scenario, if they were recorded from the pinned Kafka version."""
    data = _load()
    if data.get("kafka_version") != kafka_version():
        return {}
    scenarios = data.get("scenarios")
    assert isinstance(scenarios, dict)
    return {name: value for name, value in scenarios.items() if isinstance(value, dict)}


def store(name: str, outcome: dict[str, Json]) -> None:
    data = _load()
    if data.get("kafka_version") != kafka_version():
        data = {"kafka_version": kafka_version(), "scenarios": {}}
    scenarios = data["scenarios"]
    assert isinstance(scenarios, dict)
    scenarios[name] = outcome
    data["scenarios"] = dict(sorted(scenarios.items()))
    RECORDED_PATH.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    outcomes.cache_clear()
