"""Logging of the long-running commands (operator, coordinator): text or JSON lines, the fleet a line is
about, and kafka-python's connection trouble told once instead of line by line.

JSON lines carry `time` (UTC, ISO 8601 with milliseconds), `level`, `logger` and `message`; `exception`
when there is one; and `namespace`, `name` and `group` when the line is about one fleet: inside a fleet's
handlers (`fleet_labels`), and on kopf's own per-resource lines.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TextIO

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(fleet_suffix)s"

# The fleet whose work this task or thread is doing (copied into asyncio.to_thread's threads).
_FLEET: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar("fleet", default=None)

# kafka-python's loggers: connection failures, lost connections and failed metadata refreshes, all at
# ERROR or WARNING, one per attempt, while a coordinator restarts (an expected event).
KAFKA_LOGGER = "kafka"
KAFKA_WINDOW_S = 60.0


def set_fleet(namespace: str, name: str, group: str) -> None:
    """Lines logged from here on in this task (and the threads it starts with asyncio.to_thread) are
    about this fleet."""
    _FLEET.set({"namespace": namespace, "name": name, "group": group})


@contextmanager
def fleet_labels(namespace: str, name: str, group: str) -> Iterator[None]:
    token = _FLEET.set({"namespace": namespace, "name": name, "group": group})
    try:
        yield
    finally:
        _FLEET.reset(token)


def fleet_of(record: logging.LogRecord) -> dict[str, str]:
    """The fleet a record is about: the context's, else kopf's reference to the resource."""
    found = _FLEET.get()
    if found:
        return dict(found)
    ref = getattr(record, "k8s_ref", None)
    if isinstance(ref, Mapping) and ref.get("kind") == "StaticConsumerGroup":
        return {key: str(ref[key]) for key in ("namespace", "name") if ref.get(key)}
    return {}


class _FleetFilter(logging.Filter):
    """Puts the fleet on every record, for the text format's suffix."""

    def filter(self, record: logging.LogRecord) -> bool:
        fleet = fleet_of(record)
        record.fleet = fleet
        record.fleet_suffix = "".join(f" {k}={v}" for k, v in fleet.items()) if fleet else ""
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fleet = getattr(record, "fleet", None)
        if fleet is None:
            fleet = fleet_of(record)
        line.update(fleet)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


class KafkaClientTrouble(logging.Handler):
    """Stands between kafka-python's loggers and the real handler. Its ERRORs and WARNINGs come in
    windows of `window_s`: the first of a window goes on as one WARNING saying more may follow, the rest
    are counted, and at the window's end one INFO line says how many were left out. A long outage so
    costs two lines a window. Everything passes as it is at DEBUG."""

    def __init__(self, target: logging.Handler, window_s: float = KAFKA_WINDOW_S) -> None:
        super().__init__()
        self.target = target
        self.window_s = window_s
        self._window = threading.Lock()
        self._left_out = 0
        self._timer: threading.Timer | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno < logging.WARNING or logging.getLogger().isEnabledFor(logging.DEBUG):
            self.target.handle(record)
            return
        with self._window:
            if self._timer is not None:
                self._left_out += 1
                return
            self._timer = threading.Timer(self.window_s, self._window_over)
            self._timer.daemon = True
            self._timer.start()
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg = (
            f"Kafka client: {record.getMessage()} (its further connection messages in the next "
            f"{self.window_s:.0f} s are counted, not logged)"
        )
        record.args = ()
        self.target.handle(record)

    def _window_over(self) -> None:
        with self._window:
            left_out, self._left_out, self._timer = self._left_out, 0, None
        if left_out:
            summary = logging.LogRecord(
                KAFKA_LOGGER, logging.INFO, __file__, 0,
                "Kafka client: %d more connection messages in %.0f s left out (--log-level DEBUG logs them)",
                (left_out, self.window_s), None,
            )  # fmt: skip
            self.target.handle(summary)

    def close(self) -> None:
        with self._window:
            if self._timer is not None:
                self._timer.cancel()
        super().close()


class _CurrentStderr(logging.StreamHandler[TextIO]):
    """Writes to sys.stderr as it is when a record comes, not as it was at configure: a replaced stderr
    (a redirect, a captured stream) is followed, and a closed one is never written to. setStream fixes
    another stream."""

    def __init__(self) -> None:
        super().__init__()
        self._fixed: TextIO | None = None

    @property
    def stream(self) -> TextIO:
        return getattr(self, "_fixed", None) or sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:
        self._fixed = None if value is sys.stderr else value


def configure(level: str, fmt: str = "text", *, quiet_kafka: bool = False) -> logging.Handler:
    """The root logger writes to stderr in `fmt` ("text" or "json") from `level` up. With `quiet_kafka`,
    kafka-python's connection trouble is told once a window (KafkaClientTrouble). Returns the handler."""
    handler = _CurrentStderr()
    handler.addFilter(_FleetFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    if quiet_kafka:
        kafka = logging.getLogger(KAFKA_LOGGER)
        for old in list(kafka.handlers):
            kafka.removeHandler(old)
        kafka.addHandler(KafkaClientTrouble(handler))
        kafka.propagate = False
        if not root.isEnabledFor(logging.DEBUG):
            kafka.setLevel(logging.WARNING)  # one INFO line per connection otherwise
    return handler
