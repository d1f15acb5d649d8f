"""The example consumer wakes librdkafka's main thread between polls, so that a classic member heartbeats
at its interval (bench/heartbeat_wake.py measures why it matters); here with a stand-in client."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

POLLS = 6


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

    def unsubscribe(self) -> None:
        self.calls.append("unsubscribe")

    def assignment(self) -> list[Any]:
        self.calls.append("assignment")
        return []

    def close(self) -> None:
        self.calls.append("close")


def run_idle(consumer: ModuleType, tmp_path: Path, departure_file: str | None) -> list[str]:
    """What an idle member asked of its client over POLLS polls, between subscribing and closing."""
    stop = threading.Event()
    IdleClient.calls, IdleClient.stop = [], stop
    code = consumer.run_member(
        {"group.id": "g", "client.id": "m-0"},
        ["t"],
        consumer.PartitionState(tmp_path / "state"),
        "m-0",
        consumer.Readiness(tmp_path / "ready", ["m-0"]),
        stop,
        consumer.Departure(departure_file),
    )
    assert code == 0
    calls = IdleClient.calls
    assert calls[0] == "subscribe" and calls[-1] == "close"
    return calls[1:-1]


def test_an_idle_member_wakes_the_client_after_every_poll_that_waited_longer_than_the_wake_period(
    consumer: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert consumer.POLL_S >= consumer.WAKE_S  # so every idle poll is followed by a wake
    monkeypatch.setattr(consumer, "Consumer", IdleClient)
    assert run_idle(consumer, tmp_path, None) == ["poll", "assignment"] * POLLS


def test_a_member_marked_departing_is_not_woken(
    consumer: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A heartbeat as the other departing members leave would draw it into their rebalance.
    monkeypatch.setattr(consumer, "Consumer", IdleClient)
    mark = tmp_path / "departing"
    mark.write_text(str(int((time.time() + 3600) * 1000)))  # marked, its moment far ahead
    monkeypatch.setattr(consumer, "LEAVE_WAIT_S", 0.2)  # stopped while marked, it leaves as it closes
    calls = run_idle(consumer, tmp_path, str(mark))
    assert calls[: POLLS + 1] == ["poll"] * POLLS + ["unsubscribe"]
    assert "assignment" not in calls


def test_members_logging_at_once_never_share_a_line(
    consumer: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pod's members log from a thread each; bench/consumption.py reads their lines one JSON per line."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    try:
        threads = [
            threading.Thread(
                target=lambda k=k: [consumer.log("tick", instance=f"m-{k}", n=n) for n in range(300)]
            )
            for k in range(6)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 * 300
    assert sorted((r["instance"], r["n"]) for r in map(json.loads, lines)) == sorted(
        (f"m-{k}", n) for k in range(6) for n in range(300)
    )
