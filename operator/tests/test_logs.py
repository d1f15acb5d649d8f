"""The long-running commands' logs: JSON lines with the fleet they are about, and kafka-python's
connection trouble told once a window instead of line by line."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import threading
import time
from collections.abc import Iterator

import pytest

from e2e.localcluster.ports import closed_port
from staticfleet import logs


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """The root and kafka loggers as configure() leaves them, writing to a buffer; restored after."""
    root, kafka = logging.getLogger(), logging.getLogger(logs.KAFKA_LOGGER)
    saved = (root.handlers[:], root.level, kafka.handlers[:], kafka.level, kafka.propagate)
    buffer = io.StringIO()
    yield buffer
    for handler in root.handlers + kafka.handlers:
        handler.close()
    root.handlers[:], kafka.handlers[:] = saved[0], saved[2]
    root.setLevel(saved[1])
    kafka.setLevel(saved[3])
    kafka.propagate = saved[4]


def _to(buffer: io.StringIO, handler: logging.Handler) -> None:
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(buffer)


def test_json_lines_carry_time_level_logger_message_and_the_exception(captured: io.StringIO) -> None:
    _to(captured, logs.configure("INFO", "json"))
    logging.getLogger("staticfleet.test").info("hello %s", "there")
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("staticfleet.test").exception("it failed")
    first, second = (json.loads(line) for line in captured.getvalue().splitlines())
    assert first.keys() == {"time", "level", "logger", "message"}
    assert (first["level"], first["logger"], first["message"]) == ("INFO", "staticfleet.test", "hello there")
    assert first["time"].endswith("+00:00") and "T" in first["time"]
    assert second["level"] == "ERROR" and "RuntimeError: boom" in second["exception"]


def test_a_line_logged_for_a_fleet_names_it_in_json_and_in_text(captured: io.StringIO) -> None:
    handler = logs.configure("INFO", "json")
    _to(captured, handler)
    with logs.fleet_labels("shop", "orders", "shop.orders"):
        logging.getLogger("staticfleet.kube").warning("scale-down blocked")
    logging.getLogger("staticfleet.kube").warning("not about a fleet")
    about, other = (json.loads(line) for line in captured.getvalue().splitlines())
    assert (about["namespace"], about["name"], about["group"]) == ("shop", "orders", "shop.orders")
    assert "group" not in other

    text = io.StringIO()
    _to(text, logs.configure("INFO", "text"))
    with logs.fleet_labels("shop", "orders", "shop.orders"):
        logging.getLogger("staticfleet.kube").warning("scale-down blocked")
    suffix = "scale-down blocked namespace=shop name=orders group=shop.orders"
    assert text.getvalue().rstrip().endswith(suffix)


def test_kopfs_own_lines_about_a_resource_name_the_fleet(captured: io.StringIO) -> None:
    _to(captured, logs.configure("INFO", "json"))
    ref = {"apiVersion": "staticfleet.io/v1alpha1", "kind": "StaticConsumerGroup", "namespace": "shop"}
    logging.getLogger("kopf.objects").warning("handler failed", extra={"k8s_ref": ref | {"name": "orders"}})
    line = json.loads(captured.getvalue())
    assert (line["namespace"], line["name"]) == ("shop", "orders")


def test_the_fleet_label_follows_a_task_into_the_threads_it_starts(captured: io.StringIO) -> None:
    import asyncio

    _to(captured, logs.configure("INFO", "json"))

    async def fleet(name: str) -> None:
        logs.set_fleet("shop", name, f"shop.{name}")
        await asyncio.to_thread(logging.getLogger("staticfleet.kube").info, "reconciled")

    async def both() -> None:
        await asyncio.gather(fleet("a"), fleet("b"))

    asyncio.run(both())
    assert sorted(json.loads(line)["name"] for line in captured.getvalue().splitlines()) == ["a", "b"]


def test_sixteen_kafka_connection_errors_are_one_warning_and_one_summary(captured: io.StringIO) -> None:
    handler = logs.configure("INFO", "text", quiet_kafka=True)
    _to(captured, handler)
    trouble = logging.getLogger(logs.KAFKA_LOGGER).handlers[0]
    assert isinstance(trouble, logs.KafkaClientTrouble)
    trouble.window_s = 0.5
    # Only this test's records: a kafka-python client another test left in this process may still be
    # logging from its own threads, and would be counted too.
    here = threading.get_ident()
    trouble.addFilter(lambda record: record.thread == here)
    for attempt in range(16):
        logging.getLogger("kafka.net.manager").error("Connection failed: [Errno 111] attempt %d", attempt)
    logging.getLogger("staticfleet.kube").info("the operator goes on")
    deadline = time.monotonic() + 10
    while "left out" not in captured.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = captured.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert " WARNING kafka.net.manager: Kafka client: Connection failed: [Errno 111] attempt 0" in lines[0]
    assert "the operator goes on" in lines[1]
    assert " INFO kafka: Kafka client: 15 more connection messages in 0 s left out" in lines[2]
    assert not any(" ERROR " in line for line in lines)

    # The next window starts with a warning again: an outage that lasts is told once a window.
    logging.getLogger("kafka.net.manager").error("Connection failed: again")
    assert captured.getvalue().splitlines()[-1].endswith("are counted, not logged)")


def test_at_debug_kafka_python_is_logged_as_it_is(captured: io.StringIO) -> None:
    _to(captured, logs.configure("DEBUG", "text", quiet_kafka=True))
    for _ in range(3):
        logging.getLogger("kafka.net.manager").error("Connection failed")
    assert captured.getvalue().count(" ERROR kafka.net.manager: Connection failed") == 3


def test_a_real_kafka_python_client_facing_a_closed_port_logs_no_error_line(captured: io.StringIO) -> None:
    """kafka-python's own retries against a coordinator that is not there (as during its restart)."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    _to(captured, logs.configure("INFO", "text", quiet_kafka=True))
    with closed_port() as port:  # a port nothing listens on, nor can while the client tries it

        def connect() -> None:
            with contextlib.suppress(KafkaError):
                KafkaAdminClient(
                    bootstrap_servers=f"127.0.0.1:{port}", request_timeout_ms=3000, reconnect_backoff_ms=100
                ).close()

        worker = threading.Thread(target=connect, daemon=True)
        worker.start()
        worker.join(timeout=10)  # a dozen retries by then; the client gives up by itself later
    lines = captured.getvalue().splitlines()
    assert lines and all(" ERROR " not in line for line in lines), lines
    assert sum(" WARNING " in line for line in lines) == 1, lines
