"""Loopback ports for the servers that tests, benchmarks and the demo start.

The kernel can hand the same free port to two `bind(("127.0.0.1", 0))` calls in a row, and a server
given one port for two of its listeners refuses to start. So a port handed out here is not handed out
again while it is among the recent ones.
"""

from __future__ import annotations

import collections
import contextlib
import socket
import threading
from collections.abc import Iterator

# Far more than the ports of the servers one process has running at once.
_RECENT_LIMIT = 4096

_recent: collections.deque[int] = collections.deque(maxlen=_RECENT_LIMIT)
_recent_set: set[int] = set()
_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A port on `host` that is free now and not among the ones this process handed out recently."""
    with _lock:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))
                port: int = sock.getsockname()[1]
            if port in _recent_set:
                continue
            if len(_recent) == _RECENT_LIMIT:
                _recent_set.discard(_recent[0])
            _recent.append(port)
            _recent_set.add(port)
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
