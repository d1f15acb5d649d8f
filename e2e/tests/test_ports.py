"""The loopback ports handed to the servers that tests start: free, and never the same one twice in a row."""

from __future__ import annotations

import collections
import errno
import socket
from types import TracebackType

import pytest

from e2e.localcluster import ports


class _KernelRepeating:
    """A socket whose `bind(("127.0.0.1", 0))` gets the ports of a script, as the kernel may hand them out."""

    script: list[int] = []

    def __init__(self, *args: object) -> None:
        self.port = 0

    def __enter__(self) -> _KernelRepeating:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        return None

    def bind(self, address: tuple[str, int]) -> None:
        self.port = self.script.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def _kernel_repeating(monkeypatch: pytest.MonkeyPatch, script: list[int], remembered: int) -> None:
    monkeypatch.setattr(socket, "socket", _KernelRepeating)
    monkeypatch.setattr(ports, "_RECENT_LIMIT", remembered)
    monkeypatch.setattr(ports, "_recent", collections.deque(maxlen=remembered))
    monkeypatch.setattr(ports, "_recent_set", set())
    _KernelRepeating.script = script


def test_a_port_the_kernel_hands_out_twice_is_given_once(monkeypatch: pytest.MonkeyPatch) -> None:
    _kernel_repeating(monkeypatch, [41001, 41001, 41001, 41002], remembered=16)
    assert [ports.free_port(), ports.free_port()] == [41001, 41002]
    assert _KernelRepeating.script == []


def test_only_the_recent_ports_are_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    _kernel_repeating(monkeypatch, [41001, 41002, 41003, 41002, 41001], remembered=2)
    assert [ports.free_port() for _ in range(4)] == [41001, 41002, 41003, 41001]
    assert _KernelRepeating.script == []


def test_the_ports_are_free_on_loopback_and_all_different() -> None:
    drawn = [ports.free_port() for _ in range(500)]
    assert len(set(drawn)) == len(drawn)
    for port in drawn[:20]:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))


def test_a_closed_port_refuses_connections_and_cannot_be_taken_while_held() -> None:
    with ports.closed_port() as port:
        for _ in range(3):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
                assert client.connect_ex(("127.0.0.1", port)) == errno.ECONNREFUSED
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError) as taken:
                other.bind(("127.0.0.1", port))
            assert taken.value.errno == errno.EADDRINUSE
