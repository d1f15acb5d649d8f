"""Loopback ports for the servers that tests, benchmarks and the demo start.

A port is drawn at random from below the kernel's ephemeral range (`ip_local_port_range`), checked free
by binding it, and not handed out again while it is among the recent ones. The kernel's own picks (a
`bind` to port 0, the local port of every outgoing connection) come from that range: a port taken from
it is free when drawn, yet any connection opened before its server binds it may be given it, and the
server then fails to start with "address already in use". Below the range only another server's
explicit choice can take it.
"""

from __future__ import annotations

import collections
import contextlib
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

# Far more than the ports of the servers one process has running at once.
_RECENT_LIMIT = 4096
# The draw stays above the ports well-known services listen on.
PORT_FLOOR = 10_000
# The kernel's default ephemeral range starts here, where /proc does not say otherwise.
DEFAULT_EPHEMERAL_LOW = 32_768
_ATTEMPTS = 200

_recent: collections.deque[int] = collections.deque(maxlen=_RECENT_LIMIT)
_recent_set: set[int] = set()
_lock = threading.Lock()
# Not the `random` module's shared generator: tests seed that one, and every process would draw alike.
_random = random.SystemRandom()


def ephemeral_low(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The first port of the kernel's ephemeral range."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def _draw(low: int, high: int) -> int:
    return _random.randrange(low, high)


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def _kernels_pick(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _remember(port: int) -> None:
    if len(_recent) == _RECENT_LIMIT:
        _recent_set.discard(_recent[0])
    _recent.append(port)
    _recent_set.add(port)


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that is free now, outside the kernel's ephemeral range (where it has room below
    it) and not among the ones this process handed out recently."""
    with _lock:
        high = ephemeral_low()
        if high - PORT_FLOOR >= 2 * _RECENT_LIMIT:
            for _ in range(_ATTEMPTS):
                port = _draw(PORT_FLOOR, high)
                if port not in _recent_set and _bindable(host, port):
                    _remember(port)
                    return port
        while True:  # a range moved down to the floor: the kernel's picks, not repeating recent ones
            port = _kernels_pick(host)
            if port not in _recent_set:
                _remember(port)
                return port


@contextlib.contextmanager
def closed_port(host: str = "127.0.0.1") -> Iterator[int]:
    """A port on `host` where nothing listens for as long as the block runs: bound and never listening, so
    a connection is refused at once. A port that is merely free could meanwhile be taken by another
    process's server, or be the kernel's pick as a client's own port (a connection to it then reaches
    itself); a bound one can be neither."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        yield int(sock.getsockname()[1])
