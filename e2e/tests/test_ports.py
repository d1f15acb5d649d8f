"""The loopback ports handed to the servers that tests start: free, below the kernel's own picks, and never
the same one twice in a row."""

from __future__ import annotations

import collections
import errno
import socket
from pathlib import Path

import pytest

from e2e.localcluster import ports


def _scripted_draws(monkeypatch: pytest.MonkeyPatch, script: list[int], remembered: int) -> list[int]:
    monkeypatch.setattr(ports, "_RECENT_LIMIT", remembered)
    monkeypatch.setattr(ports, "_recent", collections.deque(maxlen=remembered))
    monkeypatch.setattr(ports, "_recent_set", set())
    monkeypatch.setattr(ports, "_draw", lambda low, high: script.pop(0))
    return script


def _unused_low_ports(count: int) -> list[int]:
    """Ports below the ephemeral range that nothing holds now."""
    found: list[int] = []
    for port in range(ports.PORT_FLOOR + 7_001, ports.ephemeral_low()):
        if ports._bindable("127.0.0.1", port):
            found.append(port)
            if len(found) == count:
                return found
    raise AssertionError("no free ports below the ephemeral range")


def test_a_port_drawn_twice_is_given_once(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _unused_low_ports(2)
    script = _scripted_draws(monkeypatch, [a, a, a, b], remembered=16)
    assert [ports.free_port(), ports.free_port()] == [a, b]
    assert script == []


def test_only_the_recent_ports_are_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = _unused_low_ports(3)
    script = _scripted_draws(monkeypatch, [a, b, c, b, a], remembered=2)
    assert [ports.free_port() for _ in range(4)] == [a, b, c, a]
    assert script == []


def test_a_port_something_holds_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    held, free = _unused_low_ports(2)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", held))
        holder.listen()
        script = _scripted_draws(monkeypatch, [held, free], remembered=16)
        assert ports.free_port() == free
    assert script == []


def test_the_ports_are_free_on_loopback_below_the_kernels_own_picks_and_all_different() -> None:
    drawn = [ports.free_port() for _ in range(500)]
    assert len(set(drawn)) == len(drawn)
    assert all(ports.PORT_FLOOR <= port < ports.ephemeral_low() for port in drawn)
    for port in drawn[:20]:
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))


def test_with_no_room_below_the_ephemeral_range_the_kernel_picks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    narrow = tmp_path / "ip_local_port_range"
    narrow.write_text(f"{ports.PORT_FLOOR + 10}\t60999\n")
    read = ports.ephemeral_low
    monkeypatch.setattr(ports, "ephemeral_low", lambda: read(narrow))
    port = ports.free_port()
    assert port >= ports.PORT_FLOOR + 10
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))


def test_the_ephemeral_range_is_read_from_proc_or_defaults(tmp_path: Path) -> None:
    given = tmp_path / "range"
    given.write_text("40000\t60999\n")
    assert ports.ephemeral_low(given) == 40_000
    assert ports.ephemeral_low(tmp_path / "missing") == ports.DEFAULT_EPHEMERAL_LOW


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
