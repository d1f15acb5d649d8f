"""The example consumer's readiness over HTTP (READY_PORT): what an httpGet readiness probe asks; and the
operator's departure handshake on the same port, the operator's side (staticfleet.kube.departure) against
the consumer's."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from e2e.localcluster.ports import free_port
from staticfleet.kube import departure


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            code: int = answer.status
            return code
    except urllib.error.HTTPError as error:
        return error.code


def test_ready_answers_200_only_while_every_member_of_the_pod_is_in_the_group(
    consumer: ModuleType, tmp_path: Path
) -> None:
    readiness = consumer.Readiness(tmp_path / "ready", ["orders-0-1", "orders-0-2"])
    port = free_port()
    server = consumer.serve_readiness(readiness, port, host="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{port}"
        assert status(f"{url}/ready") == 503
        readiness.assigned("orders-0-1")
        assert status(f"{url}/ready") == 503  # one member of two
        readiness.assigned("orders-0-2")
        assert status(f"{url}/ready") == 200 and (tmp_path / "ready").exists()
        readiness.left("orders-0-2")
        assert status(f"{url}/ready") == 503 and not (tmp_path / "ready").exists()
        assert status(f"{url}/metrics") == 404
    finally:
        server.shutdown()
        server.server_close()


def post(url: str, body: bytes) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


@dataclass
class PodEndpoint:
    """A consumer's HTTP endpoint with its departure file (empty: not marked), as a pod has them."""

    name: str
    port: int
    mark_file: Path
    departure_mark: Any

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/departure"

    @property
    def endpoint(self) -> departure.Endpoint:
        return departure.Endpoint(self.name, "127.0.0.1", self.port)


@contextmanager
def serving(consumer: ModuleType, tmp_path: Path, name: str) -> Iterator[PodEndpoint]:
    mark_file = tmp_path / f"departing-{name}"
    mark_file.write_text("")
    readiness = consumer.Readiness(tmp_path / f"ready-{name}", [name])
    departure_mark = consumer.Departure(str(mark_file))
    port = free_port()
    server = consumer.serve_readiness(readiness, port, host="127.0.0.1", departure_mark=departure_mark)
    try:
        yield PodEndpoint(name, port, mark_file, departure_mark)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def pod(consumer: ModuleType, tmp_path: Path) -> Iterator[tuple[str, Path, Any]]:
    with serving(consumer, tmp_path, "orders-1") as served:
        yield served.url, served.mark_file, served.departure_mark


def test_the_departure_endpoint_brings_forward_only_the_mark_the_pod_holds(
    pod: tuple[str, Path, Any],
) -> None:
    url, mark_file, departure_mark = pod
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert json.loads(answer.read()) == {"mark": None}
    # Not marked: a sooner moment is refused, and nothing changes.
    assert post(url, b'{"mark": 5000000, "leaveAt": 4000000}')[0] == 409
    assert departure_mark.leave_at() is None
    mark_file.write_text("5000000")
    with urllib.request.urlopen(url, timeout=5) as answer:
        assert json.loads(answer.read()) == {"mark": 5000000}
    assert post(url, b'{"mark": 6000000, "leaveAt": 4000000}')[0] == 409  # another mark
    assert departure_mark.leave_at() == 5000.0
    assert post(url, b'{"mark": 5000000, "leaveAt": 4000000}') == (200, {"leaveAt": 4000000})
    assert departure_mark.leave_at() == 4000.0
    # The sooner moment lapses with its mark: unmarked, the pod stays; marked anew, the new moment holds.
    mark_file.write_text("")
    assert departure_mark.leave_at() is None
    mark_file.write_text("7000000")
    assert departure_mark.leave_at() == 7000.0


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b'{"mark": 5000000}', b'{"mark": "x", "leaveAt": 1}', b"[1, 2]", b"x" * 2000],
    ids=["empty", "not-json", "no-leave-at", "not-a-number", "not-an-object", "too-long"],
)
def test_a_malformed_handshake_is_refused_and_changes_nothing(
    pod: tuple[str, Path, Any], body: bytes
) -> None:
    url, mark_file, departure_mark = pod
    mark_file.write_text("5000000")
    code, answer = post(url, body)
    assert code == 400 and "mark" in str(answer["error"])
    assert departure_mark.leave_at() == 5000.0


def test_the_operators_handshake_gives_every_marked_consumer_one_sooner_moment(
    consumer: ModuleType, tmp_path: Path
) -> None:
    """The operator's side against the consumer's: two pods, one reading its mark later, leave together."""
    with serving(consumer, tmp_path, "orders-1") as early, serving(consumer, tmp_path, "orders-2") as late:
        mark_ms = int((time.time() + 1.0) * 1000)
        early.mark_file.write_text(str(mark_ms))

        def read(target: departure.Endpoint) -> int | departure.NoAnswer | None:
            if time.time() > mark_ms / 1000 - 0.8:  # the second kubelet shows the mark 0.2 s later
                late.mark_file.write_text(str(mark_ms))
            return departure.read_mark(target)

        sooner = departure.hasten([early.endpoint, late.endpoint], mark_ms, read=read).sooner
        assert sooner is not None and sooner < mark_ms / 1000 - 0.5
        assert [early.departure_mark.leave_at(), late.departure_mark.leave_at()] == [sooner, sooner]
