"""The operator's readiness endpoint: 503 while it starts, 200 once kopf has started or while the replica
stands by for the Lease, 503 again between winning the Lease and kopf's start."""

from __future__ import annotations

import urllib.error
import urllib.request

from e2e.localcluster.ports import free_port
from staticfleet.readiness import Readiness, serve


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_readiness_follows_the_replicas_part() -> None:
    readiness = Readiness()
    url = f"http://127.0.0.1:{free_port()}/readyz"
    server = serve(url, readiness)
    try:
        assert _get(url) == (503, "not ready: the operator is starting\n")
        readiness.following(True)
        assert _get(url) == (200, "ready: standing by for the Lease\n")
        readiness.following(False)  # it won the Lease; kopf has not started yet
        assert _get(url)[0] == 503
        readiness.kopf_started.set()
        assert _get(url) == (200, "ready: operating\n")
        assert _get(url.replace("/readyz", "/other"))[0] == 404
    finally:
        server.shutdown()
        server.server_close()
