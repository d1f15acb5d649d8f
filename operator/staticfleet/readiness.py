"""The operator's readiness endpoint (`staticfleet operator --readiness URL`).

A replica is ready when it can do its part: the one that leads once kopf has started (its startup
handlers ran and its watches are up: kopf sets the flag), a replica that waits for the Lease at once
(it stands by, and it serves the dashboard and metrics like the leader). Liveness stays with kopf's
own endpoint (`--liveness`), which answers from kopf's event loop.
"""

from __future__ import annotations

import http.server
import threading
import urllib.parse
from typing import Any


class Readiness:
    def __init__(self) -> None:
        self.kopf_started = threading.Event()  # kopf.run(ready_flag=...)
        self._following = threading.Event()

    def following(self, waiting: bool) -> None:
        """This replica waits for the Lease (True) or has stopped waiting to lead (False)."""
        if waiting:
            self._following.set()
        else:
            self._following.clear()

    def ready(self) -> bool:
        return self._following.is_set() or self.kopf_started.is_set()

    def describe(self) -> str:
        if self.kopf_started.is_set():
            return "ready: operating"
        if self._following.is_set():
            return "ready: standing by for the Lease"
        return "not ready: the operator is starting"


def serve(url: str, readiness: Readiness) -> http.server.ThreadingHTTPServer:
    """Answers GET <the URL's path> with 200 when ready, else 503, on the URL's host and port, from a
    daemon thread."""
    parsed = urllib.parse.urlsplit(url)
    path = parsed.path or "/"

    class Probe(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if urllib.parse.urlsplit(self.path).path != path:
                self.send_error(404)
                return
            body = (readiness.describe() + "\n").encode()
            self.send_response(200 if readiness.ready() else 503)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # one line per probe is noise
            pass

    host = (parsed.hostname or "0.0.0.0").strip("[]")
    server_class = http.server.ThreadingHTTPServer
    if ":" in host:
        import socket

        class Server6(http.server.ThreadingHTTPServer):
            address_family = socket.AF_INET6

        server_class = Server6
    server = server_class((host, parsed.port or 80), Probe)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="readiness", daemon=True).start()
    return server
