"""The example consumer's readiness over HTTP (READY_PORT): what an httpGet readiness probe asks; and the
operator's departure handshake on the same port, the operator's side (staticfleet.kube.departure) against
the consumer's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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

from e2e.helpers import wait_until
from e2e.localcluster.ports import free_port
from e2e.tests.operator.harness import CONSUMER
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


FLEET_KEY = departure.fleet_key(b"s" * 32, "shop", "orders", "uid-1")


@contextmanager
def serving(
    consumer: ModuleType, tmp_path: Path, name: str, key: str | None = None, rejoins: bool = False
) -> Iterator[PodEndpoint]:
    mark_file = tmp_path / f"departing-{name}"
    mark_file.write_text("")
    readiness = consumer.Readiness(tmp_path / f"ready-{name}", [name])
    departure_mark = consumer.Departure(str(mark_file), key=key, pod=name, rejoins=rejoins)
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


def test_a_mark_handed_with_the_fleets_key_is_held_before_the_file_shows_it(
    consumer: ModuleType, tmp_path: Path
) -> None:
    with serving(consumer, tmp_path, "orders-1", key=FLEET_KEY) as pod:
        mark_ms = int((time.time() + 1.0) * 1000)
        # Refused: another fleet's key, a signature for another pod, a mark whose moment has passed (a
        # request sent again later), a mark far ahead.
        other_key = departure.fleet_key(b"s" * 32, "shop", "orders", "uid-2")
        assert departure.hand_mark(pod.endpoint, other_key, mark_ms) is None
        stranger = departure.Endpoint("orders-2", "127.0.0.1", pod.port)
        assert departure.hand_mark(stranger, FLEET_KEY, mark_ms) is None
        assert departure.hand_mark(pod.endpoint, FLEET_KEY, int(time.time() * 1000) - 10) is None
        far = int((time.time() + consumer.HANDED_MARK_AHEAD_S + 1) * 1000)  # would keep it out that long
        assert departure.hand_mark(pod.endpoint, FLEET_KEY, far) is None
        assert pod.departure_mark.leave_at() is None
        code, answer = post(pod.url, json.dumps({"mark": mark_ms, "signature": "00"}).encode())
        assert code == 403 and "signed" in str(answer["error"])
        # Signed for this pod with its fleet's key: held at once, the file still empty.
        assert departure.hand_mark(pod.endpoint, FLEET_KEY, mark_ms) == mark_ms
        assert departure.read_mark(pod.endpoint) == mark_ms
        assert pod.departure_mark.leave_at() == mark_ms / 1000
        # The file shows it, then no longer does (the scale-down was called off): the mark lapses.
        pod.mark_file.write_text(str(mark_ms))
        assert pod.departure_mark.leave_at() == mark_ms / 1000
        pod.mark_file.write_text("")
        assert pod.departure_mark.leave_at() is None
        # Another mark in the file: a handed one is refused.
        pod.mark_file.write_text(str(mark_ms + 5000))
        assert departure.hand_mark(pod.endpoint, FLEET_KEY, mark_ms) is None
        assert pod.departure_mark.leave_at() == mark_ms / 1000 + 5


def test_a_pod_without_the_key_takes_no_handed_mark(consumer: ModuleType, tmp_path: Path) -> None:
    with serving(consumer, tmp_path, "orders-1") as pod:
        mark_ms = int((time.time() + 1.0) * 1000)
        assert departure.hand_mark(pod.endpoint, FLEET_KEY, mark_ms) is None
        assert pod.departure_mark.leave_at() is None


def test_a_handed_mark_the_file_never_shows_lapses(consumer: ModuleType, tmp_path: Path) -> None:
    mark_file = tmp_path / "departing"
    mark_file.write_text("")
    now = [1000.0]
    held = consumer.Departure(str(mark_file), key=FLEET_KEY, pod="orders-1", clock=lambda: now[0])
    assert held.hand(1_001_000, departure.signature(FLEET_KEY, "orders-1", 1_001_000))
    now[0] = 1001.0 + consumer.HANDED_MARK_S - 0.1
    assert held.mark() == 1001.0
    now[0] = 1001.0 + consumer.HANDED_MARK_S
    assert held.mark() is None  # the operator wrote no annotation after all: the pod stays


def test_the_operator_hands_the_marks_and_the_pods_leave_together_without_their_files(
    consumer: ModuleType, tmp_path: Path
) -> None:
    """The operator's side against the consumer's: handed their mark, both pods take one sooner moment
    at once, before any file shows the mark."""
    with (
        serving(consumer, tmp_path, "orders-1", key=FLEET_KEY) as first,
        serving(consumer, tmp_path, "orders-2", key=FLEET_KEY) as second,
    ):
        mark_ms = int((time.time() + 1.0) * 1000)

        def never_read(target: departure.Endpoint) -> int | departure.NoAnswer | None:
            raise AssertionError(f"{target.pod} was asked for its file's mark")

        began = time.time()
        targets = [first.endpoint, second.endpoint]
        held = departure.hand_marks(targets, FLEET_KEY, mark_ms)
        assert held == {"orders-1", "orders-2"}
        handshake = departure.hasten(targets, mark_ms, held=held, read=never_read)
        sooner = handshake.sooner
        assert handshake.result == "sooner" and sooner is not None
        assert began + departure.LEAD_S <= sooner < began + departure.LEAD_S + 0.5
        assert [first.departure_mark.leave_at(), second.departure_mark.leave_at()] == [sooner, sooner]


def test_a_pod_that_takes_no_handed_mark_is_asked_for_its_files(consumer: ModuleType, tmp_path: Path) -> None:
    """An older consumer, or one without the key, beside one that has it: the handshake reads the
    file of the first, and both leave together."""
    with (
        serving(consumer, tmp_path, "orders-1", key=FLEET_KEY) as keyed,
        serving(consumer, tmp_path, "orders-2") as keyless,
    ):
        mark_ms = int((time.time() + 1.0) * 1000)
        keyless.mark_file.write_text(str(mark_ms))
        read: list[str] = []

        def read_file(target: departure.Endpoint) -> int | departure.NoAnswer | None:
            read.append(target.pod)
            return departure.read_mark(target)

        began = time.time()
        targets = [keyed.endpoint, keyless.endpoint]
        held = departure.hand_marks(targets, FLEET_KEY, mark_ms)
        assert held == {"orders-1"}
        handshake = departure.hasten(targets, mark_ms, held=held, read=read_file)
        sooner = handshake.sooner
        assert handshake.result == "sooner" and sooner is not None and read == ["orders-2"]
        assert sooner >= began + departure.LEAD_S
        assert [keyed.departure_mark.leave_at(), keyless.departure_mark.leave_at()] == [sooner, sooner]


def test_a_two_member_process_answers_not_ready_and_ends_with_zero_and_every_line_on_sigterm(
    tmp_path: Path,
) -> None:
    """The whole process, with no broker (its members keep trying to reach one): /ready says not ready,
    and a SIGTERM ends the process with 0 and every member's lines logged, though it skips the
    interpreter's teardown."""
    port = free_port()
    env = {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{free_port()}",  # nobody listens there
        "KAFKA_GROUP_ID": "orders",
        "KAFKA_GROUP_INSTANCE_ID": "orders-0",
        "KAFKA_TOPICS": "orders",
        "KAFKA_MEMBERS_PER_POD": "2",
        "READY_PORT": str(port),
        "READY_HOST": "127.0.0.1",
        "STATE_DIR": str(tmp_path / "state"),
        "READY_FILE": str(tmp_path / "ready"),
    }
    process = subprocess.Popen(
        [sys.executable, str(CONSUMER)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )

    def answer() -> int | None:
        assert process.poll() is None, "the consumer ended before it answered"
        try:
            return status(f"http://127.0.0.1:{port}/ready")
        except urllib.error.URLError:  # not listening yet
            return None

    try:
        # not ready (no member in the group), but answering
        assert wait_until(answer, timeout=30, what="the consumer's HTTP server", interval=0.05) == 503
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err.decode()
    lines = [json.loads(line) for line in out.decode().splitlines()]
    events = [
        (line["event"], line.get("instance")) for line in lines if line["event"] in ("started", "stopped")
    ]
    assert sorted(events) == sorted(
        [
            ("started", "orders-0-1"),
            ("started", "orders-0-2"),
            ("stopped", "orders-0-1"),
            ("stopped", "orders-0-2"),
        ]
    )
    assert not [line for line in lines if line["event"] == "fatal"], lines


def test_the_pods_that_stay_are_told_to_join_again_once_the_departing_ones_took_their_moment(
    consumer: ModuleType, tmp_path: Path
) -> None:
    """The operator's side against the consumer's: once the departing pod took the sooner moment, the pod
    that stays (eager: it can join again on demand) holds a latest moment REJOIN_LATEST_S after it, which
    the operator then brings forward; one whose consumers cannot (a cooperative assignor) refuses, and
    the handshake still succeeds."""
    with (
        serving(consumer, tmp_path, "orders-2", key=FLEET_KEY) as departing,
        serving(consumer, tmp_path, "orders-0", key=FLEET_KEY, rejoins=True) as eager,
        serving(consumer, tmp_path, "orders-1", key=FLEET_KEY, rejoins=False) as cooperative,
    ):
        mark_ms = int((time.time() + 1.0) * 1000)

        def rejoin(target: departure.Endpoint, mark: int, rejoin_at_ms: int) -> bool:
            return departure.send_rejoin(target, FLEET_KEY, mark, rejoin_at_ms)

        held = departure.hand_marks([departing.endpoint], FLEET_KEY, mark_ms)
        staying = [eager.endpoint, cooperative.endpoint]
        handshake = departure.hasten([departing.endpoint], mark_ms, held=held, staying=staying, rejoin=rejoin)
        sooner = handshake.sooner
        assert handshake.result == "sooner" and sooner is not None
        assert (handshake.rejoining, handshake.staying) == (("orders-0",), 2)
        assert "1 of the 2 pods that stay" in handshake.message(["orders-2"], mark_ms / 1000)
        first = eager.departure_mark.rejoin_at()
        assert first is not None and first.mark == mark_ms / 1000
        assert abs(first.moment - (sooner + departure.REJOIN_LATEST_S)) < 0.002
        assert cooperative.departure_mark.rejoin_at() is None
        # Brought forward for the same mark: the moment changes, not when it was first told.
        now_ms = int(time.time() * 1000)
        assert rejoin(eager.endpoint, mark_ms, now_ms)
        assert eager.departure_mark.rejoin_at() == (mark_ms / 1000, now_ms / 1000, first.told)
        # The departing pod is not told one.
        assert departing.departure_mark.rejoin_at() is None
        assert not rejoin(departing.endpoint, mark_ms, now_ms)


def test_a_moment_to_join_again_needs_the_fleets_signature_for_the_pod_and_a_moment_not_long_past(
    consumer: ModuleType, tmp_path: Path
) -> None:
    with serving(consumer, tmp_path, "orders-0", key=FLEET_KEY, rejoins=True) as pod:
        mark_ms, ahead = int((time.time() + 1.0) * 1000), int((time.time() + 0.5) * 1000)
        other_key = departure.fleet_key(b"s" * 32, "shop", "orders", "uid-2")
        assert not departure.send_rejoin(pod.endpoint, other_key, mark_ms, ahead)
        stranger = departure.Endpoint("orders-3", "127.0.0.1", pod.port)
        assert not departure.send_rejoin(stranger, FLEET_KEY, mark_ms, ahead)
        # A mark's signature is not a moment to join again's.
        signed_mark = departure.signature(FLEET_KEY, "orders-0", ahead)
        body = {"mark": mark_ms, "rejoinAt": ahead, "signature": signed_mark}
        assert post(pod.url, json.dumps(body).encode())[0] == 409
        long_past = int((time.time() - consumer.REJOIN_LATE_S - 0.5) * 1000)
        assert not departure.send_rejoin(pod.endpoint, FLEET_KEY, mark_ms, long_past)
        far = int((time.time() + consumer.HANDED_MARK_AHEAD_S + 1) * 1000)
        assert not departure.send_rejoin(pod.endpoint, FLEET_KEY, mark_ms, far)
        assert pod.departure_mark.rejoin_at() is None
        assert post(pod.url, b'{"mark": 1, "rejoinAt": "soon", "signature": "00"}')[0] == 400
        assert departure.send_rejoin(pod.endpoint, FLEET_KEY, mark_ms, ahead)
        held = pod.departure_mark.rejoin_at()
        assert held is not None and (held.mark, held.moment) == (mark_ms / 1000, ahead / 1000)


def test_a_moment_to_join_again_lapses_once_long_past(consumer: ModuleType, tmp_path: Path) -> None:
    now = [1000.0]
    stays = consumer.Departure(None, key=FLEET_KEY, pod="orders-0", clock=lambda: now[0], rejoins=True)
    signed = departure.rejoin_signature(FLEET_KEY, "orders-0", 1_001_000, 1_000_500)
    assert stays.tell_rejoin(1_001_000, 1_000_500, signed)
    now[0] = 1000.5 + consumer.REJOIN_LATE_S
    assert stays.rejoin_at() == (1001.0, 1000.5, 1000.0)
    now[0] += 0.01
    assert stays.rejoin_at() is None  # a member that first looks this late has met the rebalance already
