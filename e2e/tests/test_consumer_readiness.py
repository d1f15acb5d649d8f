"""The example consumer's readiness over HTTP (READY_PORT): what an httpGet readiness probe asks."""

from __future__ import annotations

import importlib.util
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

from e2e.localcluster.ports import free_port

CONSUMER = Path(__file__).resolve().parents[2] / "examples" / "consumer" / "consumer.py"


@pytest.fixture(scope="module")
def consumer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_consumer", CONSUMER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
