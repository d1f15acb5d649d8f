"""What a connection can cost the broker, over real sockets: a failed login is answered only after
connection.failed.authentication.delay.ms, a frame larger than sasl.server.max.receive.size before a
login closes the connection before anything is reserved for it, and stalled senders hold what they sent
and do not hold back anyone else's request."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer
from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from conformance import driver as d
from staticfleet.broker.connections import SASL_SERVER_MAX_RECEIVE_SIZE
from staticfleet.broker.security.plain import plain_token
from staticfleet.broker.security.scram import ScramClient, ScramMechanism
from staticfleet.broker.server import failed_login_wait_s

from .login import LISTENER, SecuredBroker, secured


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    yield from secured(tmp_path_factory.mktemp("before-login"))


def _port(broker: SecuredBroker) -> int:
    return broker.server.listener_ports[LISTENER.name]


def _delay_s(broker: SecuredBroker) -> float:
    return broker.server.settings.failed_authentication_delay_s


TIMER_SLACK_S = 0.005
"""asyncio runs a timer up to its clock resolution early."""


def _held_long_enough(waited: float, broker: SecuredBroker) -> bool:
    """No answer before the delay, nor before the idle Kafka poll the delay is rounded up to."""
    delay = _delay_s(broker)
    return waited >= delay and waited >= failed_login_wait_s(delay) - TIMER_SLACK_S


@pytest.mark.parametrize(("delay_s", "held_s"), [(0.0, 0.0), (0.1, 0.3), (0.3, 0.3), (0.31, 0.6), (1.0, 1.2)])
def test_a_failed_login_is_held_until_the_first_idle_kafka_poll_after_the_delay(
    delay_s: float, held_s: float
) -> None:
    assert failed_login_wait_s(delay_s) == pytest.approx(held_s)


def test_a_wrong_scram_password_is_answered_no_sooner_than_the_delay_then_closed(
    broker: SecuredBroker,
) -> None:
    async def main() -> tuple[float, int, bool]:
        conn = await d.Connection.open("127.0.0.1", _port(broker))
        try:
            assert (await conn.request(d.sasl_handshake(1, "SCRAM-SHA-512"))).error_code == ErrorCode.none
            client = ScramClient(ScramMechanism.SCRAM_SHA_512, "alice", "not-her-password")
            first = await conn.request(d.sasl_authenticate(2, client.first()))
            assert first.error_code == ErrorCode.none
            # The clock starts before the send: between a send and the next clock reading the client's thread
            # can lose its turn long enough for the server to receive the frame and begin its hold.
            proof = d.sasl_authenticate(2, client.final(bytes(first.auth_bytes)))
            sent = time.monotonic()
            final = conn.send(proof)
            answer = await final.result()
            waited = time.monotonic() - sent
            return waited, answer.error_code, await conn.closed_within(5)
        finally:
            await conn.close()

    waited, error, closed = asyncio.run(main())
    assert error == ErrorCode.sasl_authentication_failed
    assert closed, "a failed login ends the connection"
    assert _held_long_enough(waited, broker), f"answered after {waited:.3f} s"


def test_an_unknown_mechanism_is_answered_no_sooner_than_the_delay(broker: SecuredBroker) -> None:
    async def main() -> tuple[float, int]:
        conn = await d.Connection.open("127.0.0.1", _port(broker))
        try:
            sent = time.monotonic()  # before the send, as above
            pending = conn.send(d.sasl_handshake(1, "GSSAPI"))
            answer = await pending.result()
            return time.monotonic() - sent, answer.error_code
        finally:
            await conn.close()

    waited, error = asyncio.run(main())
    assert error == ErrorCode.unsupported_sasl_mechanism
    assert _held_long_enough(waited, broker), f"answered after {waited:.3f} s"


def _closed_by_peer(s: socket.socket, timeout: float) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


@pytest.mark.parametrize("size", [SASL_SERVER_MAX_RECEIVE_SIZE + 1, 100 * 1024 * 1024])
def test_a_frame_over_the_login_limit_closes_before_anything_is_reserved(
    broker: SecuredBroker, size: int
) -> None:
    pool = broker.server.connections.pool
    grants = pool.grants
    with socket.create_connection(("127.0.0.1", _port(broker)), timeout=5) as s:
        s.sendall(size.to_bytes(4, "big") + b"\x00" * 1000)
        assert _closed_by_peer(s, 5), "the connection stays open"
    assert (pool.grants, pool.reserved) == (grants, 0), "something was reserved for it"


def test_a_frame_at_the_login_limit_is_read_and_holds_only_what_arrived(broker: SecuredBroker) -> None:
    """The largest frame allowed before a login is read; stalled half-way it holds what it sent and at
    most one chunk more, and closing it gives everything back."""
    pool = broker.server.connections.pool
    with socket.create_connection(("127.0.0.1", _port(broker)), timeout=5) as s:
        s.sendall(SASL_SERVER_MAX_RECEIVE_SIZE.to_bytes(4, "big") + b"\x00" * 100_000)
        assert not _closed_by_peer(s, 0.5), "a frame at the limit is allowed"
        assert 0 < pool.reserved <= 100_000 + pool.chunk
    deadline = time.monotonic() + 5
    while pool.reserved and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.reserved == 0


def _raw_request(s: socket.socket, request: RequestPayload, correlation: int) -> bytes:
    """Send one request frame and return the answer's bytes (after its size)."""
    s.sendall(d.request_frame(request, correlation))
    size = int.from_bytes(_recv_exactly(s, 4), "big")
    return _recv_exactly(s, size)


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        more = s.recv(n - len(data))
        if not more:
            raise ConnectionError("closed")
        data += more
    return data


def _stalled(port: int, *, login: bool, size: int, sent: int) -> socket.socket:
    """A connection (logged in as alice, or not) that announced `size` bytes, sent `sent` and stopped."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if login:
        _raw_request(s, d.sasl_handshake(1, "PLAIN"), 1)
        _raw_request(s, d.sasl_authenticate(2, plain_token("alice", "alice-secret")), 2)
    s.sendall(size.to_bytes(4, "big") + b"\x01" * sent)
    return s


def test_stalled_senders_do_not_hold_back_a_logged_in_200_kb_produce(broker: SecuredBroker) -> None:
    """Three logged-in connections that announced the largest request and stalled after 1 MiB, and three
    that sent only the size of the largest frame allowed before a login: a 200 KB produce is still
    acknowledged, while every one of them is still connected, holding what it sent."""
    port = _port(broker)
    pool = broker.server.connections.pool
    stalled = [_stalled(port, login=True, size=100 * 1024 * 1024, sent=1024 * 1024) for _ in range(3)]
    stalled += [_stalled(port, login=False, size=SASL_SERVER_MAX_RECEIVE_SIZE, sent=0) for _ in range(3)]
    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
        acks=1,
        linger_ms=0,
    )
    try:
        metadata = producer.send("stalled-senders", b"x" * 200_000).get(timeout=60)
        assert metadata.offset >= 0
        assert not any(_closed_by_peer(s, 0.01) for s in stalled), "a stalled sender was closed first"
        assert pool.reserved <= 3 * (1024 * 1024 + pool.chunk) + 3 * pool.chunk
    finally:
        producer.close(timeout=5)
        for s in stalled:
            s.close()
