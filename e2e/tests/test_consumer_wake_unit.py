"""The example consumer wakes librdkafka's main thread between polls, so that a classic member heartbeats
at its interval (bench/heartbeat_wake.py measures why it matters); here with a stand-in client."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

CONSUMER = Path(__file__).resolve().parents[2] / "examples" / "consumer" / "consumer.py"
POLLS = 6


@pytest.fixture(scope="module")
def consumer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_consumer_wake", CONSUMER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class IdleClient:
    """A client with nothing to read: each poll waits its whole timeout and returns nothing."""

    calls: list[str]
    stop: threading.Event

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.calls.append("subscribe")

    def poll(self, timeout: float) -> None:
        time.sleep(timeout)
        self.calls.append("poll")
        if self.calls.count("poll") == POLLS:
            self.stop.set()

    def assignment(self) -> list[Any]:
        self.calls.append("assignment")
        return []

    def close(self) -> None:
        self.calls.append("close")


def test_an_idle_member_wakes_the_client_after_every_poll_that_waited_longer_than_the_wake_period(
    consumer: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert consumer.POLL_S >= consumer.WAKE_S  # so every idle poll is followed by a wake
    stop = threading.Event()
    IdleClient.calls, IdleClient.stop = [], stop
    monkeypatch.setattr(consumer, "Consumer", IdleClient)
    code = consumer.run_member(
        {"group.id": "g", "client.id": "m-0"},
        ["t"],
        consumer.PartitionState(tmp_path / "state"),
        "m-0",
        consumer.Readiness(tmp_path / "ready", ["m-0"]),
        stop,
        consumer.Departure(None),
    )
    assert code == 0
    calls = IdleClient.calls
    assert calls[0] == "subscribe" and calls[-1] == "close"
    between = calls[1:-1]
    assert between == ["poll", "assignment"] * POLLS
