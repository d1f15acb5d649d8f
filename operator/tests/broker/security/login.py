"""A secured in-process broker for the login tests: a SASL_PLAINTEXT listener with PLAIN and SCRAM-SHA-512,
users alice (a super user) and bob, ACLs on; requests go through its one dispatch path as frames."""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

from kio.index import load_response_schema
from kio.serial import entity_reader
from kio.static.protocol import RequestPayload

from conformance import driver as d
from staticfleet.broker.dispatch import Outcome
from staticfleet.broker.registry import Peer
from staticfleet.broker.security.authorizer import AuthorizerConfig
from staticfleet.broker.security.listeners import Endpoint, Listener, SecurityProtocol
from staticfleet.broker.security.settings import SecuritySettings
from staticfleet.broker.server import BrokerServer, BrokerSettings
from staticfleet.coordinator import CoordinatorConfig

T = TypeVar("T")
USERS = (
    "PLAIN=[name=alice,password=alice-secret]",
    "SCRAM-SHA-512=[name=alice,password=alice-secret]",
    "PLAIN=[name=bob,password=bob-secret]",
)
_ENDPOINT = Endpoint("SASL_PLAINTEXT", "127.0.0.1", 0)
LISTENER = Listener("SASL_PLAINTEXT", SecurityProtocol.SASL_PLAINTEXT, _ENDPOINT, _ENDPOINT)


class SecuredBroker:
    """The broker on an event loop of its own thread, so that tests (hypothesis's too) call it in turn."""

    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        users = data_dir / "users"
        users.write_text("\n".join(USERS) + "\n")
        security = SecuritySettings(
            listeners=(LISTENER,),
            sasl_mechanisms=("PLAIN", "SCRAM-SHA-512"),
            users_file=users,
            authorizer=AuthorizerConfig(super_users=frozenset({"User:alice"})),
        )
        self.server = BrokerServer(
            BrokerSettings(
                data_dir=data_dir / "data",
                fsync=False,
                coordinator=CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=100),
                security=security,
            )
        )
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> SecuredBroker:
        self._thread.start()
        self.run(self.server.start())
        return self

    def __exit__(self, *exc: object) -> None:
        self.run(self.server.stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=30)

    def connect(self) -> Peer:
        """A new connection on the SASL listener, not logged in yet."""
        return Peer("/127.0.0.1", LISTENER.name, login=self.server._login(LISTENER))

    def send(self, peer: Peer, frame: bytes) -> Outcome:
        """One frame (without its size prefix) through the dispatch path."""
        return self.run(self.server._answer(peer, frame))

    def request(self, peer: Peer, request: RequestPayload, correlation: int = 7) -> Outcome:
        return self.send(peer, frame(request, correlation))


def frame(request: RequestPayload, correlation: int = 7) -> bytes:
    return d.request_frame(request, correlation)[4:]


def decode(outcome: Outcome, api_key: int, version: int) -> Any:
    """The response entity an outcome's frame holds."""
    assert isinstance(outcome.frame, bytes), outcome
    response_type = load_response_schema(api_key, version)
    data = outcome.frame[4:]
    _, offset = entity_reader(response_type.__header_schema__)(data, 0)
    return entity_reader(response_type)(data, offset)[0]


def correlation_of(outcome: Outcome) -> int:
    assert isinstance(outcome.frame, bytes)
    return int(struct.unpack_from(">i", outcome.frame, 4)[0])


def secured(tmp: Path) -> Iterator[SecuredBroker]:
    with SecuredBroker(tmp) as broker:
        yield broker
