"""What every command's arguments are checked with: argparse `type=` functions that turn bad input into a
one-line error and exit code 2 before anything starts, and the parser that prints that one line.

Each function takes the text as typed and returns the parsed value, or raises ArgumentTypeError with a
message that says what was expected and what was given.
"""

from __future__ import annotations

import argparse
import math
import urllib.parse
from typing import NoReturn

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr: `<prog>: error: <what>` (and a pointer to
    --help), with exit code 2. Subcommands' parsers are of the same class (argparse makes them so)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _port_number(text: str, given: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        where = "" if text == given else f" of {given!r}"
        raise argparse.ArgumentTypeError(f"port {text!r}{where} is not a number from 1 to 65535")
    return int(text)


def _host_and_port(item: str, given: str) -> tuple[str, int]:
    host, sep, port = item.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {given!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or any(c.isspace() for c in host) or (":" in host and not item.startswith("[")):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (an IPv6 host in brackets), got {given!r}")
    return host, _port_number(port, given)


def bootstrap_servers(value: str) -> str:
    """HOST:PORT[,HOST:PORT...], as Kafka's tools take --bootstrap-server; returned as given."""
    items = [item.strip() for item in value.split(",")]
    if not value.strip() or not all(items):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT[,HOST:PORT...], got {value!r}")
    for item in items:
        _host_and_port(item, value)
    return ",".join(items)


def listen_address(value: str) -> tuple[str, int]:
    """[HOST]:PORT to bind, an IPv6 host in brackets as in a URL ([::]:9092); no host means every
    interface."""
    if value.startswith(":"):
        return "0.0.0.0", _port_number(value[1:], value)
    return _host_and_port(value, value)


def listen_text(value: str) -> str:
    """[HOST]:PORT to serve on, port 0 meaning any free one; returned as given."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535 or any(c.isspace() for c in host):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, e.g. 127.0.0.1:8000, got {value!r}")
    return value


def http_url(value: str) -> str:
    """An http:// or https:// URL with a host (and a valid port, when it has one)."""
    parsed = urllib.parse.urlsplit(value)
    try:
        port = parsed.port
    except ValueError:
        port = 0
    if parsed.scheme not in ("http", "https") or not parsed.hostname or port == 0:
        raise argparse.ArgumentTypeError(f"expected an http:// or https:// URL with a host, got {value!r}")
    return value


def port_or_zero(value: str) -> int:
    """A TCP port, or 0 for off."""
    if value.strip() == "0":
        return 0
    return _port_number(value.strip(), value)


def _integer(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None


def positive_int(value: str) -> int:
    number = _integer(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value!r}")
    return number


def non_negative_int(value: str) -> int:
    number = _integer(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 0, got {value!r}")
    return number


def seconds(value: str) -> float:
    """A duration in seconds, above zero (fractions allowed)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {value!r}")
    return number


def log_level(value: str) -> str:
    """A logging level name, in any case; returned upper-case."""
    level = value.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"expected one of {', '.join(LOG_LEVELS)}, got {value!r}")
    return level


def add_logging_arguments(parser: argparse.ArgumentParser) -> None:
    """--log-level and --log-format, as the long-running commands (operator, coordinator) take them."""
    parser.add_argument(
        "--log-level", type=log_level, default="INFO", metavar="LEVEL", help=f"{', '.join(LOG_LEVELS)}"
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="text (default) or json: one JSON object per line with time, level, logger and message, and "
        "the fleet (namespace, name, group) where a line is about one (docs/observability.md)",
    )


def assignor_names(value: str) -> tuple[str, ...]:
    """A comma-separated list of consumer-protocol server assignors (group.consumer.assignors)."""
    from staticfleet.coordinator.server_assignors import BUILTIN_ASSIGNORS

    names = tuple(part.strip() for part in value.split(",") if part.strip())
    unknown = [name for name in names if name not in BUILTIN_ASSIGNORS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{value!r}: the assignors are {', '.join(BUILTIN_ASSIGNORS)}")
    return names
